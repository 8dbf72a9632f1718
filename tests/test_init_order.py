"""The actor-critics' initialisations run their QR decompositions one at a time.

jaxlib 0.10's CPU LAPACK kernels split a batched QR (``vmap`` of an orthogonal initialisation
over seeds) into chunks queued on the thread pool the QR itself runs on; independent QRs can
then occupy every pool thread, each waiting for chunks that nobody runs, and the program
hangs (benchmarks/NOTES.md). rollax orders every orthogonal draw after the one before
(``rollax.policies.orthogonal``). This test reads the program JAX builds for a vmapped
``init``: every QR must depend on the previous one, at every level of nested calls, so XLA
cannot run two at once. It does not need the hang to show: it checks the pattern on any JAX.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import rollax
from rollax.recurrent import RecurrentActorCritic

KEYS = jnp.stack([jax.random.key(i) for i in range(8)])


def _sub_jaxprs(eqn):
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", None)
            if inner is not None:
                yield getattr(inner, "jaxpr", inner)


def _qr_count(eqn) -> int:
    own = 1 if eqn.primitive.name in ("qr", "geqrf", "householder_product") else 0
    return own + sum(sum(_qr_count(e) for e in sub.eqns) for sub in _sub_jaxprs(eqn))


def unordered_qrs(jaxpr) -> list[str]:
    """Pairs of QR-holding equations (at any nesting level) that do not depend one on the
    other, as readable strings; empty when the QRs form one chain."""
    produced, ancestors, found = {}, [], []
    for i, eqn in enumerate(jaxpr.eqns):
        mine = set()
        for var in eqn.invars:
            if type(var).__name__ != "Literal" and var in produced:
                j = produced[var]
                mine |= {j} | ancestors[j]
        ancestors.append(mine)
        for var in eqn.outvars:
            produced[var] = i
    holders = [i for i, eqn in enumerate(jaxpr.eqns) if _qr_count(eqn)]
    for a, b in zip(holders, holders[1:]):
        if a not in ancestors[b]:
            found.append(f"{jaxpr.eqns[a].primitive.name}#{a} || "
                         f"{jaxpr.eqns[b].primitive.name}#{b}")
    for i in holders:
        if _qr_count(jaxpr.eqns[i]) > 1:
            for sub in _sub_jaxprs(jaxpr.eqns[i]):
                found += unordered_qrs(sub)
    return found


def qr_report(fn) -> tuple[int, list[str]]:
    jaxpr = jax.make_jaxpr(jax.vmap(fn))(KEYS).jaxpr
    return sum(_qr_count(e) for e in jaxpr.eqns), unordered_qrs(jaxpr)


NETWORKS = {
    "mlp": rollax.MLPActorCritic(observation_size=4, num_actions=2),
    "mlp-gaussian": rollax.MLPActorCritic(observation_size=3, action_size=1, hidden=(8, 8, 8)),
    "cnn": rollax.CNNActorCritic(image_shape=(10, 10, 4), num_actions=3, channels=(8, 8)),
    "gru": RecurrentActorCritic(observation_size=4, num_actions=2, hidden=(16, 16)),
    "lstm": RecurrentActorCritic(observation_size=4, num_actions=2, cell="lstm"),
}


@pytest.mark.parametrize("name", NETWORKS)
def test_every_qr_of_a_vmapped_init_waits_for_the_one_before(name):
    count, unordered = qr_report(NETWORKS[name].init)
    assert count >= 4, f"expected one QR per weight matrix, found {count}"
    assert not unordered, unordered


def test_the_check_sees_independent_qrs():
    """The unchained pattern that hangs jaxlib 0.10 is reported (the test can fail)."""

    def independent(key):
        orthogonal = jax.nn.initializers.orthogonal()
        a, b, c = jax.random.split(key, 3)
        return [orthogonal(k, (64, 64), jnp.float32) for k in (a, b, c)]

    count, unordered = qr_report(independent)
    assert count == 3 and len(unordered) == 2, unordered

"""Contract checks for environments and collectors: ``check_env`` and ``check_collector``.

``check_env(env)`` drives any environment that follows :mod:`rollax.envs.base` (deterministic
or stochastic, ``Discrete`` or ``Box`` actions) with uniformly random actions, under ``jit`` and
``vmap``, and checks the contracts of ``docs/contract.md`` §1-2 on every state it visits.
``check_collector`` checks a collector function with the signature of :func:`rollax.collect`
against the key ownership and masks of ``docs/contract.md`` §2, with :func:`rollax.collect`
itself as the reference.

Both return a :class:`CheckReport`: one :class:`CheckResult` per named check, ``passed``,
``failed``, ``warning`` or ``skipped``; a failure names the first offending step and
environment index and the values involved, e.g.
``absorbing_reward: reward after done: step 5, env 3, reward 0.5``.

Conventions of the reports:

- ``step t`` is the transition index (0-based) of a time-major rollout; an observation or state
  is reported at the step that *produced* it, and a start state as ``reset`` (``step`` None).
- ``env b`` is the index in the batch; "first" means smallest step, then smallest env.
- Keys: ``check_env`` derives its keys exactly like :func:`rollax.collect` does,
  ``rollax.collection_keys(jax.random.key(seed), batch_size, num_steps, env.stochastic)``, so
  its absorbing rollout is ``rollax.rollout(env, RandomPolicy.for_space(env.action_space),
  None, *keys)`` and a failure can be replayed with the library's own functions. The
  "different key" run uses ``seed + 1``; the auto-reset run starts from the same start states
  with ``jax.random.key(seed + 2)``. Done states are also stepped with a few fixed probe
  actions (first / last / second actions of a ``Discrete`` space; corners and centre of a
  ``Box``), with the cell's own transition key.

Modules: :mod:`~rollax.contracts.report` (results and reports), :mod:`~rollax.contracts.probe`
(random and probe actions), :mod:`~rollax.contracts.trees` (comparing pytrees),
:mod:`~rollax.contracts.tracer` (the jitted rollout), :mod:`~rollax.contracts.registry` (the
ordered check registries), and the checks: :mod:`~rollax.contracts.env_checks`,
:mod:`~rollax.contracts.autoreset_checks`, :mod:`~rollax.contracts.collector_checks`;
:mod:`~rollax.contracts.preflight` holds the one-line check of an environment that the command
line runs before it writes anything (hashable, ``Discrete`` or ``Box`` spaces, one reset and step
traced against them).

The check names and what each checks, in report order (generated from the registries):
"""

from rollax.contracts.collector_checks import check_collector
from rollax.contracts.env_checks import check_env
from rollax.contracts.host_checks import check_host_env
from rollax.contracts.probe import RandomPolicy
from rollax.contracts.recurrent_checks import CountingPolicy, check_recurrent
from rollax.contracts.registry import (
    COLLECTOR_REGISTRY,
    ENV_REGISTRY,
    HOST_REGISTRY,
    RECURRENT_REGISTRY,
)
from rollax.contracts.report import CheckReport, CheckResult, EnvContractError

ENV_CHECKS: tuple[str, ...] = ENV_REGISTRY.names
"""The names of ``check_env``'s checks, in report order."""

COLLECTOR_CHECKS: tuple[str, ...] = COLLECTOR_REGISTRY.names
"""The names of ``check_collector``'s checks, in report order."""

RECURRENT_CHECKS: tuple[str, ...] = RECURRENT_REGISTRY.names
"""The names of ``check_recurrent``'s checks, in report order."""

HOST_CHECKS: tuple[str, ...] = HOST_REGISTRY.names
"""The names of ``check_host_env``'s checks, in report order."""

__doc__ = (f"{__doc__}\n{ENV_REGISTRY.docstring()}\n\n{COLLECTOR_REGISTRY.docstring()}\n\n"
           f"{RECURRENT_REGISTRY.docstring()}\n\n{HOST_REGISTRY.docstring()}\n")

__all__ = [
           "COLLECTOR_CHECKS",
           "ENV_CHECKS",
           "HOST_CHECKS",
           "RECURRENT_CHECKS",
           "CheckReport",
           "CheckResult",
           "CountingPolicy",
           "EnvContractError",
           "RandomPolicy",
           "check_collector",
           "check_env",
           "check_host_env",
           "check_recurrent",
]

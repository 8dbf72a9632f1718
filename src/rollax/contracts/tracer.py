"""The jitted tracer: an absorbing rollout of random (and probe) actions under ``jit`` and
``vmap``, with every visited state kept (:class:`Trace`), and the keys it is driven with."""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.collect import collection_keys
from rollax.contracts.probe import probe_actions, sample_action, usable_mask
from rollax.contracts.report import Finding
from rollax.contracts.trees import first_mismatch, mismatch_values, same_bits
from rollax.envs.base import is_structured, space_leaves, space_tree, step_with_key
from rollax.keys import eval_shape, is_key


class Trace(NamedTuple):
    """An absorbing rollout with everything the checks look at (host numpy arrays)."""

    states: Any
    """State pytree, leading ``(T + 1, B)``: the start states, then the state after each step."""
    observation: Any
    """``(T + 1, B, ...)``: observation of each state."""
    in_space: Any
    """``(T + 1, B)``: ``observation_space.contains`` of each observation; ``(T + 1, B, L)`` for
    a ``Dict`` / ``Tuple`` space of ``L`` leaves, each leaf's space on that leaf."""
    done: Any
    """``(T + 1, B, ...)``: ``env.done`` of each state."""
    action_mask: Any
    """``(T + 1, B, ...)``: the action mask of each state (None without a mask that fits the
    action space, :func:`~rollax.contracts.probe.usable_mask`)."""
    step_done: Any
    """``(T, B, ...)``: ``env.done`` of the state each step started from (``done[:-1]`` unless
    the states were overridden)."""
    action: Any
    reward: Any
    terminated: Any
    truncated: Any
    """``(T, B, ...)``: the rollout's action and the raw step outputs."""
    probe_action: Any
    probe_same: Any
    probe_reward: Any
    probe_terminated: Any
    probe_truncated: Any
    """``(T, B, K, ...)``: ``K`` extra actions tried on each state before the step; whether the
    state came back unchanged (bit for bit) and the step outputs."""


STATE_FIELDS = ("states", "observation", "in_space", "done", "action_mask")
"""Fields with a leading ``T + 1`` axis: index ``i`` was produced by step ``i - 1``."""

_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 32


def cached(build: Callable, *args: Any) -> Any:
    """``build(*args)``, memoised (the last ``_CACHE_SIZE``) on ``args`` when they are hashable:
    compiled functions are then reused across checks of the same environment."""
    try:
        key = (build, *args)
        hash(key)
    except TypeError:
        return build(*args)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = _CACHE[key] = build(*args)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


_KEYS_LOCK = threading.Lock()


@functools.cache
def _keys_fn(batch_size: int, num_steps: int, stochastic: bool) -> Callable:
    """``rollax.collection_keys`` as key data, compiled once per shape (shared by all
    environments)."""

    def keys(key: jax.Array) -> Any:
        derived = collection_keys(key, batch_size, num_steps, stochastic)
        return jax.tree.map(jax.random.key_data, derived)

    return jax.jit(keys)


def collection_key_data(batch_size: int, num_steps: int, stochastic: bool, seed: int) -> Any:
    """Key data of ``rollax.collection_keys(jax.random.key(seed), B, T, stochastic)``."""
    with _KEYS_LOCK:  # one compilation per shape, also when checks run on several threads
        return _keys_fn(batch_size, num_steps, stochastic)(jax.random.key(seed))


def _step_with_probes(env: Any, probes: np.ndarray) -> tuple[Callable, Callable]:
    """``(one, view)`` for one environment: ``one(state, action, transition_key) ->
    (next_state, row)`` steps the rollout's action and the probe actions in one batched step
    (one copy of the code); ``view(state) -> (observation, in_space, done, action_mask)``."""
    obs_space = env.observation_space

    def view(state: Any) -> tuple[Any, jax.Array, jax.Array, Any]:
        observation = env.observation(state)
        mask = usable_mask(env, state)
        if is_structured(obs_space):  # one flag per leaf: the check names the leaf
            leaves = jax.tree.structure(space_tree(obs_space, lambda s: 0)).flatten_up_to(
                observation)
            inside = jnp.stack([jnp.asarray(s.contains(x), bool)
                                for (_, s), x in zip(space_leaves(obs_space), leaves)])
            return observation, inside, env.done(state), mask
        return (observation, jnp.asarray(obs_space.contains(observation), bool), env.done(state),
                mask)

    def one(state: Any, action: jax.Array, transition_key: jax.Array | None) -> tuple:
        actions = jnp.concatenate([jnp.asarray(action)[None],
                                   jnp.asarray(probes, action.dtype)])

        def step(a: jax.Array) -> tuple:
            s, r, te, tr = step_with_key(env, state, a, transition_key)
            return s, same_bits(s, state), r, te, tr

        states, same, rewards, terms, truncs = jax.vmap(step)(actions)
        next_state = jax.tree.map(lambda x: x[0], states)
        row = (next_state, *view(next_state), env.done(state), action, rewards[0], terms[0],
               truncs[0], actions[1:], same[1:], rewards[1:], terms[1:], truncs[1:])
        return next_state, row

    return one, view


def make_tracer(env: Any, policy: Any, params: Any) -> Callable:
    """A jitted ``(keys, perm, override, override_states, override_actions) -> Trace``.

    ``keys``: key data of ``rollax.collection_keys(root_key, B, T, env.stochastic)``, their
    batch axis permuted by ``perm`` (B,). With ``override`` False the rollout is
    ``rollax.rollout``'s (same policy, same keys) with the states kept, and the fixed
    :func:`~rollax.contracts.probe.probe_actions` tried on every state too (with the cell's own
    transition key: probes are not collection, and reusing the key keeps them permutable with
    the batch).

    With ``override`` True, step ``t`` starts from ``override_states[t]`` (T, B) with
    ``override_actions[t]`` instead of the carried state and sampled action: one absorbing
    step from each given state (used to re-step an auto-reset trajectory). The same compiled
    function serves both.
    """
    one, view = _step_with_probes(env, probe_actions(env.action_space))

    def cell(state: Any, action_key: jax.Array, transition_key: jax.Array | None,
             forced_action: jax.Array, override: jax.Array) -> tuple:
        action = sample_action(policy, params, env, state, action_key)
        action = jnp.where(override, jnp.asarray(forced_action, action.dtype), action)
        return one(state, action, transition_key)

    def run(keys: Any, perm: Any, override: Any, override_states: Any,
            override_actions: Any) -> Trace:
        reset_data, action_data, transition_data = keys
        wrap = jax.random.wrap_key_data
        reset_keys, action_keys = wrap(reset_data[perm]), wrap(action_data[:, perm])
        transition_keys = None if transition_data is None else wrap(transition_data[:, perm])

        def body(carry: Any, xs: tuple) -> tuple:
            akeys, tkeys, forced_states, forced_actions = xs
            state = jax.lax.cond(override, lambda: forced_states, lambda: carry)
            return jax.vmap(cell, in_axes=(0, 0, None if tkeys is None else 0, 0, None))(
                state, akeys, tkeys, forced_actions, override)

        state0 = jax.vmap(env.reset)(reset_keys)
        xs = (action_keys, transition_keys, override_states, override_actions)
        _, rows = jax.lax.scan(body, state0, xs)
        first = (state0, *jax.vmap(view)(state0))

        def prepend(head: Any, rest: Any) -> Any:
            return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], axis=0), head, rest)

        return Trace(*(prepend(h, r) for h, r in zip(first, rows[:5])), *rows[5:])

    return jax.jit(run)


def no_override(env: Any, policy: Any, params: Any, batch_size: int, num_steps: int) -> tuple:
    """Zero ``(override_states, override_actions)`` of the right shapes (host arrays)."""
    key = jax.random.key(0)
    shapes = eval_shape(env.reset, key)
    state = shapes.value
    action = jax.eval_shape(lambda s, k: sample_action(policy, params, env, s, k), state, key)
    lead = (num_steps, batch_size)

    def zeros(leaf: Any, impl: Any = None) -> Any:
        if is_key(leaf):  # a key inside the state: zero key data, wrapped as its own kind
            data = jax.eval_shape(jax.random.key_data, leaf)
            # jax.random.wrap_key_data takes any uint32 array; its stub says jax.Array
            return jax.random.wrap_key_data(np.zeros(lead + data.shape, data.dtype), impl=impl)  # pyright: ignore[reportArgumentType]
        return np.zeros(lead + tuple(leaf.shape), leaf.dtype)

    leaves, tree = jax.tree.flatten(state)
    zeroed = [zeros(leaf, shapes.key_impls.get(i)) for i, leaf in enumerate(leaves)]
    return tree.unflatten(zeroed), zeros(action)


def trace_difference(a: Trace, b: Trace, ulps: int = 0) -> Finding | None:
    """The first (step, env, field) where two traces differ, or None: bit for bit, or with
    ``ulps`` floats up to that many units in the last place apart (integers, booleans and keys
    still bit for bit)."""
    best = None
    for field in Trace._fields:
        found = first_mismatch(getattr(a, field), getattr(b, field), 2, ulps)
        if found is None:
            continue
        name = field + found.path
        if found.kind == "structure":
            return Finding(None, None, f"{field} changed structure", {})
        if found.kind == "shape":
            return Finding(None, None, f"{name} changed shape or dtype", {})
        i, env = found.cell
        step = (None if i == 0 else i - 1) if field in STATE_FIELDS else i
        finding = Finding(step, env, f"{name} differs", mismatch_values(found))
        if best is None or finding.order() < best.order():
            best = finding
    return best


def permute(trace: Trace, perm: np.ndarray) -> Trace:
    """``trace`` with its batch axis permuted."""
    return jax.tree.map(lambda x: np.asarray(x)[:, perm], trace)

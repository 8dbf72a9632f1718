"""The absorbing collector: ``vmap`` over environments, ``lax.scan`` over time.

Key ownership (spec §2), for a deterministic environment::

    reset_key, action_key = split(key)
    reset_keys  = split(reset_key, B)                    # one per environment
    step_keys   = split(action_key, T)                   # one per time step
    action_keys[t] = split(step_keys[t], B)              # one per (step, environment)

An environment with random transitions (``env.stochastic``) splits ``key`` into three,
``reset_key, action_key, transition_key``, and owns ``transition_key`` exactly like the action
key (one key per time step and environment, never reused).

The trajectory is time-major: every field has leading shape ``(T, B)``. ``active`` is taken from
the state *before* the step, so the transition that ends an episode is active and keeps its
reward; only later cells are padding (reward 0, no events). ``reward.sum(axis=0)`` is one return
per episode; ``reward.sum(axis=1)`` is the reward per time index across the batch.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rollax.validate import check_count


class Trajectory(NamedTuple):
    """A time-major batch; every field has leading shape ``(T, B)``."""

    observation: jax.Array
    """Observation before the step."""
    action: jax.Array
    """Action taken."""
    reward: jax.Array
    """float32 reward of the transition (0 on padding)."""
    active: jax.Array
    """bool: the episode was live before the step (the transition is real evidence)."""
    terminated: jax.Array
    """bool event: this transition reached a terminal state."""
    truncated: jax.Array
    """bool event: this transition hit the time limit."""
    log_prob: jax.Array
    """Behaviour policy's log-probability of ``action``, stored at collection time."""


def collection_keys(key: jax.Array, batch_size: int, num_steps: int, stochastic: bool = False):
    """The keys the collector uses, materialised: ``(reset_keys (B,), action_keys (T, B),
    transition_keys (T, B) or None)``. ``collect`` derives the same keys inside its scan."""
    if stochastic:
        reset_key, action_key, transition_key = jax.random.split(key, 3)
    else:
        (reset_key, action_key), transition_key = jax.random.split(key), None

    def per_step(k):
        return jax.vmap(lambda s: jax.random.split(s, batch_size))(jax.random.split(k, num_steps))

    reset_keys = jax.random.split(reset_key, batch_size)
    return reset_keys, per_step(action_key), None if transition_key is None else per_step(
        transition_key
    )


def _step_batch(env, policy, params, state, action_keys, transition_keys):
    """One time step of B environments with their own keys: ``(next_state, Trajectory row)``."""

    def one(state, action_key, transition_key):
        observation = env.observation(state)
        active = ~env.done(state)
        action, log_prob = policy.sample(params, observation, action_key)
        if env.stochastic:
            next_state, reward, terminated, truncated = env.step(state, action, transition_key)
        else:
            next_state, reward, terminated, truncated = env.step(state, action)
        row = Trajectory(observation, action, reward, active, terminated, truncated, log_prob)
        return next_state, row

    if transition_keys is None:
        return jax.vmap(lambda s, k: one(s, k, None))(state, action_keys)
    return jax.vmap(one)(state, action_keys, transition_keys)


def rollout(env, policy, params, reset_keys, action_keys, transition_keys=None):
    """Absorbing rollout from explicit keys: ``reset_keys (B,)``, ``action_keys (T, B)`` and,
    for a stochastic environment, ``transition_keys (T, B)``. Returns ``(final_state,
    Trajectory)``. ``collect`` is this function with the keys derived from one key."""
    if env.stochastic and transition_keys is None:
        raise ValueError("a stochastic environment needs transition_keys of shape (T, B)")
    state = jax.vmap(env.reset)(reset_keys)

    def body(state, keys):
        return _step_batch(env, policy, params, state, *keys)

    return jax.lax.scan(body, state, (action_keys, transition_keys))


@functools.partial(jax.jit, static_argnames=("env", "policy", "batch_size", "num_steps",
                                             "unroll"))
def _collect(env, policy, params, key, batch_size, num_steps, unroll=1):
    if env.stochastic:
        reset_key, action_key, transition_key = jax.random.split(key, 3)
        xs = (jax.random.split(action_key, num_steps), jax.random.split(transition_key, num_steps))
    else:
        reset_key, action_key = jax.random.split(key)
        xs = (jax.random.split(action_key, num_steps), None)
    state = jax.vmap(env.reset)(jax.random.split(reset_key, batch_size))

    def body(state, step_keys):
        action_step_key, transition_step_key = step_keys
        action_keys = jax.random.split(action_step_key, batch_size)
        transition_keys = (
            None if transition_step_key is None
            else jax.random.split(transition_step_key, batch_size)
        )
        return _step_batch(env, policy, params, state, action_keys, transition_keys)

    return jax.lax.scan(body, state, xs, unroll=unroll)


def collect(env, policy, params, key, batch_size: int, num_steps: int, unroll: int | bool = 1):
    """Collect ``batch_size`` (B) absorbing episodes for ``num_steps`` (T) steps.

    Returns ``(final_state, trajectory)``; every trajectory field has shape ``(T, B, ...)``.
    Compiled once per (env, policy, B, T); works inside ``jit`` and ``vmap``.

    Example::

        env = rollax.make("corridor")
        policy = rollax.BernoulliPolicy(3)
        _, traj = collect(env, policy, policy.init(), jax.random.key(0), 256, 8)
        episode_returns = traj.reward.sum(axis=0)      # (B,)

    ``unroll`` (``lax.scan``'s: a step count per loop iteration, or ``True`` for all ``T``)
    changes how the loop is compiled, never the records. Fully unrolled, the step keys of
    every environment are derived, used and dropped inside one fused kernel per batch slice,
    and the carried state never goes back to memory between steps: on a GPU the collector then
    writes little more than the records themselves (``benchmarks/NOTES.md``). Compile time
    grows with the unrolled length.
    """
    check_count("batch_size", batch_size)
    check_count("num_steps", num_steps)
    if not isinstance(unroll, bool):
        check_count("unroll", unroll)
    return _collect(env, policy, params, key, int(batch_size), int(num_steps),
                    unroll if isinstance(unroll, bool) else int(unroll))


# ---------------------------------------------------------------------------------------------
# Auto-reset (streaming) collection


class AutoResetTrajectory(NamedTuple):
    """A time-major streaming batch; every field has leading shape ``(T, B)``.

    Every cell is a real transition (``active`` is all True). When a transition ends an
    episode, ``next_observation`` is the episode's true final observation, while the next row's
    ``observation`` is already the fresh start of the following episode (same-step reset).
    """

    observation: jax.Array
    action: jax.Array
    reward: jax.Array
    active: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    log_prob: jax.Array
    next_observation: jax.Array
    """True next observation of the transition (the final one when the episode ended)."""


def reset_batch(env, key: jax.Array, batch_size: int):
    """``B`` start states, environment ``b`` reset with ``split(key, B)[b]``."""
    check_count("batch_size", batch_size)
    return jax.vmap(env.reset)(jax.random.split(key, batch_size))


def _select(mask, on_true, on_false):
    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim))
        return jnp.where(m, a, b)

    return jax.tree_util.tree_map(pick, on_true, on_false)


def _split_at(key: jax.Array, num: int, index: jax.Array) -> jax.Array:
    """``split(key, num)[index]``, hashing only the keys asked for. With JAX's partitionable
    threefry (the default), key ``i`` of a split is ``fold_in(key, i)``; otherwise all ``num``
    keys are derived and gathered (XLA does not fuse the gather into the hash)."""
    impl = str(jax.random.key_impl(key))
    if jax.config.jax_threefry_partitionable and "threefry" in impl:
        return jax.vmap(lambda i: jax.random.fold_in(key, i))(index)
    return jax.random.split(key, num)[index]


COMPACT_MIN_BATCH = 64
"""Batches of at least this many environments reset through a compacted gather (see
:func:`autoreset`); smaller ones select between stepped and fresh states."""


def autoreset(env, done: jax.Array, state, key: jax.Array):
    """Replace the finished environments of a batch with fresh starts: environment ``b`` (where
    ``done[b]``) becomes ``env.reset(split(key, B)[b])``, the others keep ``state``.

    ``done (B,)``, ``state`` a batched env state ``(B, ...)``. Nothing is reset when no
    environment finished. From ``COMPACT_MIN_BATCH`` environments on, only the finished ones
    are reset: their indices are compacted (at most ``B // 16``, the usual case, else every
    environment is reset and selected), so the random numbers and reset work scale with the
    finished count, not with B. Every path gives identical states.

    Under ``vmap`` (e.g. over seeds) the ``lax.cond`` predicates are batched and every branch
    runs; a vmapped caller with large B pays for both the compacted and the full reset.
    """
    batch_size = done.shape[0]

    def every(state):
        return _select(done, jax.vmap(env.reset)(jax.random.split(key, batch_size)), state)

    if batch_size < COMPACT_MIN_BATCH:
        return jax.lax.cond(jnp.any(done), every, lambda s: s, state)
    cap = batch_size // 16

    def few(state):
        (index,) = jnp.nonzero(done, size=cap, fill_value=batch_size)
        fresh = jax.vmap(env.reset)(_split_at(key, batch_size, jnp.minimum(index, batch_size - 1)))
        return jax.tree_util.tree_map(lambda s, f: s.at[index].set(f, mode="drop"), state, fresh)

    count = jnp.sum(done)
    branch = jnp.where(count == 0, 0, jnp.where(count <= cap, 1, 2))
    return jax.lax.switch(branch, (lambda s: s, few, every), state)


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps"))
def _collect_autoreset(env, policy, params, state, key, num_steps):
    batch_size = jax.tree_util.tree_leaves(state)[0].shape[0]
    if env.stochastic:
        reset_key, action_key, transition_key = jax.random.split(key, 3)
        transition_step_keys = jax.random.split(transition_key, num_steps)
    else:
        reset_key, action_key = jax.random.split(key)
        transition_step_keys = None
    xs = (jax.random.split(reset_key, num_steps), jax.random.split(action_key, num_steps),
          transition_step_keys)

    def one(state, action_key, transition_key):
        observation = env.observation(state)
        action, log_prob = policy.sample(params, observation, action_key)
        if env.stochastic:
            next_state, reward, terminated, truncated = env.step(state, action, transition_key)
        else:
            next_state, reward, terminated, truncated = env.step(state, action)
        row = AutoResetTrajectory(
            observation, action, reward, jnp.ones((), bool), terminated, truncated, log_prob,
            env.observation(next_state),
        )
        return next_state, row

    def body(state, step_keys):
        reset_step_key, action_step_key, transition_step_key = step_keys
        action_keys = jax.random.split(action_step_key, batch_size)
        if transition_step_key is None:
            next_state, row = jax.vmap(lambda s, k: one(s, k, None))(state, action_keys)
        else:
            transition_keys = jax.random.split(transition_step_key, batch_size)
            next_state, row = jax.vmap(one)(state, action_keys, transition_keys)
        next_state = autoreset(env, row.terminated | row.truncated, next_state, reset_step_key)
        return next_state, row

    return jax.lax.scan(body, state, xs)


def collect_autoreset(env, policy, params, state, key: jax.Array, num_steps: int):
    """Continue ``B`` streaming environments from ``state`` for ``num_steps`` (T) steps.

    Reset convention: **same-step** (Gymnasium's name). The step that ends an episode
    (terminated or truncated) records the true final observation in ``next_observation``; the
    state carried to the next step is a fresh ``env.reset`` with its own key, never a cached
    start state. Keys: ``reset_key, action_key = split(key)`` (plus ``transition_key`` for a
    stochastic environment); action keys ``split(split(action_key, T)[t], B)[b]`` as in
    :func:`collect`, and the auto-reset keys likewise from ``reset_key``. Start states come
    from :func:`reset_batch`.

    Returns ``(state, AutoResetTrajectory)``, fields ``(T, B, ...)``.

    Example::

        state = reset_batch(env, jax.random.key(0), 8)
        state, traj = collect_autoreset(env, policy, params, state, jax.random.key(1), 128)
    """
    check_count("num_steps", num_steps)
    return _collect_autoreset(env, policy, params, state, key, int(num_steps))

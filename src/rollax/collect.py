"""The collectors: ``vmap`` over environments, ``lax.scan`` over time.

Key ownership (``docs/contract.md`` §2). Both collectors derive every key from one collection
key, in three stages, and use each key at most once:

1. :func:`split_key` splits the key into streams: ``reset, action = split(key)``, or
   ``reset, action, transition = split(key, 3)`` when ``env.stochastic``.
2. :func:`per_step` splits a stream into one key per time step: ``split(stream, T)[t]``.
3. :func:`per_env` splits a step key into one key per environment: ``split(step_key, B)[b]``
   (with the ``rbg`` implementations, ``B`` keys drawn as bits from ``step_key``:
   :func:`rollax.keys.children`; the ``split`` below then means that).

The action and transition streams go through all three stages: environment ``b`` samples its
action at step ``t`` with ``split(split(action, T)[t], B)[b]``, and a stochastic environment
steps with the transition key at the same place (a deterministic one gets none). The reset
stream differs by contract. :func:`collect` (absorbing) resets each environment once, skipping
stage 2: ``split(reset, B)[b]``. :func:`collect_autoreset` (streaming) treats it like the
others: an environment whose episode ends at step ``t`` restarts from
``split(split(reset, T)[t], B)[b]``. :func:`collection_keys` materialises the absorbing keys.
A league's collector (:func:`collect_league`) splits its key first, ``key, draws =
split(key)``: ``key`` gives the three streams above, ``draws`` the matches of the episodes that
start, split per step and per environment in the same way.

The trajectory is time-major: every field has leading shape ``(T, B)``. In an absorbing batch
``active`` is taken from the state *before* the step, so the transition that ends an episode is
active and keeps its reward; only later cells are padding (reward 0, no events).
``reward.sum(axis=0)`` is one return per episode; ``reward.sum(axis=1)`` is the reward per time
index across the batch.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, overload

import jax
import jax.numpy as jnp

from rollax.envs.agents import agent_rewards
from rollax.envs.base import step_with_key
from rollax.envs.host import is_host
from rollax.envs.masks import action_mask as state_mask
from rollax.envs.players import turns
from rollax.keys import children
from rollax.recurrent import initial_carries, is_recurrent, reset_where
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
    action_mask: Any = None
    """The action mask of the state before the step (:mod:`rollax.envs.masks`), bool ``(T, B,
    *mask_shape)``, stored so the update scores the actions under the mask they were drawn
    with; None for an environment without masks (no array at all)."""
    turns: Any = None
    """A game's (:mod:`rollax.envs.players`) :class:`~rollax.envs.players.Turns`: the player
    who acted, the player to act next and every player's reward, ``(T, B)``, ``(T, B)`` and
    ``(T, B, P)``; None for an environment that is not a game."""
    agent_rewards: Any = None
    """A team's (:mod:`rollax.envs.agents`) rewards of each agent, float32 ``(T, B, N)`` (0 on
    padding; ``reward`` is their sum); None for an environment that is not a team."""


class StepKeys(NamedTuple):
    """The reset, action and transition keys: a collection key's three streams
    (:func:`split_key`), or one time step's keys from them (:func:`per_step`)."""

    reset: jax.Array
    action: jax.Array
    transition: jax.Array | None
    """``None`` for a deterministic environment."""


def split_key(key: jax.Array, stochastic: bool) -> StepKeys:
    """Stage 1: ``split(key)`` into reset and action streams, ``split(key, 3)`` with a
    transition stream for a stochastic environment."""
    if stochastic:
        return StepKeys(*jax.random.split(key, 3))
    reset, action = jax.random.split(key)
    return StepKeys(reset, action, None)


@overload
def per_step(stream: jax.Array, num_steps: int) -> jax.Array: ...
@overload
def per_step(stream: None, num_steps: int) -> None: ...
def per_step(stream: jax.Array | None, num_steps: int) -> jax.Array | None:
    """Stage 2: ``split(stream, T)``, one key per time step (``None`` stays ``None``)."""
    return None if stream is None else jax.random.split(stream, num_steps)


@overload
def per_env(step_key: jax.Array, batch_size: int) -> jax.Array: ...
@overload
def per_env(step_key: None, batch_size: int) -> None: ...
def per_env(step_key: jax.Array | None, batch_size: int) -> jax.Array | None:
    """Stage 3: one key per environment, ``split(step_key, B)`` (``None`` stays ``None``);
    for the ``rbg`` implementations ``B`` keys drawn from ``step_key``'s generator
    (:func:`rollax.keys.children`)."""
    return None if step_key is None else children(step_key, batch_size)


def collection_keys(key: jax.Array, batch_size: int, num_steps: int, stochastic: bool = False):
    """The keys :func:`collect` uses, materialised: ``(reset_keys (B,), action_keys (T, B),
    transition_keys (T, B) or None)``. ``collect`` derives the same keys inside its scan."""
    streams = split_key(key, stochastic)

    def grid(stream):
        steps = per_step(stream, num_steps)
        return None if steps is None else jax.vmap(lambda k: per_env(k, batch_size))(steps)

    return per_env(streams.reset, batch_size), grid(streams.action), grid(streams.transition)


def _env_step(env, policy, params, state, carry, action_key, transition_key):
    """One environment, one step: ``((next_state, next_carry), Trajectory row)``, the row's
    ``active`` (and ``action_mask``, for an environment with masks: the policy samples among
    its legal actions) taken from ``state`` (before the step). ``carry`` is a recurrent
    policy's memory (``None`` for a feedforward policy); it stays frozen once the episode has
    ended."""
    observation = env.observation(state)
    active = ~env.done(state)
    mask = state_mask(env, state)
    given = () if mask is None else (mask,)  # the policy sees a mask only when there is one
    if carry is None:
        action, log_prob = policy.sample(params, observation, action_key, *given)
        next_carry = None
    else:
        next_carry, action, log_prob = policy.sample(params, carry, observation, action_key,
                                                     *given)
        next_carry = reset_where(~active, carry, next_carry)
    next_state, reward, terminated, truncated = step_with_key(env, state, action, transition_key)
    return (next_state, next_carry), Trajectory(observation, action, reward, active, terminated,
                                                truncated, log_prob, mask,
                                                turns(env, state, next_state, active),
                                                agent_rewards(env, next_state, active))


def _step_batch(env, policy, params, state, carry, action_keys, transition_keys):
    """One time step of B environments with their own keys (``transition_keys`` may be
    ``None``, ``carry`` too): ``((next_state, next_carry), Trajectory row)``."""
    step = functools.partial(_env_step, env, policy, params)
    return jax.vmap(step)(state, carry, action_keys, transition_keys)


def _start_carry(policy, params, batch_size: int):
    """The memory of B fresh episodes: ``None`` unless ``policy`` is recurrent."""
    return initial_carries(policy, params, batch_size) if is_recurrent(policy) else None


def rollout(env, policy, params, reset_keys, action_keys, transition_keys=None):
    """Absorbing rollout from explicit keys: ``reset_keys (B,)``, ``action_keys (T, B)`` and,
    for a stochastic environment, ``transition_keys (T, B)``. Returns ``(final_state,
    Trajectory)``. ``collect`` is this function with the keys derived from one key."""
    if env.stochastic and transition_keys is None:
        raise ValueError("a stochastic environment needs transition_keys of shape (T, B)")
    state = jax.vmap(env.reset)(reset_keys)
    carry = _start_carry(policy, params, reset_keys.shape[0])

    def body(state_carry, keys):
        state, carry = state_carry
        return _step_batch(env, policy, params, state, carry, *keys)

    (state, _), traj = jax.lax.scan(body, (state, carry), (action_keys, transition_keys))
    return state, traj


def rollout_live(env, policy, params, reset_keys, action_keys, transition_keys=None,
                 rows: int = 64):
    """:func:`rollout`, stopping once every episode has ended: chunks of ``rows`` steps (a
    ``scan`` each) in a ``while_loop`` that ends when all ``B`` episodes are done or the ``T``
    steps are taken. Every row it runs is :func:`rollout`'s, bit for bit; the rows after it
    stopped are dead padding written as zeros (``active`` false, reward 0, no event; the
    observation, action and log-probability 0 where :func:`rollout` records the absorbed
    state's). Returns the ``(T, B, ...)`` :class:`Trajectory` only. Batches of short episodes
    take a fraction of the steps."""
    if env.stochastic and transition_keys is None:
        raise ValueError("a stochastic environment needs transition_keys of shape (T, B)")
    T, B = action_keys.shape[:2]
    rows = min(rows, T)
    state = jax.vmap(env.reset)(reset_keys)
    carry = _start_carry(policy, params, B)
    extra = -T % rows  # the last chunk's keys past T repeat the first rows' (its rows dropped)
    keys = [k if k is None or not extra else jnp.concatenate([k, k[:extra]])
            for k in (action_keys, transition_keys)]

    def chunk(state, carry, start):
        xs = [None if k is None else jax.lax.dynamic_slice_in_dim(k, start, rows) for k in keys]
        return jax.lax.scan(lambda sc, k: _step_batch(env, policy, params, *sc, *k),
                            (state, carry), tuple(xs))

    shapes = jax.eval_shape(lambda: chunk(state, carry, 0)[1])
    empty = jax.tree.map(lambda s: jnp.zeros((T + extra, *s.shape[1:]), s.dtype), shapes)

    def body(loop):
        c, state, carry, traj = loop
        (state, carry), rows_out = chunk(state, carry, c * rows)
        traj = jax.tree.map(lambda buf, x: jax.lax.dynamic_update_slice_in_dim(
            buf, x, c * rows, 0), traj, rows_out)
        return c + 1, state, carry, traj

    def running(loop):
        c, state = loop[0], loop[1]
        return (c * rows < T) & ~jnp.all(jax.vmap(env.done)(state))

    start = (jnp.zeros((), jnp.int32), state, carry, empty)
    traj = jax.lax.while_loop(running, body, start)[3]
    return jax.tree.map(lambda x: x[:T], traj)


@functools.partial(jax.jit, static_argnames=("env", "policy", "batch_size", "num_steps",
                                             "unroll"))
def _collect(env, policy, params, key, batch_size, num_steps, unroll=1):
    streams = split_key(key, env.stochastic)
    state = jax.vmap(env.reset)(per_env(streams.reset, batch_size))
    carry = _start_carry(policy, params, batch_size)

    def body(state_carry, step_keys):
        action_keys, transition_keys = (per_env(k, batch_size) for k in step_keys)
        state, carry = state_carry
        return _step_batch(env, policy, params, state, carry, action_keys, transition_keys)

    xs = (per_step(streams.action, num_steps), per_step(streams.transition, num_steps))
    (state, _), traj = jax.lax.scan(body, (state, carry), xs, unroll=unroll)
    return state, traj


def collect(env, policy, params, key, batch_size: int, num_steps: int, unroll: int | bool = 1):
    """Collect ``batch_size`` (B) absorbing episodes for ``num_steps`` (T) steps.

    Returns ``(final_state, trajectory)``; every trajectory field has shape ``(T, B, ...)``.
    A recurrent policy (:mod:`rollax.recurrent`) starts every episode from its initial carry,
    and an environment's carry stays frozen once its episode has ended.

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
    if is_host(env):  # its pools reset an ended environment within the step (no absorbing)
        raise ValueError(f"env {env.name} is stepped on the host, whose environments reset "
                         f"within the step that ends them: collect it with "
                         f"collect_autoreset(env, policy, params, reset_batch(env, key, B), "
                         f"key, T)")
    return _collect(env, policy, params, key, int(batch_size), int(num_steps),
                    unroll if isinstance(unroll, bool) else int(unroll))


@functools.partial(jax.jit, static_argnames=("env", "policy", "batch_size", "num_steps"))
def _returns(env, policy, params, key, batch_size, num_steps):
    streams = split_key(key, env.stochastic)
    state = jax.vmap(env.reset)(per_env(streams.reset, batch_size))
    carry = _start_carry(policy, params, batch_size)
    action_steps = per_step(streams.action, num_steps)
    transition_steps = per_step(streams.transition, num_steps)

    def running(loop):
        t, state, _, _ = loop
        return (t < num_steps) & jnp.any(~jax.vmap(env.done)(state))

    def body(loop):
        t, state, carry, total = loop
        action_keys = per_env(action_steps[t], batch_size)
        transition_keys = (None if transition_steps is None
                           else per_env(transition_steps[t], batch_size))
        (state, carry), row = _step_batch(env, policy, params, state, carry, action_keys,
                                          transition_keys)
        return t + 1, state, carry, total + row.reward

    total = jnp.zeros((batch_size,), jnp.float32)
    _, _, _, total = jax.lax.while_loop(running, body, (0, state, carry, total))
    return total


def episode_returns(env, policy, params, key, batch_size: int, num_steps: int) -> jax.Array:
    """The ``(B,)`` returns of the episodes :func:`collect` would collect with the same
    arguments (the same keys, actions and rewards; each return summed step by step), without
    keeping the trajectory: memory grows with ``B``, not ``T x B`` (only the ``T`` step keys
    are materialised), and the loop stops once every episode has ended (the absorbed steps
    after it add 0). What evaluation uses, so a long horizon needs no ``(T, B)`` batch.

    Example::

        env = rollax.make("corridor")
        policy = rollax.BernoulliPolicy(3)
        returns = episode_returns(env, policy, policy.init(), jax.random.key(0), 256, 8)
    """
    check_count("batch_size", batch_size)
    check_count("num_steps", num_steps)
    if is_host(env):
        return _host_returns(env, policy, params, key, int(batch_size), int(num_steps))
    return _returns(env, policy, params, key, int(batch_size), int(num_steps))


@functools.partial(jax.jit, static_argnames=("env", "policy", "batch_size", "num_steps"))
def _host_returns(env, policy, params, key, batch_size, num_steps):
    """:func:`episode_returns` on a host environment: a pool of its own seeded from the reset
    stream, the first episode of each environment summed (its later ones, after Gymnasium's
    reset, add nothing), the pool closed at the end. The loop stops once every episode has
    ended. JAX refuses host calls in a loop whose stop is batched, so under ``vmap`` (lanes)
    the lanes run one after another (``lax.map``), each stopping when its episodes end: a host
    environment's lanes step one after another anyway."""

    @jax.custom_batching.custom_vmap
    def returns(params, key):
        return _host_loop(env, policy, params, key, batch_size, num_steps)

    @returns.def_vmap
    def _lanes(axis_size, in_batched, params, key):
        params_batched, key_batched = in_batched

        def lane(i):
            take = lambda x, batched: x[i] if batched else x  # noqa: E731
            return returns(jax.tree.map(take, params, params_batched), take(key, key_batched))

        return jax.lax.map(lane, jnp.arange(axis_size)), True

    return returns(params, key)


def _host_loop(env, policy, params, key, batch_size, num_steps):
    streams = split_key(key, False)
    state = env.reset_batch(streams.reset, batch_size)
    carry = _start_carry(policy, params, batch_size)
    action_steps = per_step(streams.action, num_steps)

    def running(loop):
        t, _, _, live, _ = loop
        return (t < num_steps) & jnp.any(live)

    def body(loop):
        t, state, carry, live, total = loop
        (state, carry), row = _host_step(env, policy, params, state, carry,
                                         per_env(action_steps[t], batch_size), live)
        total = total + jnp.where(live, row.reward, 0.0)
        return t + 1, state, carry, live & ~(row.terminated | row.truncated), total

    live = jnp.ones((batch_size,), bool)
    total = jnp.zeros((batch_size,), jnp.float32)
    _, state, _, _, total = jax.lax.while_loop(running, body, (0, state, carry, live, total))
    return total + env.close_batch(state, total).astype(jnp.float32)  # closed once summed


def collect_groups(env, policy, params, key, groups: int, group_size: int, num_steps: int,
                   live_only: bool = False):
    """:func:`collect` of ``groups * group_size`` (B) absorbing episodes in groups: the
    episodes ``b`` of group ``b // group_size`` all reset with the group's key
    ``split(reset, groups)[b // group_size]``, so they start from the same start state, and
    take their actions (and a stochastic environment its transitions) with keys of their own,
    exactly as :func:`collect` gives them. With ``group_size = 1`` this is :func:`collect`.
    ``live_only``: :func:`rollout_live`'s collection, which stops when every episode has
    ended (the final state is then ``None``).

    Returns ``(final_state, Trajectory)``, fields ``(T, B, ...)``. Group-relative baselines
    compare the episodes of one group: they differ only by their own actions and transitions.
    """
    check_count("groups", groups)
    check_count("group_size", group_size)
    check_count("num_steps", num_steps)
    batch = groups * group_size
    _, action_keys, transition_keys = collection_keys(key, batch, num_steps, env.stochastic)
    group_keys = per_env(split_key(key, env.stochastic).reset, groups)
    reset_keys = group_keys[jnp.arange(batch) // group_size]
    if live_only:
        return None, rollout_live(env, policy, params, reset_keys, action_keys, transition_keys)
    return rollout(env, policy, params, reset_keys, action_keys, transition_keys)


# ---------------------------------------------------------------------------------------------
# Auto-reset (streaming) collection


AutoResetTrajectory = NamedTuple(
    "AutoResetTrajectory",
    [(name, jax.Array) for name in Trajectory._fields] + [("next_observation", jax.Array)],
)
AutoResetTrajectory.__doc__ = """A :class:`Trajectory` plus its ``next_observation``: the fields
of ``Trajectory`` in its order (``action_mask`` None without masks, ``turns`` None but for a
game, ``agent_rewards`` None but for a team), then ``next_observation``, all ``(T, B,
...)``. Build one from a trajectory with ``AutoResetTrajectory(*trajectory,
next_observation)``.

``next_observation`` is the true next observation of the transition: ``observation[t + 1]``
within an episode, the episode's final observation where it ended, while the next row's
``observation`` is already the fresh start of the following episode (same-step reset). Every
cell is a real transition (``active`` is all True)."""


def reset_batch(env, key: jax.Array, batch_size: int):
    """``B`` start states, environment ``b`` reset with ``split(key, B)[b]`` (a host
    environment's pool of ``B`` is seeded from ``key`` itself:
    :meth:`rollax.envs.host.HostEnvironment.reset_batch`)."""
    check_count("batch_size", batch_size)
    if is_host(env):
        return env.reset_batch(key, batch_size)
    return jax.vmap(env.reset)(per_env(key, batch_size))


def split_at(key: jax.Array, num: int, index: jax.Array) -> jax.Array:
    """``per_env(key, num)[index]`` for an integer array ``index``. For threefry with JAX's
    partitionable threefry (the default), key ``i`` of a split is ``fold_in(key, i)``, so only
    the keys asked for are hashed; otherwise all ``num`` keys are derived and gathered (for
    the ``rbg`` implementations one draw of bits; XLA does not fuse a gather into a hash).
    :func:`autoreset` uses it to draw the keys of the finished environments only."""
    impl = str(jax.random.key_impl(key))
    # jax.config sets its flags as attributes at runtime; the stub does not list them
    if jax.config.jax_threefry_partitionable and impl == "threefry2x32":  # pyright: ignore[reportAttributeAccessIssue]
        return jax.vmap(lambda i: jax.random.fold_in(key, i))(index)
    return per_env(key, num)[index]


COMPACT_MIN_BATCH = 64
"""Batches of at least this many environments reset through a compacted gather (see
:func:`autoreset`); smaller ones select between stepped and fresh states."""


def autoreset(env, done: jax.Array, state, key: jax.Array):
    """Replace the finished environments of a batch with fresh starts: environment ``b`` (where
    ``done[b]``) becomes ``env.reset(per_env(key, B)[b])``, the others keep ``state``.

    ``done (B,)``, ``state`` a batched env state ``(B, ...)``. Every path gives identical
    states; which one runs depends on the platform the program is lowered for:

    - on a CPU (:func:`reset_finished`) nothing is reset when no environment finished, and
      from ``COMPACT_MIN_BATCH`` environments on only the finished ones are reset: their
      indices are compacted (at most ``B // 16``, the usual case, else every environment is
      reset and selected), so the random numbers and reset work scale with the finished count;
    - on a GPU or TPU (:func:`reset_all`) every environment's reset is computed and the
      finished ones selected, with no branch: XLA's conditionals there read their predicate on
      the host, a device-to-host copy and a wait at every step that costs more than the
      resets it would skip.

    Under ``vmap`` (e.g. over seeds) the CPU path's ``lax.cond`` predicates are batched and
    every branch runs; a vmapped caller with large B pays for both the compacted and the full
    reset.
    """
    return jax.lax.platform_dependent(
        done, state, key,
        cpu=lambda done, state, key: reset_finished(env, done, state, key),
        default=lambda done, state, key: reset_all(env, done, state, key))


def reset_all(env, done: jax.Array, state, key: jax.Array):
    """:func:`autoreset` without a branch: all ``B`` resets computed, the finished ones
    selected (the accelerators' path)."""
    batch_size = done.shape[0]
    return reset_where(done, jax.vmap(env.reset)(per_env(key, batch_size)), state)


def reset_finished(env, done: jax.Array, state, key: jax.Array):
    """:func:`autoreset` resetting only what finished (the CPU's path): a ``lax.cond`` below
    ``COMPACT_MIN_BATCH`` environments, else a three-way switch between none, the compacted
    finished ones and all."""
    batch_size = done.shape[0]

    def every(state):
        return reset_all(env, done, state, key)

    if batch_size < COMPACT_MIN_BATCH:
        return jax.lax.cond(jnp.any(done), every, lambda s: s, state)
    cap = batch_size // 16

    def few(state):
        (index,) = jnp.nonzero(done, size=cap, fill_value=batch_size)
        fresh = jax.vmap(env.reset)(split_at(key, batch_size, jnp.minimum(index, batch_size - 1)))
        return jax.tree_util.tree_map(lambda s, f: s.at[index].set(f, mode="drop"), state, fresh)

    count = jnp.sum(done)
    branch = jnp.where(count == 0, 0, jnp.where(count <= cap, 1, 2))
    return jax.lax.switch(branch, (lambda s: s, few, every), state)


def _host_step(env, policy, params, state, carry, action_keys, wanted=None):
    """One step of a host environment's ``B`` environments: ``((next_state, next_carry),
    AutoResetTrajectory row)`` (every cell live; Gymnasium's same-step reset; ``wanted``:
    :meth:`rollax.envs.host.HostEnvironment.step_batch`)."""
    observation = state.observation
    if carry is None:
        action, log_prob = jax.vmap(policy.sample, in_axes=(None, 0, 0))(params, observation,
                                                                        action_keys)
        next_carry = None
    else:
        next_carry, action, log_prob = jax.vmap(policy.sample, in_axes=(None, 0, 0, 0))(
            params, carry, observation, action_keys)
    next_state, out = env.step_batch(state, action, wanted)
    live = jnp.ones(out.reward.shape, bool)
    row = AutoResetTrajectory(observation, action, out.reward, live, out.terminated,
                              out.truncated, log_prob, action_mask=None, turns=None,
                              agent_rewards=None, next_observation=out.final_observation)
    return (next_state, next_carry), row


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps"))
def _collect_host(env, policy, params, state, carry, key, num_steps):
    batch_size = state.pool.shape[0]
    action_steps = per_step(split_key(key, False).action, num_steps)

    def body(state_carry, action_step):
        state, carry = state_carry
        (state, next_carry), row = _host_step(env, policy, params, state, carry,
                                               per_env(action_step, batch_size))
        if next_carry is not None:  # the restarted environments' memory starts afresh
            done = row.terminated | row.truncated
            next_carry = reset_where(done, policy.initial_carry(params), next_carry)
        return (state, next_carry), row

    return jax.lax.scan(body, (state, carry), action_steps)


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps"))
def _collect_autoreset(env, policy, params, state, carry, key, num_steps):
    if is_host(env):
        return _collect_host(env, policy, params, state, carry, key, num_steps)
    batch_size = jax.tree_util.tree_leaves(state)[0].shape[0]
    streams = split_key(key, env.stochastic)
    xs = StepKeys(per_step(streams.reset, num_steps), per_step(streams.action, num_steps),
                  per_step(streams.transition, num_steps))

    def body(state_carry, step_keys):
        action_keys = per_env(step_keys.action, batch_size)
        transition_keys = per_env(step_keys.transition, batch_size)
        state, carry = state_carry
        (next_state, next_carry), row = _step_batch(env, policy, params, state, carry,
                                                    action_keys, transition_keys)
        row = AutoResetTrajectory(*row._replace(active=jnp.ones_like(row.active)),
                                  jax.vmap(env.observation)(next_state))
        done = row.terminated | row.truncated
        next_state = autoreset(env, done, next_state, step_keys.reset)
        if next_carry is not None:  # the restarted environments' memory starts afresh
            next_carry = reset_where(done, policy.initial_carry(params), next_carry)
        return (next_state, next_carry), row

    return jax.lax.scan(body, (state, carry), xs)


def collect_autoreset(env, policy, params, state, key: jax.Array, num_steps: int):
    """Continue ``B`` streaming environments from ``state`` for ``num_steps`` (T) steps.

    Reset convention: **same-step** (Gymnasium's name). The step that ends an episode
    (terminated or truncated) records the true final observation in ``next_observation``; the
    state carried to the next step is a fresh ``env.reset`` with its own key, never a cached
    start state. Keys: the streaming ownership of the module docstring, every stream split per
    step and per environment. Start states come from :func:`reset_batch`.

    Returns ``(state, AutoResetTrajectory)``, fields ``(T, B, ...)``. A recurrent policy goes
    through :func:`collect_autoreset_recurrent`, which carries its memory too.

    Example::

        state = reset_batch(env, jax.random.key(0), 8)
        state, traj = collect_autoreset(env, policy, params, state, jax.random.key(1), 128)
    """
    check_count("num_steps", num_steps)
    if is_recurrent(policy):
        raise ValueError("policy is recurrent: collect with collect_autoreset_recurrent, "
                         "which carries its memory")
    (state, _), traj = _collect_autoreset(env, policy, params, state, None, key, int(num_steps))
    return state, traj


def collect_autoreset_recurrent(env, policy, params, state, carry, key: jax.Array,
                                num_steps: int):
    """:func:`collect_autoreset` for a recurrent policy (:mod:`rollax.recurrent`): ``carry``
    ``(B, ...)`` is the policy's memory of each environment, e.g.
    ``rollax.recurrent.initial_carries(policy, params, B)`` at the start.

    After every step the carry of exactly the environments that restarted is reset to
    ``policy.initial_carry(params)``, so the carry returned is the one the next rollout starts
    from. Keep the carry a rollout started with: with the trajectory it replays the rollout
    (:func:`rollax.recurrent.replay_log_prob`). Keys and the trajectory are those of
    :func:`collect_autoreset`. Returns ``(state, carry, AutoResetTrajectory)``.
    """
    check_count("num_steps", num_steps)
    (state, carry), traj = _collect_autoreset(env, policy, params, state, carry, key,
                                              int(num_steps))
    return state, carry, traj


# ---------------------------------------------------------------------------------------------
# A league: the learner against a pool of past snapshots


class League(NamedTuple):
    """Each environment's match in a league (:func:`collect_league`), ``(B,)`` int32 each."""

    seat: jax.Array
    """The player id whose moves the learner's parameters choose."""
    opponent: jax.Array
    """The pool's snapshot that plays the other seat, ``0 .. K - 1``."""


def draw_matches(key: jax.Array, batch_size: int, pool_size: int) -> League:
    """``B`` fresh matches: environment ``b`` draws ``c = randint(split(key, B)[b], 0, 2K)``
    (one key, used once), the learner's seat ``c % 2`` and the opponent ``c // 2``, each
    uniform and independent."""
    choice = jax.vmap(lambda k: jax.random.randint(k, (), 0, 2 * pool_size))(
        per_env(key, batch_size))
    return League(choice % 2, choice // 2)


def _league_step(env, policy, params, pool, state, match: League, action_key, transition_key):
    """One environment's step in a league: the player to act is the learner (``match.seat``)
    and acts by ``params``, or is the opponent and acts by the snapshot
    ``pool[match.opponent]``; one action drawn with the one action key. The row's
    ``turns.learner`` records which."""
    learner = jnp.asarray(env.to_act(state), jnp.int32) == match.seat
    theirs = jax.tree.map(lambda p: p[match.opponent], pool)
    acting = jax.tree.map(lambda mine, other: jnp.where(learner, mine, other), params, theirs)
    (next_state, _), row = _env_step(env, policy, acting, state, None, action_key,
                                     transition_key)
    return next_state, row._replace(turns=row.turns._replace(learner=learner))


@functools.partial(jax.jit, static_argnames=("env", "policy", "num_steps"))
def _collect_league(env, policy, params, pool, state, league, key, num_steps):
    batch_size = league.seat.shape[0]
    pool_size = jax.tree.leaves(pool)[0].shape[0]
    key, draws = jax.random.split(key)
    streams = split_key(key, env.stochastic)
    xs = (StepKeys(per_step(streams.reset, num_steps), per_step(streams.action, num_steps),
                   per_step(streams.transition, num_steps)), per_step(draws, num_steps))
    step = functools.partial(_league_step, env, policy, params, pool)

    def body(carry, keys):
        state, league = carry
        step_keys, draw_key = keys
        next_state, row = jax.vmap(step)(state, league, per_env(step_keys.action, batch_size),
                                         per_env(step_keys.transition, batch_size))
        row = AutoResetTrajectory(*row._replace(active=jnp.ones_like(row.active)),
                                  jax.vmap(env.observation)(next_state))
        done = row.terminated | row.truncated
        next_state = autoreset(env, done, next_state, step_keys.reset)
        fresh = draw_matches(draw_key, batch_size, pool_size)
        league = jax.tree.map(lambda new, old: jnp.where(done, new, old), fresh, league)
        return (next_state, league), row

    return jax.lax.scan(body, (state, league), xs)


def collect_league(env, policy, params, pool, state, league: League, key: jax.Array,
                   num_steps: int):
    """:func:`collect_autoreset` of a game (``docs/contract.md §8``) in which the learner's
    ``params`` play one seat of each environment and a past snapshot the other: ``pool`` is
    ``K`` parameters of ``policy`` stacked on a leading axis, ``league`` each environment's
    :class:`League` (the learner's seat and the opponent's index).

    Keys: ``key`` is split first, ``key, draws = split(key)``; ``key`` then gives the reset,
    action and transition streams exactly as :func:`collect_autoreset`'s, and ``draws`` is the
    league's own stream, split per step and per environment as the others: an environment
    whose episode ends at step ``t`` starts its next with the match
    :func:`draw_matches` gives for ``split(split(draws, T)[t], B)[b]``. Every move is drawn
    with the one action key of its cell, by whichever parameters act. The rows record
    ``turns.learner`` (the learner acted); ``log_prob`` is the acting policy's.

    Returns ``(state, league, AutoResetTrajectory)``.
    """
    check_count("num_steps", num_steps)
    if is_recurrent(policy) or is_host(env):
        raise ValueError("a league collects a feed-forward policy on a JAX game")
    (state, league), traj = _collect_league(env, policy, params, pool, state, league, key,
                                            int(num_steps))
    return state, league, traj

"""Rollax environments for Gymnasium users: :func:`to_gymnasium` wraps a functional rollax
environment as a ``gymnasium.Env`` (one environment) or a ``gymnasium.vector.VectorEnv`` (``N``
environments stepped by one jitted, ``vmap``-ed call, and one more for the restarts where
episodes ended), NumPy in and NumPy out.

Keys are owned by the wrapper, one chain per wrapper, and every key is used once:

- ``reset(seed=s)`` restarts the chain at ``jax.random.key(s)``; ``reset()`` without a seed
  continues it (the first one starts at the ``seed`` given to :func:`to_gymnasium`).
- one environment: a reset does ``key, reset_key = split(key)`` and starts from
  ``env.reset(reset_key)``; a step does ``key, transition_key = split(key)`` and calls
  ``env.step(state, action, transition_key)`` (a deterministic environment gets no key, but
  the split still happens, so the chain does not depend on ``env.stochastic``).
- ``N`` environments: a reset does ``key, reset_key = split(key)`` and starts environment ``b``
  from ``env.reset(split(reset_key, N)[b])`` (:func:`rollax.reset_batch`); a step does
  ``key, step_key = split(key)``, ``reset_key, transition_key = split(step_key)``, steps
  environment ``b`` with ``split(transition_key, N)[b]`` and restarts a finished one from
  ``env.reset(split(reset_key, N)[b])`` (:func:`rollax.collect.autoreset`).

The vector environment auto-resets in Gymnasium's **same-step** mode by default
(``metadata["autoreset_mode"] == AutoresetMode.SAME_STEP``), the convention of
:func:`rollax.collect_autoreset`: the step that ends an episode returns the first observation
of the next episode, and the episode's last observation in ``info["final_obs"]`` (masked by
``info["_final_obs"]``), exactly as ``SyncVectorEnv(..., autoreset_mode=SAME_STEP)`` does.
With ``autoreset_mode=AutoresetMode.NEXT_STEP`` (Gymnasium's default) the step that ends an
episode returns its last observation, and the next step ignores that environment's action and
returns a fresh start with reward 0 and no event, as ``SyncVectorEnv`` does in that mode: the
mode Gymnasium's observation wrappers (``NormalizeObservation``, ``TransformObservation``, ...)
require, since they transform ``obs`` but not ``info["final_obs"]``. The key chain is the same
in both modes; a finished environment is reset with the reset key of the step that restarts
it (same-step: the step that ends the episode; next-step: the one after).

Rendering: ``to_gymnasium(..., render_mode="rgb_array")`` for one environment that rollax
can draw (:data:`rollax.envs.frames.DRAWN`): ``render()`` returns the current state's RGB
frame ``(H, W, 3)`` (``uint8``), so Gymnasium's ``RecordVideo`` and Stable-Baselines3's
``VecVideoRecorder`` work; ``metadata["render_modes"]`` lists it and ``metadata["render_fps"]``
is the drawing's (Gymnasium's own for classic control). Without a render mode, ``render()``
warns and returns ``None``, as Gymnasium's own environments do.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import jax
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rollax.collect import autoreset, per_env, reset_batch, split_at
from rollax.envs.base import (
    Box,
    Dict,
    Discrete,
    Environment,
    MultiBinary,
    MultiDiscrete,
    Space,
    Tuple,
    step_with_key,
)
from rollax.envs.frames import DRAWN, frame_renderer
from rollax.envs.host import is_host
from rollax.envs.masks import action_mask
from rollax.envs.registry import make
from rollax.validate import check_count, check_seed

AUTORESET_MODES = (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP)
"""The auto-reset modes of :class:`GymnasiumVectorEnv`, the default first (``DISABLED`` would
need partial resets, ``reset(options={"reset_mask": ...})``, which rollax does not offer)."""

# ---------------------------------------------------------------------------------------------
# Spaces, actions, seeds


def gym_space(space: Any) -> gym.spaces.Space:
    """The Gymnasium space of a rollax one: ``Discrete(n)`` becomes ``gymnasium.spaces.Discrete(n)``
    of dtype int64 (Gymnasium's own, and the type its checker expects of observations; rollax's
    int32 values fit), ``Box(low, high, shape)`` a ``gymnasium.spaces.Box`` of the same shape,
    dtype (float32) and elementwise bounds, ``MultiDiscrete(nvec)`` a
    ``gymnasium.spaces.MultiDiscrete(nvec)`` (int64), ``MultiBinary(n)`` a
    ``gymnasium.spaces.MultiBinary(n)`` (int8, Gymnasium's), a ``Dict`` / ``Tuple``
    (observations) a ``gymnasium.spaces.Dict`` / ``Tuple`` of the converted leaves."""
    if isinstance(space, Discrete):
        if tuple(space.shape) != ():
            raise ValueError(f"only scalar Discrete spaces convert to Gymnasium, got {space}")
        return gym.spaces.Discrete(int(space.n), dtype=np.int64)
    if isinstance(space, Box):
        dtype = np.dtype(space.dtype)
        shape = tuple(int(n) for n in space.shape)
        low = np.broadcast_to(np.asarray(space.low, dtype), shape).copy()
        high = np.broadcast_to(np.asarray(space.high, dtype), shape).copy()
        return gym.spaces.Box(low, high, shape, dtype=dtype.type)
    if isinstance(space, MultiBinary):
        return gym.spaces.MultiBinary(int(space.n))
    if isinstance(space, MultiDiscrete):
        return gym.spaces.MultiDiscrete(np.asarray(space.nvec, np.int64), dtype=np.int64)
    if isinstance(space, Dict):
        return gym.spaces.Dict({k: gym_space(s) for k, s in space.spaces.items()})
    if isinstance(space, Tuple):
        return gym.spaces.Tuple(tuple(gym_space(s) for s in space.spaces))
    raise ValueError(f"cannot convert space {space!r} to Gymnasium: rollax Discrete, Box, "
                     f"MultiDiscrete, MultiBinary, Dict or Tuple only")


def gym_mask(space: Space, mask: Any) -> Any:
    """A rollax action mask (:mod:`rollax.envs.masks`; leading batch axes allowed) as
    Gymnasium's ``action_space.sample(mask=...)`` takes it, the convention of
    ``info["action_mask"]``: int8 ``(n,)`` of 0/1 for ``Discrete``; a tuple of int8 ``(nvec[k],)``
    per component for ``MultiDiscrete``; int8 ``(n,)`` for ``MultiBinary``, 0 or 1 where a bit
    has that one legal value, 2 where both are legal. None stays None."""
    if mask is None:
        return None
    mask = np.asarray(mask, bool)
    if isinstance(space, MultiBinary):
        zero, one = mask[..., 0], mask[..., 1]
        return np.where(zero & one, 2, np.where(one, 1, 0)).astype(np.int8)
    if isinstance(space, MultiDiscrete):
        return tuple(mask[..., k, :n].astype(np.int8) for k, n in enumerate(space.nvec))
    return mask.astype(np.int8)


def mask_info(space: Space, mask: Any, num_envs: int | None = None) -> dict[str, Any]:
    """``{"action_mask": gym_mask(...)}`` (with ``"_action_mask"``, all True, for ``num_envs``
    environments), or ``{}`` for an environment without masks."""
    if mask is None:
        return {}
    info: dict[str, Any] = {"action_mask": gym_mask(space, mask)}
    if num_envs is not None:
        info["_action_mask"] = np.ones(num_envs, bool)
    return info


def device_action(space: Space, action: Any, batch: tuple[int, ...] = ()) -> np.ndarray:
    """``action`` checked against the rollax ``space`` and cast to its dtype (int32 or float32),
    shape ``batch + space.shape``; ``ValueError`` naming the action otherwise. A discrete action
    must be an integer in ``0 .. n-1``; a ``Box`` action may lie outside its bounds (the
    environment's own rules apply, e.g. Pendulum clips the torque)."""
    array = np.asarray(action)
    shape = batch + tuple(space.shape)
    if array.shape != shape:
        raise ValueError(f"action must have shape {shape} (action_space {space}), got an array "
                         f"of shape {array.shape}")
    if isinstance(space, Discrete):
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"action must be an integer in [0, {space.n}), got dtype "
                             f"{array.dtype}")
        if np.any((array < 0) | (array >= space.n)):
            raise ValueError(f"action must be an integer in [0, {space.n}), got {action!r}")
        return array.astype(np.int32)
    if isinstance(space, (MultiDiscrete, MultiBinary)):
        nvec = np.asarray(space.nvec)
        if not np.issubdtype(array.dtype, np.integer) or np.any((array < 0) | (array >= nvec)):
            raise ValueError(f"action must be integers, component i in [0, nvec[i]) with nvec "
                             f"{list(space.nvec)}, got {action!r}")
        return array.astype(np.int32)
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"action must be a real array of shape {shape}, got dtype {array.dtype}")
    return array.astype(np.dtype(space.dtype))


def seed_key(seed: int | None) -> jax.Array:
    """``jax.random.key(seed)``; ``seed=None`` draws one from the operating system's entropy."""
    if seed is None:
        seed = int(np.random.SeedSequence().entropy) % 2**63  # pyright: ignore[reportArgumentType]
    check_seed(seed)
    return jax.random.key(seed)


def check_options(options: dict | None) -> None:
    """Rollax environments take no reset options: ``None`` or ``{}`` only."""
    if options:
        raise ValueError(f"options: rollax environments take no reset options, got "
                         f"{sorted(options)}")


def check_render_mode(render_mode: Any, env: Environment, num_envs: int | None,
                      name: str | None = None) -> Any:
    """``None``, or for ``"rgb_array"`` the drawing of ``env``'s states
    (:func:`rollax.envs.frames.frame_renderer`); ``ValueError`` in one line for another mode,
    a vector environment, or an environment rollax cannot draw (``name`` names it)."""
    if render_mode is None:
        return None
    if render_mode != "rgb_array":
        raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
    if num_envs is not None:
        raise ValueError("render_mode='rgb_array' applies to one environment (num_envs=None): "
                         "record each environment of a batch as its own")
    name = name or type(env).__name__
    draw = frame_renderer(env, name)
    if draw is None:
        raise ValueError(f"render_mode='rgb_array': rollax cannot draw {name} yet; it draws "
                         f"{', '.join(DRAWN)}")
    return draw


def autoreset_mode_of(mode: Any) -> AutoresetMode:
    """``mode`` (an ``AutoresetMode`` or its value, e.g. ``"NextStep"``) as an
    ``AutoresetMode`` of :data:`AUTORESET_MODES`; ``ValueError`` naming it otherwise."""
    for known in AUTORESET_MODES:
        if mode is known or (isinstance(mode, str) and mode == known.value):
            return known
    shown = " or ".join(f"AutoresetMode.{m.name} ({m.value!r})" for m in AUTORESET_MODES)
    raise ValueError(f"autoreset_mode must be {shown} (rollax's vector environment resets "
                     f"finished environments itself), got {mode!r}")


def render_nothing() -> None:
    """What ``render()`` does without a render mode, as Gymnasium's own environments: warn and
    return ``None``."""
    gym.logger.warn("render_mode is None: render() returns None (to_gymnasium(..., "
                    "render_mode='rgb_array') draws the environments rollax can draw)")


def host_observation(space: gym.spaces.Space, obs: Any):
    """One environment's observation as Gymnasium's checker expects it: ``np.int64`` for a
    ``Discrete`` space, a fresh writeable array of the space's dtype for a ``Box``, a ``dict`` or
    ``tuple`` of those for a ``Dict`` or ``Tuple``."""
    if isinstance(space, gym.spaces.Dict):
        return {k: host_observation(s, obs[k]) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(host_observation(s, x) for s, x in zip(space.spaces, obs))
    if isinstance(space, gym.spaces.Discrete):
        return np.int64(obs)
    return np.array(obs, dtype=space.dtype)


def host_batch(space: gym.spaces.Space, obs: Any):
    """A batch of observations ``(N, ...)`` of one environment's ``space`` as fresh arrays of its
    dtype (leaf by leaf, in a ``dict`` or ``tuple``, for a ``Dict`` or ``Tuple``)."""
    if isinstance(space, gym.spaces.Dict):
        return {k: host_batch(s, obs[k]) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(host_batch(s, x) for s, x in zip(space.spaces, obs))
    return np.array(obs, dtype=space.dtype)


# ---------------------------------------------------------------------------------------------
# The compiled calls (cached per environment, which is hashable and static)


@functools.partial(jax.jit, static_argnums=0)
def _reset_one(env: Environment, key: jax.Array):
    key, reset_key = jax.random.split(key)
    state = env.reset(reset_key)
    return key, state, env.observation(state), action_mask(env, state)


@functools.partial(jax.jit, static_argnums=0)
def _step_one(env: Environment, key: jax.Array, state, action: jax.Array):
    key, transition_key = jax.random.split(key)
    state, reward, terminated, truncated = step_with_key(env, state, action, transition_key)
    return key, state, (env.observation(state), reward, terminated, truncated,
                        action_mask(env, state))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _reset_many(env: Environment, num_envs: int, key: jax.Array):
    key, reset_key = jax.random.split(key)
    states = reset_batch(env, reset_key, num_envs)
    return key, states, jax.vmap(env.observation)(states), _masks(env, states)


def _masks(env: Environment, states) -> Any:
    """The action masks of a batch of states (None without masks)."""
    return jax.vmap(lambda state: action_mask(env, state))(states)


@functools.partial(jax.jit, static_argnums=0)
def _step_many(env: Environment, key: jax.Array, states, actions: jax.Array):
    """Every environment one step with this step's keys (the module docstring's chain), no
    restart: ``(next key, this step's reset key, stepped states, (observations, reward,
    terminated, truncated, masks))``. A program apart from :func:`_restart_many`, which runs
    only on steps where some environment restarts: without the resets this one is small
    enough for XLA's CPU client to run it on the calling thread."""
    key, step_key = jax.random.split(key)
    reset_key, transition_key = jax.random.split(step_key)
    keys = per_env(transition_key, actions.shape[0]) if env.stochastic else None
    stepped, reward, terminated, truncated = jax.vmap(functools.partial(step_with_key, env))(
        states, actions, keys)
    out = (jax.vmap(env.observation)(stepped), reward, terminated, truncated,
           _masks(env, stepped))
    return key, reset_key, stepped, out


@functools.partial(jax.jit, static_argnums=0)
def _restart_many(env: Environment, restart: jax.Array, states, reset_key: jax.Array):
    """The environments where ``restart`` is true started afresh with this step's reset key
    (:func:`rollax.collect.autoreset`), the others kept: ``(states, (observations, masks))``."""
    states = autoreset(env, restart, states, reset_key)
    return states, (jax.vmap(env.observation)(states), _masks(env, states))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _restart_one(env: Environment, num_envs: int, states, index: jax.Array,
                 reset_key: jax.Array):
    """:func:`_restart_many` for the one environment ``index``: the same fresh start
    (``env.reset(split(reset_key, N)[index])``, one key hashed instead of ``N``), a program
    small enough to run on the calling thread."""
    fresh = env.reset(split_at(reset_key, num_envs, index[None])[0])
    states = jax.tree.map(lambda s, f: s.at[index].set(f), states, fresh)
    return states, (jax.vmap(env.observation)(states), _masks(env, states))


RESTART_ONE_AT_A_TIME = 2
"""A step where at most this many environments restart restarts them one program call each
(:func:`_restart_one`); more, all in one call (:func:`_restart_many`)."""


def restart(env: Environment, ended: np.ndarray, states, reset_key: jax.Array):
    """The environments where the host array ``ended`` is true started afresh (the key chain of
    the module docstring; at least one is): ``(states, (observations, masks))``, the latter two
    on the host."""
    finished = np.flatnonzero(ended)
    if len(finished) > RESTART_ONE_AT_A_TIME:
        states, out = _restart_many(env, ended, states, reset_key)
    else:
        for index in finished:
            states, out = _restart_one(env, len(ended), states, np.int32(index), reset_key)
    return states, to_host(out)


def compile_restarts(env: Environment, num_envs: int, states, key: jax.Array) -> None:
    """Compile both restart programs for this batch of ``num_envs`` (their results
    discarded), so that the first step that restarts an environment does not stop to
    compile."""
    _restart_many(env, np.zeros(num_envs, bool), states, key)
    _restart_one(env, num_envs, states, np.int32(0), key)


def to_host(tree: Any) -> Any:
    """A pytree of device arrays as NumPy arrays, leaf by leaf (``None`` leaves kept): for a few
    small arrays far cheaper than ``jax.device_get``, which is made for large transfers."""
    return jax.tree.map(np.asarray, tree)


# ---------------------------------------------------------------------------------------------
# The wrappers


class GymnasiumEnv(gym.Env):
    """One rollax environment as a ``gymnasium.Env`` (build it with :func:`to_gymnasium`).

    ``reset(seed=None, options=None) -> (obs, info)`` and ``step(action) -> (obs, reward,
    terminated, truncated, info)``: ``obs`` of ``observation_space`` (``np.int64`` or a float32
    array of the space's shape), ``reward`` a Python float (rollax's float32 value), the events
    Python bools; ``info`` is ``{}``, or for an environment with ``action_mask`` the legal
    actions of the returned state in ``info["action_mask"]``, as
    ``action_space.sample(mask=...)`` takes them (:func:`gym_mask`). Stepping a finished
    episode returns its last observation, reward 0 and no event (rollax's absorbing rule) until
    the next ``reset``. ``rollax_env`` is the wrapped
    :class:`Environment`. With ``render_mode="rgb_array"`` (``draw``, its drawing of a state),
    ``render()`` returns the current state's RGB frame; without, it warns and returns
    ``None``."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (Gymnasium's class attribute)

    def __init__(self, env: Environment, seed: int | None = 0, draw: Any = None):
        self.rollax_env = env
        self.observation_space = gym_space(env.observation_space)
        self.action_space = gym_space(env.action_space)
        self.render_mode = None if draw is None else "rgb_array"
        if draw is not None:
            self.metadata = {"render_modes": ["rgb_array"],
                             "render_fps": getattr(draw, "fps", 30)}
        self._draw = draw
        self._key = seed_key(seed)
        self._state = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        check_options(options)
        if seed is not None:
            self._key = seed_key(seed)
        self._key, self._state, obs, mask = _reset_one(self.rollax_env, self._key)
        info = mask_info(self.rollax_env.action_space, to_host(mask))
        return host_observation(self.observation_space, to_host(obs)), info

    def step(self, action):
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        action = device_action(self.rollax_env.action_space, action)
        self._key, self._state, out = _step_one(self.rollax_env, self._key, self._state, action)
        obs, reward, terminated, truncated, mask = to_host(out)
        return (host_observation(self.observation_space, obs), float(reward), bool(terminated),
                bool(truncated), mask_info(self.rollax_env.action_space, mask))

    def render(self) -> np.ndarray | None:
        """The current state's RGB frame ``(H, W, 3)`` with ``render_mode="rgb_array"``;
        without a render mode a warning, and ``None``."""
        if self._draw is None:
            render_nothing()
            return None
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        return self._draw(jax.device_get(self._state))


class GymnasiumVectorEnv(VectorEnv):
    """``num_envs`` copies of a rollax environment as a ``gymnasium.vector.VectorEnv`` (build it
    with :func:`to_gymnasium`), stepped by one jitted ``vmap`` over the batch (and restarted,
    where episodes ended, by :func:`restart`).

    Shapes, with ``N = num_envs``: observations ``(N, *obs_shape)`` (float32 for a ``Box``,
    int64 ``(N,)`` for a ``Discrete`` observation), actions ``(N, *action_shape)``, rewards
    float64 ``(N,)``, terminations and truncations bool ``(N,)``. ``single_observation_space``
    and ``single_action_space`` are one environment's; ``observation_space`` and
    ``action_space`` the batched ones (``gymnasium.vector.utils.batch_space``).

    Auto-reset (``metadata["autoreset_mode"]``): **same-step** by default. Where environment
    ``b`` ends an episode (terminated or truncated) the returned ``obs[b]`` already starts the
    next one, and ``info`` holds ``final_obs`` (object array of ``N``: the episode's last
    observation at ``b``, ``None`` elsewhere), ``final_info`` (``{}``: rollax steps report no
    info) and their masks ``_final_obs``/``_final_info`` (bool ``(N,)``); a step where nothing
    ended returns ``info == {}``. **Next-step** (``autoreset_mode=AutoresetMode.NEXT_STEP``):
    ``obs[b]`` is the episode's last observation, and the next step ignores ``actions[b]`` and
    returns a fresh start with reward 0 and no event; ``info`` is always ``{}``. An environment
    with ``action_mask`` adds, in both modes and on reset, ``info["action_mask"]`` (the masks of
    the returned states, :func:`gym_mask` with a leading ``N`` axis) and ``_action_mask`` (all
    True).
    ``reset(seed=s)`` takes one integer seed (the key chain of the module docstring), not a
    list. ``render()`` warns and returns ``None``."""

    def __init__(self, env: Environment, num_envs: int, seed: int | None = 0,
                 autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP):
        self.rollax_env = env
        self.num_envs = num_envs
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = gym_space(env.observation_space)
        self.single_action_space = gym_space(env.action_space)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._key = seed_key(seed)
        self._states = None
        self._restart = np.zeros(num_envs, bool)  # next-step: ended in the previous step
        self._compiled = False  # the restart programs, compiled at the first reset

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None and not isinstance(seed, int | np.integer):
            raise ValueError(f"seed must be one integer for all {self.num_envs} environments "
                             f"(a rollax key chain), got {seed!r}")
        super().reset(seed=seed)
        check_options(options)
        if seed is not None:
            self._key = seed_key(seed)
        self._key, self._states, obs, mask = _reset_many(self.rollax_env, self.num_envs,
                                                         self._key)
        if not self._compiled:
            compile_restarts(self.rollax_env, self.num_envs, self._states, self._key)
            self._compiled = True
        self._restart = np.zeros(self.num_envs, bool)
        info = mask_info(self.rollax_env.action_space, to_host(mask), self.num_envs)
        return host_batch(self.single_observation_space, obs), info

    def step(self, actions):
        if self._states is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        actions = device_action(self.rollax_env.action_space, actions, (self.num_envs,))
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            return self._step_next(actions)
        self._key, reset_key, stepped, out = _step_many(self.rollax_env, self._key,
                                                        self._states, actions)
        obs, reward, terminated, truncated, mask = to_host(out)
        done = terminated | truncated
        info = {}
        if done.any():
            final = np.full(self.num_envs, None, dtype=object)
            for b in np.flatnonzero(done):
                final[b] = host_observation(self.single_observation_space,
                                            jax.tree.map(lambda x, b=b: x[b], obs))
            info = {"final_obs": final, "_final_obs": done.copy(), "final_info": {},
                    "_final_info": done.copy()}
            stepped, (obs, mask) = restart(self.rollax_env, done, stepped, reset_key)
        self._states = stepped
        info = mask_info(self.rollax_env.action_space, mask, self.num_envs) | info
        return (host_batch(self.single_observation_space, obs),
                np.asarray(reward, np.float64), np.array(terminated), np.array(truncated), info)

    def _step_next(self, actions):
        self._key, reset_key, stepped, out = _step_many(self.rollax_env, self._key,
                                                        self._states, actions)
        obs, reward, terminated, truncated, mask = to_host(out)
        ended = self._restart
        if ended.any():  # the episodes that ended last step restart now, with no event
            stepped, (obs, mask) = restart(self.rollax_env, ended, stepped, reset_key)
            reward = np.where(ended, np.float32(0), reward)
            terminated, truncated = terminated & ~ended, truncated & ~ended
        self._states = stepped
        self._restart = terminated | truncated
        return (host_batch(self.single_observation_space, obs),
                np.asarray(reward, np.float64), np.array(terminated), np.array(truncated),
                mask_info(self.rollax_env.action_space, mask, self.num_envs))

    def render(self) -> None:
        """Nothing renders yet: a warning, and ``None``."""
        render_nothing()


# ---------------------------------------------------------------------------------------------
# The entry point


def _host_refusal(name: str) -> ValueError:
    """A host environment's pools step Gymnasium's or EnvPool's own environments already."""
    return ValueError(f"{name} is stepped on the host: use the environment itself "
                      f"(gymnasium.make, envpool.make_gymnasium); to_gymnasium wraps rollax's "
                      f"JAX environments")


def to_gymnasium(env_or_id: Environment | str, num_envs: int | None = None, seed: int | None = 0,
                 autoreset_mode: AutoresetMode | str | None = None,
                 render_mode: str | None = None,
                 **make_kwargs) -> GymnasiumEnv | GymnasiumVectorEnv:
    """A rollax environment for Gymnasium users.

    ``env_or_id`` is an :class:`Environment` or a name for :func:`rollax.make` (``make_kwargs``,
    e.g. ``horizon=100``, go to ``make``). ``num_envs=None`` gives a ``gymnasium.Env`` for one
    environment (:class:`GymnasiumEnv`); ``num_envs=N`` a ``gymnasium.vector.VectorEnv`` of
    ``N`` environments in one jitted batched step (:class:`GymnasiumVectorEnv`), with
    same-step auto-reset, or next-step with ``autoreset_mode=AutoresetMode.NEXT_STEP`` (or
    ``"NextStep"``; the mode Gymnasium's observation wrappers require). ``seed`` (an integer in
    ``[0, 2**63)``, or ``None`` for fresh entropy) starts the key chain that the first
    ``reset()`` without a seed uses; ``reset(seed=s)`` restarts it, so the same seed gives the
    same episodes. ``render_mode``: ``None``, or ``"rgb_array"`` for one environment rollax can
    draw (:data:`rollax.envs.frames.DRAWN`; ``render()`` then returns the current frame, as
    Gymnasium's ``RecordVideo`` takes it). Compiled once per environment (one reset, one step
    program).

    Example::

        env = rollax.to_gymnasium("CartPole-v1")
        obs, info = env.reset(seed=0)                 # obs: float32 (4,)
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

        envs = rollax.to_gymnasium("CartPole-v1", num_envs=8, seed=0)
        obs, info = envs.reset()                      # obs: float32 (8, 4)
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
    """
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
    if autoreset_mode is not None:
        if num_envs is None:
            raise ValueError(f"autoreset_mode applies to a vector environment (num_envs=N) "
                             f"only, got autoreset_mode={autoreset_mode!r} without num_envs")
        autoreset_mode = autoreset_mode_of(autoreset_mode)
    if is_host(env_or_id):
        raise _host_refusal(env_or_id.name)
    if isinstance(env_or_id, Environment):
        if make_kwargs:
            raise ValueError(f"make_kwargs {sorted(make_kwargs)} apply to an environment name "
                             f"only; got an Environment ({type(env_or_id).__name__})")
        env = env_or_id
    elif isinstance(env_or_id, str):
        env = make(env_or_id, **make_kwargs)
    else:
        raise ValueError(f"env_or_id must be a rollax Environment or a name for rollax.make, "
                         f"got {type(env_or_id).__name__}")
    if is_host(env):
        raise _host_refusal(env.name)
    if seed is not None:
        check_seed(seed)
    draw = check_render_mode(render_mode, env, num_envs,
                             repr(env_or_id) if isinstance(env_or_id, str) else None)
    if num_envs is None:
        return GymnasiumEnv(env, seed, draw)
    check_count("num_envs", num_envs)
    return GymnasiumVectorEnv(env, int(num_envs), seed,
                              autoreset_mode or AutoresetMode.SAME_STEP)

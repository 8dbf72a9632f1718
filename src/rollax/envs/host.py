"""Environments stepped on the host: ``B`` environments driven from the compiled program.

A :class:`HostEnvironment` is not a functional :class:`~rollax.envs.base.Environment`: its
state lives outside JAX, in a *pool* of ``B`` copies with Gymnasium's vector API (Gymnasium's
own ``SyncVectorEnv``, or an EnvPool pool: :mod:`rollax.envs.suites.envpool`) that the
compiled collector steps through ``jax.experimental.io_callback``, one call per time step
for the whole batch. What the program carries is a :class:`HostState`: which pool, and the
observations the policy acts on next. Everything after collection (GAE, the losses, the
gradient steps, lanes, chunks, checkpoints of the parameters) is the same program as for a
JAX environment.

The contract, kept as for JAX environments (``docs/environments.md``, Host environments):

- **Same-step reset.** The pool resets an ended environment within the step that ends it
  (Gymnasium's ``AutoresetMode.SAME_STEP``): the step returns the new episode's first
  observation and, apart, the true final observation (Gymnasium's ``info["final_obs"]``), so
  the trajectory's ``next_observation`` is the true one, ``terminated`` and ``truncated`` are
  Gymnasium's own, apart (a ``TimeLimit`` truncation is bootstrapped; a step that does both,
  which Gymnasium allows, counts as terminated only, as rollax's own environments count it),
  and every cell is a real transition (``active`` all true).
- **Randomness.** The environments' randomness is Gymnasium's, seeded once per pool from the
  lane's reset key (``seed = bits(key)``; environment ``b`` gets ``seed + b`` as Gymnasium's
  ``reset(seed=...)`` gives it): a run is reproducible from its key. The policy's actions keep
  the collector's key ownership.
- **Actions** go to Gymnasium as sampled; a ``Box`` action is clipped to the space's bounds
  on the host first, as Stable-Baselines3 and CleanRL do (the trajectory keeps the sampled
  action, whose log-probability the update scores).
- **Outputs against the declared spaces.** Before a command writes anything
  (:func:`rollax.contracts.preflight.check_host_before_run`), one environment is reset and
  stepped once and its observation, reward and flags held against its Gymnasium spaces
  (:meth:`HostEnvironment.first_problem`). Later, a pool whose reset or step fails (an
  observation of another shape cannot be stacked into the batch) stops the compiled program
  with one line, :class:`HostOutputError`, naming the leaf, the step counted from the pool's
  reset, and the environment; the command line prints it (:func:`host_failure`) and exits 2.
  Nothing is checked per step when the pool does not fail (no cost to throughput).
- **What cannot be kept**: a pool's episodes in flight are not part of a checkpoint, and
  nothing about a pool survives its process.

Evaluation runs its own pool per call (seeded from the evaluation key), one episode per
environment, closed when the episodes end.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, NamedTuple, TypeGuard

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from rollax.envs.base import (
    Box,
    Dict,
    Discrete,
    MultiBinary,
    MultiDiscrete,
    Tuple,
    mismatch_words,
    space_leaves,
    space_tree,
)

__all__ = ["BatchStep", "HostEnvironment", "HostOutputError", "HostState", "host_failure",
           "is_host", "output_problem", "read_spaces", "space_from_gymnasium"]


class HostState(NamedTuple):
    """What a compiled program holds of ``B`` host environments."""

    pool: jax.Array
    """(B,) int32: the pool's number on the host (the same for all ``B``)."""
    observation: Any
    """(B, ...) the observation each environment's policy acts on next."""


class BatchStep(NamedTuple):
    """One step of ``B`` host environments (Gymnasium's same-step reset)."""

    observation: Any
    """(B, ...) the observation after the step: a new episode's first where one ended."""
    reward: jax.Array
    """(B,) float32."""
    terminated: jax.Array
    """(B,) bool."""
    truncated: jax.Array
    """(B,) bool."""
    final_observation: Any
    """(B, ...) the observation the step reached: the episode's last where one ended, else
    ``observation``."""


def is_host(env: Any) -> TypeGuard[HostEnvironment]:
    """Whether ``env`` is stepped on the host (:class:`HostEnvironment`)."""
    return isinstance(env, HostEnvironment)


def space_from_gymnasium(space: Any, what: str) -> Box | Discrete | MultiDiscrete | MultiBinary:
    """rollax's space for one of Gymnasium's (``Box``, ``Discrete`` starting at 0,
    ``MultiDiscrete``, ``MultiBinary``); a ``Box`` keeps its shape (see :attr:`HostEnvironment.
    observation_space` for the flattening of observations). ``ValueError`` naming ``what``
    otherwise."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete) and int(space.start) == 0:
        return Discrete(int(space.n))
    if isinstance(space, spaces.MultiBinary) and len(np.shape(space.n)) <= 1:
        return MultiBinary(int(np.prod(space.n)))
    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1 and not space.start.any():
        return MultiDiscrete(tuple(int(n) for n in space.nvec))
    if isinstance(space, spaces.Box):
        return Box(np.asarray(space.low, np.float32), np.asarray(space.high, np.float32),
                   tuple(space.shape))
    raise ValueError(f"{what} {space} is not one rollax trains on yet (Box, Discrete from 0, "
                     f"MultiDiscrete from 0, MultiBinary)")


def observation_space_from_gymnasium(space: Any, what: str) -> Any:
    """rollax's observation space for one of Gymnasium's: :func:`space_from_gymnasium`'s
    spaces, and Gymnasium's ``Dict`` and ``Tuple`` of them (nestable) as rollax's
    :class:`~rollax.envs.base.Dict` and :class:`~rollax.envs.base.Tuple` (each ``Box`` leaf
    keeps its shape)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return Dict({k: observation_space_from_gymnasium(s, f"{what}[{k!r}]")
                     for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return Tuple(tuple(observation_space_from_gymnasium(s, f"{what}[{i}]")
                           for i, s in enumerate(space.spaces)))
    return space_from_gymnasium(space, what)


def gymnasium_leaves(observation: Any, space: Any) -> list:
    """The arrays of a Gymnasium observation (a batch's or one environment's) in the order of
    :func:`rollax.envs.base.space_leaves` of its rollax ``space``: a ``Dict``'s by name, sorted;
    a ``Tuple``'s in order."""
    if isinstance(space, Dict):
        return [leaf for k, s in space.spaces.items()
                for leaf in gymnasium_leaves(observation[k], s)]
    if isinstance(space, Tuple):
        return [leaf for i, s in enumerate(space.spaces)
                for leaf in gymnasium_leaves(observation[i], s)]
    return [observation]


class HostOutputError(ValueError):
    """A host environment's output does not match its declared spaces, or its pool failed: the
    message is one line naming the environment, the output, the step and the environment
    index."""


_FAILURES: collections.deque = collections.deque(maxlen=16)
"""The messages of the latest :class:`HostOutputError`: JAX hands a failed host callback's
error back as its own error, whose text holds the message (:func:`host_failure`)."""


class _QuietFailures(logging.Filter):
    """Keeps JAX from logging the traceback of a :class:`HostOutputError` raised in a host
    callback: the error reaches the caller, whose one line says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, HostOutputError)


logging.getLogger("jax._src.callback").addFilter(_QuietFailures())


def host_failure(err: BaseException) -> str | None:
    """The one line of the :class:`HostOutputError` that ``err`` carries (itself, or JAX's
    error around the failed host callback that raised it), or None."""
    if isinstance(err, HostOutputError):
        return str(err)
    text = str(err)
    return next((line for line in reversed(_FAILURES) if line in text), None)


def value_text(x: Any) -> str:
    """``float32[4]``: a host value's dtype and shape (a Python number's as NumPy reads it),
    or its type's name (a dict, a ragged list)."""
    try:
        array = np.asarray(x)
    except Exception:  # a ragged list
        return type(x).__name__
    if array.dtype == object:
        return type(x).__name__
    return f"{array.dtype}{list(array.shape)}"


def finding_text(what: str, values: dict, step: int | None = None,
                 env: int | None = None) -> str:
    """``what: step 5, env 3, observation 'float32[8]', space 'float32[7]'``: a finding as
    the contract checks' reports write it (the values here are texts)."""
    at = [] if step is None and env is None else [
        ("reset" if step is None else f"step {step}") + ("" if env is None else f", env {env}")]
    details = ", ".join(at + [f"{k} {v!r}" for k, v in values.items()])
    return what + (f": {details}" if details else "")


def output_problem(value: Any, space: Any, what: str, path: str = "") -> tuple[str, dict] | None:
    """``(what is wrong, values)`` when a Gymnasium observation ``value`` does not fit its
    Gymnasium ``space`` (every leaf of a ``Dict`` / ``Tuple`` in turn), else None. A leaf fits
    with the space's shape and a dtype Gymnasium casts to the space's without changing its
    kind (a float64 into a float32 ``Box`` fits; a float into an integer space does not)."""
    from gymnasium import spaces

    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        keys: list[Any]
        if isinstance(space, spaces.Dict):
            keys = list(space.spaces)
            fits = isinstance(value, Mapping) and set(value) == set(keys)
            got = ", ".join(f"[{k!r}]" for k in value) if isinstance(value, Mapping) else None
            want = ", ".join(f"[{k!r}]" for k in keys)
        else:
            keys = list(range(len(space.spaces)))
            fits = isinstance(value, (tuple, list)) and len(value) == len(keys)
            got = (", ".join(f"[{i}]" for i in range(len(value)))
                   if isinstance(value, (tuple, list)) else None)
            want = ", ".join(f"[{i}]" for i in keys)
        if not fits:
            where = f" leaf {path}" if path else ""
            return (f"{what}{where} does not have observation_space's leaves",
                    {"observation": got if got is not None else value_text(value),
                     "space": want})
        nodes: Any = space.spaces  # a dict by key or a tuple by index, as ``value``
        for k in keys:
            problem = output_problem(value[k], nodes[k], what, f"{path}[{k!r}]")
            if problem is not None:
                return problem
        return None
    try:
        array = np.asarray(value)
    except Exception:  # a ragged list
        array = None
    if (array is not None and array.dtype != object and array.shape == tuple(space.shape)
            and np.can_cast(array.dtype, np.dtype(space.dtype), "same_kind")):
        return None
    return mismatch_words(what, path), {"observation": value_text(value),
                                        "space": f"{np.dtype(space.dtype)}{list(space.shape)}"}


def reward_problem(reward: Any) -> tuple[str, dict] | None:
    """What is wrong with a host step's reward (a real scalar: bool, int or float), or None."""
    text = value_text(reward)
    if text[-2:] == "[]" and np.asarray(reward).dtype.kind in "biuf":
        return None
    return "reward is not a real scalar", {"reward": text}


def flag_problem(name: str, flag: Any) -> tuple[str, dict] | None:
    """What is wrong with a host step's ``terminated`` or ``truncated`` (a bool scalar, as
    Gymnasium's own checker asks), or None."""
    text = value_text(flag)
    if not text.startswith("bool"):
        return f"{name} must be bool", {name: text}
    if text != "bool[]":
        return f"{name} must be a scalar", {name: text}
    return None


def read_spaces(name: str, observation_space: Any, action_space: Any) -> tuple:
    """``(observation space, action space, raw observation shape)`` of a host environment from
    its Gymnasium spaces: an observation of one array that is not a vector (an image, a grid)
    is flattened in C order for the policy and its shape kept (``None`` for a vector, or a
    ``Dict``/``Tuple`` observation, whose leaves keep their shapes)."""
    observation = observation_space_from_gymnasium(observation_space,
                                                   f"{name}'s observation space")
    action = space_from_gymnasium(action_space, f"{name}'s action space")
    raw = None
    if isinstance(observation, Box) and len(observation.shape) != 1:
        raw = observation.shape
        observation = Box(observation.low.reshape(-1), observation.high.reshape(-1),
                          (math.prod(raw),))
    return observation, action, raw


def _first_line(err: BaseException) -> str:
    """``"ValueError: <the first line of its message>"``."""
    return f"{type(err).__name__}: {str(err).strip().partition(chr(10))[0]}"


def _sync_pool(make_one: Callable[[], Any], batch_size: int, seed: int) -> tuple[Any, Any]:
    """``batch_size`` copies of ``make_one()`` in Gymnasium's ``SyncVectorEnv`` (same-step
    reset), reset with ``seed`` (environment ``b`` gets ``seed + b``)."""
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    pool = SyncVectorEnv([make_one] * batch_size, autoreset_mode=AutoresetMode.SAME_STEP)
    observation, _ = pool.reset(seed=seed)
    return pool, observation


def _drawn_env(make_one: Callable[..., Any], seed: int) -> tuple[Any, Any]:
    """One ``make_one(render_mode="rgb_array")`` environment reset with ``seed``, and its
    first observation (:attr:`HostEnvironment.open_drawn`)."""
    from rollax.envs.frames import quiet_pygame

    quiet_pygame()  # Gymnasium's own environments draw with pygame
    env = make_one(render_mode="rgb_array")
    observation, _ = env.reset(seed=seed)
    return env, observation


@dataclasses.dataclass(frozen=True, eq=False)
class HostEnvironment:
    """``B`` copies of an environment stepped on the host, from compiled programs.

    ``open_pool(B, seed)`` returns ``B`` environments reset with ``seed``, as a Gymnasium
    vector environment that resets an ended environment within the step that ends it
    (Gymnasium's ``AutoresetMode.SAME_STEP``, true final observations in ``info["final_obs"]``),
    and their first observations; ``name`` is how configs name it (``"gymnasium:<id>"``,
    ``"envpool:<id>"``). Equal only to itself (it holds its pools), so compiled functions that
    take it as a static argument are reused while it lives.
    """

    name: str
    open_pool: Callable[[int, int], tuple[Any, Any]]
    horizon: int
    """The episode's step limit (evaluation cuts its episodes there)."""
    spaces: tuple = dataclasses.field(repr=False)
    """``(observation space, action space, raw observation shape)`` as rollax reads them."""
    scoring: HostEnvironment | None = dataclasses.field(default=None, repr=False)
    """The environment evaluation plays when training's rewards or episodes are not the
    task's own score (EnvPool's Atari with ``episodic_life`` or ``reward_clip``: the whole game,
    unclipped); ``None``: this one (:func:`rollax.evaluation.scoring_env`)."""
    open_drawn: Callable[[int], tuple[Any, Any]] | None = dataclasses.field(default=None,
                                                                             repr=False)
    """One environment that draws its states, for videos (:func:`rollax.run.video.
    play_host_episodes`): ``open_drawn(seed)`` returns ``(env, first observation)``, ``env``
    with Gymnasium's single-environment ``step(action)`` (its 5-tuple, no reset after an
    episode ends), ``render()`` (the RGB frame of the state it is in) and ``close()``;
    ``None`` when the environment has no ``rgb_array`` rendering."""
    make_single: Callable[[], Any] | None = dataclasses.field(default=None, repr=False)
    """One of the pool's ``gymnasium.Env`` (:meth:`first_problem` probes it); ``None`` for a
    pool built another way (EnvPool's)."""
    pools: dict = dataclasses.field(default_factory=dict, repr=False)
    """The host's open pools by number (training and evaluation)."""
    steps: dict = dataclasses.field(default_factory=dict, repr=False)
    """How many steps each open pool has taken since its reset, by number (a failure names
    the step)."""
    numbers: Iterator[int] = dataclasses.field(default_factory=itertools.count, repr=False)
    """The pools' numbers, never given twice (pools close in any order)."""

    stochastic: ClassVar[bool] = False
    """The environments' randomness is the host's, seeded per pool (no transition keys)."""

    @classmethod
    def build(cls, name: str, make_one: Callable[..., Any], horizon: int | None = None,
              renders: bool = True) -> HostEnvironment:
        """``B`` copies of the ``gymnasium.Env`` that ``make_one()`` builds (with its
        ``TimeLimit``, as ``gymnasium.make`` gives it) in a ``SyncVectorEnv``. Probes one for
        its spaces and step limit (``horizon`` when given, else its registered
        ``max_episode_steps``, else none: 10**9), then closes it. Videos build one with
        ``make_one(render_mode="rgb_array")`` when ``renders`` (``make_one`` takes a
        ``render_mode``) and its ``metadata["render_modes"]`` has it."""
        probe = make_one()
        try:
            spaces = read_spaces(name, probe.observation_space, probe.action_space)
            limit = getattr(getattr(probe, "spec", None), "max_episode_steps", None)
            drawn = renders and "rgb_array" in probe.metadata.get("render_modes", ())
        finally:
            probe.close()
        return cls(name=name, open_pool=functools.partial(_sync_pool, make_one),
                   horizon=int(horizon or limit or 10**9), spaces=spaces,
                   open_drawn=functools.partial(_drawn_env, make_one) if drawn else None,
                   make_single=make_one)

    def first_problem(self) -> tuple[str | None, str] | None:
        """``(check, what is wrong)`` of the first output of one environment that does not
        match its declared Gymnasium spaces, or None when they match (or there is no
        :attr:`make_single` to probe). The environment is reset with seed 0 and stepped once
        with a sample of its action space (seeded 0): the observation after each against the
        observation space (``reset_output``, ``step_output``: :func:`output_problem`), the
        reward a real scalar, ``terminated`` and ``truncated`` bool scalars (``step_output``).
        A reset or step that raises: ``(None, "reset(seed=0) raised <type>: <first line>")``."""
        if self.make_single is None:
            return None
        env = self.make_single()
        try:
            try:
                observation, _ = env.reset(seed=0)
            except Exception as err:
                return None, f"reset(seed=0) raised {_first_line(err)}"
            problem = output_problem(observation, env.observation_space, "start observation")
            if problem is not None:
                return "reset_output", finding_text(*problem)
            env.action_space.seed(0)
            try:
                observation, reward, terminated, truncated, _ = env.step(
                    env.action_space.sample())
            except Exception as err:
                return None, f"step after reset(seed=0) raised {_first_line(err)}"
            problem = (reward_problem(reward)
                       or flag_problem("terminated", terminated)
                       or flag_problem("truncated", truncated)
                       or output_problem(observation, env.observation_space,
                                         "observation after a step"))
            return None if problem is None else ("step_output", finding_text(*problem))
        finally:
            env.close()

    # -- the spaces, as a functional environment has them ---------------------------------------

    @property
    def observation_space(self):
        return self.spaces[0]

    @property
    def action_space(self):
        return self.spaces[1]

    @property
    def raw_observation_shape(self) -> tuple[int, ...] | None:
        """The environment's own observation shape when it is not a vector (flattened in C
        order for the policy, as the suite adapters do)."""
        return self.spaces[2]

    # -- the host side ---------------------------------------------------------------------------

    def _open(self, seed, batch_size: int) -> tuple[np.ndarray, Any]:
        number = next(self.numbers)
        pool = None
        try:
            pool, observation = self.open_pool(batch_size, int(np.asarray(seed)))
            self.pools[number] = pool
            self.steps[number] = 0
            return np.full(batch_size, number, np.int32), self._observation(observation)
        except Exception as err:
            raise self._failure(err, pool, None, {}) from None

    def _failure(self, err: Exception, pool: Any, step: int | None,
                 info: dict) -> HostOutputError:
        """The one-line error of a pool whose reset (``step`` None) or step failed: the first
        observation that does not fit the space (each environment's latest, where the pool
        keeps them as Gymnasium's ``SyncVectorEnv`` does, and the true final ones in
        ``info``), else the error's type and first line."""
        check = "reset_output" if step is None else "step_output"
        what = "start observation" if step is None else "observation after a step"
        space = getattr(pool, "single_observation_space", None)
        latest = list(getattr(pool, "_env_obs", None) or ()) if space is not None else []
        final = info.get("final_obs", ()) if space is not None else ()
        candidates = [(b, value, what) for b, value in enumerate(latest)]
        candidates += [(int(b), final[b], "final observation")
                       for b in np.flatnonzero(info.get("_final_obs", ()))]
        message = None
        for b, value, said in candidates:
            problem = output_problem(value, space, said)
            if problem is not None:
                message = (f"environment {self.name!r} fails {check}: "
                           f"{finding_text(*problem, step, b)}")
                break
        if message is None:
            action = "reset" if step is None else f"step {step}"
            message = (f"environment {self.name!r}: its pool's {action} raised "
                       f"{_first_line(err)}")
        _FAILURES.append(message)
        return HostOutputError(message)

    def _observation(self, observation) -> Any:
        """A pool's batch of observations as the compiled side takes them (a pytree of
        arrays for a ``Dict``/``Tuple``; NumPy only, no JAX call on the host side)."""
        space = self.observation_space
        leaves = iter(gymnasium_leaves(observation, space))

        def leaf(s):
            batch = np.asarray(next(leaves)).reshape(-1, *s.shape)
            return batch.astype(np.dtype(s.dtype), copy=False)

        return space_tree(space, leaf)

    def one_observation(self, observation) -> Any:
        """One environment's Gymnasium observation as the policy takes it (NumPy leaves)."""
        return jax.tree.map(lambda x: x[0], self._observation(observation))

    def _flat(self, observation, batch_size: int) -> np.ndarray:
        """``(batch_size, D)``: the observation's leaves flattened side by side."""
        leaves = [np.reshape(x, (batch_size, -1)) for x in
                  gymnasium_leaves(observation, self.observation_space)]
        return leaves[0] if len(leaves) == 1 else np.concatenate(leaves, axis=1,
                                                                 dtype=np.float32)

    def _step(self, packed):
        """One step of a pool, in and out as one float32 array each (every argument and
        result of a host call costs a conversion of its own, about 20 us here): in, ``(B, 2 +
        A)`` = pool number, wanted, the action's ``A`` numbers; out, ``(B, 2 D + 3)`` = the
        observation's ``D`` numbers, the final observation's, reward, terminated, truncated."""
        packed = np.asarray(packed)  # JAX hands a callback a jax.Array: read it once
        size = self._size
        out = np.zeros((len(packed), 2 * size + 3), np.float32)
        if not packed[:, 1].any():  # nothing left to step (an evaluation whose episodes ended)
            return out
        number = int(packed[0, 0])
        envs = self.pools[number]
        step = self.steps.get(number, 0)
        self.steps[number] = step + 1
        action = self.host_action(packed[:, 2:])
        info: dict = {}
        try:
            observation, reward, terminated, truncated, info = envs.step(action)
            out[:, :size] = self._flat(observation, len(packed))
            out[:, size:2 * size] = out[:, :size]
            for b in np.flatnonzero(info.get("_final_obs", ())):
                out[b, size:2 * size] = self._flat(info["final_obs"][b], 1)[0]
            out[:, -3], out[:, -2], out[:, -1] = reward, terminated, truncated
        except Exception as err:
            raise self._failure(err, envs, step, info) from None
        return out

    def host_action(self, action: np.ndarray) -> np.ndarray:
        """``(B, ...)`` actions as the pool takes them: a ``Box`` action clipped to the
        space's bounds, any other as int64."""
        space = self.action_space
        action = np.asarray(action).reshape(len(action), *space.shape)
        if isinstance(space, Box):
            return np.clip(action, space.low, space.high)
        return action.astype(np.int64)

    def _close(self, pool, after) -> np.ndarray:
        self.steps.pop(int(np.asarray(pool)[0]), None)
        envs = self.pools.pop(int(np.asarray(pool)[0]), None)
        if envs is not None:
            envs.close()
        return np.zeros((), np.int32)

    # -- the compiled side -------------------------------------------------------------------------

    @property
    def _size(self) -> int:
        """The numbers of one observation, all its leaves."""
        return sum(math.prod(s.shape) for _, s in space_leaves(self.observation_space))

    def _observation_shape(self, batch_size: int) -> Any:
        return space_tree(self.observation_space,
                          lambda s: jax.ShapeDtypeStruct((batch_size, *s.shape), s.dtype))

    def _unflat(self, numbers: jax.Array) -> Any:
        """``(B, D)`` numbers as the observation's pytree (each leaf its shape and dtype)."""
        batch_size, start, parts = numbers.shape[0], 0, []
        for _, s in space_leaves(self.observation_space):
            size = math.prod(s.shape)
            parts.append(numbers[:, start:start + size].reshape(batch_size, *s.shape)
                         .astype(s.dtype))
            start += size
        leaves = iter(parts)
        return space_tree(self.observation_space, lambda s: next(leaves))

    def reset_batch(self, key: jax.Array, batch_size: int) -> HostState:
        """A new pool of ``batch_size`` environments, reset with ``seed = bits(key)``."""
        seed = jax.random.bits(key, dtype=jnp.uint32)
        shapes = (jax.ShapeDtypeStruct((batch_size,), jnp.int32),
                  self._observation_shape(batch_size))
        pool, observation = io_callback(lambda s: self._open(s, batch_size), shapes, seed)
        return HostState(pool, observation)

    def step_batch(self, state: HostState, action: jax.Array,
                   wanted: jax.Array | None = None) -> tuple[HostState, BatchStep]:
        """Every environment of ``state``'s pool steps with its action (same-step reset);
        when ``wanted`` ((B,) bool) has no true entry, none does: the host returns zeros at
        once (a loop of a fixed length, as ``vmap`` over lanes needs, stops stepping early).
        The numbers cross as float32 (exact for the pool number, the flags, integer actions
        and observations below 2**24, and float32 ones)."""
        batch_size = state.pool.shape[0]
        if wanted is None:
            wanted = jnp.ones((batch_size,), bool)
        packed = jnp.concatenate([state.pool[:, None].astype(jnp.float32),
                                  wanted[:, None].astype(jnp.float32),
                                  action.reshape(batch_size, -1).astype(jnp.float32)], axis=1)
        size = self._size
        out = io_callback(self._step, jax.ShapeDtypeStruct((batch_size, 2 * size + 3),
                                                           jnp.float32), packed)
        terminated = out[:, -2] > 0
        step = BatchStep(self._unflat(out[:, :size]), out[:, -3], terminated,
                         (out[:, -1] > 0) & ~terminated, self._unflat(out[:, size:2 * size]))
        return HostState(state.pool, step.observation), step

    def close_batch(self, state: HostState, after: jax.Array) -> jax.Array:
        """Close ``state``'s pool once ``after`` is computed (an int32 0 to depend on). The
        callbacks are unordered (lanes ``vmap`` them), so data alone orders them: without
        ``after`` the pool's number, the same from its reset on, would let XLA close it
        before its last step."""
        return io_callback(self._close, jax.ShapeDtypeStruct((), jnp.int32), state.pool, after)

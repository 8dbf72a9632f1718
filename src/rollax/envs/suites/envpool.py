"""EnvPool's environments (MuJoCo, Atari, classic control...), stepped on the host:
``make("envpool:HalfCheetah-v4")``.

An EnvPool task is a :class:`~rollax.envs.host.HostEnvironment` whose pools are EnvPool's own
(``envpool.make_gymnasium(task, num_envs=B, seed=seed)``: C++ environments stepped by its
thread pool), stepped from the compiled collector once per time step for the whole batch, as
Gymnasium's environments are (:mod:`rollax.envs.host`). Needs ``pip install 'rollax[envpool]'``.

**The ending contract.** EnvPool resets an ended environment on the *next* step, which ignores
its action. rollax resets it within the step that ends it instead: the pool steps every
environment, then resets exactly the ended ones (``reset(env_id=...)``, which EnvPool's
synchronous pools allow), so the step keeps its true final observation, reward, termination
and truncation apart (a truncation, e.g. MuJoCo's 1,000-step limit, is bootstrapped from the
true final observation), the next observation is the new episode's first, and no cell of a
trajectory is dead. The next step is a real one (EnvPool counts it as the new episode's first).

**Randomness.** EnvPool seeds a pool once, when it is made (environment ``b`` from ``seed +
b``); rollax makes each pool at its reset with ``seed = bits(key)`` of the lane's key, so a
run is reproducible from its key (``--seed``); resets within a pool continue the
environments' own generators. What cannot be kept: a pool's episodes in flight (a resume
starts new ones) and the pool's generators.

**Why not EnvPool's XLA interface.** ``env.xla()`` steps a pool from inside ``jax.jit``
without Python, but (measured here, envpool 1.2.5) its MuJoCo tasks take float64 actions,
which a float32 program cannot pass without turning on ``jax_enable_x64`` for everything; the
pool is a constant of the compiled program (its handle an attribute of the call), so lanes
cannot ``vmap`` over pools and the key cannot seed one; and it keeps the next-step reset.
Stepping through a host call costs about 20 us per step of the whole batch.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np

from rollax.envs.host import HostEnvironment, read_spaces
from rollax.envs.suites.base import (
    headless_gl,
    host_maker,
    import_suite,
    rejected_options,
    unknown_id,
)

PREFIX = "envpool"

FAMILIES = ("mujoco.gym", "atari", "box2d", "classic_control", "toy_text")
"""EnvPool's families ``rollax envs`` lists (its others need more packages or spaces rollax
does not take yet)."""


TRAINING_SIGNAL = ("episodic_life", "reward_clip")
"""EnvPool's Atari options that change what training sees, not the game: an episode per
life, rewards clipped to their signs. An environment made with either is evaluated on the
whole game's unclipped score (its ``scoring`` environment, made without them)."""


def ids() -> tuple[str, ...]:
    """EnvPool's tasks of :data:`FAMILIES` (none when EnvPool is not installed) with spaces
    rollax trains on (Blackjack's observation is a ``Tuple``: not yet); any other task EnvPool
    knows builds too."""
    if importlib.util.find_spec("envpool") is None:
        return ()
    envpool = import_suite("envpool", PREFIX)
    specs = envpool.registration.registry.specs
    return tuple(sorted(task for task in envpool.list_all_envs()
                        if str(specs[task][0]).removeprefix("envpool.") in FAMILIES
                        and "Blackjack" not in task))


def make(env_id: str, horizon: int | None = None, **options) -> HostEnvironment:
    """The host environment of EnvPool's ``env_id``, with EnvPool's ``options`` (e.g.
    ``episodic_life=True`` for Atari), its episodes cut at ``horizon`` steps when given (else
    at EnvPool's ``max_episode_steps``). The same arguments give the same object."""
    return _make(env_id, horizon, options)


def _build(env_id: str, kwargs: dict) -> HostEnvironment:
    headless_gl()  # before MuJoCo is imported, so videos can draw EnvPool's MuJoCo tasks
    envpool = import_suite("envpool", PREFIX)
    if env_id not in envpool.list_all_envs():
        raise unknown_id(PREFIX, env_id, ids())
    try:
        spec = envpool.make_spec(env_id, **kwargs)
    except (TypeError, ValueError, KeyError) as error:  # an option the task does not take
        raise rejected_options(PREFIX, env_id, kwargs, error) from error
    name = f"{PREFIX}:{env_id}"
    observation_space = spec.gymnasium_observation_space
    image = len(observation_space.shape) == 3  # EnvPool's images: (C, H, W)
    if image:
        from gymnasium.spaces import Box

        observation_space = Box(np.moveaxis(observation_space.low, 0, -1),
                                np.moveaxis(observation_space.high, 0, -1),
                                dtype=observation_space.dtype)
    scoring = None
    if any(kwargs.get(option) for option in TRAINING_SIGNAL):  # scored on the whole game
        scoring = _make(env_id, kwargs.get("max_episode_steps"),
                        {k: v for k, v in kwargs.items()
                         if k not in (*TRAINING_SIGNAL, "max_episode_steps")})
    return HostEnvironment(
        name=name, open_pool=functools.partial(SameStepPool.open, env_id, kwargs, image),
        horizon=int(spec.config.max_episode_steps),
        spaces=read_spaces(name, observation_space, spec.gymnasium_action_space),
        scoring=scoring, open_drawn=_drawn(envpool, env_id, kwargs, image))


def _drawn(envpool, env_id: str, kwargs: dict, image: bool):
    """:meth:`DrawnPool.open` for ``env_id``; ``None`` (not drawn) for a MuJoCo task without
    MuJoCo's Python package, whose OpenGL context EnvPool draws into."""
    gl = "mujoco" in str(envpool.registration.registry.specs[env_id][0])
    if gl and importlib.util.find_spec("mujoco") is None:
        return None
    return functools.partial(DrawnPool.open, env_id, kwargs, image, gl)


_make = host_maker(PREFIX, _build)


class SameStepPool:
    """An EnvPool pool behind Gymnasium's vector API with same-step resets (module docstring):
    ``step(action)`` returns ``(observation, reward, terminated, truncated, info)`` where an
    environment that ended has its new episode's first observation, and ``info["final_obs"]``
    (read where ``info["_final_obs"]``) the true final one. With ``image``, EnvPool's
    channel-first frames (Atari's ``(4, 84, 84)``) are handed over channel-last, ``(H, W, C)``,
    as rollax's convolutional networks read images."""

    def __init__(self, pool: Any, image: bool, lives: bool = False):
        self.pool = pool
        self.image = image
        self.lives = lives
        self.action_dtype = pool.action_space.dtype

    @classmethod
    def open(cls, task: str, options: dict, image: bool, batch_size: int,
             seed: int) -> tuple[Any, Any]:
        """``batch_size`` environments of ``task`` seeded with ``seed`` modulo ``2**31 -
        batch_size`` (EnvPool's seeds, ``seed + b`` for environment ``b``, are int32s), reset;
        and their first observations."""
        envpool = import_suite("envpool", PREFIX)
        pool = cls(envpool.make_gymnasium(task, num_envs=batch_size, batch_size=batch_size,
                                          seed=seed % (2**31 - batch_size), **options), image,
                   lives=bool(options.get("episodic_life")))
        observation, _ = pool.pool.reset()
        return pool, pool._observation(observation)

    def _observation(self, observation) -> np.ndarray:
        """A copy (the pool's buffer is reused by its next call), channels last for images."""
        return np.moveaxis(observation, 1, -1).copy() if self.image else np.array(observation)

    def step(self, action: np.ndarray) -> tuple[Any, Any, Any, Any, dict]:
        observation, reward, terminated, truncated, _ = self.pool.step(
            np.asarray(action, self.action_dtype))
        observation = self._observation(observation)
        ended = np.asarray(terminated) | np.asarray(truncated)
        info = {}
        if ended.any():
            ids = np.flatnonzero(ended).astype(np.int32)
            if self.lives:  # EnvPool's own next step: a lost life continues the game
                space = self.pool.action_space
                first, *_ = self.pool.step(np.zeros((ids.size, *space.shape), self.action_dtype),
                                           env_id=ids)
            else:
                first, _ = self.pool.reset(env_id=ids)
            info = {"final_obs": observation.copy(), "_final_obs": ended}
            observation[ended] = self._observation(first)
        return observation, np.array(reward), np.array(terminated), np.array(truncated), info

    def close(self) -> None:
        self.pool.close()


class DrawnPool:
    """One EnvPool environment that draws its frames (EnvPool's ``render_mode="rgb_array"``),
    behind Gymnasium's single-environment ``step`` / ``render`` / ``close``, for videos
    (:attr:`rollax.envs.host.HostEnvironment.open_drawn`): an episode is played to its end,
    never past it, so EnvPool's next-step reset does not matter here."""

    def __init__(self, pool: Any, image: bool, context: Any = None):
        self.pool = pool
        self.image = image
        self.context = context
        self.action_dtype = pool.action_space.dtype

    @classmethod
    def open(cls, task: str, options: dict, image: bool, gl: bool,
             seed: int) -> tuple[Any, Any]:
        """The environment of ``task`` seeded with ``seed`` (as :meth:`SameStepPool.open`
        seeds its first), reset; and its first observation (channels last for images).
        EnvPool's MuJoCo tasks (``gl``) draw into the calling thread's OpenGL context,
        which MuJoCo's ``GLContext`` makes (EGL without a display) and :meth:`close` frees."""
        envpool = import_suite("envpool", PREFIX)
        context = None
        if gl:
            import mujoco  # pyright: ignore[reportMissingImports]  (EnvPool's MuJoCo needs it)

            context = mujoco.GLContext(640, 480)
            context.make_current()
        pool = cls(envpool.make_gymnasium(task, num_envs=1, batch_size=1,
                                          seed=seed % (2**31 - 1), render_mode="rgb_array",
                                          **options), image, context)
        observation, _ = pool.pool.reset()
        return pool, pool._observation(observation)

    def _observation(self, observation) -> np.ndarray:
        """The pool's one observation (a copy), channels last for images."""
        one = np.array(observation[0])
        return np.moveaxis(one, 0, -1) if self.image else one

    def step(self, action) -> tuple[Any, float, bool, bool, dict]:
        observation, reward, terminated, truncated, _ = self.pool.step(
            np.asarray(action, self.action_dtype)[None])
        return (self._observation(observation), float(reward[0]),
                bool(terminated[0]), bool(truncated[0]), {})

    def render(self) -> np.ndarray:
        return np.asarray(self.pool.render())[0]

    def close(self) -> None:
        self.pool.close()
        if self.context is not None:
            self.context.free()

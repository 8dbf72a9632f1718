"""Brax environments behind rollax's functional interface: ``make("brax:<name>")``.

Also the shared base of :mod:`rollax.envs.suites.playground` (MuJoCo Playground), whose
environments have the same ``State`` API: ``reset(rng) -> State`` and ``step(state, action) ->
State`` with ``State.obs``, ``State.reward``, ``State.done`` (and ``metrics``, ``info`` and the
physics state, ``pipeline_state`` in Brax, ``data`` in Playground). Both suites are imported
lazily, only when such an environment is built (``pip install rollax[brax]`` /
``rollax[playground]``).

What Brax does at an episode's end (read in brax 0.14.2, ``brax/envs/*.py`` and
``brax/envs/wrappers/training.py``):

- A raw environment (``brax.envs.get_environment(name, **kwargs)``) has no time limit and no
  auto-reset. Its ``step`` sets ``done`` (float 0/1) to the task's own end only: falling or
  leaving the healthy range (``inverted_pendulum``: ``|angle| > 0.2``;
  ``inverted_double_pendulum``: tip below ``y = 1``; ``ant``/``hopper``/``humanoid``/
  ``walker2d``: unhealthy, when ``terminate_when_unhealthy``); the other environments never set
  it. No raw environment reads a step counter. ``step`` takes no key: given the state it is
  deterministic; randomness is drawn at ``reset`` only.
- The time limit lives in the training wrappers (``training.wrap`` / ``envs.create``):
  ``EpisodeWrapper(episode_length=1000)`` folds ``steps >= episode_length`` into ``done`` and
  flags it in ``info["truncation"]``; ``AutoResetWrapper`` then puts back the *cached first
  state* of the batch entry (every episode of an entry starts from the same state).

The adapter steps the raw environment only: ``terminated`` is the raw ``done != 0``, unchanged;
the time limit is rollax's ``horizon`` (default 1000, Brax's ``episode_length`` default), so it
becomes ``truncated``, never ``terminated``. A finished state absorbs (rollax's collectors reset
it with a fresh key); Brax's wrappers and their cached-state auto-reset are never used.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, start_counters
from rollax.envs.suites.base import (
    Options,
    Spaces,
    SuiteEnvironment,
    flat_box,
    hashable_options,
    headless_gl,
    import_suite,
    raw_key,
    rejected_options,
    strong,
    unknown_id,
)
from rollax.validate import check_horizon

BRAX_DEFAULT_HORIZON = 1000
"""Brax's ``episode_length`` default (``training.wrap``, ``envs.create``)."""

BRAX_TEST_ONLY = ("fast",)
"""Brax's registry entries left out: ``fast`` is Brax's own test stub (no physics system)."""


class SuiteState(NamedTuple):
    """One wrapped environment's state."""

    inner: Any
    """The suite's own ``State`` (a pytree: physics state, ``obs``, ``reward``, ``done``,
    ``metrics``, ``info``): after reset, or after the last live step (the final one once
    done)."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


@dataclasses.dataclass(frozen=True)
class StateApiEnv(SuiteEnvironment):
    """A Brax-style environment (``State`` with ``obs``/``reward``/``done``) with rollax's
    contracts. Subclasses name the suite (``prefix``) and build the suite's raw environment
    (:meth:`_build`). It lives here, with Brax, because the ``State`` API is Brax's: Playground's
    environments implement it (and Playground's own wrappers are Brax's).

    - ``stochastic = False``: the suite's ``step`` takes no key; ``reset(key)`` hands the key's
      raw data to the suite's ``reset`` (its only randomness; both suites split and store raw
      ``uint32[2]`` keys: Playground keeps it in ``info["rng"]`` for later draws, which makes
      those draws part of the state).
    - ``terminated`` is the suite's ``done != 0`` after a raw step; ``truncated`` is rollax's
      ``horizon``. The suite's wrappers (time limit, auto-reset) are never used.
    - Observations: the suite's array observation as float32, flattened to a vector (already
      one in every Brax and Playground state-based environment). Dict observations (Playground
      locomotion, vision) are refused with a ``ValueError`` at construction.
    - Actions: ``Box(-1, 1, (action_size,))``, the convention of both suites (Brax scales
      ``[-1, 1]`` to the actuators' range; Playground's tasks and Brax's PPO use ``[-1, 1]``).
    - Equality and hash depend only on ``(name, horizon, env_kwargs)``, so compiled functions
      are reused across adapters of the same environment.
    """

    stochastic = False
    prefix: ClassVar[str] = ""

    name: str
    """The suite's environment id (without the prefix)."""
    horizon: int | None = None
    """Live steps after which an episode is truncated; ``None``: the suite's episode length."""
    env_kwargs: Options = ()
    """Sorted ``(name, value)`` options handed to the suite's constructor."""

    suite_env: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The suite's raw environment object."""

    def __post_init__(self):
        options = hashable_options(self.prefix, self.env_kwargs)
        env, options, default_horizon = self._build(self.name, options)
        horizon = default_horizon if self.horizon is None else self.horizon
        check_horizon(horizon)
        self._fill(env_kwargs=options, horizon=int(horizon), suite_env=env,
                   spaces=self._convert_spaces(env))

    def _build(self, name: str, options: Options) -> tuple[Any, Options, int]:
        """``(raw env, resolved options, default horizon)``."""
        raise NotImplementedError

    def _convert_spaces(self, env) -> Spaces:
        shape = jax.eval_shape(env.reset, jax.random.key_data(jax.random.key(0))).obs
        if not hasattr(shape, "shape"):
            keys = list(shape) if isinstance(shape, dict) else type(shape).__name__
            raise ValueError(
                f"{self.prefix}:{self.name} has dict observations ({keys}); the adapter supports "
                f"array observations only"
            )
        raw_shape = tuple(int(d) for d in shape.shape)
        n = int(env.action_size)
        action = Box(np.full(n, -1.0, np.float32), np.full(n, 1.0, np.float32), (n,))
        return Spaces(flat_box(-np.inf, np.inf, raw_shape), action, raw_shape)

    # -- the functional interface ---------------------------------------------------------------

    def reset(self, key: jax.Array) -> SuiteState:
        inner = self.suite_env.reset(raw_key(key))
        return SuiteState(jax.tree.map(strong, inner), *start_counters())

    def transition(self, state: SuiteState, action: jax.Array, key: jax.Array | None):
        # fresh containers: both suites update ``metrics``/``info`` dicts in place, which
        # would otherwise write into the (absorbing) state passed in
        inner = jax.tree.map(lambda x: x, state.inner)
        nxt = self.suite_env.step(inner, action)
        reward = jnp.reshape(jnp.asarray(nxt.reward, jnp.float32), ())
        terminated = jnp.reshape(jnp.asarray(nxt.done) != 0, ())
        return state._replace(inner=nxt), reward, terminated

    def observation(self, state: SuiteState) -> jax.Array:
        return jnp.reshape(state.inner.obs, (-1,)).astype(jnp.float32)



def _import_brax_envs():
    headless_gl()
    import_suite("brax", "brax")
    return import_suite("brax.envs", "brax")


def _brax_names(envs) -> tuple[str, ...]:
    registry = getattr(envs, "_envs", {})  # Brax has no public list of its registry
    return tuple(n for n in registry if n not in BRAX_TEST_ONLY)


@dataclasses.dataclass(frozen=True)
class BraxEnv(StateApiEnv):
    """A raw Brax environment (``brax.envs.get_environment(name, **env_kwargs)``, e.g.
    ``backend="mjx"``) with rollax's contracts (:class:`StateApiEnv`); built by
    ``make("brax:<name>")``. The horizon defaults to 1000, Brax's ``episode_length``."""

    prefix: ClassVar[str] = "brax"

    def _build(self, name, options):
        envs = _import_brax_envs()
        names = _brax_names(envs)
        if not isinstance(name, str) or name not in names:
            raise unknown_id(self.prefix, name, names)
        try:
            env = envs.get_environment(name, **dict(options))
        except TypeError as error:
            raise rejected_options(self.prefix, name, dict(options), error) from error
        return env, options, BRAX_DEFAULT_HORIZON


def ids() -> tuple[str, ...]:
    """The ids ``make("brax:<id>")`` accepts, in Brax's order; empty when Brax is missing."""
    try:
        return _brax_names(_import_brax_envs())
    except ValueError:
        return ()


def make_brax(env_id: str, horizon: int | None = None, **env_kwargs) -> BraxEnv:
    """``BraxEnv(env_id, horizon, env_kwargs)``; what ``make("brax:<env_id>")`` calls."""
    return BraxEnv(env_id, horizon, tuple(sorted(env_kwargs.items())))


make = make_brax
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

"""gymnax environments behind rollax's functional interface: ``make("gymnax:<id>")``.

``GymnaxEnv`` wraps one gymnax environment (with its default ``EnvParams``) as a rollax
:class:`~rollax.envs.base.Environment`. gymnax is imported lazily, only when such an
environment is built; install it with ``pip install rollax[gymnax]``.

What gymnax does, and what the adapter uses (gymnax 1.x):

- ``reset_env(key, params) -> (obs, state)`` and ``step_env(key, state, action, params) ->
  (obs, state, reward, terminated, info)`` are the raw dynamics: no auto-reset and no time
  limit. ``terminated`` is ``is_terminal(next_state, params)`` (``== is_terminated``), the
  task's own end only.
- ``step(key, state, action, params)`` wraps ``step_env``: it splits the key, adds
  ``truncated = state.time >= params.max_steps_in_episode`` (``is_truncated``), auto-resets when
  either fires and returns ``(obs, state, reward, terminated, truncated, info)`` with the final
  observation in ``info["final_observation"]``. The adapter does **not** use it: rollax states
  absorb instead of resetting, and rollax owns the time limit.

The same split as rollax's own: ``step_env`` is the adapter's ``transition`` and the inherited
``step`` of :class:`~rollax.envs.base.Environment` adds the time limit and absorbing states, so
``terminated`` is ``step_env``'s flag, unchanged, and ``truncated`` is rollax's. The horizon
defaults to the environment's ``max_steps_in_episode``, so with the default the events coincide
with gymnax's own ``step`` (minus its ``terminated & truncated`` overlap). ``params`` are passed
unchanged: a few gymnax environments read ``max_steps_in_episode`` in their observations (e.g.
``DiscountingChain-bsuite`` shows ``time / max_steps_in_episode``), so replacing it by an
"infinite" value would change what the agent sees, and in gymnax 1.x no ``step_env`` consults it
for termination (the tests check this for every environment they cover).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, start_counters
from rollax.envs.suites.base import (
    Options,
    Spaces,
    SuiteEnvironment,
    flat_box,
    hashable_options,
    import_suite,
    rejected_options,
    strong,
    unknown_id,
)
from rollax.validate import check_horizon

GYMNAX_PREFIX = "gymnax:"
"""``rollax.make("gymnax:<id>", horizon=None, **options)`` hands ``<id>`` to
:func:`make_gymnax` (gymnax is imported lazily); other names cannot start with it."""



class GymnaxState(NamedTuple):
    """One wrapped environment's state."""

    inner: Any
    """gymnax's own state (a pytree)."""
    obs: jax.Array
    """The last observation as gymnax returned it (original shape): the reset observation, or
    the observation after the last live step (the final one once done)."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


def _import_gymnax():
    return import_suite("gymnax", "gymnax")


def ids() -> tuple[str, ...]:
    """The ids ``make("gymnax:<id>")`` accepts, in gymnax's order; empty when gymnax is not
    installed."""
    try:
        gymnax = _import_gymnax()
    except ValueError:
        return ()
    return tuple(gymnax.registered_envs)


@dataclasses.dataclass(frozen=True)
class GymnaxEnv(SuiteEnvironment):
    """A gymnax environment with rollax's contracts (built by ``make("gymnax:<id>")``).

    - ``stochastic = True``: ``step(state, action, key)`` passes ``key`` to gymnax's
      ``step_env`` (gymnax transitions take a key even where they ignore it); ``reset(key)``
      passes ``key`` to ``reset_env``.
    - ``terminated`` is gymnax's own termination (module docstring); once done, the final
      observation stays in ``state.obs``. gymnax's auto-reset is never used.
    - Observations: a ``Box`` observation is returned as float32 and **flattened to a vector**
      (C order) when gymnax's is not already one, e.g. ``Catch-bsuite``'s ``(10, 5)`` board
      becomes ``(50,)`` and MinAtar's ``(10, 10, C)`` planes ``(100 C,)``: rollax's neural
      policies and PPO take rank-1 ``Box`` observations. ``state.obs`` keeps the original shape
      (``raw_observation_shape``) for anyone who wants to reshape it back, e.g. for a CNN. A
      ``Discrete`` observation (``FrozenLake-misc``) stays an int32 scalar, as for rollax's
      tabular tasks. The space's bounds are gymnax's, broadcast and flattened (its declared
      dtype is replaced by float32, the dtype actually returned).
    - Equality and hash depend only on ``(name, horizon, env_kwargs)``, so two adapters of the
      same environment are interchangeable static arguments and compiled functions are reused.
      ``env_kwargs`` (keyword arguments of gymnax's environment constructor, e.g. ``rows`` for
      ``Catch-bsuite``) must be hashable. gymnax's default ``EnvParams`` are always used.
    """

    stochastic = True

    name: str
    """gymnax environment id, e.g. ``"Catch-bsuite"`` (without the ``gymnax:`` prefix)."""
    horizon: int | None = None
    """Live steps after which an episode is truncated; ``None`` (resolved at construction):
    the environment's ``max_steps_in_episode``."""
    env_kwargs: Options = ()
    """Sorted ``(name, value)`` pairs passed to gymnax's environment constructor."""

    gymnax_env: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The wrapped gymnax environment object."""
    gymnax_params: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """Its default ``EnvParams`` (used unchanged)."""

    def __post_init__(self):
        gymnax = _import_gymnax()
        if not isinstance(self.name, str) or self.name not in gymnax.registered_envs:
            raise unknown_id("gymnax", self.name, list(gymnax.registered_envs))
        env_kwargs = hashable_options("gymnax", self.env_kwargs)
        try:
            env, params = gymnax.make(self.name, **dict(env_kwargs))
        except TypeError as error:
            raise rejected_options("gymnax", self.name, dict(env_kwargs), error) from error
        horizon = self.horizon
        if horizon is None:
            horizon = _default_horizon(params.max_steps_in_episode)
        check_horizon(horizon)
        self._fill(env_kwargs=env_kwargs, horizon=int(horizon), gymnax_env=env,
                   gymnax_params=params, spaces=_convert_spaces(gymnax, env, params, self.name))

    # -- the functional interface ---------------------------------------------------------------

    def reset(self, key: jax.Array) -> GymnaxState:
        obs, inner = self.gymnax_env.reset_env(key, self.gymnax_params)
        return GymnaxState(jax.tree.map(strong, inner), strong(obs), *start_counters())

    def transition(self, state: GymnaxState, action: jax.Array, key: jax.Array | None):
        obs, inner, reward, terminated, _ = self.gymnax_env.step_env(
            key, state.inner, action, self.gymnax_params
        )
        reward = jnp.reshape(jnp.asarray(reward, jnp.float32), ())
        terminated = jnp.reshape(jnp.asarray(terminated, bool), ())
        return state._replace(inner=inner, obs=obs), reward, terminated

    def observation(self, state: GymnaxState) -> jax.Array:
        if isinstance(self.observation_space, Discrete):
            return state.obs.astype(jnp.int32)
        return jnp.reshape(state.obs, (-1,)).astype(jnp.float32)



def _default_horizon(max_steps) -> int:
    value = float(np.asarray(max_steps))
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise ValueError(
            f"gymnax max_steps_in_episode {max_steps!r} is not a usable horizon; pass horizon="
        )
    return int(value)


def _convert_spaces(gymnax, env, params, name) -> Spaces:
    spaces = gymnax.environments.spaces
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    if isinstance(obs_space, spaces.Discrete):
        observation, raw_shape = Discrete(int(obs_space.n)), ()
    elif isinstance(obs_space, spaces.Box):
        raw_shape = tuple(int(d) for d in obs_space.shape)
        observation = flat_box(obs_space.low, obs_space.high, raw_shape)
    else:
        # ValueError, as for every unusable environment choice (the user picked the id)
        raise ValueError(
            f"{GYMNAX_PREFIX}{name} has a {type(obs_space).__name__} observation space; "
            f"the adapter supports Box and Discrete"
        )
    if isinstance(act_space, spaces.Discrete):
        action = Discrete(int(act_space.n))
    elif isinstance(act_space, spaces.Box):
        shape = tuple(int(d) for d in act_space.shape)
        low, high = (np.broadcast_to(np.asarray(bound, np.float32), shape).copy()
                     for bound in (act_space.low, act_space.high))
        action = Box(low, high, shape)
    else:
        raise ValueError(
            f"{GYMNAX_PREFIX}{name} has a {type(act_space).__name__} action space; the adapter "
            f"supports Box and Discrete"
        )
    return Spaces(observation, action, raw_shape)


def make_gymnax(env_id: str, horizon: int | None = None, **env_kwargs) -> GymnaxEnv:
    """``GymnaxEnv(env_id, horizon, env_kwargs)``; what ``make("gymnax:<env_id>")`` calls."""
    return GymnaxEnv(env_id, horizon, tuple(sorted(env_kwargs.items())))


make = make_gymnax
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

"""Craftax environments behind rollax's functional interface: ``make("craftax:<id>")``.

``CraftaxEnv`` wraps one Craftax environment (``Craftax-Classic-Symbolic-v1``,
``Craftax-Symbolic-v1``, ``Craftax-Classic-Pixels-v1``, ``Craftax-Pixels-v1``) as a rollax
:class:`~rollax.envs.base.Environment`. Craftax is imported lazily, only when such an
environment is built; install it with ``pip install rollax[craftax]``.

What Craftax does at an episode's end (read in craftax 1.6.1, ``craftax_env.py``,
``environment_base/environment_bases.py``, ``craftax*/envs/*_env.py``, ``*/game_logic.py``):

- ``make_craftax_env_from_name(name, auto_reset=False)`` gives an ``EnvironmentNoAutoReset``.
  Its ``reset_env(key, params) -> (obs, state)`` generates a world (``state.timestep = 0``) and
  ``step_env(key, state, action, params) -> (obs, state, reward, done, info)`` runs
  ``craftax_step``, which adds exactly 1 to ``state.timestep`` on every call, then sets
  ``done = is_terminal(state, params)`` (``info["discount"] = 1 - done``). No auto-reset there;
  the ``auto_reset=True`` classes add gymnax's reset-on-``done`` in ``step`` (never used here).
- ``done`` is the **only** end signal, and ``is_terminal`` (``is_game_over``) mixes both kinds
  of end: ``state.timestep >= params.max_timesteps`` (the time limit: 10,000 steps in Classic,
  100,000 in Craftax) *or* the player's end: ``player_health <= 0`` (both games), standing in
  lava (Classic) or having beaten the final boss (``boss_progress``, Craftax).

What the adapter does: ``step_env`` is its ``transition`` (same key, same params) and the
inherited ``step`` adds rollax's time limit and absorbing states. It splits ``done`` with the
step counter of the *next* state: ``time_up = next.timestep >= params.max_timesteps`` and
``died = is_terminal(next, params with max_timesteps = 2**31 - 1)`` (the same test without the
time limit; ``timestep`` is int32, so that limit is never reached), and

    terminated = done & (~time_up | died)

i.e. any ``done`` before the time limit is terminated, and at or after it only a real end
(death, lava, boss) is. When death and the time limit coincide on the same step the episode is
**terminated** (not truncated): the value of a dead player's next state really is 0, and
rollax's base class makes the same choice (ending on the last allowed step counts as
terminated when the task itself ended). ``truncated`` is rollax's own: ``elapsed >= horizon``
and not terminated. The horizon defaults to ``params.max_timesteps``, and ``elapsed`` counts
steps from 0 exactly as ``state.timestep`` does, so with the default the time-limit ``done``
of Craftax is exactly rollax's truncation. A horizon above ``max_timesteps`` makes the episode
run on past Craftax's limit (its ``done`` keeps firing with ``time_up`` and is dropped); the
params are still passed unchanged because ``max_timesteps`` is only read by ``is_game_over``.

Options: ``make("craftax:<id>", horizon=None, **params)`` replaces fields of Craftax's
default ``EnvParams`` (e.g. ``max_timesteps=100``; the horizon then defaults to it). Values
must be hashable (equality and hash are on ``(name, horizon, params)``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Discrete, start_counters
from rollax.envs.suites.base import (
    Options,
    Spaces,
    SuiteEnvironment,
    flat_box,
    hashable_options,
    import_suite,
    raw_key,
    strong,
    unknown_id,
)
from rollax.keys import is_key
from rollax.validate import check_horizon

CRAFTAX_PREFIX = "craftax:"

CRAFTAX_IDS = (
    "Craftax-Classic-Symbolic-v1",
    "Craftax-Symbolic-v1",
    "Craftax-Classic-Pixels-v1",
    "Craftax-Pixels-v1",
)
"""The ids ``make_craftax_env_from_name`` accepts without auto-reset (craftax 1.6)."""

_NO_LIMIT = 2**31 - 1
"""``max_timesteps`` that an int32 ``state.timestep`` never reaches."""


class CraftaxState(NamedTuple):
    """One wrapped environment's state."""

    inner: Any
    """Craftax's own ``EnvState`` (a pytree), its ``state_rng`` key as raw key data."""
    obs: jax.Array
    """The last observation as Craftax returned it (original shape): the reset observation, or
    the one after the last live step (the final one once done)."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


def _import_craftax():
    return import_suite("craftax.craftax_env", "craftax")


def ids() -> tuple[str, ...]:
    """The ids ``make("craftax:<id>")`` accepts; empty when Craftax is not installed."""
    try:
        _import_craftax()
    except ValueError:
        return ()
    return CRAFTAX_IDS


def _stored(inner):
    """Craftax's state as the adapter keeps it: weak types made strong (Classic's world
    generator returns some Python scalars, e.g. ``timestep=0``), and ``state_rng`` (a
    key of the caller's kind, read by the pixel renderer) as its raw ``key_data`` (uint32),
    wrapped back with the transition key's implementation before each ``step_env``. rollax's
    contract checker hands states back through host arrays, which turns typed keys into their
    data, so the state holds none."""
    inner = jax.tree.map(strong, inner)
    inner = inner.replace(state_rng=raw_key(inner.state_rng))
    if any(is_key(x) for x in jax.tree.leaves(inner)):
        raise ValueError("craftax state holds a typed key besides state_rng; the adapter "
                         "does not support this craftax version")
    return inner


@dataclasses.dataclass(frozen=True)
class CraftaxEnv(SuiteEnvironment):
    """A Craftax environment with rollax's contracts (built by ``make("craftax:<id>")``).

    - ``stochastic = True``: ``step(state, action, key)`` passes ``key`` unchanged to Craftax's
      ``step_env``; ``reset(key)`` passes ``key`` to ``reset_env``.
    - ``terminated``/``truncated``: the split of Craftax's ``done`` described in the module
      docstring. Craftax's auto-reset is never used.
    - Observations are float32 in ``[0, 1]`` and returned flattened to a vector (C order):
      the symbolic ones already are (1345 for Classic, 8268 for Craftax), the pixel ones
      (``(63, 63, 3)`` Classic, ``(130, 110, 3)`` Craftax) become rank 1 because rollax's PPO
      takes rank-1 observations; ``state.obs`` keeps the original shape
      (``raw_observation_shape``), e.g. to reshape it back for a CNN.
    - Actions: ``Discrete(17)`` (Classic) or ``Discrete(43)`` (Craftax).
    """

    stochastic = True

    name: str
    """Craftax id, e.g. ``"Craftax-Classic-Symbolic-v1"`` (without the ``craftax:`` prefix)."""
    horizon: int | None = None
    """Live steps after which an episode is truncated; ``None`` (resolved at construction):
    ``params.max_timesteps``."""
    params: Options = ()
    """Sorted ``(field, value)`` replacements of Craftax's default ``EnvParams``."""

    craftax_env: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The wrapped Craftax environment (its no-auto-reset class)."""
    craftax_params: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """Its ``EnvParams`` (defaults with ``params`` replaced), passed to every call."""

    def __post_init__(self):
        module = _import_craftax()
        if self.name not in CRAFTAX_IDS:
            raise unknown_id("craftax", self.name, CRAFTAX_IDS)
        env = module.make_craftax_env_from_name(self.name, auto_reset=False)
        overrides = hashable_options("craftax", self.params, what="params")
        craftax_params = _replace_params(env.default_params, overrides, self.name)
        horizon = self.horizon
        if horizon is None:
            horizon = _default_horizon(craftax_params.max_timesteps)
        check_horizon(horizon)
        self._fill(params=overrides, horizon=int(horizon), craftax_env=env,
                   craftax_params=craftax_params, spaces=_convert_spaces(env, craftax_params))

    # -- the functional interface ---------------------------------------------------------------

    def reset(self, key: jax.Array) -> CraftaxState:
        obs, inner = self.craftax_env.reset_env(key, self.craftax_params)
        return CraftaxState(_stored(inner), strong(obs), *start_counters())

    def transition(self, state: CraftaxState, action: jax.Array, key: jax.Array | None):
        env, params = self.craftax_env, self.craftax_params
        assert key is not None  # stochastic: the base class passes the transition key
        inner = state.inner.replace(
            state_rng=jax.random.wrap_key_data(state.inner.state_rng,
                                               impl=jax.random.key_impl(key)))
        obs, inner, reward, done, _ = env.step_env(key, inner, action, params)
        inner = _stored(inner)
        time_up = inner.timestep >= params.max_timesteps
        died = env.is_terminal(inner, params.replace(max_timesteps=_NO_LIMIT))
        terminated = jnp.asarray(done, bool) & (~time_up | died)
        reward = jnp.reshape(jnp.asarray(reward, jnp.float32), ())
        return state._replace(inner=inner, obs=obs), reward, jnp.reshape(terminated, ())

    def observation(self, state: CraftaxState) -> jax.Array:
        return jnp.reshape(state.obs, (-1,)).astype(jnp.float32)



def _replace_params(defaults, overrides: Options, name):
    fields = {f.name for f in dataclasses.fields(defaults)}
    unknown = sorted(set(dict(overrides)) - fields)
    if unknown:
        raise ValueError(f"craftax environment {name!r} has no EnvParams field(s) "
                         f"{', '.join(unknown)} (fields: {', '.join(sorted(fields))})")
    return defaults.replace(**dict(overrides))


def _default_horizon(max_timesteps) -> int:
    value = np.asarray(max_timesteps)
    if value.shape != () or not np.issubdtype(value.dtype, np.integer) or int(value) < 1:
        raise ValueError(f"craftax max_timesteps {max_timesteps!r} is not a usable horizon; "
                         f"pass a positive integer max_timesteps= or horizon=")
    return int(value)


def _convert_spaces(env, params) -> Spaces:
    obs_space = env.observation_space(params)
    raw_shape = tuple(int(d) for d in obs_space.shape)
    action = Discrete(int(env.action_space(params).n))
    return Spaces(flat_box(obs_space.low, obs_space.high, raw_shape), action, raw_shape)


def make_craftax(env_id: str, horizon: int | None = None, **params) -> CraftaxEnv:
    """``CraftaxEnv(env_id, horizon, params)``; what ``make("craftax:<env_id>")`` calls."""
    return CraftaxEnv(env_id, horizon, tuple(sorted(params.items())))


make = make_craftax
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

"""XLand-MiniGrid's ``MiniGrid-*`` environments behind rollax's interface:
``make("xminigrid:<id>")``.

``XMiniGridEnv`` wraps one environment of the ``xminigrid`` package (``pip install
rollax[xminigrid]``; imported lazily, only when such an environment is built) as a rollax
:class:`~rollax.envs.base.Environment`. Only the ``MiniGrid-*`` ids are offered: the
``XLand-MiniGrid-*`` ones are meant to be played with rulesets from ``xminigrid.
load_benchmark``, which downloads them at run time, so they are refused with a ``ValueError``.

What xminigrid does at an episode's end (read in xminigrid 0.9.3, ``environment.py`` and
``envs/minigrid/memory.py``), and what the adapter makes of it:

- ``env, params = xminigrid.make(id, **options)``: ``params`` is a static pytree whose
  ``max_steps`` is the time limit (per task, e.g. ``4 * height * width`` for Empty, 100 for
  FourRooms); options replace fields of it (``max_steps``, ``view_size``, ...).
- ``env.reset(params, key) -> TimeStep`` draws the layout from ``key`` and keeps a key in
  ``timestep.state.key`` that only xminigrid's auto-reset wrappers use.
- ``env.step(params, timestep, action) -> TimeStep`` reads only ``timestep.state`` and uses no
  randomness (moves, rules and goal checks are deterministic), so the adapter is **not**
  stochastic: ``step(state, action)`` takes no key. It adds 1 to ``state.step_num``, sets
  ``terminated`` when the goal is met (Memory: reaching either end of the corridor) and
  ``truncated = step_num == max_steps``, and returns ``step_type = LAST`` when either holds,
  ``discount = 0`` when terminated and 1 otherwise (a truncation is LAST with discount 1; a goal
  met on the last allowed step is LAST with discount 0). The reward is ``1 - 0.9 * step_num /
  max_steps`` on a successful termination, else 0. It does **not** absorb: stepping a LAST
  timestep just goes on (``step_num`` past ``max_steps``); only the ``GymAutoResetWrapper`` /
  ``DmEnvAutoResetWrapper`` of ``xminigrid.wrappers`` reset, and the adapter uses neither.

The adapter's ``transition`` is xminigrid's raw ``step``, and ``terminated`` is its ``discount
== 0`` (exactly xminigrid's termination flag). Its truncation flag is ignored: rollax's
inherited ``step`` truncates at ``horizon``, which defaults to ``params.max_steps``, so with the
default the events are xminigrid's own, step for step, and finished states absorb. A shorter
``horizon`` truncates earlier; a longer one is refused (``ValueError``), because the reward
formula assumes ``step_num <= max_steps``: lengthen episodes with the ``max_steps=`` option,
which changes xminigrid's limit and its reward scale together.

Observations: xminigrid's is an egocentric ``(V, V, 2)`` uint8 grid (tile id, colour id per
cell; ``V = params.view_size``). The adapter returns it **flattened** (C order) as float32,
``(2 V^2,)``, with bounds ``[0, 12]`` for tiles and ``[0, 11]`` for colours, since rollax's
policies take rank-1 observations; ``state.obs`` keeps the grid (``raw_observation_shape``).
Actions are ``Discrete(6)`` (xminigrid's ``num_actions``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rollax.envs.base import Discrete, start_counters
from rollax.envs.suites.base import (
    Options,
    Spaces,
    SuiteEnvironment,
    flat_box,
    hashable_options,
    import_suite,
    raw_key,
    rejected_options,
    strong,
    unknown_id,
)
from rollax.validate import check_horizon

XMINIGRID_PREFIX = "xminigrid:"
"""``rollax.make("xminigrid:<id>", horizon=None, **options)`` hands ``<id>`` to
:func:`make_xminigrid`."""

OFFERED = "MiniGrid-"
"""The id prefix of the environments the adapter offers (no download needed)."""


class XMiniGridState(NamedTuple):
    """One wrapped environment's state."""

    timestep: Any
    """xminigrid's ``TimeStep`` (its ``state.key`` stored as raw key data, uint32): the reset
    timestep, or the one after the last live step (the final one once done)."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""

    @property
    def obs(self) -> jax.Array:
        """xminigrid's observation grid ``(V, V, 2)`` uint8, as it returned it."""
        return self.timestep.observation


def _import_xminigrid():
    return import_suite("xminigrid", "xminigrid")


def ids() -> tuple[str, ...]:
    """The ids ``make("xminigrid:<id>")`` accepts (the ``MiniGrid-*`` ones, in xminigrid's
    order); empty when xminigrid is not installed."""
    try:
        xminigrid = _import_xminigrid()
    except ValueError:
        return ()
    return tuple(i for i in xminigrid.registered_environments() if i.startswith(OFFERED))


def _stored(x) -> jax.Array:
    """``x`` without weak typing (stable scan carries); a typed key becomes its raw data, which
    ``jnp.where`` can select (xminigrid's step never reads the key)."""
    return strong(raw_key(x))


@dataclasses.dataclass(frozen=True)
class XMiniGridEnv(SuiteEnvironment):
    """An xminigrid ``MiniGrid-*`` environment with rollax's contracts (built by
    ``make("xminigrid:<id>")``; the module docstring says how endings map).

    - Deterministic (``stochastic = False``): ``reset(key)`` is xminigrid's ``reset`` with
      ``key``; ``step(state, action)`` is its raw ``step`` plus rollax's time limit and
      absorbing states.
    - Observations: the ``(V, V, 2)`` grid flattened to float32 ``(2 V^2,)``.
    - Equality and hash depend only on ``(name, horizon, env_kwargs)``, so two adapters of the
      same environment are interchangeable static arguments and compiled functions are reused.
      ``env_kwargs`` replace fields of xminigrid's ``EnvParams`` (e.g. ``max_steps``,
      ``view_size``) exactly as ``xminigrid.make(id, **env_kwargs)`` does.
    """

    stochastic = False

    name: str
    """xminigrid id, e.g. ``"MiniGrid-Empty-8x8"`` (without the ``xminigrid:`` prefix)."""
    horizon: int | None = None
    """Live steps after which an episode is truncated; ``None`` (resolved at construction):
    xminigrid's ``params.max_steps``. At most ``max_steps``."""
    env_kwargs: Options = ()
    """Sorted ``(name, value)`` pairs replacing fields of xminigrid's ``EnvParams``."""

    xminigrid_env: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The wrapped xminigrid environment object."""
    xminigrid_params: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """Its ``EnvParams`` (defaults with ``env_kwargs`` applied)."""

    def __post_init__(self):
        xminigrid = _import_xminigrid()
        _check_name(self.name)
        env_kwargs = hashable_options("xminigrid", self.env_kwargs)
        try:
            env, params = xminigrid.make(self.name, **dict(env_kwargs))
        except TypeError as error:
            raise rejected_options("xminigrid", self.name, dict(env_kwargs), error) from error
        max_steps = params.max_steps
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"xminigrid max_steps must be a positive integer, got {max_steps!r}")
        horizon = max_steps if self.horizon is None else self.horizon
        check_horizon(horizon)
        if horizon > max_steps:
            raise ValueError(
                f"horizon {horizon} exceeds xminigrid's max_steps {max_steps} for {self.name}: "
                f"its reward 1 - 0.9 * step / max_steps assumes step <= max_steps; pass "
                f"max_steps={horizon} as an option to lengthen its episodes instead"
            )
        self._fill(env_kwargs=env_kwargs, horizon=int(horizon), xminigrid_env=env,
                   xminigrid_params=params, spaces=_spaces(env, params))

    # -- the functional interface ---------------------------------------------------------------

    def reset(self, key: jax.Array) -> XMiniGridState:
        timestep = self.xminigrid_env.reset(self.xminigrid_params, key)
        return XMiniGridState(jax.tree.map(_stored, timestep), *start_counters())

    def transition(self, state: XMiniGridState, action: jax.Array, key: jax.Array | None):
        timestep = self.xminigrid_env.step(self.xminigrid_params, state.timestep, action)
        terminated = jnp.reshape(timestep.discount == 0, ())
        reward = jnp.reshape(jnp.asarray(timestep.reward, jnp.float32), ())
        return state._replace(timestep=timestep), reward, terminated

    def observation(self, state: XMiniGridState) -> jax.Array:
        return jnp.reshape(state.obs, (-1,)).astype(jnp.float32)



def _check_name(name) -> None:
    if isinstance(name, str) and name.startswith("XLand-"):
        raise ValueError(
            f"xminigrid:{name} is not supported: XLand-MiniGrid environments play rulesets that "
            f"xminigrid.load_benchmark downloads at run time, which cannot work offline; use a "
            f"MiniGrid-* id ({', '.join(ids()[:3])}, ...)"
        )
    valid = ids()
    if not isinstance(name, str) or name not in valid:
        raise unknown_id("xminigrid", name, valid)


def _spaces(env, params) -> Spaces:
    constants = import_suite("xminigrid.core.constants", "xminigrid")

    raw_shape = tuple(int(d) for d in env.observation_shape(params))
    if len(raw_shape) != 3 or raw_shape[-1] != 2:  # pragma: no cover - xminigrid 0.9's layout
        raise ValueError(f"unexpected xminigrid observation shape {raw_shape}")
    top = [constants.NUM_TILES - 1, constants.NUM_COLORS - 1]  # largest tile and colour ids
    return Spaces(flat_box(0.0, top, raw_shape), Discrete(int(env.num_actions(params))),
                  raw_shape)


def make_xminigrid(env_id: str, horizon: int | None = None, **env_kwargs) -> XMiniGridEnv:
    """``XMiniGridEnv(env_id, horizon, env_kwargs)``; what ``make("xminigrid:<env_id>")``
    calls."""
    return XMiniGridEnv(env_id, horizon, tuple(sorted(env_kwargs.items())))


make = make_xminigrid
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

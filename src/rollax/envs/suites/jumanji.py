"""Jumanji environments behind rollax's functional interface: ``make("jumanji:<id>")``.

``JumanjiEnv`` wraps one Jumanji environment as a rollax :class:`~rollax.envs.base.Environment`:
every single-agent one, and the multi-agent ones whose agents share one scalar reward (Cleaner,
MMST, RobotWarehouse, MultiCVRP), as one joint action. Those with a reward per agent
(Connector, LevelBasedForaging, SearchAndRescue, which also acts continuously) are refused,
naming why. Jumanji is imported lazily, only when such an environment is built; install it
with ``pip install rollax[jumanji]``.

Actions (:class:`Support`, per id): a ``DiscreteArray`` is ``Discrete``. A multi-component
action whose ``action_mask`` is **joint** (Minesweeper ``(row, col)``, Sudoku ``(row, col,
digit)``, Tetris ``(rotation, column)``, BinPack ``(ems, item)``, FlatPack ``(block, rotation,
row, col)``) is one ``Discrete`` over the joint space, numbered in C order, with the joint mask
flattened: exact, where rollax's factorised ``MultiDiscrete`` masks could not be (FlatPack's 8100
actions included: a factorised mask would let a policy waste its fixed 25 steps on illegal
placements). A multi-component action whose mask is **per component** (JobShop's machines, the
agents of the multi-agent ones; Jumanji resolves clashes between components itself) or that
has no mask (RubiksCube's ``(face, depth, direction)``) is a ``MultiDiscrete``.

What Jumanji does (read in jumanji 1.1.2's sources):

- ``reset(key) -> (state, timestep)`` and ``step(state, action) -> (state, timestep)``; the
  ``TimeStep`` is dm_env-like: ``step_type`` (FIRST/MID/LAST), ``reward``, ``discount``,
  ``observation`` (a ``NamedTuple``) and ``extras``. ``step`` takes no key: the random key lives
  in the state and is split there, so a step is a deterministic function of ``(state, action)``.
  ``step`` never resets (auto-reset is a separate wrapper, which rollax does not use).
- Every episode end, the task's own **and the time limit**, is ``termination(...)``:
  ``step_type = LAST`` with ``discount = 0``. Where there is a time limit, the environment counts
  steps itself (``state.step_count``: 0 after ``reset``, +1 per step) and ends the episode when
  the new count reaches ``time_limit`` (a constructor option): ``Snake`` 4000 (also ends on an
  invalid move or a full board), ``Maze`` ``num_rows * num_cols`` = 100, ``PacMan`` 1000,
  ``SlidingTilePuzzle`` 500, ``Sokoban`` 120. ``Game2048`` counts steps but has no limit (it
  ends when no move is legal; an illegal move is a no-op). ``TSP``, ``CVRP``, ``Knapsack`` and
  ``GraphColoring`` have no limit either: each valid step fills one slot, so they end within
  ``num_cities``, ``2 * num_nodes``, ``num_items`` and ``num_nodes`` steps (an invalid action
  ends them at once).
- The others: ``RubiksCube`` (``time_limit`` 200; 20 for the partly scrambled id), ``Tetris``
  (400; also ends on an invalid placement or a full grid), ``Cleaner`` (``num_rows * num_cols``
  = 100; also ends on any agent's invalid move) and ``RobotWarehouse`` (500; also on a
  collision) have a limit like Snake's. ``MMST``'s ``time_limit`` (70) also sizes arrays of its
  state (``connected_nodes`` is ``(num_agents, time_limit)``). Without a limit: ``Minesweeper``
  reveals one cell per valid step and ends on a mine, an invalid action or a solved board
  (within ``num_rows * num_cols - num_mines`` = 90 steps); ``Sudoku`` fills one cell per valid
  step (81); ``BinPack`` places one item per valid step (20); ``FlatPack`` ends after exactly
  ``num_blocks`` (25) steps, an illegal placement being a no-op; ``JobShop`` ends on an invalid
  action, all machines idle or the schedule finished, each live step one time unit with some
  machine working (so at most the total operation time, bounded by ``num_jobs * max_num_ops *
  max_op_duration`` = 960); ``MultiCVRP`` ends itself once its ``step_count`` (1 after
  ``reset``) passes ``2 * num_customers``, i.e. within 40 steps, with the penalty of its
  reward (a task end, not a time limit).

So a Jumanji ``LAST`` alone cannot tell a terminal state from the time limit (both discount 0).
The adapter separates them with the step counter, without guessing: it builds the inner
environment with ``time_limit = 2**31 - 1`` (never reached), so its ``LAST`` is only ever the
task's own end and becomes ``terminated``; the limit moves to rollax's ``horizon`` (counted by
``elapsed``, which equals Jumanji's ``step_count``), whose default is the environment's own
``time_limit`` (or the ``time_limit=`` option), so ``truncated`` fires on exactly the step where
Jumanji's limit would. A task that ends on that very step is ``terminated`` (rollax's rule),
which a split on ``LAST & step_count >= time_limit`` would get wrong. MMST's inner environment
is built with ``time_limit = horizon + 1`` instead (never reached either; its arrays stay small).
Environments without a limit get the natural bound above as horizon (never reached by a
terminating episode) and ``Game2048`` a horizon of :data:`GAME2048_HORIZON` (its episodes are
otherwise unbounded).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, MultiDiscrete, start_counters
from rollax.envs.suites.base import (
    Options,
    Spaces,
    SuiteEnvironment,
    hashable_options,
    import_suite,
    package_version,
    raw_key,
    rejected_options,
    unknown_id,
)
from rollax.validate import check_horizon

JUMANJI_PREFIX = "jumanji:"
UNLIMITED = 2**31 - 1
"""The ``time_limit`` the inner environment is built with: never reached (rollax truncates)."""
GAME2048_HORIZON = 4000
"""Default horizon of ``Game2048-v1``, which has no time limit of its own."""
HIDDEN_FIELDS = ("step_count",)
"""Observation fields left out of the policy's vector (the step counter: time is rollax's
horizon; raw counts up to thousands would also swamp the other features)."""


class Support(NamedTuple):
    """How the adapter takes one Jumanji id."""

    horizon: Any
    """How the default horizon is found: ``"time_limit"`` (the environment's own limit, and the
    inner environment is built with :data:`UNLIMITED`), ``"sized_time_limit"`` (the same, but
    the limit sizes arrays of the state, so the inner environment is built with ``horizon + 1``,
    never reached either), a fixed number, or a function of the built environment (a natural
    bound on the episode length)."""
    action: str = "native"
    """How Jumanji's action becomes rollax's (module docstring): ``"native"`` (one
    ``DiscreteArray``: ``Discrete``), ``"joint"`` (a multi-discrete action with a joint mask:
    one ``Discrete`` over the joint space, the mask flattened) or ``"factored"``
    (``MultiDiscrete``, one component per Jumanji component, the mask per component)."""


def _board_cells(env) -> int:
    return int(np.prod(env.observation_spec.board.shape))


# id -> Support; bounds documented in the module docstring.
SUPPORTED: dict[str, Support] = {
    "Snake-v1": Support("time_limit"),
    "Maze-v0": Support("time_limit"),
    "PacMan-v1": Support("time_limit"),
    "SlidingTilePuzzle-v0": Support("time_limit"),
    "Sokoban-v0": Support("time_limit"),
    "Game2048-v1": Support(GAME2048_HORIZON),
    "TSP-v1": Support(lambda env: env.num_cities),
    "CVRP-v1": Support(lambda env: 2 * env.num_nodes),
    "Knapsack-v1": Support(lambda env: env.num_items),
    "GraphColoring-v1": Support(lambda env: env.num_nodes),
    "RubiksCube-v0": Support("time_limit", "factored"),
    "RubiksCube-partly-scrambled-v0": Support("time_limit", "factored"),
    "Minesweeper-v0": Support(lambda env: env.num_rows * env.num_cols - env.num_mines, "joint"),
    "Sudoku-v0": Support(_board_cells, "joint"),
    "Sudoku-very-easy-v0": Support(_board_cells, "joint"),
    "Tetris-v0": Support("time_limit", "joint"),
    "BinPack-v2": Support(lambda env: env.observation_spec.items_mask.shape[0], "joint"),
    "FlatPack-v0": Support(lambda env: env.num_blocks, "joint"),
    "JobShop-v0": Support(
        lambda env: env.num_jobs * env.max_num_ops * env.max_op_duration, "factored"),
    "Cleaner-v0": Support("time_limit", "factored"),
    "MMST-v0": Support("sized_time_limit", "factored"),
    "RobotWarehouse-v0": Support("time_limit", "factored"),
    "MultiCVRP-v0": Support(
        lambda env: 2 * (env.observation_spec.action_mask.shape[1] - 1), "factored"),
    "LevelBasedForaging-v0": Support("time_limit", "factored"),
    "Connector-v3": Support("time_limit", "factored"),
    "SearchAndRescue-v0": Support("time_limit", "continuous"),
}
"""The ids the adapter accepts: single-agent environments, multi-agent ones whose agents
share one scalar reward (their joint action a ``MultiDiscrete``, one component per agent), and
the teams of :data:`TEAMS`."""
TEAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "LevelBasedForaging-v0": (("agents_view", "action_mask"), ()),
    "Connector-v3": (("action_mask",), ()),
    "SearchAndRescue-v0": (("searcher_views", "positions"), ("step",)),
}
"""The teams (:mod:`rollax.envs.agents`: a reward per agent, an episode end shared), by id:
the observation fields that have a row per agent (each agent sees its own), and the fields
left out besides ``step_count`` (SearchAndRescue's ``step``, its step counter). Every other
field is shared: Connector's ``grid`` (``(grid_size, grid_size)``, which numbers agent ``i``'s
cells ``3i+1 .. 3i+3``: the network's agent id tells it which are its own) and
SearchAndRescue's ``targets_remaining``, repeated in every agent's row."""
NVEC_FROM_MASK = ("MultiCVRP-v0",)
"""Ids whose action spec is an integer ``BoundedArray`` with a maximum one past the last valid
value (MultiCVRP: ``num_customers + 1``, an index out of its node arrays): the values per
component are the mask's width, ``num_customers + 1`` (the depot and the customers)."""
LOW_FIXES = {("TSP-v1", "position"): -1.0}
"""Lower bounds below Jumanji's spec: TSP's ``position`` is -1 before the first city, outside
its ``DiscreteArray(num_cities)`` spec."""


class TeamState(NamedTuple):
    """One wrapped team's state (:data:`TEAMS`): :class:`JumanjiState`'s fields and the
    agents' rewards of the last step."""

    inner: Any
    obs: Any
    rewards: jax.Array
    """float32 ``(num_agents,)``: each agent's reward in the step that reached this state (0
    after ``reset``)."""
    elapsed: jax.Array
    done: jax.Array


class JumanjiState(NamedTuple):
    """One wrapped environment's state."""

    inner: Any
    """Jumanji's own state (its random key included)."""
    obs: Any
    """The last raw observation (Jumanji's ``NamedTuple``, unflattened): the reset one, or the
    one after the last live step (the final one once done)."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far (equal to Jumanji's ``step_count``)."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


def _import_jumanji():
    return import_suite("jumanji", "jumanji")


def ids() -> tuple[str, ...]:
    """The ids ``make("jumanji:<id>")`` accepts; empty when Jumanji is not installed."""
    try:
        jumanji = _import_jumanji()
    except ValueError:
        return ()
    return tuple(i for i in SUPPORTED if i in jumanji.registered_environments())


def _check_name(jumanji, name) -> None:
    registered = jumanji.registered_environments()
    if isinstance(name, str) and name in SUPPORTED and name in registered:
        return
    if isinstance(name, str) and name in registered:
        raise ValueError(f"{JUMANJI_PREFIX}{name} is not supported: {_refusal(jumanji, name)}")
    raise unknown_id("jumanji", name, list(SUPPORTED), listed="supported ids")


def _refusal(jumanji, name: str) -> str:
    """Why the registered id ``name`` is refused, read from its specs (one clause)."""
    try:
        env = jumanji.make(name)
    except Exception as error:  # any failure is the reason
        return f"jumanji could not build it ({error})"
    reasons = []
    reward_shape = tuple(env.reward_spec.shape)
    if reward_shape != ():
        reasons.append(f"each of its {int(np.prod(reward_shape))} agents gets its own reward "
                       f"(reward shape {reward_shape}), and the adapter reads the observations "
                       f"of the teams it knows only ({', '.join(TEAMS)})")
    if np.issubdtype(np.dtype(env.action_spec.dtype), np.floating):
        reasons.append(f"its action is continuous ({type(env.action_spec).__name__} of "
                       f"{np.dtype(env.action_spec.dtype)}, shape {tuple(env.action_spec.shape)})")
    if not reasons:
        reasons.append(f"the adapter knows the ids of jumanji 1.1.2, not this one (jumanji "
                       f"{package_version('jumanji')})")
    return "; ".join(reasons)


@dataclasses.dataclass(frozen=True)
class JumanjiEnv(SuiteEnvironment):
    """A Jumanji environment with rollax's contracts (built by ``make("jumanji:<id>")``).

    - ``stochastic = False``: Jumanji's ``step`` is deterministic given the state, whose key
      ``reset(key)`` seeds (``key``'s raw data, ``jax.random.key_data``, goes to Jumanji's
      ``reset``, so the state holds a plain uint32 key, as with Jumanji's own ``PRNGKey``
      examples, and rollax's collectors can select between states); the randomness of later steps
      (Snake's fruit, 2048's new tile) comes from that key, split inside the state.
    - ``terminated`` is Jumanji's ``LAST`` from an inner environment without a time limit (the
      task's end); ``truncated`` is rollax's ``horizon``, by default Jumanji's ``time_limit``
      (module docstring). Jumanji's auto-reset is never used.
    - Observations: the fields of Jumanji's observation ``NamedTuple`` in its field order
      (nested ones depth first), except ``step_count``, each flattened in C order, cast to
      float32 (booleans 0/1) and concatenated: ``observation_fields`` lists them with their
      shapes. Snake-v1: ``grid`` (12, 12, 5) then ``action_mask`` (4,), 724 floats; Game2048-v1:
      ``board`` (4, 4) (tile exponents, 0 = empty) then ``action_mask`` (4,), 20 floats.
      ``state.obs`` keeps the raw observation. Bounds are Jumanji's specs (bounded arrays and
      discrete values; unbounded ones are infinite).
    - Actions: ``Discrete`` or ``MultiDiscrete`` (module docstring); :meth:`jumanji_action`
      converts one to Jumanji's. ``action_mask(state)``: the legal actions in ``state`` in
      rollax's layout, from Jumanji's ``action_mask`` field (all legal where Jumanji has none);
      rollax's policies sample under it. An illegal action does what Jumanji does (Snake:
      terminated; Game2048: no-op).
    - Equality and hash depend only on ``(name, horizon, env_kwargs)`` (hashable constructor
      options, e.g. ``num_rows`` for Snake); a ``time_limit=`` option sets the horizon instead.
    """

    stochastic = False

    name: str
    """Jumanji id, e.g. ``"Snake-v1"`` (without the ``jumanji:`` prefix)."""
    horizon: int | None = None
    """Live steps after which an episode is truncated; ``None``: the environment's own limit."""
    env_kwargs: Options = ()
    """Sorted ``(name, value)`` pairs passed to Jumanji's environment constructor."""

    jumanji_env: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The wrapped Jumanji environment (built with ``time_limit = UNLIMITED`` where it has one)."""
    observation_fields: tuple[tuple[str, tuple[int, ...]], ...] = dataclasses.field(
        init=False, repr=False, compare=False, hash=False)
    """``(field path, raw shape)`` of each part of the observation vector, in order (a nested
    field is ``"outer.inner"``); ``raw_observation_shape`` is ``None``: Jumanji's observation is
    a ``NamedTuple`` of fields, not one array."""
    num_agents: int = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The agents of a team (:data:`TEAMS`), else 1."""

    def __post_init__(self):
        jumanji = _import_jumanji()
        _check_name(jumanji, self.name)
        kwargs = dict(hashable_options("jumanji", self.env_kwargs))
        support = SUPPORTED[self.name]
        limit = kwargs.pop("time_limit", None)
        limited = support.horizon in ("time_limit", "sized_time_limit")
        if limit is not None and not limited:
            raise ValueError(f"{JUMANJI_PREFIX}{self.name} has no time_limit option")
        if limit is not None and self.horizon is not None and int(limit) != self.horizon:
            raise ValueError(f"time_limit={limit} and horizon={self.horizon} disagree: the "
                             f"time limit is rollax's horizon; give one of them")
        horizon = self.horizon if self.horizon is not None else limit
        if horizon is None:
            horizon = _default_horizon(jumanji, self.name, kwargs, support.horizon)
        check_horizon(horizon)
        inner_limit = {"time_limit": UNLIMITED,
                       "sized_time_limit": int(horizon) + 1}.get(support.horizon)
        inner = _build(jumanji, self.name, kwargs, inner_limit)
        spaces, fields, agents = _convert_spaces(inner, self.name)
        self._fill(env_kwargs=tuple(sorted(kwargs.items())), horizon=int(horizon),
                   jumanji_env=inner, spaces=spaces, observation_fields=fields,
                   num_agents=agents)

    @property
    def team(self) -> bool:
        """Whether this is a team of agents with rewards of their own (:data:`TEAMS`)."""
        return self.name in TEAMS

    # -- the functional interface ---------------------------------------------------------------

    def reset(self, key: jax.Array) -> JumanjiState | TeamState:
        # a raw uint32 key: states stay plain arrays
        inner, timestep = self.jumanji_env.reset(raw_key(key))
        if self.team:  # SearchAndRescue's state holds Python numbers: arrays, as after a step
            return jax.tree.map(jnp.asarray, TeamState(
                inner, timestep.observation, jnp.zeros((self.num_agents,), jnp.float32),
                *start_counters()))
        return JumanjiState(inner, timestep.observation, *start_counters())

    def transition(self, state: Any, action: jax.Array, key: jax.Array | None):
        inner, timestep = self.jumanji_env.step(state.inner, self.jumanji_action(action))
        terminated = jnp.reshape(timestep.last(), ())
        if self.team:  # the team's reward: the sum of its agents'
            rewards = jnp.reshape(jnp.asarray(timestep.reward, jnp.float32), (self.num_agents,))
            moved = state._replace(inner=inner, obs=timestep.observation, rewards=rewards)
            return moved, jnp.sum(rewards), terminated
        reward = jnp.reshape(jnp.asarray(timestep.reward, jnp.float32), ())
        return state._replace(inner=inner, obs=timestep.observation), reward, terminated

    def agent_rewards(self, state: TeamState) -> jax.Array:
        """A team's agents' rewards ``(num_agents,)`` in the step that reached ``state``
        (:mod:`rollax.envs.agents`; an environment of one agent is no team, whatever it
        defines)."""
        return state.rewards

    def jumanji_action(self, action: jax.Array) -> jax.Array:
        """rollax's ``action`` as Jumanji's: unchanged for a ``DiscreteArray``; a joint
        ``Discrete`` index as the components it numbers in C order (``jnp.unravel_index`` over
        Jumanji's ``num_values``); a ``MultiDiscrete`` vector cast to Jumanji's dtype."""
        spec = self.jumanji_env.action_spec
        layout = SUPPORTED[self.name].action
        if layout == "joint":
            parts = jnp.unravel_index(action, tuple(int(n) for n in np.asarray(spec.num_values)))
            return jnp.stack(parts).astype(spec.dtype)
        if layout == "factored":
            return jnp.asarray(action).astype(spec.dtype)
        if layout == "continuous":  # a Gaussian's draw, clipped into Jumanji's bounds
            return jnp.clip(jnp.asarray(action, spec.dtype), spec.minimum, spec.maximum)
        return action

    def observation(self, state: Any) -> jax.Array:
        if self.team:  # (num_agents, D): each agent's own rows, then what the team shares
            own = TEAMS[self.name][0]
            rows = [_agent_rows(_get(state.obs, path), path in own, self.num_agents)
                    for path, _ in self.observation_fields]
            return jnp.concatenate(rows, axis=1)
        parts = [jnp.reshape(_get(state.obs, path), (-1,)).astype(jnp.float32)
                 for path, _ in self.observation_fields]
        return jnp.concatenate(parts)

    def action_mask(self, state: Any) -> jax.Array | None:
        """bool, in rollax's layout (:mod:`rollax.envs.masks`): which actions are legal in
        ``state``, from Jumanji's ``action_mask`` observation field (all legal where Jumanji has
        none): ``(n,)`` for a ``Discrete`` action (a joint mask flattened in C order),
        ``(K, max(nvec))`` for a ``MultiDiscrete`` one (Jumanji's per-component mask). Where
        Jumanji's mask leaves a live state (or one component) no legal action, every action
        (value) is allowed: Jumanji treats them all as illegal alike; None (every action legal)
        for a continuous action. Works under ``vmap``."""
        space = self.action_space
        if isinstance(space, Box):
            return None
        mask = getattr(state.obs, "action_mask", None)
        if isinstance(space, MultiDiscrete):
            valid = jnp.asarray(np.arange(max(space.nvec))[None, :]
                                < np.asarray(space.nvec)[:, None])
            if mask is None:
                return valid
            mask = jnp.asarray(mask, bool) & valid
            return jnp.where(jnp.any(mask, axis=-1, keepdims=True), mask, valid)
        n = space.n  # type: ignore[union-attr]
        if mask is None:
            return jnp.ones((n,), bool)
        mask = jnp.reshape(jnp.asarray(mask, bool), (n,))
        return jnp.where(jnp.any(mask), mask, True)


def _build(jumanji, name: str, kwargs: dict, time_limit: int | None):
    options = dict(kwargs, time_limit=time_limit) if time_limit is not None else kwargs
    try:
        return jumanji.make(name, **options)
    except TypeError as error:
        raise rejected_options("jumanji", name, kwargs, error) from error
    except Exception as error:  # e.g. Sokoban's level download failing offline
        raise ValueError(f"jumanji could not build {name!r}: {error}") from error


def _default_horizon(jumanji, name: str, kwargs: dict, rule) -> int:
    if isinstance(rule, int):
        return rule
    env = _build(jumanji, name, kwargs, None)  # as Jumanji builds it with these options
    if rule in ("time_limit", "sized_time_limit"):
        return int(env.time_limit)
    return int(rule(env))


def _agent_rows(leaf, own: bool, agents: int) -> jax.Array:
    """An observation field as ``(agents, size)`` float32 rows: agent ``i``'s own part of a
    field with a row per agent (``own``), else the whole field in every row."""
    leaf = jnp.asarray(leaf).astype(jnp.float32)
    if own:
        return jnp.reshape(leaf, (agents, -1))
    return jnp.broadcast_to(jnp.reshape(leaf, (1, -1)), (agents, leaf.size))


def _action_space(env, name: str) -> Discrete | MultiDiscrete | Box:
    """rollax's action space for the Jumanji environment ``env`` (the id's layout)."""
    specs = import_suite("jumanji.specs", "jumanji")

    spec = env.action_spec
    layout = SUPPORTED[name].action
    if layout == "continuous":
        shape = tuple(int(d) for d in spec.shape)
        return Box(np.broadcast_to(np.asarray(spec.minimum, np.float32), shape).copy(),
                   np.broadcast_to(np.asarray(spec.maximum, np.float32), shape).copy(), shape)
    if layout == "native":
        if not isinstance(spec, specs.DiscreteArray) or isinstance(spec,
                                                                   specs.MultiDiscreteArray):
            raise ValueError(f"{JUMANJI_PREFIX}{name} has a {type(spec).__name__} action; the "
                             f"adapter expected one DiscreteArray")
        return Discrete(int(spec.num_values))
    if isinstance(spec, specs.MultiDiscreteArray):
        nvec = tuple(int(n) for n in np.asarray(spec.num_values).reshape(-1))
    elif name in NVEC_FROM_MASK:
        width = int(env.observation_spec.action_mask.shape[-1])
        nvec = (width,) * int(np.prod(spec.shape))
    else:
        raise ValueError(f"{JUMANJI_PREFIX}{name} has a {type(spec).__name__} action; the "
                         f"adapter expected a MultiDiscreteArray")
    if layout == "joint":
        return Discrete(int(np.prod(nvec)))
    return MultiDiscrete(nvec)


def _get(obs, path: str):
    for part in path.split("."):
        obs = getattr(obs, part)
    return obs


def _leaf_bounds(spec, shape) -> tuple[np.ndarray, np.ndarray]:
    specs = import_suite("jumanji.specs", "jumanji")

    low, high = -np.inf, np.inf
    if isinstance(spec, specs.BoundedArray):  # DiscreteArray too: 0 .. num_values - 1
        low, high = np.asarray(spec.minimum), np.asarray(spec.maximum)
    elif np.dtype(spec.dtype) == np.bool_:
        low, high = 0, 1
    size = int(np.prod(shape))
    return (np.broadcast_to(np.asarray(low, np.float32), shape).reshape(size),
            np.broadcast_to(np.asarray(high, np.float32), shape).reshape(size))


def _fields(spec, value, prefix: str = "", hidden: tuple[str, ...] = HIDDEN_FIELDS):
    """``(path, leaf spec, shape)`` of every shown observation field (not in ``hidden``), in
    field order."""
    specs = import_suite("jumanji.specs", "jumanji")

    names = (value._fields if hasattr(value, "_fields")  # a NamedTuple, or a dataclass (BinPack)
             else tuple(f.name for f in dataclasses.fields(value)))
    for field in names:
        if field in hidden:
            continue
        path, sub, leaf = prefix + field, spec[field], getattr(value, field)
        if isinstance(sub, specs.Array):
            yield path, sub, tuple(int(d) for d in np.shape(leaf))
        else:
            yield from _fields(sub, leaf, path + ".", hidden)


def _convert_spaces(env, name: str
                    ) -> tuple[Spaces, tuple[tuple[str, tuple[int, ...]], ...], int]:
    """The spaces (no raw shape), the observation fields and the agents: 1, or a team's
    ``num_agents`` (:data:`TEAMS`), whose observation is ``(num_agents, D)``, each agent's row
    its own fields then the shared ones, in field order (:func:`_agent_rows`)."""
    spec = env.observation_spec
    own, hidden = TEAMS.get(name, ((), ()))
    fields = list(_fields(spec, spec.generate_value(), hidden=(*HIDDEN_FIELDS, *hidden)))
    bounds = [_leaf_bounds(sub, shape) for _, sub, shape in fields]
    for i, (path, _, _) in enumerate(fields):
        if (name, path) in LOW_FIXES:
            bounds[i] = (np.minimum(bounds[i][0], LOW_FIXES[name, path]), bounds[i][1])
    agents = int(env.num_agents) if name in TEAMS else 1
    if name in TEAMS:
        rows = [[np.asarray(_agent_rows(b.reshape(shape), path in own, agents)) for b in pair]
                for (path, _, shape), pair in zip(fields, bounds)]
        low = np.concatenate([r[0] for r in rows], axis=1)
        high = np.concatenate([r[1] for r in rows], axis=1)
    else:
        low = np.concatenate([b[0] for b in bounds])
        high = np.concatenate([b[1] for b in bounds])
    observation = Box(low, high, tuple(int(d) for d in low.shape))
    action = _action_space(env, name)
    return (Spaces(observation, action, None),
            tuple((path, shape) for path, _, shape in fields), agents)


def make_jumanji(env_id: str, horizon: int | None = None, **env_kwargs) -> JumanjiEnv:
    """``JumanjiEnv(env_id, horizon, env_kwargs)``; what ``make("jumanji:<env_id>")`` calls."""
    return JumanjiEnv(env_id, horizon, tuple(sorted(env_kwargs.items())))


make = make_jumanji
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

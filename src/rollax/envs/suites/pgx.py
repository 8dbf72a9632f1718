"""Pgx's games behind rollax's functional interface: ``make("pgx:<id>")``.

``PgxEnv`` wraps one Pgx environment (``pgx.make(<id>)``, or its class built with the options
given) as a rollax :class:`~rollax.envs.base.Environment`. Pgx is imported lazily, only when
such an environment is built; install it with ``pip install rollax[pgx]``. It takes the
single-player games: the five MinAtar games (``minatar-asterix``, ``minatar-breakout``,
``minatar-freeway``, ``minatar-seaquest``, ``minatar-space_invaders``) and ``2048``; and the
two-player zero-sum games (:data:`TWO_PLAYER`: tic-tac-toe, Connect Four, the poker games,
backgammon, the board games), trained by self-play as games of :mod:`rollax.envs.players`
(``docs/contract.md §8``): ``num_players`` 2, ``to_act`` Pgx's ``current_player``,
``player_rewards`` Pgx's ``rewards``, the observation and legal-action mask the player to
act's (Pgx's own). Sparrow mahjong (3 players) is refused in one line: the zero-sum
bootstrapping of a player's view (``-V`` of the other's) holds for two players only.

What Pgx does (read in the source of pgx 2.6.0, ``pgx/core.py``, ``pgx/minatar/*.py``,
``pgx/play2048.py``; pgx 2.6 ships MinAtar itself as ``pgx.minatar``, which ``pgx.make`` uses):

- ``init(key) -> State`` and ``step(state, action, key) -> State``; the state carries
  ``observation`` (MinAtar: ``(10, 10, C)`` bool planes; 2048: ``(4, 4, 31)`` bool),
  ``rewards`` (float32 ``(num_players,)``), ``terminated``, ``truncated`` and
  ``legal_action_mask``. Every single-player game needs the step key (MinAtar: sticky actions,
  probability 0.1 by default, and spawns; 2048: the new tile), hence ``stochastic = True``.
- ``step`` on a terminated (or truncated) state returns it with zero rewards and nothing else
  changed: Pgx's terminal states absorb, and ``step`` never auto-resets
  (``pgx.experimental.auto_reset`` is a separate wrapper, not used here).
- An illegal action (``legal_action_mask[action]`` false) ends the game at once with reward
  -1 (``terminated``). In MinAtar every action is always legal; in 2048 a move that slides
  nothing is illegal, so a uniform random policy ends 2048 games early (mask them with
  :meth:`PgxEnv.action_mask`). At a terminal state Pgx sets the whole mask to true.
- ``truncated`` is never set by any Pgx 2.6 game, and Pgx has no time-limit option: MinAtar
  asterix, breakout, seaquest and space_invaders can run for ever. Freeway is the exception:
  it ends after a fixed 2501 steps (its ``_terminate_timer`` starts at 2500 and the game ends
  once it drops below 0, as in the original MinAtar), and Pgx reports that as ``terminated``.
  The timer is not in the observation: it is a time limit, not the task's end.

How the adapter maps it: Pgx's ``step`` is the adapter's ``transition`` (with the same key),
and the inherited ``step`` of :class:`~rollax.envs.base.Environment` adds the horizon and
absorbing states. ``terminated`` is Pgx's ``terminated`` (the task's own end: losing the last
life, a game over, an illegal action), except in Freeway, where it is always false and the end
after 2501 steps is a **truncation**: Freeway's horizon defaults to 2501 and may not exceed it.
Elsewhere the horizon defaults to :data:`DEFAULT_HORIZON` (10,000), a rollax truncation.
Observations are flattened (C order) to rank-1 float32 (``raw_observation_shape`` keeps Pgx's
shape), the reward is ``rewards[0]`` (in a game, player 0's; Pgx deals the seats to player ids
at random, so player 0 moves first in about half of the games).
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
    rejected_options,
    strong,
    unknown_id,
)
from rollax.validate import check_horizon, is_int

PGX_PREFIX = "pgx:"
"""``rollax.make("pgx:<id>", horizon=None, **options)`` hands ``<id>`` to :func:`make_pgx`."""

SINGLE_PLAYER = (
    "2048",
    "minatar-asterix",
    "minatar-breakout",
    "minatar-freeway",
    "minatar-seaquest",
    "minatar-space_invaders",
)
"""The ids of ``pgx.available_envs()`` with one player (pgx 2.6); :func:`ids` lists those the
installed Pgx has. Any id is checked by its own ``num_players`` when built."""

TWO_PLAYER = (
    "animal_shogi",
    "backgammon",
    "chess",
    "connect_four",
    "gardner_chess",
    "go_9x9",
    "go_19x19",
    "hex",
    "kuhn_poker",
    "leduc_holdem",
    "othello",
    "shogi",
    "tic_tac_toe",
)
"""The two-player zero-sum games of pgx 2.6, trained by self-play (:mod:`rollax.envs.players`):
each pays ``rewards`` summing to 0 (backgammon's gammons included)."""

HIDDEN_INFORMATION = ("kuhn_poker", "leduc_holdem")
"""The two-player games whose state holds what a player does not see (the other's cards):
:attr:`PgxEnv.perfect_information` is false, and a search player is refused."""

DEFAULT_HORIZON = 10_000
"""Horizon of games without a time limit of their own (all but Freeway)."""

OWN_TIME_LIMIT = {"minatar-freeway": 2501}
"""Games whose fixed episode length Pgx reports as ``terminated``: the adapter reports it as a
truncation, and it is their default (and largest) horizon."""


class PgxState(NamedTuple):
    """One wrapped game's state."""

    inner: Any
    """Pgx's own ``State`` (a pytree; ``inner.observation`` has the original shape)."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


def _import_pgx():
    return import_suite("pgx", "pgx")


def ids() -> tuple[str, ...]:
    """The ids ``make("pgx:<id>")`` accepts; empty when Pgx is not installed."""
    try:
        pgx = _import_pgx()
    except ValueError:
        return ()
    available = set(pgx.available_envs())
    return tuple(name for name in SINGLE_PLAYER + TWO_PLAYER if name in available)


@dataclasses.dataclass(frozen=True)
class PgxEnv(SuiteEnvironment):
    """A Pgx game with rollax's contracts (built by ``make("pgx:<id>")``).

    - ``stochastic = True``: ``step(state, action, key)`` passes ``key`` unchanged to Pgx's
      ``step``; ``reset(key)`` passes it to ``init``.
    - ``terminated`` is Pgx's, except Freeway's fixed 2501-step end, a truncation (module
      docstring). Pgx's own auto-reset is never used.
    - Observations: Pgx's bool planes as float32, **flattened** (C order) to a vector, e.g.
      Breakout's ``(10, 10, 4)`` becomes ``(400,)``; bounds ``[0, 1]``. ``raw_observation_shape``
      gives Pgx's shape to reshape back (e.g. for a CNN).
    - Actions: ``Discrete(num_actions)`` (MinAtar's minimal action set by default);
      :meth:`action_mask` gives Pgx's ``legal_action_mask``.
    - Options are keyword arguments of the game's class, e.g. ``sticky_action_prob=0.0`` or
      ``use_minimal_action_set=False`` for MinAtar (they must be hashable).
    - Equality and hash depend only on ``(name, horizon, env_kwargs)``, so two adapters of the
      same game are interchangeable static arguments and compiled functions are reused.
    - A two-player game (``num_players`` 2) is a game of :mod:`rollax.envs.players`:
      :meth:`to_act` and :meth:`player_rewards`; the observation, the mask and the value are
      the player to act's.
    """

    stochastic = True

    name: str
    """Pgx environment id, e.g. ``"minatar-breakout"`` (without the ``pgx:`` prefix)."""
    horizon: int | None = None
    """Live steps after which an episode is truncated; ``None`` (resolved at construction): the
    game's own time limit (Freeway: 2501), else :data:`DEFAULT_HORIZON`."""
    env_kwargs: Options = ()
    """Sorted ``(name, value)`` pairs passed to the game's class."""
    opening_moves: int = 0
    """A two-player game's random opening (training's ``opening_moves`` setting): ``reset``
    plays ``k`` uniformly random legal moves after Pgx's ``init``, ``k`` drawn uniformly from
    ``0 .. opening_moves``; a move that would end the game is not played (the opening stops
    there), so every start is live. 0: Pgx's start position."""

    pgx_env: Any = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The wrapped Pgx environment object."""
    num_players: int = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """1, or 2 for a game played by self-play (:mod:`rollax.envs.players`)."""

    def __post_init__(self):
        pgx = _import_pgx()
        env_kwargs = hashable_options("pgx", self.env_kwargs)
        env = _build(pgx, self.name, dict(env_kwargs))
        check_opening(self.opening_moves, f"pgx:{self.name}", int(env.num_players))
        horizon = _resolve_horizon(self.name, self.horizon)
        self._fill(env_kwargs=env_kwargs, horizon=horizon, pgx_env=env, spaces=_spaces(env),
                   num_players=int(env.num_players))

    # -- the functional interface ---------------------------------------------------------------

    def reset(self, key: jax.Array) -> PgxState:
        if self.opening_moves:
            key, opening_key = jax.random.split(key)
            inner = self._opening(self.pgx_env.init(key), opening_key)
        else:
            inner = self.pgx_env.init(key)
        return PgxState(jax.tree.map(strong, inner), *start_counters())

    def _opening(self, inner, key: jax.Array):
        """``inner`` after ``k ~ U{0 .. opening_moves}`` uniformly random legal moves, each
        kept only while it leaves the game live (:attr:`opening_moves`)."""
        count_key, moves_key = jax.random.split(key)
        count = jax.random.randint(count_key, (), 0, self.opening_moves + 1)

        def move(i, inner):
            pick_key, step_key = jax.random.split(jax.random.fold_in(moves_key, i))
            logits = jnp.where(inner.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(pick_key, logits)
            moved = self.pgx_env.step(inner, action, step_key)
            keep = (i < count) & ~jnp.asarray(moved.terminated, bool)
            return jax.tree.map(lambda new, old: jnp.where(keep, new, old), moved, inner)

        return jax.lax.fori_loop(0, self.opening_moves, move, inner)

    def transition(self, state: PgxState, action: jax.Array, key: jax.Array | None):
        inner = self.pgx_env.step(state.inner, action, key)
        reward = jnp.reshape(inner.rewards, (-1,))[0].astype(jnp.float32)
        if self.name in OWN_TIME_LIMIT:  # its fixed end is a time limit: rollax truncates
            terminated = jnp.zeros((), bool)
        else:
            terminated = jnp.reshape(jnp.asarray(inner.terminated, bool), ())
        return state._replace(inner=inner), reward, terminated

    def observation(self, state: PgxState) -> jax.Array:
        return jnp.reshape(state.inner.observation, (-1,)).astype(jnp.float32)

    def action_mask(self, state: PgxState) -> jax.Array:
        """Pgx's ``legal_action_mask`` (bool ``(num_actions,)``) of ``state``: the actions that
        do not end the game with the illegal-action penalty. All true in MinAtar, and at any
        terminal state."""
        return state.inner.legal_action_mask

    def to_act(self, state: PgxState) -> jax.Array:
        """The player to act in ``state`` (int32 ``()``): Pgx's ``current_player``."""
        return jnp.asarray(state.inner.current_player, jnp.int32)

    @property
    def perfect_information(self) -> bool:
        """Whether the players see the whole state: false in the poker games
        (:data:`HIDDEN_INFORMATION`), whose cards are hidden."""
        return self.name not in HIDDEN_INFORMATION

    def player_rewards(self, state: PgxState) -> jax.Array:
        """Each player's reward in the step that reached ``state`` (float32
        ``(num_players,)``): Pgx's ``rewards``."""
        return jnp.reshape(state.inner.rewards, (-1,)).astype(jnp.float32)


def check_opening(moves: Any, env_name: str, players: int) -> None:
    """``opening_moves`` is a count of moves, at least 0, and positive only in a game of two
    players (``ValueError`` naming the setting)."""
    if not is_int(moves) or moves < 0:
        raise ValueError(f"opening_moves must be an integer >= 0, got {moves!r}")
    if moves and players != 2:
        raise ValueError(f"opening_moves is refused for {env_name}: random openings are for "
                         f"games of two players")


def _build(pgx, name, env_kwargs: dict):
    """The Pgx environment ``name`` built with ``env_kwargs``; ``ValueError`` for an unknown
    id, a game of more than two players or options the game's class does not take."""
    valid = list(pgx.available_envs())
    if not isinstance(name, str) or name not in valid:
        taken = [n for n in SINGLE_PLAYER + TWO_PLAYER if n in valid]
        raise unknown_id("pgx", name, taken, listed="games")
    env = pgx.make(name)
    if env.num_players != 1 and name not in TWO_PLAYER:
        raise ValueError(
            f"pgx:{name} is a {env.num_players}-player game: rollax's self-play takes "
            f"two-player zero-sum games only (a player's view of a state is -V of the "
            f"other's), so the pgx adapter takes: {', '.join(SINGLE_PLAYER + TWO_PLAYER)}"
        )
    if env_kwargs:
        try:
            env = type(env)(**env_kwargs)
        except TypeError as error:
            raise rejected_options("pgx", name, env_kwargs, error) from error
    return env


def _resolve_horizon(name: str, horizon) -> int:
    limit = OWN_TIME_LIMIT.get(name)
    if horizon is None:
        return limit if limit is not None else DEFAULT_HORIZON
    check_horizon(horizon)
    if limit is not None and horizon > limit:
        raise ValueError(
            f"pgx:{name} ends every episode after {limit} steps (its own timer, a truncation "
            f"here); horizon must be at most {limit}, got {horizon}"
        )
    return int(horizon)


def _spaces(env) -> Spaces:
    """Observation and action spaces from the abstract shape of ``init`` (nothing computed)."""
    shapes = jax.eval_shape(env.init, jax.random.key(0))
    raw_shape = tuple(int(d) for d in shapes.observation.shape)
    if shapes.observation.dtype == jnp.bool_:
        low, high = 0.0, 1.0
    else:  # backgammon's int32 counts, the shogi games' float32 planes
        low, high = -np.inf, np.inf
    action = Discrete(int(shapes.legal_action_mask.shape[0]))
    return Spaces(flat_box(low, high, raw_shape), action, raw_shape)


def make_pgx(env_id: str, horizon: int | None = None, **env_kwargs) -> PgxEnv:
    """``PgxEnv(env_id, horizon, env_kwargs)``; what ``make("pgx:<env_id>")`` calls."""
    return PgxEnv(env_id, horizon, tuple(sorted(env_kwargs.items())))


make = make_pgx
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

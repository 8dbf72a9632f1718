"""Tic-tac-toe solved by minimax: the value of every position to the player to move and a
perfect player, as arrays looked up in JAX.

A position is seen from the player to move, as Pgx's ``tic_tac_toe`` shows it: planes
``(3, 3, 2)`` of booleans, plane 0 that player's marks, plane 1 the opponent's (rollax's Pgx
adapter flattens them in C order to 18 numbers, ``obs[6 r + 2 c + p]``). Cell ``i = 3 r + c``
holds ``d_i`` = 0 (empty), 1 (mine) or 2 (theirs), and the position's index is
``sum_i d_i 3**i``, one of ``3**9 = 19,683``.

Negamax over the game tree (the position after my move is seen from the opponent)::

    V(s) = -1                            the opponent completed a line (it moved last)
         =  0                            the board is full
         =  max_{a empty} -V(s after a)  otherwise
    best(s) = the lowest a attaining the maximum

``V(empty board) = 0``: perfect play draws. Only the 5,478 positions reachable from the empty
board are solved; ``VALUES`` is 0 and ``BEST`` -1 elsewhere.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
"""The eight lines of three cells (rows, columns, diagonals)."""

POWERS = 3 ** np.arange(9)


def _won(cells: tuple[int, ...], mark: int) -> bool:
    return any(all(cells[i] == mark for i in line) for line in LINES)


def _flipped(cells: tuple[int, ...]) -> tuple[int, ...]:
    """The same board seen from the other player (mine <-> theirs)."""
    return tuple((0, 2, 1)[d] for d in cells)


@functools.cache
def solve() -> tuple[np.ndarray, np.ndarray, int]:
    """``(values, best, positions)``: ``values`` (``(19683,)`` int8) and ``best`` (``(19683,)``
    int8, -1 where the game is over or the position unreachable) indexed as the module
    docstring says, and the number of reachable positions solved."""
    values = np.zeros(3**9, np.int8)
    best = np.full(3**9, -1, np.int8)
    seen: dict[tuple[int, ...], int] = {}

    def negamax(cells: tuple[int, ...]) -> int:
        if cells in seen:
            return seen[cells]
        if _won(cells, 2):
            value, move = -1, -1
        elif all(cells):
            value, move = 0, -1
        else:
            value, move = -2, -1
            for a in range(9):
                if cells[a] == 0:
                    after = _flipped(cells[:a] + (1,) + cells[a + 1:])
                    child = -negamax(after)
                    if child > value:
                        value, move = child, a
        seen[cells] = value
        index = int(np.dot(cells, POWERS))
        values[index], best[index] = value, move
        return value

    negamax((0,) * 9)
    return values, best, len(seen)


def position_index(obs) -> jnp.ndarray:
    """The index of a position from its observation: ``(..., 3, 3, 2)`` planes or ``(..., 18)``
    as rollax's adapter flattens them; ``(...,)`` int32."""
    obs = jnp.asarray(obs)
    planes = obs.reshape(*obs.shape[:-1], 9, 2) if obs.shape[-1] == 18 else \
        obs.reshape(*obs.shape[:-3], 9, 2)
    digits = planes[..., 0].astype(jnp.int32) + 2 * planes[..., 1].astype(jnp.int32)
    powers = jnp.broadcast_to(jnp.asarray(POWERS, jnp.int32), digits.shape)
    return jnp.sum(digits * powers, axis=-1)


def value(obs) -> jnp.ndarray:
    """``V`` of each position to the player to move (-1, 0 or 1), ``(...,)`` int32."""
    return jnp.asarray(solve()[0], jnp.int32)[position_index(obs)]


def perfect_action(obs) -> jnp.ndarray:
    """A minimax-optimal move for the player to move, ``(...,)`` int32 (the lowest optimal
    cell); -1 where the game is over."""
    return jnp.asarray(solve()[1], jnp.int32)[position_index(obs)]


def observation(cells) -> np.ndarray:
    """The 18-number observation (rollax's Pgx adapter's, float32) of a board ``cells`` (9
    digits from the mover's view: 0 empty, 1 mine, 2 theirs)."""
    digits = np.asarray(cells)
    return np.stack([digits == 1, digits == 2], axis=-1).reshape(18).astype(np.float32)


def against_perfect_play(move: Callable[[np.ndarray, np.ndarray], int], first: bool
                         ) -> tuple[int, int]:
    """How a deterministic player fares against perfect play: ``move(obs (18,), mask (9,) bool)
    -> cell`` plays one seat (``first``: X, moving first) and the opponent plays *every*
    minimax-optimal move at each of its turns (each line of perfect play the opponent could
    choose, not one). Returns ``(worst, games)``: the player's worst outcome over those games
    (1 win, 0 draw, -1 loss) and how many distinct games there are. ``worst == 0`` means the
    player never loses to perfect play from that seat (it cannot win against it). ``move``
    returning an occupied or out-of-range cell is a ``ValueError``."""
    values = solve()[0]

    def value(cells: tuple[int, ...]) -> int:  # V of a position to its mover
        return int(values[int(np.dot(cells, POWERS))])

    @functools.cache
    def play(cells: tuple[int, ...], mine: bool) -> tuple[int, int]:
        if _won(cells, 2):  # the previous mover completed a line
            return (-1 if mine else 1), 1
        if all(cells):
            return 0, 1
        if mine:
            cell = int(move(observation(cells), np.asarray(cells) == 0))
            if not 0 <= cell < 9 or cells[cell]:
                raise ValueError(f"move played cell {cell} on board {cells}")
            return play(_flipped(cells[:cell] + (1,) + cells[cell + 1:]), False)
        after = [_flipped(cells[:a] + (1,) + cells[a + 1:]) for a in range(9) if not cells[a]]
        best = max(-value(s) for s in after)
        results = [play(s, True) for s in after if -value(s) == best]
        return min(r[0] for r in results), sum(r[1] for r in results)

    return play((0,) * 9, first)


@dataclasses.dataclass(frozen=True)
class PerfectPlayer:
    """The minimax player as a policy without parameters (``greedy`` and ``sample`` as
    :class:`rollax.policies.Policy` has them): it plays :func:`perfect_action` on the
    adapter's observation, so ``rollax.evaluation.game_payoffs(env, PerfectPlayer(), None,
    key, first)`` plays it against a random player."""

    def greedy(self, params, observation, mask) -> jnp.ndarray:
        return jnp.maximum(perfect_action(observation), 0)  # -1 where the game is over

    def sample(self, params, observation, key, mask) -> tuple[jnp.ndarray, jnp.ndarray]:
        return self.greedy(params, observation, mask), jnp.zeros((), jnp.float32)

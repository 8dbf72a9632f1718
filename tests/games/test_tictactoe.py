"""rollax.games.tictactoe: the minimax table against hand-solved positions and OpenSpiel's own
alpha-beta search (skipped without OpenSpiel, which is in the ``test`` extra)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rollax.games import tictactoe


def planes(board: str) -> np.ndarray:
    """``(3, 3, 2)`` planes from a board written row by row with ``m`` (the mover's marks),
    ``t`` (the opponent's) and ``.``."""
    cells = np.array(list(board.replace(" ", "")))
    return np.stack([cells == "m", cells == "t"], -1).reshape(3, 3, 2)


def test_every_reachable_position_is_solved_and_perfect_play_draws():
    values, best, positions = tictactoe.solve()
    assert positions == 5478  # the legal tic-tac-toe positions, the empty board included
    assert values[0] == 0 and best[0] >= 0
    assert set(np.unique(values)) == {-1, 0, 1}


@pytest.mark.parametrize("board, value, moves", [
    ("mm. tt. ...", 1, {2}),         # complete my row
    ("tt. tm. ..m", -1, {2}),        # their fork (cells 2 and 6): every move loses
    ("t.. .m. ..t", 0, {1, 3, 5, 7}),  # an edge: the corner would lose to a fork
    ("mtm tmt t..", 1, {8}),         # the diagonal wins at once
    ("ttt mm. m..", -1, {-1}),       # over: they completed a line
    ("tmt tmm mtt", 0, {-1}),        # over: full, nobody won
])
def test_hand_solved_positions(board, value, moves):
    obs = planes(board)
    assert int(tictactoe.value(obs)) == value
    assert int(tictactoe.perfect_action(obs)) in moves
    flat = obs.reshape(18).astype(np.float32)  # as rollax's Pgx adapter gives it
    assert int(tictactoe.value(flat)) == value


def test_lookups_compile_once_and_batch():
    boards = np.stack([planes("mm. tt. ..."), planes("... ... ..."),
                       planes("t.. .m. ..t")]).astype(np.float32)
    values = jax.jit(tictactoe.value)(boards.reshape(3, 18))
    assert values.tolist() == [1, 0, 0]
    assert jax.vmap(tictactoe.perfect_action)(boards).shape == (3,)


def _mover_view(cells: list[int], mover: int) -> np.ndarray:
    """Planes from OpenSpiel's cells (-1 empty, else the player who marked it)."""
    cells_ = np.array(cells)
    return np.stack([cells_ == mover, (cells_ >= 0) & (cells_ != mover)], -1).reshape(3, 3, 2)


def test_values_and_moves_agree_with_openspiels_alpha_beta():
    pyspiel = pytest.importorskip("pyspiel")
    from open_spiel.python.algorithms import minimax

    game = pyspiel.load_game("tic_tac_toe")
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(12):  # random games, every position of each
        state, cells = game.new_initial_state(), [-1] * 9
        while not state.is_terminal():
            mover = state.current_player()
            obs = _mover_view(cells, mover)
            expected, _ = minimax.alpha_beta_search(game, state.clone(),
                                                    maximizing_player_id=mover)
            assert int(tictactoe.value(obs)) == expected, (cells, mover)
            move = int(tictactoe.perfect_action(obs))
            after = state.clone()
            after.apply_action(move)
            reached = (after.returns()[mover] if after.is_terminal() else
                       minimax.alpha_beta_search(game, after, maximizing_player_id=mover)[0])
            assert reached == expected, (cells, mover, move)  # the move keeps the value
            checked += 1
            action = int(rng.choice(state.legal_actions()))
            cells[action] = mover
            state.apply_action(action)
    assert checked > 60


# --- a deterministic player against every line of perfect play --------------------------------

def _perfect(obs, mask):
    return int(tictactoe.perfect_action(obs))


def _first_free(obs, mask):
    return int(np.flatnonzero(mask)[0])


def _edge_reply(obs, mask):
    """Perfect, except that against a lone corner mark it replies on the edge beside it (a
    losing reply: only the centre holds the draw)."""
    theirs = np.flatnonzero(obs.reshape(9, 2)[:, 1])
    if mask.sum() == 8 and theirs[0] in (0, 2, 6, 8):
        return {0: 1, 2: 1, 6: 7, 8: 7}[int(theirs[0])]
    return _perfect(obs, mask)


@pytest.mark.parametrize("first", [True, False])
def test_perfect_play_never_loses_to_perfect_play(first):
    worst, games = tictactoe.against_perfect_play(_perfect, first)
    assert worst == 0 and games >= 1


@pytest.mark.parametrize("first", [True, False])
def test_a_player_that_takes_the_first_free_cell_loses_to_perfect_play(first):
    assert tictactoe.against_perfect_play(_first_free, first)[0] == -1


def test_one_losing_reply_is_found_among_the_lines_of_perfect_play():
    # moving first it never meets a lone corner mark: perfect; moving second it does, when
    # perfect play opens in a corner (one of the optimal openings, all of which are played)
    assert tictactoe.against_perfect_play(_edge_reply, True)[0] == 0
    assert tictactoe.against_perfect_play(_edge_reply, False)[0] == -1


def test_an_illegal_move_is_refused():
    with pytest.raises(ValueError, match="move played cell"):
        tictactoe.against_perfect_play(lambda obs, mask: 9, True)

"""The search player of a game's evaluations (:mod:`rollax.games.search`: UCT over random
rollouts on mctx) in Pgx's tic-tac-toe, against expectations computed apart from it: its moves
in positions with a win in one or a single threat to block, against the board read in plain
Python and tic-tac-toe's minimax values (:mod:`rollax.games.tictactoe`); a rollout's mean value
against the exact expectation of random play, enumerated in plain Python; its games against a
random player (it wins far more than it loses from both seats) and against the minimax player
(it never wins), which check the seats and signs; ``eval_search_simulations``'s refusals; and
the rates in a tiny run's metrics.jsonl, summary.json and ``rollax eval``.

Needs ``pip install rollax[pgx]`` (Pgx and mctx); the main test suite skips this folder.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from rollax.envs.base import step_with_key
from rollax.evaluation import SEARCH_SCORES, search_scores
from rollax.games import tictactoe
from rollax.games.search import rollout_value, search_player

pgx = pytest.importorskip("pgx")
pytest.importorskip("mctx")

SIMULATIONS = 128
"""The search player's simulations per move in these tests."""


@pytest.fixture(scope="module")
def env():
    return rollax.make("pgx:tic_tac_toe")


@pytest.fixture(scope="module")
def play(env):
    """The search player, compiled once for the module."""
    return jax.jit(search_player(env, SIMULATIONS))


# --- tic-tac-toe in plain Python: X (1) moves first, O (2) second ------------------------------

def _won(board, mark) -> bool:
    return any(all(board[i] == mark for i in line) for line in tictactoe.LINES)


def _wins_in_one(board, mark) -> list[int]:
    """The empty cells where ``mark`` completes a line."""
    return [a for a in range(9) if board[a] == 0
            and _won(board[:a] + [mark] + board[a + 1:], mark)]


def _board(moves) -> list[int]:
    board = [0] * 9
    for t, a in enumerate(moves):
        board[a] = 1 + t % 2
    return board


def _random_positions(count: int, length: int, seed: int) -> list[list[int]]:
    """``count`` move sequences of ``length`` random legal moves, the game still running."""
    rng, out = np.random.default_rng(seed), []
    while len(out) < count:
        moves = list(rng.permutation(9)[:length])
        if not any(_won(_board(moves[:t + 1]), 1 + t % 2) for t in range(length)):
            out.append([int(a) for a in moves])
    return out


def _states(env, sequences):
    """Pgx states after each move sequence (all of one length), batched."""
    size = len(sequences)
    state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), size))
    moves = jnp.asarray(sequences, jnp.int32)
    for t in range(moves.shape[1]):
        keys = jax.random.split(jax.random.key(t + 1), size)
        state = jax.vmap(lambda s, a, k: step_with_key(env, s, a, k)[0])(state, moves[:, t],
                                                                          keys)
    return state


def _expected_random_play(board, mark) -> float:
    """The exact expected payoff to ``mark`` (to move) when both players choose uniformly
    among the empty cells until the game ends."""
    empty = [a for a in range(9) if board[a] == 0]
    if not empty:
        return 0.0
    total = 0.0
    for a in empty:
        after = board[:a] + [mark] + board[a + 1:]
        total += 1.0 if _won(after, mark) else -_expected_random_play(after, 3 - mark)
    return total / len(empty)


# --- the moves ---------------------------------------------------------------------------------

def test_the_search_wins_when_it_can_and_blocks_a_single_threat(env, play):
    """200 random positions after 3 to 6 moves. Where the mover can win at once, the search's
    move keeps the minimax win (``V(s) = 1 = -V(s after the move)``: a line completed, or a
    fork that wins a move later, which UCT values as much) and mostly completes the line at
    once; where it cannot but the opponent threatens exactly one cell, it mostly plays there,
    and then its move keeps the minimax value. Measured at 128 simulations with these keys:
    71 positions with a win, all kept, 65 completed at once; 60 single threats, 59 blocked
    (64 simulations block 54)."""
    sequences = [m for length in (3, 4, 5, 6) for m in _random_positions(50, length, length)]
    states = jax.tree.map(lambda *x: jnp.concatenate(x),
                          *[_states(env, sequences[i:i + 50]) for i in range(0, 200, 50)])
    moves = np.asarray(play(states, jax.random.split(jax.random.key(7), 200)))
    after = jax.vmap(lambda s, a: step_with_key(env, s, a, jax.random.key(0))[0])(
        states, jnp.asarray(moves))
    before = np.asarray(tictactoe.value(jax.vmap(env.observation)(states)))
    kept = before == -np.asarray(tictactoe.value(jax.vmap(env.observation)(after)))
    wins, blocks = [], []
    for i, moves_so_far in enumerate(sequences):
        board, mark = _board(moves_so_far), 1 + len(moves_so_far) % 2
        mine, theirs = _wins_in_one(board, mark), _wins_in_one(board, 3 - mark)
        if mine:
            assert before[i] == 1 and kept[i], (moves_so_far, moves[i], mine)
            wins.append(moves[i] in mine)
        elif len(theirs) == 1:
            blocks.append(moves[i] == theirs[0])
            assert kept[i] or not blocks[-1], (moves_so_far, moves[i])
    assert len(wins) >= 40 and len(blocks) >= 40, (len(wins), len(blocks))
    assert np.mean(wins) >= 0.85 and np.mean(blocks) >= 0.9, (np.mean(wins), np.mean(blocks))


def test_a_rollout_values_a_position_as_random_play_does_on_average(env):
    """X 0, O 3, X 1, O 4, X 8, O to move among 2, 5, 6, 7: the mean of 4,000 rollouts is the
    exact expectation of uniform random play to O (enumerated in plain Python, 1/3, not 0,
    so a wrong sign fails) within four standard errors; a finished game's value is 0."""
    moves = [0, 3, 1, 4, 8]
    exact = _expected_random_play(_board(moves), 2)
    assert exact == pytest.approx(1 / 3)
    state = jax.tree.map(lambda x: x[0], _states(env, [moves]))
    values = np.asarray(jax.jit(jax.vmap(lambda k: rollout_value(env, state, k)))(
        jax.random.split(jax.random.key(3), 4000)))
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}
    assert abs(values.mean() - exact) < 4 * values.std() / np.sqrt(values.size)
    over = jax.tree.map(lambda x: x[0], _states(env, [[0, 3, 1, 4, 2]]))  # X won the top row
    assert float(rollout_value(env, over, jax.random.key(0))) == 0.0


# --- games: the seats and signs ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Uniform:
    """A player choosing uniformly among the legal moves (sampled, ``greedy=False``)."""

    def sample(self, params, observation, key, mask):
        return (jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32),
                jnp.zeros((), jnp.float32))


Perfect = tictactoe.PerfectPlayer
"""The minimax player (rollax.games.tictactoe)."""


def _rates(out, seat):
    return {o: float(out[f"eval_search_{o}_{seat}"]) for o in ("win", "draw", "loss")}


def test_a_random_player_loses_to_the_search_far_more_than_it_wins_from_both_seats(env):
    """50 games a seat; measured: the random player loses 0.90 of its games as the first mover
    (wins 0.02) and 1.00 as the second. With the discount's sign flipped (``+1`` for the
    other player's turn) it wins 0.56 as the first mover, and this test fails."""
    out = search_scores(env, Uniform(), None, jax.random.key(0), 50, SIMULATIONS,
                        greedy=False)
    assert set(out) == {"eval_search_return", *SEARCH_SCORES}
    for seat in ("first", "second"):
        rates = _rates(out, seat)
        assert sum(rates.values()) == pytest.approx(1.0)
        assert rates["loss"] > 0.6 and rates["win"] < 0.15, (seat, rates)
    assert float(out["eval_search_return"]) < -0.6


def test_the_search_never_beats_the_minimax_player_from_either_seat(env):
    """Perfect play cannot lose: the minimax player's losses are 0 from both seats, over 50
    games a seat (measured: it wins 0.34 of its games as the first mover and draws the rest;
    it draws every game as the second)."""
    out = search_scores(env, Perfect(), None, jax.random.key(1), 50, SIMULATIONS)
    for seat in ("first", "second"):
        rates = _rates(out, seat)
        assert rates["loss"] == 0.0 and sum(rates.values()) == pytest.approx(1.0), rates
    assert float(out["eval_search_return"]) >= 0.0


# --- the setting: refusals and a run -----------------------------------------------------------

@pytest.mark.parametrize("argv,words", [
    (["--env", "CartPole-v1", "--eval-search-simulations", "8"],
     "eval_search_simulations is refused for CartPole-v1: the search player plays games of "
     "two players only"),
    (["--env", "pgx:tic_tac_toe", "--eval-search-simulations", "-1"],
     "eval_search_simulations must be an integer >= 0 (0: no search player), got -1"),
    (["--env", "pgx:kuhn_poker", "--eval-search-simulations", "8"],
     "eval_search_simulations is refused for pgx:kuhn_poker: the game hides part of its state"),
])
def test_the_setting_is_refused_in_one_line_before_anything_is_written(argv, words, tmp_path,
                                                                         capsys):
    code = rollax.cli.main(["train", *argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_without_mctx_the_setting_names_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mctx", None)  # import mctx raises ImportError
    code = rollax.cli.main(["train", "--env", "pgx:tic_tac_toe", "--eval-search-simulations",
                            "8", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "the search player needs mctx: `pip install 'rollax[pgx]'`" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_run_reports_the_rates_against_the_search_player(tmp_path, capsys):
    """``rollax train --env pgx:tic_tac_toe --eval-search-simulations 8``: the rates on the
    update-0 line, the ``--eval-every`` line and in summary.json, the simulations stated under
    the table; ``rollax eval`` plays the run's search player by default and none with
    ``--search-simulations 0``."""
    run = tmp_path / "ttt"
    code = rollax.cli.main(["train", "--env", "pgx:tic_tac_toe", "--total-steps", "128",
                            "--num-envs", "4", "--num-steps", "32", "--network", "mlp",
                            "--eval-episodes", "4", "--eval-every", "1",
                            "--eval-search-simulations", "8", "--out", str(run)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Monte Carlo tree search of 8 simulations per move" in out
    names = {"eval_search_return", *SEARCH_SCORES}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert names <= set(rows[0]) and names <= set(rows[-1])
    lane = json.loads((run / "summary.json").read_text())["lanes"][0]
    assert names <= set(lane)
    for seat in ("first", "second"):
        assert sum(lane[f"eval_search_{o}_{seat}"] for o in ("win", "draw", "loss")) == 1.0
    assert json.loads((run / "config.json").read_text())["config"][
        "eval_search_simulations"] == 8
    for flags, present in (([], True), (["--search-simulations", "0"], False)):
        assert rollax.cli.main(["eval", str(run), "--json", "--episodes", "4", *flags]) == 0
        evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["lanes"][0]
        assert (names <= set(evaluated)) is present and "eval_win_first" in evaluated

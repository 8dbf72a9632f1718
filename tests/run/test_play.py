"""``rollax play`` without Pgx: the boards drawn from hand-made observation planes, the seat
drawn from the seed, and the refusals of a run that is no drawable game (exit 2, one line,
before anything is read past config.json). The games themselves, and the refusal of a recurrent
policy: tests/suites/test_pgx_play.py. The games themselves: tests/suites/test_pgx_play.py.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from helpers import run
from rollax.run.play import BOARDS, check_play, moves_first


def _planes(rows, cols, mine, theirs):
    planes = np.zeros((rows, cols, 2), bool)
    for r, c in mine:
        planes[r, c, 0] = True
    for r, c in theirs:
        planes[r, c, 1] = True
    return planes


def test_tic_tac_toe_shows_marks_and_the_numbers_of_empty_cells():
    planes = _planes(3, 3, mine=[(0, 0), (1, 1)], theirs=[(2, 2)])
    assert BOARDS["tic_tac_toe"].draw(planes, "X", "O") == [
        " X | 2 | 3",
        "---+---+---",
        " 4 | X | 6",
        "---+---+---",
        " 7 | 8 | O",
    ]
    # the viewer's marks are its own whichever letter it plays
    assert BOARDS["tic_tac_toe"].draw(planes, "O", "X")[0] == " O | 2 | 3"


def test_connect_four_numbers_the_columns_and_keeps_pgxs_top_row_first():
    # Pgx's row 0 is the top: discs fall to row 5
    planes = _planes(6, 7, mine=[(5, 0), (4, 0)], theirs=[(5, 6)])
    drawn = BOARDS["connect_four"].draw(planes, "X", "O")
    assert drawn[0] == " 1 2 3 4 5 6 7"
    assert drawn[1:5] == [" . . . . . . ."] * 4
    assert drawn[5:] == [" X . . . . . .", " X . . . . . O"]


def test_the_boards_count_their_moves():
    assert BOARDS["tic_tac_toe"].moves == 9 and BOARDS["connect_four"].moves == 7
    assert BOARDS["tic_tac_toe"].taken() == "is taken"
    assert BOARDS["connect_four"].taken() == "is full"


def test_a_random_seat_is_drawn_from_the_seed():
    assert moves_first("first", 5) and not moves_first("second", 5)
    draws = {seed: moves_first("random", seed) for seed in range(20)}
    expected = {seed: int(np.random.default_rng(seed).integers(2)) == 0 for seed in range(20)}
    assert draws == expected and len(set(draws.values())) == 2


def _refused(capsys, monkeypatch, *argv) -> str:
    """The error line of ``rollax play *argv``, which must not read a checkpoint."""
    import rollax.run.loaded

    def never(*args, **kwargs):
        raise AssertionError("the checkpoint was read before the refusal")

    monkeypatch.setattr(rollax.run.loaded, "load_run", never)
    code, out, err = run(capsys, "play", *argv)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    return err.strip()


def test_no_such_folder(capsys, monkeypatch, tmp_path):
    missing = tmp_path / "nowhere"
    assert _refused(capsys, monkeypatch, missing) == (
        f"rollax play: error: run_dir {str(missing)!r} is not a folder")


def test_a_run_that_is_no_game(capsys, monkeypatch, tabular_run):
    assert _refused(capsys, monkeypatch, tabular_run) == (
        f"rollax play: error: run_dir {str(tabular_run)!r} trained corridor, not a two-player "
        f"game: play takes runs of pgx:connect_four or pgx:tic_tac_toe")


def _as_if(tabular_run, tmp_path, **config):
    """A copy of the tabular run whose config.json claims ``config`` (only config.json is read
    before the refusals)."""
    copy = tmp_path / "run"
    shutil.copytree(tabular_run, copy)
    stored = json.loads((copy / "config.json").read_text())
    stored["config"].update(config)
    (copy / "config.json").write_text(json.dumps(stored))
    return copy


def test_a_game_without_a_board(capsys, monkeypatch, tabular_run, tmp_path):
    chess = _as_if(tabular_run, tmp_path, env="pgx:chess")
    assert _refused(capsys, monkeypatch, chess) == (
        f"rollax play: error: run_dir {str(chess)!r} trained pgx:chess, a two-player game it "
        f"cannot draw: play takes runs of pgx:connect_four or pgx:tic_tac_toe")


def test_a_lane_the_run_lacks_and_a_bad_seed(capsys, monkeypatch, tabular_run, tmp_path):
    game = _as_if(tabular_run, tmp_path, env="pgx:tic_tac_toe")
    assert check_play(game) == ("pgx:tic_tac_toe", BOARDS["tic_tac_toe"])
    assert _refused(capsys, monkeypatch, game, "--lane", "1") == (
        f"rollax play: error: lane must be in [0, 1) for the run in {str(game)!r}, got 1")
    assert _refused(capsys, monkeypatch, game, "--seed", "-1") == (
        "rollax play: error: seed must be an integer in [0, 2**63), got -1")


@pytest.mark.parametrize("seat", ["left", "1"])
def test_an_unknown_seat(capsys, monkeypatch, tabular_run, seat):
    assert _refused(capsys, monkeypatch, tabular_run, "--seat", seat) == (
        f"rollax play: error: invalid choice {seat!r} for argument '--seat'. Expected one of "
        f"('first', 'second', 'random').")

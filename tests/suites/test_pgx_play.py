"""``rollax play`` on Pgx's games: scripted people play a tiny tic-tac-toe run (trained once per
module) through stdin, and every board printed is checked against the moves made, drawn by
hand here; the agent's moves are its policy's mode among the legal moves, recomputed from the
policy's log-probabilities; the refused lines; the end of the input and ``q``; ``--json``; a
Connect Four game against a scripted agent whose every move is known in advance.

Needs ``pip install rollax[pgx]``; the main test suite skips this folder (the refusals that need
no Pgx are in tests/run/test_play.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.cli import main
from rollax.run.loaded import LoadedPolicy
from rollax.run.play import BOARDS, play_game

pgx = pytest.importorskip("pgx")

# one tiny training shared by the module (about 10 s here)
pytestmark = pytest.mark.slow

TRAIN = ["train", "--env", "pgx:tic_tac_toe", "--total-steps", "2048", "--num-envs", "16",
         "--num-steps", "16", "--network", "mlp", "--hidden", "16", "16", "--eval-episodes", "4"]
SCRIPT = "5\n5\n1\n2\n3\n4\n6\n7\n8\n9\n"
"""The person: the centre, the centre again (taken: refused), then the first free cell."""
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


@pytest.fixture(scope="module")
def ttt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("play") / "ttt"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([*TRAIN, "--out", str(path)]) == 0
    return path


def _play(capsys, monkeypatch, stdin: str, *argv) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["play", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def games(ttt):
    """The transcripts of SCRIPT moving first (text) and second (``--json``: the drawing on
    stderr, the JSON object on stdout)."""
    played = {}
    for seat in ("first", "second"):
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            patch.setattr(sys, "stdin", io.StringIO(SCRIPT))
            json_flag = ["--json"] if seat == "second" else []
            assert main(["play", str(ttt), "--seat", seat, *json_flag]) == 0, err.getvalue()
        played[seat] = (out.getvalue(), err.getvalue())
    return played


def _hand_board(moves: list[tuple[str, int]]) -> list[str]:
    """The board after ``moves`` ((mark, cell from 1)), drawn by hand."""
    cells = [str(n) for n in range(1, 10)]
    for mark, cell in moves:
        cells[cell - 1] = mark
    rows = [" " + " | ".join(cells[r * 3:r * 3 + 3]) for r in range(3)]
    return [rows[0], "---+---+---", rows[1], "---+---+---", rows[2]]


def _winner(moves) -> str | None:
    owner = {cell - 1: mark for mark, cell in moves}
    for line in LINES:
        marks = {owner.get(c) for c in line}
        if len(marks) == 1 and None not in marks:
            return marks.pop()
    return None


def _replay(transcript: str, first: bool) -> list[tuple[str, int]]:
    """Walk the transcript, checking each board, refusal and the result against the moves
    made so far (drawn and judged by hand); the moves ((mark, cell))."""
    lines = transcript.splitlines()
    you, agent = ("X", "O") if first else ("O", "X")
    assert lines[0].startswith(f"pgx:tic_tac_toe: you play {you}, moving "
                               f"{'first' if first else 'second'}; the agent plays the mode")
    moves: list[tuple[str, int]] = []
    i = 1
    assert lines[i:i + 6] == ["", *_hand_board([])]
    i += 6
    while i < len(lines):
        line = lines[i]
        if line.startswith("legal cells: "):
            free = [n for n in range(1, 10) if n not in {c for _, c in moves}]
            assert line == "legal cells: " + " ".join(map(str, free))
            i += 1
            continue
        typed = re.fullmatch(r"your move: (\d)", line)
        played = re.fullmatch(r"agent plays cell (\d)", line)
        if typed and int(typed.group(1)) in {c for _, c in moves}:  # taken: refused, asked again
            free = [n for n in range(1, 10) if n not in {c for _, c in moves}]
            assert lines[i + 1] == (f"cell {typed.group(1)} is taken: legal cells: "
                                    + " ".join(map(str, free)))
            i += 2
            continue
        assert typed or played, line
        moves.append((you if typed else agent, int((typed or played).group(1))))  # type: ignore
        assert lines[i + 1:i + 7] == ["", *_hand_board(moves)], moves
        i += 7
        if _winner(moves) or len(moves) == 9:
            break
    winner = _winner(moves)
    result = "you win" if winner == you else "you lose" if winner == agent else "a draw"
    assert lines[i:] == [f"result: {result} ({you}, moving {'first' if first else 'second'})"]
    return moves


def test_a_scripted_game_draws_every_move_and_refuses_a_taken_cell(games):
    out, err = games["first"]
    assert err == ""
    moves = _replay(out, first=True)
    assert moves[0] == ("X", 5) and moves[1][0] == "O"
    assert "cell 5 is taken" in out  # the second 5 was refused, then the script went on
    out, err = games["second"]
    moves = _replay(err, first=False)
    assert moves[0][0] == "X"  # the agent opened
    obj = json.loads(out)
    assert obj["env"] == "pgx:tic_tac_toe" and obj["seat"] == "second"
    assert obj["policy"] == "greedy" and obj["lane"] == 0
    assert [(m["player"], m["cell"]) for m in obj["moves"]] == [
        ("you" if mark == "O" else "agent", cell) for mark, cell in moves]
    winner = _winner(moves)
    assert obj["result"] == ("win" if winner == "O" else "loss" if winner == "X" else "draw")


def test_the_agent_plays_its_policys_mode_among_the_legal_moves(games, ttt):
    """Each agent move, recomputed: the legal action of highest log-probability under the
    loaded policy for the observation of the board reached (the observation is the player to
    act's planes, the same whichever player id Pgx dealt)."""
    loaded = rollax.load_run(ttt)
    params = loaded.lane_params(0)
    env = rollax.make("pgx:tic_tac_toe")
    log_prob = jax.jit(jax.vmap(loaded.policy.log_prob, in_axes=(None, None, 0, None)))
    checked = 0
    for seat, (out, err) in games.items():
        first = seat == "first"
        moves = _replay(out if first else err, first)
        state = env.reset(jax.random.key(0))
        for mover, (_, cell) in zip(["you", "agent"] * 5 if first else ["agent", "you"] * 5,
                                    moves):
            if mover == "agent":
                obs, mask = env.observation(state), env.action_mask(state)
                scores = np.array(log_prob(params, obs, jnp.arange(9), mask))
                scores[~np.asarray(mask)] = -np.inf
                assert cell - 1 == int(np.argmax(scores)), (seat, moves)
                checked += 1
            state, *_ = env.step(state, jnp.int32(cell - 1), jax.random.key(1))
    assert checked >= 4


def test_the_end_of_the_input_and_q_stop_cleanly(capsys, monkeypatch, ttt):
    code, out, err = _play(capsys, monkeypatch, "", ttt)
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == ["your move: ", "the input ended: the game is left unfinished"]
    code, out, err = _play(capsys, monkeypatch, "x\n0\nq\n", ttt)
    assert (code, err) == (0, "")
    assert out.splitlines()[-6:] == [
        "your move: x", "'x' is not a move: type a cell number (1-9), or q quits",
        "your move: 0", "there is no cell 0: type 1-9, or q quits",
        "your move: q", "you quit: the game is left unfinished"]
    code, out, _ = _play(capsys, monkeypatch, "q\n", ttt, "--json")
    assert code == 0 and json.loads(out)["result"] == "quit"


@pytest.mark.integration
def test_the_command_stops_at_the_end_of_a_piped_input(ttt):
    """A real pipe that closes after one move (``q`` is the in-process test's)."""
    proc = subprocess.run([sys.executable, "-m", "rollax.cli", "play", str(ttt)], input="5\n",
                          capture_output=True, text=True, timeout=300, env={**os.environ})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert "your move: 5" in lines and "agent plays cell" in proc.stdout
    assert lines[-2:] == ["your move: ", "the input ended: the game is left unfinished"]


def test_a_sampled_game_is_the_seeds(capsys, monkeypatch, ttt):
    """With --sample the agent draws its moves; the same seed draws the same game."""
    runs = [_play(capsys, monkeypatch, SCRIPT, ttt, "--sample", "--seed", "3", "--json")
            for _ in range(2)]
    assert runs[0][0] == 0 and runs[0] == runs[1]
    obj = json.loads(runs[0][1])
    assert obj["policy"] == "sampled" and obj["result"] in ("win", "draw", "loss")


def test_a_recurrent_policy_is_refused(capsys, monkeypatch, ttt, tmp_path):
    copy = tmp_path / "gru"
    shutil.copytree(ttt, copy)
    stored = json.loads((copy / "config.json").read_text())
    stored["config"]["network"] = "gru"
    (copy / "config.json").write_text(json.dumps(stored))
    code, out, err = _play(capsys, monkeypatch, SCRIPT, copy)
    assert (code, out) == (2, "")
    assert err == (f"rollax play: error: run_dir {str(copy)!r} trained a recurrent policy "
                   f"(network gru): play takes feed-forward policies only\n")


@dataclasses.dataclass(frozen=True)
class FirstLegal:
    """Plays the first legal column of ``params`` (an order of the 7 columns)."""

    def greedy(self, params, observation, mask):
        return params[jnp.argmax(mask[params])].astype(jnp.int32)


def test_a_connect_four_game_against_a_known_agent():
    """The agent drops every disc in column 1; the person stacks column 4 and wins on its
    fourth disc. Every board, drawn by hand."""
    env = rollax.make("pgx:connect_four")
    loaded = LoadedPolicy(env, FirstLegal(), jnp.arange(7)[None], ({"seed": 0},), 0, Path("."))
    said: list[str] = []
    typed = iter(["4\n"] * 4)
    game = play_game(loaded, BOARDS["connect_four"], True, read=lambda: next(typed, None),
                     say=said.append, prompt=lambda text: None)
    assert game.moves == [("you", 4), ("agent", 1)] * 3 + [("you", 4)]
    assert game.result == "win"

    def board(x: int, o: int) -> list[str]:  # x discs in column 4, o in column 1
        rows = [[". "] * 7 for _ in range(6)]
        for k in range(x):
            rows[5 - k][3] = "X "
        for k in range(o):
            rows[5 - k][0] = "O "
        return ["", " 1 2 3 4 5 6 7", *(" " + "".join(r).rstrip() for r in rows)]

    expected = board(0, 0)
    for k in range(1, 4):
        expected += ["legal columns: 1 2 3 4 5 6 7", *board(k, k - 1),
                     "agent plays column 1", *board(k, k)]
    expected += ["legal columns: 1 2 3 4 5 6 7", *board(4, 3),
                 "result: you win (X, moving first)"]
    assert said == expected

"""Habits of the command line: counts written 1e6 or 1_000_000, live output when piped, the
rate and the time left while a run trains."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from rollax.cli import main
from rollax.cli.flags import parse_count
from rollax.cli.parse import build, parse_train
from rollax.cli.train import eta, length_line
from rollax.validate import counted


def test_whole_numbers_in_exponent_form_are_counts():
    assert parse_count("1e6") == 1_000_000 and parse_count("2.5E3") == 2500
    assert parse_count("1_000") == 1000 and parse_count("16") == 16
    for text in ("2.5e0", "abc", "1e400"):
        with pytest.raises(ValueError, match="not a whole number"):
            parse_count(text)
    request = parse_train(["train", "--env", "CartPole-v1", "--total-steps", "1e6", "--lr",
                           "1e-3", "--num-envs=1.6e1"])
    assert (request.config.total_steps, request.config.num_envs) == (1_000_000, 16)
    assert request.config.lr == 1e-3


@pytest.mark.slow
def test_counts_in_any_spelling_train_the_same(tmp_path, capsys):
    hashes = []
    for i, spelling in enumerate(["32", "3.2e1", "3_2"]):
        assert main(["train", "--updates", "2", "--batch-size", spelling, "--json", "--out",
                     str(tmp_path / f"r{i}")]) == 0
        hashes.append(json.loads(capsys.readouterr().out)["params_sha256"])
    assert len(set(hashes)) == 1
    assert main(["train", "--batch-size", "2.55e1"]) == 2  # 25.5: not a count
    assert "batch_size must be a whole number, got '2.55e1'" in capsys.readouterr().err


@pytest.mark.integration
def test_piped_output_has_the_header_first_then_a_line_per_chunk(tmp_path):
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rollax.cli", "train", "--updates", "4", "--batch-size", "16",
             "--chunk-size", "1", "--out", str(tmp_path / "run")],
            stdout=subprocess.PIPE, stderr=err, text=True,
            # the closing line names the cache folder, as long as the session's temporary path
            env={**os.environ, "ROLLAX_COMPILE_CACHE": "off"})
        assert proc.stdout is not None
        first = proc.stdout.readline()  # arrives before the run ends (flushed)
        assert first.startswith("ppo on corridor: updates=4, batch_size=16")
        assert proc.poll() is None or proc.returncode == 0
        # Read the rest through the same buffered reader: communicate() reads the raw pipe and
        # would lose whatever readline() had already buffered past the first line.
        rest = proc.stdout.read()
        proc.wait(timeout=600)
    lines = [first, *rest.splitlines()]
    assert lines[1].startswith("4 updates x 16 episodes of at most 8 steps = 64 episodes per "
                               "lane; run folder:")
    updates = [line for line in lines if line.startswith("update ")]
    assert [line.split()[1] for line in updates] == ["1/4", "2/4", "3/4", "4/4"]
    # each chunk's line: the rate (the first chunk's, then since it ended) and the time left
    pattern = re.compile(r"update \d/4  [\d,]+ env steps  [\d,]+ steps/s  exact_return "
                         r"\d\.\d{3}  (\d+ (d|h|min|s) ?)+ left")
    assert all(pattern.fullmatch(line) for line in updates), updates
    assert updates[-1].endswith("  0 s left")
    assert proc.returncode == 0 and all(len(line) < 200 for line in lines)


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (0.4, "0 s"), (45, "45 s"), (59.6, "1 min"), (90, "1 min 30 s"),
    (3599, "1 h"), (8000, "2 h 13 min"),  # 2 h 13 min 20 s
    (86_399, "1 d"), (200_000, "2 d 8 h"),  # 2 d 7 h 33 min 20 s
    (float("inf"), "—"),
])
def test_the_time_left_reads_in_its_two_largest_units(seconds, text):
    assert eta(seconds) == text


def test_the_header_gives_the_budget_per_lane_and_over_all_lanes():
    request = parse_train(["train", "--env", "CartPole-v1", "--total-steps", "4096",
                           "--seeds", "2", "--sweep", "lr=1e-3,3e-4"])
    run, algo = build(request)
    assert length_line(algo, len(run.lanes())) == (
        "8 updates x 512 env steps = 4,096 env steps per lane (16,384 over 4 lanes)")
    assert length_line(algo, 1) == "8 updates x 512 env steps = 4,096 env steps per lane"
    request = parse_train(["train", "--env", "CartPole-v1", "--algo", "grpo", "--updates", "3",
                           "--batch-size", "8", "--group-size", "4", "--seeds", "2"])
    run, algo = build(request)
    assert length_line(algo, len(run.lanes())) == (  # whole episodes: counted as episodes
        "3 updates x 8 episodes of at most 500 steps = 24 episodes per lane (48 over 2 lanes)")
    one = parse_train(["train", "--env", "CartPole-v1", "--total-steps", "512"])
    run, algo = build(one)
    assert length_line(algo, len(run.lanes())) == (
        "1 update x 512 env steps = 512 env steps per lane")


def test_counts_read_as_written_singular_for_one_and_thousands_separated():
    assert counted(1, "lane") == "1 lane" and counted(0, "lane") == "0 lanes"
    assert counted(2, "batch", "batches") == "2 batches"
    assert counted(320_000, "env step") == "320,000 env steps"
    assert counted(np.int64(1234567), "observation") == "1,234,567 observations"


@pytest.mark.slow
def test_one_update_one_lane_and_one_episode_are_singular(capsys, tmp_path):
    """The header of a one-update run, ``rollax eval --episodes 1`` of a one-lane run, and
    check-env on one environment: no "1 updates", "1 lane(s)", "over 1 lanes", "1 keys"."""
    out = tmp_path / "run"
    assert main(["train", "--updates", "1", "--batch-size", "128", "--out", str(out)]) == 0
    header = capsys.readouterr().out.splitlines()
    assert header[0].endswith(", 1 lane")
    assert header[1].startswith("1 update x 128 episodes of at most 8 steps = 128 episodes "
                                "per lane;")
    assert main(["eval", str(out), "--episodes", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "corridor: 1 greedy episode per lane" and lines[-1].endswith(
        " over 1 lane")
    assert main(["check-env", "CartPole-v1", "--batch-size", "1"]) == 0
    text = capsys.readouterr().out
    for phrase in ("(1 key consumed in reset, 0 keys consumed in transition)",
                   "1 event, one per episode", " 1 episode ended (lengths "):
        assert phrase in text
    assert main(["check-env", "CartPole-v1", "--batch-size", "4"]) == 0
    assert re.search(r"\b2,016 observations in the space\b", capsys.readouterr().out)


@pytest.mark.integration
def test_a_reader_that_closes_early_gets_no_broken_pipe_message(tmp_path):
    """``rollax envs | head``: Python's way with SIGPIPE, stdout to devnull, no message."""
    reader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.close()"],
                              stdin=subprocess.PIPE)
    reader.wait()  # the pipe is closed before rollax writes
    proc = subprocess.run([sys.executable, "-m", "rollax.cli", "envs"], stdout=reader.stdin,
                          stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    reader.stdin.close()
    assert proc.stderr == ""
    assert proc.returncode == 1


def test_help_lists_choices_in_order_without_none(capsys):
    """A choice flag of another algorithm (unset unless given) shows its choices only."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "--network {auto,mlp,cnn,nature,spatial,gru,lstm}" in out and "{None,auto" not in out

"""``rollax tune`` (``pip install 'rollax[tune]'``): Optuna's trials, two at a time as the lanes
of one program, kept in ``study.db``; the best one written as a config ``rollax train`` reads;
``--resume`` repeats no finished trial and finishes a stopped search; a bad space is refused
before anything is written."""

import json
import sqlite3

import pytest
import yaml

from helpers import run

pytest.importorskip("optuna", reason="rollax tune needs the tune extra: pip install 'rollax[tune]'")

SEARCH = ["--env", "CartPole-v1", "--trials", "4", "--parallel", "2", "--budget", "1024"]


def trials(out):
    """``(number, state)`` of every trial of the study in ``out``."""
    with sqlite3.connect(out / "study.db") as db:
        return db.execute("SELECT number, state FROM trials ORDER BY number").fetchall()


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    from rollax.cli import main

    out = tmp_path_factory.mktemp("tune") / "study"
    assert main(["tune", *SEARCH, "--out", str(out)]) == 0
    return out


def test_four_trials_in_two_programs_and_their_figures(searched):
    for name in ("history", "settings"):
        for suffix in (".png", ".svg"):
            assert (searched / "figures" / f"{name}{suffix}").stat().st_size > 5000
    assert sorted(p.name for p in (searched / "runs").iterdir()) == ["program-000", "program-001"]
    assert trials(searched) == [(n, "COMPLETE") for n in range(4)]
    config = json.loads((searched / "runs" / "program-000" / "config.json").read_text())
    assert config["paired"] and all(len(v) == 2 for v in config["sweep"].values())


def test_best_yaml_trains(searched, tmp_path, capsys):
    best = yaml.safe_load((searched / "best.yaml").read_text())
    assert best["env"] == "CartPole-v1" and best["total_steps"] == 1024 and "lr" in best
    code, _, err = run(capsys, "train", "--config", searched / "best.yaml", "--out",
                       tmp_path / "best", "--json")
    assert code == 0, err


def test_resume_after_the_end_repeats_nothing(searched, capsys):
    code, out, err = run(capsys, "tune", "--resume", searched)
    assert code == 0, err
    assert not [line for line in out.splitlines() if line.startswith("program ")]
    assert len(trials(searched)) == 4


def test_resume_after_a_kill_finishes_the_rest(tmp_path, monkeypatch, capsys):
    from rollax.run import training

    begin, calls = training.begin, []

    def killed_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return begin(*args, **kwargs)

    monkeypatch.setattr(training, "begin", killed_second)
    out = tmp_path / "study"
    code, _, _ = run(capsys, "tune", *SEARCH, "--out", out)
    assert code == 130 and trials(out) == [(0, "COMPLETE"), (1, "COMPLETE"), (2, "RUNNING"),
                                           (3, "RUNNING")]
    monkeypatch.setattr(training, "begin", begin)
    code, printed, err = run(capsys, "tune", "--resume", out)
    assert code == 0, err
    assert "trials 2, 3 were asked but their program was stopped" in printed
    assert [s for _, s in trials(out)] == ["COMPLETE"] * 2 + ["FAIL"] * 2 + ["COMPLETE"] * 2


def test_show_prints_the_best_trials_and_redraws_the_figures(searched, capsys):
    (searched / "figures" / "history.png").unlink()
    code, out, err = run(capsys, "tune", "--show", searched, "--json")
    assert code == 0, err
    shown = json.loads(out)
    with sqlite3.connect(searched / "study.db") as db:  # the study's own best, read apart
        best = db.execute("SELECT MAX(value) FROM trial_values").fetchone()[0]
    assert shown["best"] == best and shown["finished"] == 4 and shown["trials"] == 4
    assert shown["settings"] == yaml.safe_load((searched / "best.yaml").read_text())
    assert (searched / "figures" / "history.png").is_file()
    code, out, err = run(capsys, "tune", "--show", searched)
    assert code == 0 and f"best: trial {shown['best_trial']}" in out, err
    code, out, err = run(capsys, "tune", "--show", searched, "--trials", "8")
    assert code == 2 and "--show reads the search from its folder" in err and out == ""


def test_grid_visits_each_combination_once(tmp_path, capsys):
    (tmp_path / "space.yaml").write_text("lr: [0.001, 0.0003]\nclip_eps: [0.1, 0.3]\n")
    out = tmp_path / "study"
    code, _, err = run(capsys, "tune", *SEARCH, "--space", tmp_path / "space.yaml",
                       "--sampler", "grid", "--out", out)
    assert code == 0, err
    import optuna

    study = optuna.load_study(study_name="rollax", storage=f"sqlite:///{out / 'study.db'}")
    assert sorted((t.params["lr"], t.params["clip_eps"]) for t in study.trials) == [
        (0.0003, 0.1), (0.0003, 0.3), (0.001, 0.1), (0.001, 0.3)]


def test_cmaes_searches_ranges(tmp_path, capsys):
    (tmp_path / "space.yaml").write_text("lr: {low: 0.0001, high: 0.003, log: true}\n"
                                         "gamma: {low: 0.95, high: 0.999}\n")
    out = tmp_path / "study"
    code, _, err = run(capsys, "tune", "--env", "CartPole-v1", "--trials", "2", "--parallel",
                       "2", "--budget", "1024", "--space", tmp_path / "space.yaml",
                       "--sampler", "cmaes", "--out", out)
    assert code == 0, err
    assert trials(out) == [(0, "COMPLETE"), (1, "COMPLETE")]


@pytest.mark.parametrize("space, sampler, message", [
    ("lr: {low: 0.0001, high: 0.001}\n", "grid",
     "--sampler grid needs a list of choices for every setting; lr is a range"),
    ("lr: [0.001]\nclip_eps: [0.1, 0.2]\n", "grid", "--trials 4 is more than the grid's 2"),
])
def test_a_sampler_the_space_cannot_serve_is_refused(tmp_path, capsys, space, sampler, message):
    (tmp_path / "space.yaml").write_text(space)
    code, out, err = run(capsys, "tune", *SEARCH, "--space", tmp_path / "space.yaml",
                         "--sampler", sampler, "--out", tmp_path / "study")
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "study").exists()


@pytest.mark.integration
def test_sigkill_mid_search_then_resume_repeats_no_finished_trial(tmp_path, capsys):
    """A real SIGKILL of the tuner's process once its first program is told (the second
    training): ``--resume`` keeps the two finished trials, fails the two asked ones and
    finishes with two new ones."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "study"
    search = ["--env", "CartPole-v1", "--trials", "4", "--parallel", "2", "--budget", "65536"]
    proc = subprocess.Popen([sys.executable, "-m", "rollax.cli", "tune", *search, "--out",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "study.db").is_file() and (out / "runs" / "program-001").is_dir():
            break  # the first program is told; the second is training
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    first = trials(out)
    assert first == [(0, "COMPLETE"), (1, "COMPLETE"), (2, "RUNNING"), (3, "RUNNING")]
    values = sqlite3.connect(out / "study.db").execute(
        "SELECT trial_id, value FROM trial_values ORDER BY trial_id").fetchall()
    code, printed, err = run(capsys, "tune", "--resume", out)
    assert code == 0, err
    assert "trials 2, 3 were asked but their program was stopped" in printed
    assert [s for _, s in trials(out)] == ["COMPLETE"] * 2 + ["FAIL"] * 2 + ["COMPLETE"] * 2
    again = sqlite3.connect(out / "study.db").execute(
        "SELECT trial_id, value FROM trial_values ORDER BY trial_id").fetchall()
    assert again[:2] == values  # the finished trials kept, not trained again
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "program-000", "program-001", "program-002"]


@pytest.mark.parametrize("space, message", [
    ("num_envs: [4, 8]\n", "'num_envs' changes the program's shape"),
    ("lr_max: [0.1]\n", "'lr_max' is not a setting of PPO"),
    ("gamma: {low: 0.9, high: 1.5}\n", "space: gamma:"),
    ("lr: {low: 0, high: 0.1, log: true}\n", "low must be > 0"),
])
def test_a_bad_space_is_refused(tmp_path, capsys, space, message):
    (tmp_path / "space.yaml").write_text(space)
    code, out, err = run(capsys, "tune", *SEARCH, "--space", tmp_path / "space.yaml", "--out",
                         tmp_path / "study")
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "study").exists()

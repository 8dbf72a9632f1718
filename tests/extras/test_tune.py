"""``rollax tune`` (``pip install 'rollax[tune]'``): Optuna's trials, two at a time as the lanes
of one program, kept in ``study.db``; the best one written as a config ``rollax train`` reads;
``--resume`` repeats no finished trial and finishes a stopped search; a bad space is refused
before anything is written."""

import json
import sqlite3
from pathlib import Path

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
    ("num_envs: {low: 4, high: 8}\n",
     "space: 'num_envs' changes the program's shape: give it as a list of single values"),
    ("num_envs: [4, 0]\n", "space: num_envs: "),
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


def _pruned_search(tmp_path, capsys, *extra):
    out = tmp_path / "study"
    code, printed, err = run(capsys, "tune", "--env", "CartPole-v1", "--trials", "5",
                             "--parallel", "2", "--budget", "2048", "--out", out, *extra)
    assert code == 0, err
    lines = [json.loads(line) for line in (out / "pruning.jsonl").read_text().splitlines()]
    return out, printed, lines


def test_a_pruned_search_reports_every_rung_and_ends_each_trial_once(tmp_path, capsys):
    """Successive halving over 2 slots: 5 trials of 4 updates (CartPole's preset at 2,048
    steps), a report after each update; each trial's lines go up an update at a time in one
    slot and end once, complete at update 4 (told its evaluation) or pruned before (told its
    last report); a slot holds one trial at a time."""
    import optuna

    out, printed, lines = _pruned_search(tmp_path, capsys, "--pruner", "halving")
    study = optuna.load_study(study_name="rollax", storage=f"sqlite:///{out / 'study.db'}")
    assert len(study.trials) == 5
    states = {t.state for t in study.trials}
    assert states == {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    for t in study.trials:
        mine = [r for r in lines if r["trial"] == t.number]
        assert len({r["slot"] for r in mine}) == 1
        assert [r["update"] for r in mine] == list(range(1, len(mine) + 1))
        assert [r["event"] for r in mine[:-1]] == ["report"] * (len(mine) - 1)
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert mine[-1]["event"] == "complete" and mine[-1]["update"] == 4
            assert t.value == mine[-1]["score"]
        else:
            assert t.state == optuna.trial.TrialState.PRUNED
            assert mine[-1]["event"] == "pruned" and mine[-1]["update"] < 4
            reported = [r["score"] for r in mine if r["score"] is not None]
            assert t.value == reported[-1]
        assert f"trial {t.number} (slot {mine[0]['slot']}): " in printed
    assert len({(r["slot"], r["chunk"]) for r in lines}) == len(lines)  # a trial a slot
    steps = {}
    for r in lines:
        steps.setdefault(r["slot"], []).append(r["trial"])
    for order in steps.values():  # a slot's trials one after another, never back
        assert order == sorted(order)
    assert (out / "best.yaml").is_file() == any(
        t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_a_slot_trains_its_next_trial_as_if_it_had_started_the_program(tmp_path, capsys,
                                                                        monkeypatch):
    """A pruner that stops trial 0 at its first report: slot 0 takes trial 2 after one
    update, from the algorithm's init again. Its score equals, bit for bit, lane 0 of the same
    program trained from the start with trial 2's settings."""
    import jax.numpy as jnp
    import numpy as np
    import optuna

    from rollax.run import pruning
    from rollax.run.config import from_settings
    from rollax.run.experiment import Runner

    class StopTrialZero(optuna.pruners.BasePruner):
        def prune(self, study, trial):
            return trial.number == 0

    monkeypatch.setattr(pruning, "make_pruner", lambda *args: StopTrialZero())
    out, _, lines = _pruned_search(tmp_path, capsys, "--pruner", "median", "--trials", "3")
    assert next((r["trial"], r["slot"]) for r in lines if r["event"] != "report") == (0, 0)
    study = optuna.load_study(study_name="rollax", storage=f"sqlite:///{out / 'study.db'}")
    second = study.trials[2]
    assert [r["slot"] for r in lines if r["trial"] == 2] == [0] * 4
    assert second.state == optuna.trial.TrialState.COMPLETE

    names = list(second.params)
    lanes = [second.params, study.trials[1].params]
    run_, algo = from_settings({"env": "CartPole-v1", "seed": 0, "total_steps": 2048,
                                "chunk_size": 1, "sweep": tuple(
                                    f"{n}={','.join(repr(float(p[n])) for p in lanes)}"
                                    for n in names)}, paired=True)
    runner = Runner(algo, run_.lanes(), 1)
    state = runner.initial_state()
    for _ in range(algo.num_updates):
        state, _ = runner.run_chunk(state, 1)
    final = runner.to_host(runner.evaluate(state, runner.hp))
    assert second.value == float(np.asarray(final["eval_return"], jnp.float64)[0])


@pytest.mark.parametrize("argv, message", [
    (["--prune-every", "2"], "--prune-every is a setting of --pruner"),
    (["--pruner", "halving", "--prune-every", "3"],
     "--prune-every must divide the run's 2 updates into rungs (at least two), got 3"),
    (["--pruner", "halving", "--prune-every", "2"], "got 2"),
    (["--pruner", "median", "--metric", "final_episode_return"],
     "--pruner scores a trial by its evaluation at the end (eval_return)"),
    (["--pruner", "halving", "--pbt"], "--pruner stops an Optuna search's trials"),
])
def test_a_pruner_it_cannot_use_is_refused(tmp_path, capsys, argv, message):
    code, out, err = run(capsys, "tune", *SEARCH, *argv, "--out", tmp_path / "study")
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "study").exists()


def test_settings_that_change_the_shape_make_a_program_per_value(tmp_path, capsys):
    """``num_envs`` from a list beside a per-lane range: the trials that drew the same
    ``num_envs`` are the lanes of one program, which trains with it."""
    import optuna

    (tmp_path / "space.yaml").write_text("num_envs: [4, 8]\n"
                                         "lr: {low: 0.0001, high: 0.003, log: true}\n")
    out = tmp_path / "study"
    code, _, err = run(capsys, "tune", "--env", "CartPole-v1", "--trials", "4",
                             "--parallel", "4", "--budget", "1024", "--sampler", "random",
                             "--space", tmp_path / "space.yaml", "--out", out)
    assert code == 0, err
    study = optuna.load_study(study_name="rollax", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 4
    programs = {}
    for t in study.trials:
        programs.setdefault(t.user_attrs["run"], []).append(t)
    assert len(programs) == len({t.params["num_envs"] for t in study.trials})
    for folder, trials in programs.items():
        config = json.loads((Path(folder) / "config.json").read_text())
        assert {t.params["num_envs"] for t in trials} == {config["config"]["num_envs"]}
        assert config["sweep"]["lr"] == [t.params["lr"] for t in trials]
    assert yaml.safe_load((out / "best.yaml").read_text())["num_envs"] in (4, 8)


@pytest.mark.parametrize("argv, message", [
    (["--pruner", "halving"], "space: 'num_envs' changes the program's shape, and --pruner's"),
    (["--pbt"], "space: 'num_envs' changes the program's shape, and a population's"),
])
def test_a_shape_setting_is_refused_where_lanes_share_a_program(tmp_path, capsys, argv,
                                                               message):
    (tmp_path / "space.yaml").write_text("num_envs: [4, 8]\n")
    code, out, err = run(capsys, "tune", *SEARCH, *argv, "--space", tmp_path / "space.yaml",
                         "--out", tmp_path / "study")
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "study").exists()


def test_on_a_terminal_a_bar_counts_the_trials_and_shows_the_best(tmp_path, capsys,
                                                                  monkeypatch):
    """stderr a terminal: the bar over the trials ends at 4/4 with the best score, which the
    program lines (above it) name too; nothing of it reaches stdout."""
    import io
    import re

    from rich.console import Console

    import rollax.cli.tune as cli_tune

    screen = io.StringIO()
    plain = cli_tune.console
    monkeypatch.setattr(cli_tune, "console", lambda stderr=False: Console(
        file=screen, force_terminal=True, width=120) if stderr else plain())
    out = tmp_path / "study"
    code, printed, err = run(capsys, "tune", *SEARCH, "--out", out)
    assert code == 0, err
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "4/4" in text and "4/4" not in printed and "program 0" not in printed
    scores = [float(s) for s in re.findall(r"#\d+ ([-\d.]+)", text)]
    assert len(scores) == 4  # the program lines, printed above the bar
    assert f"best {max(scores):.4g}" in text

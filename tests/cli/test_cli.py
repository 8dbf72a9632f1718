"""The command line: JSON outputs, run folders, one-line errors that write nothing."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import run
from rollax.algos.registry import algorithms

METHODS = dict.fromkeys(m for spec in algorithms() for m in spec.methods)
"""Every registered method, in the registry's order (the unknown ``--algo`` message's)."""


def test_every_command_parses_to_what_its_runner_takes():
    """train is dispatched like every other command: parse gives an object RUNNERS runs."""
    from rollax.cli.commands import RUNNERS
    from rollax.cli.flags import COMMANDS
    from rollax.cli.parse import TrainRequest, parse

    given = {"eval": ["some-run"], "plot": ["some-run"], "check-env": ["corridor"],
             "render": ["corridor"], "export": ["some-run"], "exploitability": ["some-run"],
             "play": ["some-run"]}
    parsed = {name: parse([name, *given.get(name, [])]) for name in COMMANDS}
    assert isinstance(parsed["train"], TrainRequest)
    assert all(type(cmd) in RUNNERS for cmd in parsed.values())


def test_train_json_and_run_folder(capsys, tmp_path):
    out_dir = tmp_path / "run"
    code, out, err = run(capsys, "train", "--json", "--updates", "3", "--batch-size", "32",
                         "--out", str(out_dir))
    assert code == 0, err
    obj = json.loads(out)  # exactly one JSON object on stdout
    # every per-lane value is a list over lanes, the same for every algorithm
    assert len(obj["exact_return"]) == 1 and len(obj["params"]) == 1 and len(obj["params"][0]) == 3
    np.testing.assert_allclose(obj["exact_return_initial"][0], 0.466875, rtol=1e-5)
    assert obj["exact_return_mean"] == obj["exact_return"][0]
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "checkpoints", "config.json", "figures", "metrics.jsonl", "summary.json"]
    config = json.loads((out_dir / "config.json").read_text())["config"]
    assert config["epochs"] == 3 and config["horizon"] == 8 and config["algo"] == "ppo"
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [0, 1, 2, 3]
    assert [r["exact_return"] for r in rows] == pytest.approx(
        [*obj["exact_return_initial"], rows[1]["exact_return"], rows[2]["exact_return"],
         *obj["exact_return"]])
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["lanes"][0]["seed"] == 0
    assert summary["lanes"][0]["exact_return"] == pytest.approx(obj["exact_return"][0])
    assert summary["lanes"][0]["exact_return_initial"] == obj["exact_return_initial"][0]
    assert summary["params_sha256"] == obj["params_sha256"]
    png = (out_dir / "figures" / "training_curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # the same seed replays: the same numbers
    code, out2, _ = run(capsys, "train", "--json", "--updates", "3", "--batch-size", "32",
                        "--out", str(tmp_path / "again"))
    assert json.loads(out2)["params"] == obj["params"]


@pytest.mark.slow
def test_train_several_seeds_tabular(capsys, tmp_path):
    code, out, err = run(capsys, "train", "--json", "--updates", "2", "--batch-size", "16",
                         "--seeds", "3", "--seed", "4", "--out", str(tmp_path / "s"))
    assert code == 0, err
    obj = json.loads(out)
    assert obj["seeds"] == [4, 5, 6] and len(obj["exact_return"]) == 3
    # seed k of a multi-seed run is the single run with root key key(seed + k)
    code, single, _ = run(capsys, "train", "--json", "--updates", "2", "--batch-size", "16",
                          "--seed", "5", "--out", str(tmp_path / "one"))
    assert json.loads(single)["params"][0] == pytest.approx(obj["params"][1], rel=1e-6)
    rows = (tmp_path / "s" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 9 and {json.loads(r)["seed"] for r in rows} == {4, 5, 6}


@pytest.mark.slow
def test_train_neural_ppo_json(capsys, tmp_path):
    code, out, err = run(capsys, "train", "--env", "CartPole-v1", "--json", "--total-steps",
                         "1024", "--num-envs", "4", "--num-steps", "64", "--seeds", "2",
                         "--out", str(tmp_path / "n"))
    assert code == 0, err
    obj = json.loads(out)
    assert len(obj["eval_return"]) == 2 and obj["env_steps"] == 1024
    assert obj["eval_return_mean"] == pytest.approx(np.mean(obj["eval_return"]))
    assert all(8 <= r <= 500 for r in obj["eval_return"])
    files = sorted(p.name for p in (tmp_path / "n").iterdir())
    assert files == ["checkpoints", "config.json", "figures", "metrics.jsonl", "summary.json"]
    rows = [json.loads(r) for r in (tmp_path / "n" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * (4 + 1) and {"approx_kl", "clip_fraction", "explained_variance",
                                         "entropy", "learning_rate"} <= set(rows[-1])
    summary = json.loads((tmp_path / "n" / "summary.json").read_text())
    assert [lane["eval_return"] for lane in summary["lanes"]] == obj["eval_return"]
    assert summary["env_steps_per_second"] > 0


def test_train_table_output(capsys, tmp_path):
    code, out, _ = run(capsys, "train", "--algo", "reinforce", "--updates", "2",
                       "--batch-size", "16", "--out", str(tmp_path / "t"))
    assert code == 0
    assert "exact return before training: seed=0: 0.466875" in out
    assert "exact return: seed=0: " in out and "params: [" in out


def test_rollout_json(capsys, tmp_path):
    code, out, _ = run(capsys, "rollout", "--json", "--batch-size", "64", "--horizon", "6",
                       "--seed", "1", "--out", str(tmp_path / "r"))
    assert code == 0
    obj = json.loads(out)
    active = obj["active_per_step"]
    assert len(active) == 6 and active[0] == 64 and all(np.diff(active) <= 0)
    assert -0.06 <= obj["mean_return"] <= 0.99
    assert (tmp_path / "r" / "active_per_step.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["exact", "--json"], (0.466875, 0.985, 8)),
        (["exact", "--json", "--horizon", "2"], (None, 0.485, 2)),
        (["exact", "--json", "--env", "CliffWalking-v1", "--horizon", "13"], (None, -13.0, 13)),
    ],
)
def test_exact_json(capsys, argv, expected):
    code, out, _ = run(capsys, *argv)
    assert code == 0
    obj = json.loads(out)
    uniform, optimal, horizon = expected
    if uniform is not None:
        assert obj["uniform_return"] == pytest.approx(uniform, rel=1e-5)
    assert obj["optimal_return"] == pytest.approx(optimal, rel=1e-5)
    assert obj["horizon"] == horizon


BAD = [
    (["train", "--updates", "0"], "updates must be a positive integer"),
    (["train", "--updates", "x"], "updates must be a whole number, got 'x'"),
    (["train", "--algo", "sac"], f"algo must be one of {', '.join(METHODS)}, got 'sac'"),
    (["train", "--algo", "a2c"], "algo a2c is only available for neural tasks"),
    (["train", "--algo", "reinforce", "--epochs", "2"], "epochs must be 1 for algo reinforce"),
    (["train", "--lr", "-1"], "lr must be a finite number > 0"),
    (["train", "--batch-size", "0"], "batch_size must be a positive integer"),
    (["train", "--horizon", "0"], "horizon must be a positive integer"),
    (["train", "--bogus", "1"], "unrecognized flag --bogus"),
    (["train", "--learning-rate", "1e-3"], "unrecognized flag --learning-rate; did you mean --lr?"),
    (["train", "--env", "CartPole-v1", "--hiden", "8"], "did you mean --hidden?"),
    (["train", "--env", "CartPole-v1", "--normalize-obs"],
     "did you mean --normalize-observations?"),
    (["train", "--seeds", "0"], "seeds must be a positive integer"),
    (["train", "--env", "CartPole-v1", "--updates", "3"], "--updates only applies to tabular"),
    (["train", "--total-steps", "100"], "--total-steps only applies to neural"),
    (["train", "--env", "corridor", "--algo", "grpo"], "only available for neural"),
    (["train", "--env", "CartPole-v1", "--minibatches", "3"], "minibatches must divide"),
    (["train", "--env", "CartPole-v1", "--total-steps", "10"], "total_steps must be at least"),
    (["train", "--env", "CartPol-v1"], "did you mean CartPole-v1"),
    (["rollout", "--batch-size", "0"], "batch_size must be a positive integer"),
    (["rollout", "--horizon", "-2"], "horizon must be a positive integer"),
    (["exact", "--env", "CliffWalking-v1"], "registers no episode limit"),
    (["exact", "--env", "Pong"], "--env"),
    (["exact", "--horizon", "0"], "horizon must be a positive integer"),
    (["trian"], "Unrecognized options: trian"),
]


@pytest.mark.parametrize("argv, message", BAD)
def test_bad_input_one_line_nothing_written(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert err.startswith("rollax")
    assert list(tmp_path.iterdir()) == []


def test_existing_run_folder_is_never_touched(capsys, tmp_path):
    existing = tmp_path / "old"
    existing.mkdir()
    (existing / "metrics.jsonl").write_text("precious\n")
    code, _, err = run(capsys, "train", "--updates", "1", "--out", str(existing))
    assert code == 2 and "already exists" in err
    assert (existing / "metrics.jsonl").read_text() == "precious\n"
    assert [p.name for p in existing.iterdir()] == ["metrics.jsonl"]


def test_unwritable_out_is_refused_before_training(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = run(capsys, "train", "--updates", "1", "--out", str(blocker / "run"))
    assert code == 2 and out == "" and "cannot be created" in err
    assert len(err.strip().splitlines()) == 1 and blocker.read_text() == "x"


@pytest.mark.integration
def test_entry_point_in_a_subprocess(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    ok = subprocess.run([sys.executable, "-m", "rollax.cli", "exact", "--json"],
                        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["optimal_return"] == pytest.approx(0.985)
    bad = subprocess.run([sys.executable, "-m", "rollax.cli", "train", "--lr", "0"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""


def test_check_env_command(capsys):
    code, out, err = run(capsys, "check-env", "corridor", "--json", "--batch-size", "4")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["ok"] is True and {c["name"] for c in obj["checks"]} >= {
        "events", "absorbing_state", "determinism", "batch_permutation"}
    code, out, err = run(capsys, "check-env", "CartPol-v1")
    assert code == 2 and out == "" and "did you mean CartPole-v1" in err


def _episodes_end(out):
    return next(c for c in json.loads(out)["checks"] if c["name"] == "episodes_end")


def test_check_env_steps_of_a_continuing_task(capsys):
    """A factory of horizon 10**9 (tests/custom_envs): check-env drives it --num-steps steps,
    by default at most 1024 (it asked for a trace of 10**9 steps, 119 GiB)."""
    name = "custom_envs.point_mass:continuing"
    code, out, err = run(capsys, "check-env", name, "--num-steps", "8", "--batch-size", "4",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["ok"] is True
    assert _episodes_end(out)["message"].startswith("no episode ended within 8 steps")
    code, out, err = run(capsys, "check-env", name, "--batch-size", "4", "--json")
    assert code == 0, err
    assert _episodes_end(out)["message"].startswith("no episode ended within 1,024 steps")


def test_check_env_passes_a_point_mass(capsys):
    """A continuous-action environment with a two-term reward (tests/custom_envs) passes at the
    default batch size, where 1-ulp differences between lanes failed batch_permutation."""
    code, out, err = run(capsys, "check-env", "custom_envs.point_mass:make", "--json")
    assert code == 0, err
    assert json.loads(out)["ok"] is True


def test_version(capsys):
    import jax

    import rollax

    code, out, err = run(capsys, "--version")
    assert code == 0 and err == ""
    assert out == f"rollax {rollax.__version__} (jax {jax.__version__})\n"
    code, out, err = run(capsys, "--version", "train")
    assert code == 2 and out == "" and err == "rollax: error: --version takes no other arguments\n"


def test_version_is_the_projects():
    """``rollax.__version__`` (kept in ``rollax/version.py``) is the version pyproject.toml
    installs, and what ``rollax --version`` reads without importing rollax."""
    import importlib.metadata
    import tomllib
    from pathlib import Path

    import rollax
    from _rollax_entry import quick_version

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert rollax.__version__ == project["project"]["version"]
    try:  # a run from src/ without an install (an accelerator machine) has no metadata
        installed = importlib.metadata.version("rollax")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    assert installed in (None, rollax.__version__)
    assert installed is not None or not os.environ.get("CI"), "CI installs rollax"
    jax_version = importlib.metadata.version("jax")
    assert quick_version() == f"rollax {rollax.__version__} (jax {jax_version})"


def test_envs_command(capsys):
    from rollax.envs.registry import registered
    from rollax.envs.suites import SUITES, adapter

    # every installed suite's own list, asked afresh (the command may read it from its cache),
    # suite by suite in the table's order; a suite not installed adds none
    expected = [*registered(), *(f"{suite.prefix}:{name}" for suite in SUITES.values()
                                 if suite.installed for name in adapter(suite).ids())]
    assert "gymnasium:CartPole-v1" in expected and "gymnasium:Blackjack-v1" not in expected
    code, out, _ = run(capsys, "envs")
    assert code == 0 and out.splitlines() == expected
    assert "corridor" in expected and "CartPole-v1" in expected
    code, out, _ = run(capsys, "envs", "--json")
    assert code == 0 and json.loads(out) == {"envs": expected}

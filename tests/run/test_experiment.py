"""Experiments: chunking never changes results, checkpoints resume bit for bit (also after
SIGKILL and Ctrl-C), bad checkpoints and config files are refused, figures and logs.

The tests whose claim is bit-identity across two differently built programs (chunk sizes, a
resume) are marked ``optimized``: compiled as ``rollax`` compiles them (tests/conftest.py). The
others (files, figures, refusals, printed intervals, which programs are lowered) hold however
XLA optimises, and compile cheaply."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import rollax
from helpers import run, train_json
from rollax.run.experiment import params_sha256
from rollax.run.stats import summarize

KILL_RUN = ["train", "--updates", "1500", "--batch-size", "16", "--chunk-size", "25",
            "--checkpoint-every", "25", "--json"]


def sha_of(capsys, *argv):
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    return json.loads(out)["params_sha256"]


def tree_digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.optimized
@pytest.mark.slow
def test_chunk_size_never_changes_results_tabular(capsys, tmp_path):
    common = ["train", "--updates", "12", "--batch-size", "64", "--seeds", "2", "--json"]
    shas = {c: sha_of(capsys, *common, "--chunk-size", str(c), "--out", str(tmp_path / str(c)))
            for c in (1, 5, 12)}
    assert len(set(shas.values())) == 1, shas
    # and equals the unchunked compiled scan of make_train, seed by seed
    train = rollax.make_train(rollax.TabularConfig(updates=12, batch_size=64))
    params = np.stack([np.asarray(train(jax.random.key(s)).params) for s in (0, 1)])
    assert params_sha256(params) == shas[1]


@pytest.mark.optimized
@pytest.mark.slow
def test_chunk_size_never_changes_results_ppo(capsys, tmp_path):
    common = ["train", "--env", "CartPole-v1", "--total-steps", "1280", "--num-envs", "4",
              "--num-steps", "32", "--json"]
    a = sha_of(capsys, *common, "--chunk-size", "3", "--out", str(tmp_path / "a"))
    b = sha_of(capsys, *common, "--chunk-size", "10", "--out", str(tmp_path / "b"))
    assert a == b


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "run"
    proc = subprocess.run([sys.executable, "-m", "rollax.cli", *KILL_RUN, "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["params_sha256"]


def start_and_wait_for_checkpoint(out):
    proc = subprocess.Popen([sys.executable, "-m", "rollax.cli", *KILL_RUN, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (out / "checkpoints" / "latest").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.02)
    return proc


@pytest.mark.optimized
@pytest.mark.integration
def test_sigkill_then_resume_is_bit_identical(capsys, tmp_path, uninterrupted):
    out = tmp_path / "killed"
    proc = start_and_wait_for_checkpoint(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "summary.json").exists()  # it really died mid-way
    code, stdout, err = run(capsys, "train", "--resume", str(out), "--json")
    assert code == 0, err
    assert json.loads(stdout)["params_sha256"] == uninterrupted
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == list(range(0, 1501))  # no gap, no duplicate


@pytest.mark.optimized
@pytest.mark.integration
def test_ctrl_c_checkpoints_then_exits_and_resumes(capsys, tmp_path, uninterrupted):
    out = tmp_path / "interrupted"
    proc = start_and_wait_for_checkpoint(out)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:  # it finished before the signal landed: nothing to resume
        pytest.skip("run finished before SIGINT arrived")
    assert proc.returncode == 130, err
    assert "checkpoint written" in err and "--resume" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    latest = (out / "checkpoints" / "latest").read_text().strip()
    updates = int(latest.split("-")[1])
    rows = (out / "metrics.jsonl").read_text().splitlines()
    assert json.loads(rows[-1])["update"] == updates  # logged exactly up to the checkpoint
    assert sha_of(capsys, "train", "--resume", str(out), "--json") == uninterrupted


@pytest.fixture()
def finished_midway(capsys, tmp_path):
    """A run folder whose summary was removed: resumable from its last checkpoint."""
    out = tmp_path / "r"
    sha_of(capsys, "train", "--updates", "6", "--batch-size", "16", "--chunk-size", "2",
           "--checkpoint-every", "2", "--out", str(out), "--json")
    (out / "summary.json").unlink()
    return out


def test_corrupt_checkpoint_refused_and_untouched(capsys, finished_midway):
    out = finished_midway
    latest = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    data = bytearray((latest / "state.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (latest / "state.npz").write_bytes(bytes(data))
    before = tree_digest(out)
    code, stdout, err = run(capsys, "train", "--resume", str(out))
    assert code == 2 and stdout == "" and "corrupt" in err and len(err.splitlines()) == 1
    assert tree_digest(out) == before


@pytest.mark.slow
def test_checkpoint_from_another_config_refused(capsys, finished_midway):
    out = finished_midway
    config = json.loads((out / "config.json").read_text())
    config["config"]["lr"] = 0.25
    (out / "config.json").write_text(json.dumps(config))
    before = tree_digest(out)
    code, _, err = run(capsys, "train", "--resume", str(out))
    assert code == 2 and "written for another config" in err
    assert tree_digest(out) == before


@pytest.mark.slow
def test_resume_refusals(capsys, tmp_path, finished_midway):
    code, _, err = run(capsys, "train", "--resume", str(tmp_path / "nope"))
    assert code == 2 and "is not a folder" in err
    code, _, err = run(capsys, "train", "--resume", str(finished_midway), "--lr", "0.1")
    assert code == 2 and "--resume takes no other settings" in err


@pytest.mark.slow
def test_config_files_and_overrides(capsys, tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('algo = "reinforce"\nupdates = 4\nbatch-size = 32\nlr = 0.25\n')
    code, out, err = run(capsys, "train", "--config", str(toml), "--updates", "2", "--json",
                         "--out", str(tmp_path / "t"))
    assert code == 0, err
    config = json.loads((tmp_path / "t" / "config.json").read_text())["config"]
    assert (config["algo"], config["updates"], config["batch_size"], config["lr"]) == (
        "reinforce", 2, 32, 0.25)
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("seeds: 2\nsweep: ['lr=0.5,1.0']\nupdates: 2\n")
    code, out, err = run(capsys, "train", "--config", str(yaml_file), "--json", "--out",
                         str(tmp_path / "y"))
    assert code == 0, err
    assert json.loads(out)["lanes"] == [{"seed": 0, "lr": 0.5}, {"seed": 1, "lr": 0.5},
                                        {"seed": 0, "lr": 1.0}, {"seed": 1, "lr": 1.0}]


@pytest.mark.parametrize("text, suffix, message", [
    ("updatez = 3\n", ".toml", "unknown key 'updatez'; did you mean updates?"),
    ("batchsize: 3\n", ".yaml", "unknown key 'batchsize'; did you mean batch_size?"),
    ("updates = [\n", ".toml", "is not valid TOML"),
    ("!!python/object/apply:os.system ['touch pwned']\n", ".yaml", "is not valid YAML"),
    ("- 1\n- 2\n", ".yaml", "must hold a table of settings"),
])
def test_bad_config_files(capsys, tmp_path, monkeypatch, text, suffix, message):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"c{suffix}"
    path.write_text(text)
    code, out, err = run(capsys, "train", "--config", str(path))
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing written


@pytest.mark.parametrize("spec, message", [
    ("lrr=0.1", "'lrr' is not a numeric hyperparameter; did you mean lr?"),
    ("lr", "sweep must look like name=v1,v2"),
    ("lr=a,b", "values of 'lr' must be numbers"),
    ("lr=-1,0.5", "lr must be a finite number > 0"),
])
def test_bad_sweeps(capsys, spec, message):
    code, _, err = run(capsys, "train", "--sweep", spec)
    assert code == 2 and message in err


@pytest.mark.slow
def test_sweep_lane_equals_single_run(capsys, tmp_path):
    _, out, _ = run(capsys, "train", "--updates", "5", "--batch-size", "32", "--sweep",
                       "lr=0.5,1.0", "--json", "--out", str(tmp_path / "s"))
    swept = json.loads(out)
    _, out, _ = run(capsys, "train", "--updates", "5", "--batch-size", "32", "--lr", "1.0",
                       "--json", "--out", str(tmp_path / "one"))
    np.testing.assert_allclose(swept["params"][1], json.loads(out)["params"][0], rtol=1e-6)


@pytest.mark.slow
def test_run_folder_logs_figures_eval_and_plot(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = run(capsys, "train", "--env", "CartPole-v1", "--total-steps", "1024",
                       "--num-envs", "4", "--num-steps", "32", "--seeds", "2", "--out", str(out))
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert {"rollax", "jax", "devices", "kind", "config", "seeds"} <= set(config)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * (8 + 1)
    assert {"approx_kl", "clip_fraction", "explained_variance", "entropy", "policy_loss",
            "value_loss", "learning_rate", "episode_return"} <= set(rows[-1])
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["lanes"]) == 2 and len(summary["params_sha256"]) == 64
    agg = summary["aggregate"][0]["eval_return"]
    assert agg["n"] == 2 and agg["ci95"][0] <= agg["mean"] <= agg["ci95"][1]
    assert summary["compile_time_s"] > 0 and summary["env_steps_per_second"] > 0
    for name in ("training_curve.png", "training_curve.svg", "ppo_diagnostics.png",
                 "ppo_diagnostics.svg"):
        assert (out / "figures" / name).stat().st_size > 5000, name
    code, stdout, err = run(capsys, "eval", str(out), "--episodes", "4", "--json")
    assert code == 0, err
    result = json.loads(stdout)
    assert len(result["lanes"]) == 2 and all(8 <= r["mean_return"] <= 500
                                             for r in result["lanes"])
    code, stdout, _ = run(capsys, "eval", str(out), "--episodes", "4", "--stochastic", "--json")
    assert code == 0 and json.loads(stdout)["greedy"] is False
    rollout = tmp_path / "roll"
    assert run(capsys, "rollout", "--out", str(rollout), "--json")[0] == 0
    code, stdout, err = run(capsys, "plot", str(out), str(rollout), "--out",
                            str(tmp_path / "figs"), "--json")
    assert code == 0, err
    figures = json.loads(stdout)["figures"]
    assert any(f.endswith("active_per_step.svg") for f in figures)
    assert all(os.path.getsize(f) > 5000 for f in figures)


def test_eval_and_plot_refusals(capsys, tmp_path):
    code, _, err = run(capsys, "eval", str(tmp_path))
    assert code == 2 and "config.json" in err
    code, _, err = run(capsys, "plot", str(tmp_path))
    assert code == 2 and "not a rollax run folder" in err


@pytest.mark.slow
def test_eval_prints_the_interval_as_train_does(capsys, tmp_path):
    """One lane has no interval (``n/a``, as ``train`` prints for one seed), not a zero-width
    one; three lanes print the bootstrap interval of the JSON aggregate."""
    for seeds in (1, 3):
        out = tmp_path / f"run{seeds}"
        train_json(capsys, "--updates", "2", "--batch-size", "4", "--seeds", str(seeds),
                   "--out", str(out))
        code, stdout, err = run(capsys, "eval", str(out), "--episodes", "4", "--json")
        assert code == 0, err
        agg = json.loads(stdout)["aggregate"]
        code, stdout, err = run(capsys, "eval", str(out), "--episodes", "4")
        assert code == 0, err
        last = stdout.splitlines()[-1]
        if seeds == 1:
            assert last == (f"mean {agg['mean']:.4f}, 95% CI n/a (fewer than 3 lanes), "
                            f"IQM {agg['iqm']:.4f} over 1 lane")
        else:
            low, high = agg["ci95"]
            assert last == (f"mean {agg['mean']:.4f}, 95% CI [{low:.4f}, {high:.4f}] "
                            f"(percentile bootstrap), IQM {agg['iqm']:.4f} over 3 lanes")


def test_summarize_statistics():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["n"] == 5 and s["mean"] == pytest.approx(22.0)
    assert s["iqm"] == pytest.approx(3.0)  # middle values 2, 3, 4
    assert s["ci95"][0] < s["mean"] < s["ci95"][1]


@pytest.mark.parametrize(("seeds", "name", "count"), [
    (1, "jit(call)", 3),  # one lane: the initial state, the evaluation and the chunk
    (2, "jit(chunk)", 1),  # lanes vmapped: the chunk alone has this name
])
def test_a_fresh_run_lowers_each_of_its_programs_once(tmp_path, seeds, name, count):
    """The chunk compiles beside the initial state and the first evaluation, from the shapes of
    the state to come: the run then finds it compiled and does not lower it a second time."""
    from rollax.run import training
    from rollax.run.config import from_settings

    lowered = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, fun_name=None, **_: lowered.append(fun_name)
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration" else None)
    settings = {"env": "CartPole-v1", "total_steps": 1024, "num_envs": 4, "num_steps": 16,
                "seeds": seeds}
    config, algo = from_settings(settings)
    folder = training.create_run(config, str(tmp_path / "run"))
    before = len(lowered)
    training.execute(config, algo, folder)
    assert lowered[before:].count(name) == count, str(lowered[before:])


@pytest.mark.slow  # a training run compiled as rollax compiles it: ~10 s
def test_the_callers_jax_contexts_reach_the_chunk(tmp_path):
    """JAX settings made with a context manager hold for the calling thread only; the chunk
    compiled beside the start is still traced under them. An environment that broadcasts ranks
    implicitly (MuJoCo's MJX does) trains under ``jax.numpy_rank_promotion("allow")`` although
    the tests' default is ``"raise"``."""
    from rollax.run import training
    from rollax.run.config import from_settings

    settings = {"env": "custom_envs.broadcasting:make", "total_steps": 64, "num_envs": 2,
                "num_steps": 8, "minibatches": 1}
    with pytest.raises(ValueError, match="rank_promotion"):  # the premise: it needs "allow"
        from_settings(settings)
    with jax.numpy_rank_promotion("allow"):
        config, algo = from_settings(settings)
        folder = training.create_run(config, str(tmp_path / "run"))
        summary, _ = training.execute(config, algo, folder)
    assert [lane["env_steps"] for lane in summary["lanes"]] == [64]

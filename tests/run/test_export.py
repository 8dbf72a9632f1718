"""Shipping a policy (``rollax export``): the ``jax.export`` artifact of a CartPole and a MinAtar
CNN run gives ``load_run(...).act``'s greedy actions in a process where ``import rollax``
fails, its description names shapes and dtypes, and bad requests are refused in one line before
anything is written. ONNX: tests/extras/test_export_onnx.py."""

import importlib.util
import json
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import rollax
from helpers import lookout_observations, run

LOAD_WITHOUT_ROLLAX = textwrap.dedent("""
    import sys
    sys.modules["rollax"] = None  # `import rollax` raises ImportError in this process
    try:
        import rollax
    except ImportError:
        pass
    else:
        raise SystemExit("rollax imported")
    import jax, numpy as np
    exported = jax.export.deserialize(open(sys.argv[1], "rb").read())
    observations = np.load(sys.argv[2])
    np.save(sys.argv[3], np.asarray(exported.call(observations)))
""")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from rollax.cli import main

    folder = tmp_path_factory.mktemp("export")
    assert main(["train", "--json", "--env", "CartPole-v1", "--total-steps", "2048",
                 "--seeds", "2", "--out", str(folder / "cartpole")]) == 0
    assert main(["train", "--json", "--env", "gymnax:Breakout-MinAtar", "--total-steps", "512",
                 "--num-envs", "8", "--num-steps", "32", "--minibatches", "2", "--hidden",
                 "16", "--out", str(folder / "minatar")]) == 0
    return folder


def observations(name):
    if name == "cartpole":
        scale = np.array([1.0, 1.0, 0.1, 1.0], np.float32)
        return np.asarray(jax.random.normal(jax.random.key(0), (2000, 4))) * scale
    return np.asarray(jax.random.bernoulli(jax.random.key(0), 0.2, (500, 400)), np.float32)


@pytest.mark.integration
@pytest.mark.parametrize(("name", "lane"), [("cartpole", 1), ("minatar", 0)])
def test_the_artifact_acts_like_load_run_without_rollax(runs, tmp_path, capsys, name, lane):
    out = tmp_path / "policy.jax"
    code, text, err = run(capsys, "export", runs / name, "--out", out, "--lane", lane,
                          "--json")
    assert code == 0, err
    info = json.loads(text)
    assert json.loads((tmp_path / "policy.jax.json").read_text()) == info
    obs = observations(name)
    assert info["input"] == {"name": "observation", "shape": ["B", *obs.shape[1:]],
                             "dtype": "float32"}
    assert info["output"] == {"name": "action", "shape": ["B"], "dtype": "int32"}
    assert info["lane"] == lane and info["lane_label"] == {"seed": lane}
    np.save(tmp_path / "obs.npy", obs)
    subprocess.run([sys.executable, "-c", LOAD_WITHOUT_ROLLAX, str(out), str(tmp_path / "obs.npy"),
                    str(tmp_path / "actions.npy")], check=True, cwd=tmp_path)
    theirs = np.load(tmp_path / "actions.npy")
    mine = np.asarray(rollax.load_run(runs / name).act(obs, lane=lane))
    assert theirs.dtype == np.int32 and len(set(mine.tolist())) > 1  # the actions vary
    np.testing.assert_array_equal(theirs, mine)


def test_a_gaussian_policy_exports_its_mean(tmp_path):
    from rollax.cli import main
    from rollax.run.export import export_policy

    assert main(["train", "--json", "--env", "Pendulum-v1", "--total-steps", "512",
                 "--num-envs", "4", "--num-steps", "64", "--minibatches", "2",
                 "--out", str(tmp_path / "run")]) == 0
    info = export_policy(tmp_path / "run", tmp_path / "p.jax")
    assert info["output"] == {"name": "action", "shape": ["B", 1], "dtype": "float32"}
    exported = jax.export.deserialize((tmp_path / "p.jax").read_bytes())
    obs = np.asarray(jax.random.uniform(jax.random.key(1), (64, 3), minval=-8, maxval=8))
    mine = np.asarray(rollax.load_run(tmp_path / "run").act(obs))
    np.testing.assert_allclose(np.asarray(exported.call(obs)), mine, rtol=1e-5, atol=1e-6)
    assert exported.platforms == ("cpu", "cuda")


@pytest.mark.parametrize(("argv", "message"), [
    (["--format", "tflite"], "invalid choice"),
    (["--out", "p.onnx"], "out must end in .jax for format stablehlo, got 'p.onnx'"),
    (["--out", "missing/p.jax"], "out: the folder 'missing' does not exist"),
    (["--lane", "3"], "lane must be in [0, 1)"),
])
def test_refusals_write_nothing(tabular_run, capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "export", tabular_run, *argv)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("jax2onnx") is not None,
                    reason="jax2onnx installed (tests/extras/test_export_onnx.py)")
def test_onnx_without_its_extra_names_the_install_command(tabular_run, capsys, tmp_path):
    code, _, err = run(capsys, "export", tabular_run, "--format", "onnx", "--out",
                       tmp_path / "p.onnx")
    assert code == 2 and "pip install 'rollax[onnx]'" in err
    assert list(tmp_path.iterdir()) == []


def test_a_recurrent_run_is_refused(tmp_path, capsys):
    from rollax.cli import main

    assert main(["train", "--json", "--env", "CartPole-v1", "--network", "gru",
                 "--total-steps", "64", "--num-envs", "4", "--num-steps", "16", "--minibatches",
                 "2", "--memory-size", "4", "--hidden", "4", "4", "--out",
                 str(tmp_path / "run")]) == 0
    capsys.readouterr()
    code, _, err = run(capsys, "export", tmp_path / "run", "--out", tmp_path / "p.jax")
    assert code == 2 and "this run's policy is recurrent" in err
    assert not (tmp_path / "p.jax").exists()


def test_the_tabular_corridor_policy_exports_with_integer_observations(tabular_run, tmp_path):
    from rollax.run.export import export_policy

    info = export_policy(tabular_run, tmp_path / "t.jax")
    assert info["input"] == {"name": "observation", "shape": ["B"], "dtype": "int32"}
    exported = jax.export.deserialize((tmp_path / "t.jax").read_bytes())
    positions = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(exported.call(positions)),
                                  np.asarray(rollax.load_run(tabular_run).act(positions)))


@pytest.fixture(scope="module")
def lookout_run(tmp_path_factory):
    from rollax.cli import main

    folder = tmp_path_factory.mktemp("export-dict") / "run"
    assert main(["train", "--json", "--env", "custom_envs.lookout:make", "--total-steps",
                 "2048", "--num-envs", "8", "--num-steps", "32", "--minibatches", "2",
                 "--hidden", "16", "--out", str(folder)]) == 0
    return folder


def test_a_dict_observation_exports_one_input_per_leaf(lookout_run, tmp_path):
    """A ``Dict`` run (an image, a vector and a ``Discrete`` cue): the artifact takes the
    observation's dict, each leaf batched with its dtype, and gives ``act``'s actions; the
    description lists one input per leaf, in ``space_leaves`` order."""
    from rollax.run.export import export_policy

    info = export_policy(lookout_run, tmp_path / "d.jax")
    assert "input" not in info and info["inputs"] == [
        {"name": "observation.cue", "shape": ["B"], "dtype": "int32"},
        {"name": "observation.grid", "shape": ["B", 5, 5, 1], "dtype": "float32"},
        {"name": "observation.reading", "shape": ["B", 2], "dtype": "float32"}]
    exported = jax.export.deserialize((tmp_path / "d.jax").read_bytes())
    obs = lookout_observations(512)
    theirs = np.asarray(exported.call(obs))
    mine = np.asarray(rollax.load_run(lookout_run).act(obs))
    assert len(set(mine.tolist())) > 1
    np.testing.assert_array_equal(theirs, mine)

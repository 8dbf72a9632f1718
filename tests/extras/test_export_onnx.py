"""ONNX export (``pip install 'rollax[onnx]'``): the models jax2onnx writes for a CartPole MLP,
a Pendulum Gaussian (its mean, observation statistics folded in) and a MinAtar CNN run give, in
onnxruntime, the greedy actions ``load_run(...).act`` gives (exactly for discrete actions,
within float32 rounding for Box means), on thousands of observations."""

import json

import jax
import numpy as np
import pytest

import rollax
from helpers import lookout_observations, run

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("jax2onnx")

RUNS = {
    "cartpole": ["--env", "CartPole-v1", "--total-steps", "2048"],
    "pendulum": ["--env", "Pendulum-v1", "--total-steps", "2048", "--num-envs", "4"],
    "minatar": ["--env", "gymnax:Breakout-MinAtar", "--total-steps", "512", "--num-envs", "8",
                "--num-steps", "32", "--minibatches", "2", "--hidden", "16"],
}


def observations(name):
    key = jax.random.key(0)
    if name == "cartpole":
        scale = np.array([1, 1, 0.1, 1], np.float32)
        return np.asarray(jax.random.normal(key, (4000, 4))) * scale
    if name == "pendulum":
        return np.asarray(jax.random.uniform(key, (4000, 3), minval=-8, maxval=8), np.float32)
    return np.asarray(jax.random.bernoulli(key, 0.2, (2000, 400)), np.float32)


@pytest.mark.parametrize("name", list(RUNS))
def test_onnxruntime_acts_like_load_run(capsys, tmp_path, name):
    code, _, err = run(capsys, "train", "--json", *RUNS[name], "--out", tmp_path / "run")
    assert code == 0, err
    code, text, err = run(capsys, "export", tmp_path / "run", "--format", "onnx", "--out",
                          tmp_path / "policy.onnx", "--json")
    assert code == 0, err
    info = json.loads(text)
    session = ort.InferenceSession(str(tmp_path / "policy.onnx"))
    (given,), (taken,) = session.get_inputs(), session.get_outputs()
    assert given.name == info["input"]["name"] == "observation"
    assert taken.name == info["output"]["name"] == "action"
    assert given.shape == info["input"]["shape"] and taken.shape == info["output"]["shape"]
    obs = observations(name)
    theirs = session.run(None, {"observation": obs})[0]
    mine = np.asarray(rollax.load_run(tmp_path / "run").act(obs))
    assert theirs.shape == mine.shape and theirs.dtype == mine.dtype
    if name == "pendulum":
        assert json.loads((tmp_path / "run" / "config.json").read_text())["config"][
            "normalize_observations"]  # the statistics are folded in
        np.testing.assert_allclose(theirs, mine, rtol=1e-5, atol=1e-6)
    else:
        assert len(set(mine.tolist())) > 1
        np.testing.assert_array_equal(theirs, mine)


def test_a_dict_observation_is_one_onnx_input_per_leaf(capsys, tmp_path):
    """tests/custom_envs/lookout.py's ``Dict`` run in onnxruntime: inputs named
    ``observation.<key>``, fed leaf by leaf, give ``act``'s greedy actions."""
    code, _, err = run(capsys, "train", "--json", "--env", "custom_envs.lookout:make",
                       "--total-steps", "2048", "--num-envs", "8", "--num-steps", "32",
                       "--minibatches", "2", "--hidden", "16", "--out", tmp_path / "run")
    assert code == 0, err
    code, text, err = run(capsys, "export", tmp_path / "run", "--format", "onnx", "--out",
                          tmp_path / "policy.onnx", "--json")
    assert code == 0, err
    session = ort.InferenceSession(str(tmp_path / "policy.onnx"))
    names = [i.name for i in session.get_inputs()]
    assert names == [i["name"] for i in json.loads(text)["inputs"]] == [
        "observation.cue", "observation.grid", "observation.reading"]
    obs = lookout_observations(1000)
    theirs = session.run(None, {f"observation.{k}": v for k, v in obs.items()})[0]
    mine = np.asarray(rollax.load_run(tmp_path / "run").act(obs))
    assert len(set(mine.tolist())) > 1
    np.testing.assert_array_equal(theirs, mine)

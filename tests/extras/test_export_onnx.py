"""ONNX export (``pip install 'rollax[onnx]'``): the models jax2onnx writes for a CartPole MLP,
a Pendulum Gaussian (its mean, observation statistics folded in) and a MinAtar CNN run give, in
onnxruntime, the greedy actions ``load_run(...).act`` gives (exactly for discrete actions,
within float32 rounding for Box means), on thousands of observations."""

import json
import logging

import jax
import numpy as np
import pytest

import rollax
from helpers import disk_full_for_staged_files, lookout_observations, run

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


@pytest.mark.parametrize("network", ["gru", "lstm"])
def test_onnxruntime_steps_a_recurrent_policy_and_samples_from_its_noise(capsys, tmp_path,
                                                                         network):
    """A recurrent run's step in onnxruntime: inputs ``carry`` (GRU) or ``carry.0``/``carry.1``
    (LSTM), ``observation``, ``noise``; outputs the next carry and the action. Threaded along 4
    steps, greedy and sampling models give the ``jax.export`` artifact's carries and actions
    (which tests/run/test_export.py checks against ``load_run``)."""
    code, _, err = run(capsys, "train", "--json", "--env", "CartPole-v1", "--network", network,
                       "--total-steps", "256", "--num-envs", "4", "--num-steps", "16",
                       "--minibatches", "2", "--memory-size", "4", "--hidden", "8", "8",
                       "--out", tmp_path / "run")
    assert code == 0, err
    leaves = 1 if network == "gru" else 2
    for sample in ([], ["--sample"]):
        for fmt, out in (("onnx", "p.onnx"), ("stablehlo", "p.jax")):
            code, text, err = run(capsys, "export", tmp_path / "run", "--format", fmt,
                                  "--out", tmp_path / out, "--json", *sample)
            assert code == 0, err
        info = json.loads(text)
        carry_names = [c["name"] for c in info["carry"]]
        assert carry_names == (["carry"] if leaves == 1 else ["carry.0", "carry.1"])
        session = ort.InferenceSession(str(tmp_path / "p.onnx"))
        assert [i.name for i in session.get_inputs()] == [
            *carry_names, "observation", *(["noise"] if sample else [])]
        assert [o.name for o in session.get_outputs()] == [
            *(c["output"] for c in info["carry"]), "action"]
        exported = jax.export.deserialize((tmp_path / "p.jax").read_bytes())
        theirs = [np.zeros((128, 4), np.float32)] * leaves
        mine = tuple(theirs) if leaves == 2 else theirs[0]
        for t in range(4):
            obs = np.asarray(jax.random.normal(jax.random.key(t), (128, 4)), np.float32)
            noise = np.asarray(jax.random.uniform(jax.random.key(9 + t), (128, 2),
                                                  minval=1e-7), np.float32)
            feeds = {"observation": obs, **dict(zip(carry_names, theirs)),
                     **({"noise": noise} if sample else {})}
            *theirs, action = session.run(None, feeds)
            mine, want = exported.call(mine, obs, *([noise] if sample else []))
            np.testing.assert_array_equal(action, np.asarray(want))
            for a, b in zip(theirs, jax.tree.leaves(mine)):
                np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-6)


def test_onnxruntime_draws_a_gaussian_sample_like_the_artifact(capsys, tmp_path):
    """A Box policy's sampling model (the normal quantile of its noise) in onnxruntime gives
    the ``jax.export`` artifact's actions, within float32 rounding."""
    code, _, err = run(capsys, "train", "--json", *RUNS["pendulum"][:2], "--total-steps", "256",
                       "--num-envs", "4", "--num-steps", "32", "--out", tmp_path / "run")
    assert code == 0, err
    for fmt, out in (("onnx", "g.onnx"), ("stablehlo", "g.jax")):
        code, _, err = run(capsys, "export", tmp_path / "run", "--format", fmt, "--out",
                           tmp_path / out, "--sample")
        assert code == 0, err
    obs = observations("pendulum")[:512]
    noise = np.asarray(jax.random.uniform(jax.random.key(5), (512, 1), minval=1e-6,
                                          maxval=1 - 1e-6), np.float32)
    theirs = ort.InferenceSession(str(tmp_path / "g.onnx")).run(
        None, {"observation": obs, "noise": noise})[0]
    mine = np.asarray(jax.export.deserialize((tmp_path / "g.jax").read_bytes()).call(obs, noise))
    np.testing.assert_allclose(theirs, mine, rtol=1e-4, atol=1e-4)


def test_an_onnx_export_on_a_full_disk_is_one_line_naming_it_and_leaves_no_file(
        tabular_run, capsys, tmp_path, monkeypatch):
    # the model and its description are staged and renamed together when both are whole:
    # ENOSPC (a real one, from /dev/full) is one line naming the model, exit 1, no file
    out = tmp_path / "p.onnx"
    disk_full_for_staged_files(monkeypatch)
    code, text, err = run(capsys, "export", tabular_run, "--format", "onnx", "--out", out)
    assert (code, text, err) == (1, "", f"rollax export: error: {out}: No space left on device\n")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    code, _, err = run(capsys, "export", tabular_run, "--format", "onnx", "--out", out)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.onnx", "p.onnx.json"]
    positions = np.arange(4, dtype=np.int32)
    theirs = ort.InferenceSession(str(out)).run(None, {"observation": positions})[0]
    np.testing.assert_array_equal(theirs, rollax.load_run(tabular_run).act(positions))


def test_onnx_irs_untyped_shape_warning_is_dropped_and_nothing_else(caplog):
    """Pgx 2048's policy flattens ``(4, 4, 31)`` bool planes: jax2onnx 0.17 records the
    reshape's shape tensors with a shape but no type, and onnx_ir warned "The value type for
    shape [1] is not known ... Skipping serialization" (twice) for annotations the model does
    not need. That warning is dropped; the model still acts as JAX does, and onnx_ir's other
    warnings still show."""
    import jax.numpy as jnp

    from rollax.run.export import _Leaf, _onnx, _untyped_shapes_unsaid

    weights = np.asarray(jax.random.normal(jax.random.key(0), (4 * 4 * 31, 4)), np.float32)

    def one(planes, mask):
        logits = planes.reshape(-1).astype(jnp.float32) @ weights
        return (jnp.argmax(jnp.where(mask, logits, -jnp.inf)).astype(jnp.int32),)

    def act(inputs):
        return jax.vmap(one)(*inputs)

    signature = [("observation", _Leaf((4, 4, 31), jnp.bool_)),
                 ("action_mask", _Leaf((4,), jnp.bool_))]
    with caplog.at_level(logging.WARNING):
        model = _onnx(act, signature, ["observation", "action_mask"], ["action"])
        with _untyped_shapes_unsaid():
            logging.getLogger("onnx_ir.serde").warning("another warning")
    assert [r.getMessage() for r in caplog.records] == ["another warning"]
    planes = np.asarray(jax.random.bernoulli(jax.random.key(1), 0.3, (64, 4, 4, 31)))
    mask = np.array(jax.random.bernoulli(jax.random.key(2), 0.6, (64, 4)))
    mask[:, 0] = True
    theirs = ort.InferenceSession(model).run(None, {"observation": planes,
                                                    "action_mask": mask})[0]
    np.testing.assert_array_equal(theirs, np.asarray(act((planes, mask))[0]))

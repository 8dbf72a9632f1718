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
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import disk_full_for_staged_files, lookout_observations, run

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
    assert exported.platforms == ("cpu", "cuda", "tpu")


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


def test_an_export_on_a_full_disk_is_one_line_naming_it_and_leaves_no_file(tabular_run, capsys,
                                                                             tmp_path,
                                                                             monkeypatch):
    # the artifact and its description are staged beside their paths and renamed together
    # when both are whole: ENOSPC (a real one, from /dev/full) is one line naming the
    # artifact, exit 1, and the files that were there are kept
    out = tmp_path / "p.jax"
    out.write_text("an older artifact")
    disk_full_for_staged_files(monkeypatch)
    code, text, err = run(capsys, "export", tabular_run, "--out", out)
    assert (code, text, err) == (1, "", f"rollax export: error: {out}: No space left on device\n")
    assert list(tmp_path.iterdir()) == [out] and out.read_text() == "an older artifact"
    monkeypatch.undo()
    code, _, err = run(capsys, "export", tabular_run, "--out", out)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jax", "p.jax.json"]
    exported = jax.export.deserialize(out.read_bytes())
    positions = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(exported.call(positions)),
                                  np.asarray(rollax.load_run(tabular_run).act(positions)))


@pytest.mark.skipif(importlib.util.find_spec("jax2onnx") is not None,
                    reason="jax2onnx installed (tests/extras/test_export_onnx.py)")
def test_onnx_without_its_extra_names_the_install_command(tabular_run, capsys, tmp_path):
    code, _, err = run(capsys, "export", tabular_run, "--format", "onnx", "--out",
                       tmp_path / "p.onnx")
    assert code == 2 and "pip install 'rollax[onnx]'" in err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    from rollax.cli import main

    folder = tmp_path_factory.mktemp("export-lstm") / "run"
    assert main(["train", "--json", "--env", "CartPole-v1", "--network", "lstm",
                 "--total-steps", "256", "--num-envs", "4", "--num-steps", "16",
                 "--minibatches", "2", "--memory-size", "4", "--hidden", "8", "8",
                 "--out", str(folder)]) == 0
    return folder


def test_a_recurrent_policy_exports_its_step_with_the_memory_in_and_out(lstm_run, tmp_path):
    """An LSTM's step: the artifact takes the carry ``(h, c)`` and the observation and gives
    the next carry and the action; threaded along 6 steps of 64 observations from the zero
    memory the description names, it gives ``load_run(...).step``'s actions and memories."""
    from rollax.run.export import export_policy

    info = export_policy(lstm_run, tmp_path / "r.jax")
    assert info["policy"] == "greedy" and info["carry"] == [
        {"name": f"carry.{i}", "shape": ["B", 4], "dtype": "float32",
         "output": f"next_carry.{i}", "initial": "zeros"} for i in (0, 1)]
    exported = jax.export.deserialize((tmp_path / "r.jax").read_bytes())
    loaded = rollax.load_run(lstm_run)
    step = jax.jit(jax.vmap(loaded.step))
    theirs = mine = (np.zeros((64, 4), np.float32),) * 2
    actions = []
    for t in range(6):
        obs = np.asarray(jax.random.normal(jax.random.key(t), (64, 4)))
        theirs, action = exported.call(theirs, obs)
        mine, want = step(mine, obs)
        np.testing.assert_array_equal(np.asarray(action), np.asarray(want))
        for a, b in zip(theirs, mine):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        actions.append(np.asarray(action))
    assert len(np.unique(np.concatenate(actions))) == 2  # the actions vary


def test_a_recurrent_step_is_compiled_once_and_is_the_policys_own(lstm_run):
    # loaded.step (one compiled program per lane, with or without a key) threads the memory
    # along an episode exactly as the policy's own greedy / sample, called op by op, does
    loaded = rollax.load_run(lstm_run)
    params = loaded.lane_params(0)
    carry = reference = loaded.initial_carry()
    keys = jax.random.split(jax.random.key(3), 8)
    for t in range(8):
        obs = np.asarray(jax.random.normal(jax.random.key(t), (4,)), np.float32)
        key = keys[t] if t % 2 else None
        carry, action = loaded.step(carry, obs, key)
        with jax.disable_jit():
            if key is None:
                reference, want = loaded.policy.greedy(params, reference, jnp.asarray(obs))
            else:
                reference, want, _ = loaded.policy.sample(params, reference, jnp.asarray(obs),
                                                          key)
        assert int(action) == int(want)
        for a, b in zip(carry, reference):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert loaded._lane_step(0)._cache_size() == 2  # greedy, sampled


def gumbel_max(logits, u):
    """The reference draw, in NumPy: ``argmax(logits - log(-log u))``."""
    return np.argmax(np.asarray(logits, np.float64) - np.log(-np.log(np.asarray(u, np.float64))),
                     axis=-1)


def test_a_recurrent_sampling_export_draws_from_its_noise(lstm_run, tmp_path):
    """``sample=True``: a ``noise`` input of one uniform per action; the action is the
    Gumbel-max draw from the step's logits (NumPy reference), and over many draws for one
    observation its frequencies are the policy's probabilities."""
    from rollax.run.export import export_policy

    info = export_policy(lstm_run, tmp_path / "s.jax", sample=True)
    assert info["policy"] == "sample" and info["noise"] == {
        "name": "noise", "shape": ["B", 2], "dtype": "float32",
        "law": "independent uniforms on (0, 1)"}
    exported = jax.export.deserialize((tmp_path / "s.jax").read_bytes())
    loaded = rollax.load_run(lstm_run)
    params, policy = loaded.lane_params(0), loaded.policy
    n = 20_000
    obs = np.broadcast_to(np.array([0.02, 0.5, -0.03, -0.6], np.float32), (n, 4))
    u = np.asarray(jax.random.uniform(jax.random.key(3), (n, 2), minval=1e-7))
    carry = (np.zeros((n, 4), np.float32),) * 2
    _, action = exported.call(carry, obs, u)
    features = policy.step(params, loaded.initial_carry(), jnp.asarray(obs[0]))[1]
    logits = np.asarray(policy.distribution(params, features).logits)
    np.testing.assert_array_equal(np.asarray(action), gumbel_max(logits, u))
    p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert abs(np.mean(np.asarray(action) == 1) - p[1]) < 5 * np.sqrt(p[0] * p[1] / n)


def test_a_gaussian_sampling_export_takes_the_normal_quantile(tmp_path):
    """A Box policy's draw is ``mean + std * Phi^-1(u)`` (the quantile from Python's
    ``statistics.NormalDist``), the mean being ``act``'s greedy action."""
    from statistics import NormalDist

    from rollax.cli import main
    from rollax.run.export import export_policy

    assert main(["train", "--json", "--env", "Pendulum-v1", "--total-steps", "256",
                 "--num-envs", "4", "--num-steps", "32", "--minibatches", "2",
                 "--out", str(tmp_path / "run")]) == 0
    info = export_policy(tmp_path / "run", tmp_path / "g.jax", sample=True)
    assert info["noise"]["shape"] == ["B", 1]
    exported = jax.export.deserialize((tmp_path / "g.jax").read_bytes())
    loaded = rollax.load_run(tmp_path / "run")
    obs = np.asarray(jax.random.uniform(jax.random.key(1), (32, 3), minval=-2, maxval=2))
    u = np.linspace(0.01, 0.99, 32, dtype=np.float32)[:, None]
    std = float(np.exp(np.asarray(loaded.lane_params(0)[0].log_std)).reshape(-1)[0])
    want = np.asarray(loaded.act(obs)) + std * np.array([[NormalDist().inv_cdf(float(x))]
                                                         for x in u[:, 0]])
    np.testing.assert_allclose(np.asarray(exported.call(obs, u)), want, rtol=1e-4, atol=1e-4)


def test_a_masked_policy_exports_the_mask_as_an_input(tmp_path):
    """An environment with action masks: the artifact takes ``action_mask`` and gives
    ``act(obs, mask=...)``'s actions, legal ones, greedy and drawn from noise."""
    from rollax.cli import main
    from rollax.run.export import export_policy

    assert main(["train", "--json", "--env", "custom_envs.masked_guess:discrete",
                 "--total-steps", "256", "--num-envs", "4", "--num-steps", "16",
                 "--minibatches", "2", "--hidden", "8", "--out", str(tmp_path / "run")]) == 0
    greedy = export_policy(tmp_path / "run", tmp_path / "m.jax")
    assert greedy["action_mask"] == {"name": "action_mask", "shape": ["B", 4], "dtype": "bool"}
    export_policy(tmp_path / "run", tmp_path / "ms.jax", sample=True)
    loaded = rollax.load_run(tmp_path / "run")
    shape = loaded.env.observation_space.shape
    obs = np.asarray(jax.random.bernoulli(jax.random.key(2), 0.5, (256, *shape)), np.float32)
    mask = np.zeros((256, 4), bool)
    mask[np.arange(256), np.arange(256) % 4] = True
    mask[np.arange(256), (np.arange(256) + 1) % 4] = True
    exported = jax.export.deserialize((tmp_path / "m.jax").read_bytes())
    actions = np.asarray(exported.call(obs, mask))
    np.testing.assert_array_equal(actions, np.asarray(loaded.act(obs, mask=mask)))
    sampled = jax.export.deserialize((tmp_path / "ms.jax").read_bytes())
    u = np.asarray(jax.random.uniform(jax.random.key(4), (256, 4), minval=1e-7))
    drawn = np.asarray(sampled.call(obs, mask, u))
    assert mask[np.arange(256), actions].all() and mask[np.arange(256), drawn].all()


def test_sampling_a_policy_without_a_distribution_is_refused(tabular_run, capsys, tmp_path):
    """The corridor's tabular policy has one (its two actions' softmax); a policy class that
    has none is refused in one line naming it."""
    import dataclasses

    from rollax.run.export import _check

    @dataclasses.dataclass(frozen=True)
    class Loaded:
        policy: object = object()

    with pytest.raises(ValueError, match="has no action distribution to draw from"):
        _check(Loaded(), "stablehlo", tmp_path / "p.jax", sample=True)
    code, text, err = run(capsys, "export", tabular_run, "--sample", "--out",
                          tmp_path / "p.jax")
    assert code == 0, err
    assert "observation (B) int32, noise (B, 2) float32 -> action (B) int32" in text


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

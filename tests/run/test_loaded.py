"""Using a trained policy (``rollax.load_run``) and environments named by import path
(``--env package.module:factory``)."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import greedy_return, run, train_json
from rollax.run.config import from_json, from_settings
from rollax.run.experiment import Runner, lane_params_sha256
from rollax.run.folder import RunFolder
from rollax.run.training import read_run


def _final_state(path, lane: int = 0):
    """The state of ``lane`` in the run's latest checkpoint (read without load_run)."""
    run = read_run(RunFolder(path))
    runner = Runner(run.build(), run.lanes(), 1)
    _, state = RunFolder(path).load_checkpoint(runner.initial_state(), run.identity())
    return jax.tree_util.tree_map(lambda x: x[lane], state)


@pytest.mark.slow
@pytest.mark.parametrize("env", ["CartPole-v1", "MountainCar-v0"])
def test_load_run_reproduces_ppo_greedy_evaluation(capsys, tmp_path, env):
    out = tmp_path / "run"
    steps, updates = {"CartPole-v1": ("2048", 4), "MountainCar-v0": ("4096", 2)}[env]
    train_json(capsys, "--env", env, "--total-steps", steps, "--out", str(out))
    summary = json.loads((out / "summary.json").read_text())
    config = json.loads((out / "config.json").read_text())["config"]
    loaded = rollax.load_run(out)
    assert loaded.lanes == ({"seed": 0},) and loaded.updates == updates
    state = _final_state(out)
    if config["normalize_observations"]:  # MountainCar's preset: (network, statistics)
        stats = loaded.lane_params(0)[1]
        for mine, saved in zip(jax.tree_util.tree_leaves(stats),
                               jax.tree_util.tree_leaves(state.obs_stats)):
            np.testing.assert_array_equal(mine, saved)
        assert np.any(np.asarray(stats.mean) != 0)  # statistics of real observations
    eval_key = jax.random.split(state.key)[0]
    episodes = config["eval_episodes"]
    mine = float(jax.jit(lambda k: greedy_return(loaded, k, episodes))(eval_key))
    assert mine == summary["lanes"][0]["eval_return"]
    theirs = rollax.evaluate_policy(loaded.env, loaded.policy, loaded.lane_params(0), eval_key,
                                    episodes)
    assert float(theirs) == summary["lanes"][0]["eval_return"]
    # a batch, as Stable-Baselines3's predict takes one: any leading axes, one action each
    starts = jax.vmap(loaded.env.reset)(jax.random.split(jax.random.key(1), 8))
    obs = jax.vmap(loaded.env.observation)(starts)
    size = loaded.env.observation_space.shape[0]
    np.testing.assert_array_equal(loaded.act(obs), jax.vmap(loaded.act)(obs))
    np.testing.assert_array_equal(loaded.act(np.asarray(obs).reshape(2, 4, size)),
                                  np.asarray(loaded.act(obs)).reshape(2, 4))
    keys = jax.random.split(jax.random.key(2), 8)
    np.testing.assert_array_equal(loaded.act(obs, jax.random.key(2)),
                                  jax.vmap(loaded.act)(obs, keys))
    expected = (f"expected an observation of shape ({size},) or a batch (..., {size}); "
                f"got (8, {size - 1})")
    with pytest.raises(ValueError, match="^" + re.escape(expected) + "$"):
        loaded.act(obs[:, 1:])


def test_load_run_tabular_matches_saved_params_and_exact_return(capsys, tmp_path):
    out = tmp_path / "run"
    obj = train_json(capsys, "--updates", "4", "--batch-size", "16", "--out", str(out))
    loaded = rollax.load_run(out)
    np.testing.assert_array_equal(loaded.lane_params(0), np.float32(obj["params"][0]))
    observations = jnp.arange(loaded.env.observation_space.n)
    greedy = jax.vmap(lambda o: loaded.policy.greedy(jnp.float32(obj["params"][0]), o))
    np.testing.assert_array_equal(jax.vmap(loaded.act)(observations), greedy(observations))
    np.testing.assert_array_equal(jax.jit(jax.vmap(loaded.act))(observations),
                                  greedy(observations))
    keys = jax.random.split(jax.random.key(0), observations.shape[0])
    sampled = jax.jit(jax.vmap(loaded.act))(observations, keys)
    expected = jax.vmap(lambda o, k: loaded.policy.sample(loaded.lane_params(0), o, k)[0])(
        observations, keys)
    np.testing.assert_array_equal(sampled, expected)
    assert sampled.shape == observations.shape and sampled.dtype == jnp.int32
    # a batch with one key: observation i samples with split(key, n)[i]
    np.testing.assert_array_equal(loaded.act(observations, jax.random.key(0)), sampled)
    np.testing.assert_array_equal(loaded.act(observations.tolist()), greedy(observations))
    exact = rollax.policy_return(loaded.env.to_mdp(), loaded.policy, loaded.lane_params(0))
    assert float(exact) == obj["exact_return"][0]


@pytest.mark.slow
def test_load_run_lanes_of_seeds_and_sweeps(capsys, tmp_path):
    out = tmp_path / "run"
    train_json(capsys, "--updates", "3", "--batch-size", "16", "--seeds", "2", "--sweep",
           "lr=0.5,0.25", "--out", str(out))
    summary = json.loads((out / "summary.json").read_text())
    loaded = rollax.load_run(out)
    assert len(loaded.lanes) == 4
    assert [dict(lane) for lane in loaded.lanes] == [
        {k: v for k, v in lane.items() if k in ("seed", "lr")} for lane in summary["lanes"]]
    assert lane_params_sha256(jax.device_get(loaded.params), 4) == [
        lane["params_sha256"] for lane in summary["lanes"]]
    mdp = loaded.env.to_mdp()
    for lane in range(4):
        exact = rollax.policy_return(mdp, loaded.policy, loaded.lane_params(lane))
        assert float(exact) == summary["lanes"][lane]["exact_return"]
        assert loaded.act(jnp.int32(0), lane=lane) == loaded.policy.greedy(
            loaded.lane_params(lane), jnp.int32(0))
    # a traced lane works too (one compiled function for every lane)
    acts = jax.jit(jax.vmap(lambda lane: loaded.act(jnp.int32(1), lane=lane)))(jnp.arange(4))
    assert acts.shape == (4,)
    with pytest.raises(ValueError, match=r"lane must be in \[0, 4\)"):
        loaded.act(jnp.int32(0), lane=4)


BEFORE_NAMES = Path(__file__).resolve().parents[1] / "data" / "checkpoint-before-names"
"""A PPO CartPole run (2 seeds, hidden 8-8, observations normalised) written by rollax before
checkpoints named their arrays (commit 957963e: ``leaf_00000``...), with the greedy actions
``load_run(...).act`` gave then on 16 observations (``expected_actions.json``)."""


def test_a_checkpoint_from_before_named_arrays_still_loads_and_acts_alike(capsys, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(BEFORE_NAMES, out)
    latest = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    assert np.load(latest / "state.npz").files[:2] == ["leaf_00000", "leaf_00001"]
    expected = json.loads((out / "expected_actions.json").read_text())
    loaded = rollax.load_run(out)
    obs = np.asarray(expected["observations"], np.float32)
    for lane in (0, 1):
        assert loaded.act(obs, lane=lane).tolist() == expected["greedy"][lane]
    code, _, err = run(capsys, "eval", out, "--episodes", "2")
    assert code == 0, err


def test_checkpoint_arrays_are_named_by_their_path_in_the_state(capsys, tmp_path):
    out = tmp_path / "run"
    train_json(capsys, "--env", "CartPole-v1", "--total-steps", "256", "--num-envs", "4",
               "--num-steps", "32", "--minibatches", "2", "--epochs", "1", "--hidden", "8",
               "--eval-episodes", "2", "--out", out)
    latest = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    meta = json.loads((latest / "meta.json").read_text())
    names = np.load(latest / "state.npz").files
    assert names == [leaf["name"] for leaf in meta["leaves"]]
    for name in ("params/actor/0/weight", "params/actor/1/bias", "params/critic/0/weight",
                 "params/log_std", "key", "updates"):
        assert name in names, names
    with np.load(latest / "state.npz") as npz:
        assert npz["params/actor/0/weight"].shape == (1, 8, 4)  # (lanes, out, in)
        network = rollax.load_run(out).lane_params(0)[0]  # (network, observation statistics)
        np.testing.assert_array_equal(npz["params/actor/0/weight"][0], network.actor[0].weight)
        assert "obs_stats/mean" in names


def test_checkpoint_leaf_names():
    from rollax.run.checkpoint import leaf_names
    tree = {"a": (np.zeros(1), {"b": np.zeros(2)}), "c/d": np.zeros(1), "c": {"d": np.zeros(1)}}
    assert leaf_names(tree) == ["a/0", "a/1/b", "c/d", "c/d#3"]
    assert leaf_names(np.zeros(3)) == ["leaf"]


def test_a_renamed_leaf_is_read_under_its_old_name_where_the_template_has_its_new_one(tmp_path):
    from rollax.run.checkpoint import RENAMED, CheckpointError, load, save
    assert RENAMED == {"update": "updates"}  # the counter of updates done, a state's own field
    config = {"kind": "x", "config": {}, "seed": 0}
    old = {"params": {"update": np.arange(2.0)}, "update": np.int32(3)}  # as written before
    path = save(tmp_path, 3, old, config)
    updates, state = load(path, {"params": {"update": np.zeros(2)}, "updates": np.int32(0)},
                          config)
    assert updates == 3 and int(state["updates"]) == 3
    np.testing.assert_array_equal(state["params"]["update"], [0.0, 1.0])
    # a leaf named update deeper in the state is not the counter: never renamed
    with pytest.raises(CheckpointError, match=r"first difference: leaf params/updates\)"):
        load(path, {"params": {"updates": np.zeros(2)}, "updates": np.int32(0)}, config)


def test_act_compiles_once_per_kind_of_call_and_clips_on_request(capsys, tmp_path):
    out = tmp_path / "run"
    train_json(capsys, "--env", "Pendulum-v1", "--total-steps", "256", "--num-envs", "4",
               "--num-steps", "32", "--minibatches", "2", "--epochs", "1", "--hidden", "8",
               "--init-log-std", "1.5", "--seeds", "2", "--eval-episodes", "2", "--out", out)
    loaded = rollax.load_run(out)
    obs = np.asarray(jax.random.uniform(jax.random.key(0), (64, 3), minval=-1.0, maxval=1.0))
    params = loaded.lane_params(1)
    for o in obs[:5]:  # one observation at a time, lanes alternating: one program a lane
        np.testing.assert_allclose(loaded.act(o, lane=1), loaded.policy.greedy(params, o),
                                   rtol=1e-5)
        loaded.act(o, lane=0)
    assert loaded._lane_act(0)._cache_size() == loaded._lane_act(1)._cache_size() == 1
    sampled = loaded.act(obs, key=jax.random.key(1))  # wide samples (log std 1.5) leave [-2, 2]
    assert np.abs(np.asarray(sampled)).max() > 2.0
    clipped = loaded.act(obs, key=jax.random.key(1), clip=True)
    np.testing.assert_array_equal(clipped, np.clip(sampled, -2.0, 2.0))
    assert loaded._lane_act(0)._cache_size() == 3
    # under jit the lane is traced: every lane's parameters go in, one program for all lanes
    lanes = jax.jit(lambda o, lane: loaded.act(o, lane=lane))
    np.testing.assert_allclose(lanes(obs[0], 1), loaded.act(obs[0], lane=1), rtol=1e-6)
    np.testing.assert_allclose(lanes(obs[0], 0), loaded.act(obs[0], lane=0), rtol=1e-6)


def test_load_run_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(ValueError):
        rollax.load_run(tmp_path / "missing")


ENV_MODULE = '''
"""A custom environment for the tests: the corridor under another class name."""
import dataclasses

import rollax


@dataclasses.dataclass(frozen=True)
class ShortCorridor(rollax.Corridor):
    """The corridor, defined outside rollax."""


def make(horizon: int = 6) -> rollax.Environment:
    return ShortCorridor(horizon=horizon)


def not_an_env(horizon: int = 6):
    return horizon


def fixed() -> rollax.Environment:
    """A factory without a horizon parameter."""
    return ShortCorridor(horizon=4)


def configurable(**options) -> rollax.Environment:
    return ShortCorridor(**options)
'''


@pytest.fixture
def env_package(tmp_path, monkeypatch):
    """``mypkg.envs`` in ``tmp_path/lib`` (on ``sys.path`` for this test)."""
    package = tmp_path / "lib" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "envs.py").write_text(textwrap.dedent(ENV_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    yield tmp_path / "lib"
    for name in ("mypkg.envs", "mypkg"):
        sys.modules.pop(name, None)


def test_a_factory_in_the_current_directory_is_refused_with_the_pythonpath_hint(
        capsys, tmp_path, monkeypatch):
    # the rollax command does not search the current directory (python -m does): a module that
    # sits there is named with the command that finds it, nothing written
    (tmp_path / "localenvs").mkdir()
    (tmp_path / "localenvs" / "__init__.py").write_text("")
    (tmp_path / "localenvs" / "grid.py").write_text("import rollax\n\ndef make():\n"
                                                    "    return rollax.Corridor()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    code, out, err = run(capsys, "train", "--env", "localenvs.grid:make", "--updates", "1")
    assert code == 2 and out == "" and err == (
        "rollax train: error: environment 'localenvs.grid:make': cannot import module "
        "'localenvs.grid' (ModuleNotFoundError: No module named 'localenvs'); it is in the "
        "current directory, which the rollax command does not search: `PYTHONPATH=. rollax "
        "...`\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["localenvs"]


def test_make_by_import_path(env_package):
    env = rollax.make("mypkg.envs:make")
    assert type(env).__name__ == "ShortCorridor" and env.horizon == 6
    assert rollax.make("mypkg.envs:make", horizon=9).horizon == 9
    with pytest.raises(ValueError, match=r"mypkg\.envs:not_an_env.*returned a value of type int"):
        rollax.make("mypkg.envs:not_an_env")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        rollax.make("mypkg.envs:missing")
    with pytest.raises(ValueError, match="unknown environment 'mypkg:make'"):
        rollax.make("mypkg:make")  # no dot before the colon: not an import path
    assert rollax.make("mypkg.envs:configurable", horizon=9).horizon == 9  # **options take it
    assert rollax.make("mypkg.envs:fixed", horizon=4).horizon == 4  # not passed: its own
    with pytest.raises(ValueError, match="fixed takes no horizon and its environment's horizon "
                                         "is 4, not 9"):
        rollax.make("mypkg.envs:fixed", horizon=9)


def test_factory_without_horizon_runs_and_reopens(env_package):
    """A run on a factory without ``horizon`` stores its environment's own horizon; reopening
    the run (``RunConfig.build``, what ``rollax eval`` and ``--resume`` do) rebuilds the
    environment without passing ``horizon=``; asking for a horizon is refused."""
    run, algo = from_settings({"env": "mypkg.envs:fixed", "updates": 2, "batch_size": 16})
    assert run.config.horizon == 4 and algo.env.horizon == 4
    assert from_json(json.loads(json.dumps(run.to_json()))).build().env == algo.env
    with pytest.raises(ValueError, match="fixed takes no horizon parameter, so --horizon "):
        from_settings({"env": "mypkg.envs:fixed", "horizon": 4})


@pytest.mark.parametrize("name", ["corridor", "CartPole-v1", "mypkg.envs:make"])
def test_check_before_run_traces_only(env_package, name):
    """The check of a user's environment before a run computes nothing concretely (so it
    compiles nothing): one reset and step under ``jax.eval_shape`` only."""
    from rollax.contracts.preflight import check_before_run

    env = rollax.make(name)
    with jax.transfer_guard("disallow"):  # any concrete computation would transfer its inputs
        check_before_run(env, name)


def _cli(lib, cwd, *argv) -> subprocess.CompletedProcess:
    """``python -m rollax.cli ...`` in a new process that finds ``lib`` on PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(lib), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-m", "rollax.cli", *argv], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.integration
def test_custom_env_train_resume_eval_plot_in_new_processes(env_package, tmp_path):
    toml = tmp_path / "train.toml"
    toml.write_text('env = "mypkg.envs:make"\nhorizon = 5\n')
    _cli(env_package, tmp_path, "train", "--config", str(toml), "--updates", "4",
         "--batch-size", "16", "--chunk-size", "2", "--checkpoint-every", "2", "--json",
         "--out", "run")
    run = tmp_path / "run"
    config = json.loads((run / "config.json").read_text())["config"]
    assert config["env"] == "mypkg.envs:make" and config["horizon"] == 5
    summary = json.loads((run / "summary.json").read_text())
    # resume from update 2 of a copy, as a run stopped there would
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / "summary.json").unlink()
    shutil.rmtree(copy / "figures")
    (copy / "checkpoints" / "latest").write_text("update-0000002")
    _cli(env_package, tmp_path, "train", "--resume", "copy", "--json")
    resumed = json.loads((copy / "summary.json").read_text())
    assert resumed["params_sha256"] == summary["params_sha256"]
    evaluated = json.loads(_cli(env_package, tmp_path, "eval", "run", "--episodes", "8",
                                "--json").stdout)
    assert evaluated["env"] == "mypkg.envs:make" and len(evaluated["lanes"]) == 1
    _cli(env_package, tmp_path, "plot", "run", "--out", "figs", "--json")
    assert any((tmp_path / "figs").iterdir())
    loaded = rollax.load_run(run)
    assert type(loaded.env).__name__ == "ShortCorridor" and loaded.env.horizon == 5


@pytest.mark.slow
@pytest.mark.parametrize("network", ["mlp", "gru"])
def test_checkpoint_template_is_the_initial_state_without_running_init(network):
    """``load_latest`` reads a checkpoint into ``state_template`` (shapes from
    ``jax.eval_shape``): the same tree, shapes and dtypes as the state the run starts from, its
    typed keys of the same implementation."""
    from rollax.algos import ppo
    from rollax.run.experiment import make_lanes
    from rollax.run.training import state_template

    algo = ppo.make_algorithm(ppo.preset("CartPole-v1", total_steps=256, num_envs=2,
                                         num_steps=8, minibatches=1, network=network))
    lanes = make_lanes(seed=0, seeds=2, sweep={})
    template = state_template(algo, lanes)
    state = Runner(algo, lanes, 1).initial_state()
    assert jax.tree_util.tree_structure(template) == jax.tree_util.tree_structure(state)
    for got, want in zip(jax.tree_util.tree_leaves(template), jax.tree_util.tree_leaves(state)):
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        if jax.dtypes.issubdtype(want.dtype, jax.dtypes.prng_key):
            assert jax.random.key_impl(got) == jax.random.key_impl(want)


TINY_PPO = ["--total-steps", "256", "--num-envs", "4", "--num-steps", "32", "--minibatches", "2",
            "--epochs", "1", "--hidden", "8", "--eval-episodes", "2"]


@pytest.mark.slow
def test_act_gives_numpy_for_numpy_and_gymnasium_cartpole_takes_it(capsys, tmp_path):
    """The first loop a Stable-Baselines3 user writes: Gymnasium's own CartPole, stepped with
    ``act`` of its NumPy observation (``step`` asserts ``action_space.contains(action)``)."""
    gym = pytest.importorskip("gymnasium")
    out = tmp_path / "run"
    train_json(capsys, "--env", "CartPole-v1", *TINY_PPO, "--out", out)
    loaded = rollax.load_run(out)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    for _ in range(30):
        action = loaded.act(obs)
        assert isinstance(action, np.integer) and action.dtype == np.int32
        assert env.action_space.contains(action)
        # the same action JAX in, JAX out
        theirs = loaded.act(jnp.asarray(obs))
        assert isinstance(theirs, jax.Array) and int(theirs) == int(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    assert loaded.act(obs.tolist()) == action  # a list is host input too
    # a NumPy batch: a writable NumPy array of the space's dtype, one action each
    batch = np.stack([env.observation_space.sample() for _ in range(6)]).reshape(2, 3, 4)
    actions = loaded.act(batch, jax.random.key(1))
    assert type(actions) is np.ndarray and actions.shape == (2, 3)
    assert actions.dtype == np.int32 and actions.flags.writeable
    np.testing.assert_array_equal(actions, loaded.act(jnp.asarray(batch), jax.random.key(1)))
    # under jit the result stays traced, whatever the observation was
    key = jax.random.key(2)
    sampled = jax.jit(lambda k: loaded.act(batch[0, 0], k))(key)
    assert isinstance(sampled, jax.Array) and int(sampled) == loaded.act(batch[0, 0], key)
    greedy = jax.jit(loaded.act)(batch[0])
    assert isinstance(greedy, jax.Array)
    np.testing.assert_array_equal(greedy, loaded.act(batch[0]))


def test_act_gives_a_float32_numpy_action_inside_gymnasium_pendulums_box(capsys, tmp_path):
    gym = pytest.importorskip("gymnasium")
    out = tmp_path / "run"
    train_json(capsys, "--env", "Pendulum-v1", *TINY_PPO, "--out", out)
    loaded = rollax.load_run(out)
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    for _ in range(10):
        action = loaded.act(obs, clip=True)
        assert type(action) is np.ndarray and action.dtype == np.float32
        assert action.shape == (1,) and env.action_space.contains(action)
        mode = loaded.act(obs)  # unclipped: the policy's own action, as a NumPy float32 array
        assert type(mode) is np.ndarray and mode.dtype == np.float32
        np.testing.assert_array_equal(action, np.clip(mode, -2.0, 2.0))
        obs, *_ = env.step(action)
    assert isinstance(loaded.act(jnp.asarray(obs)), jax.Array)


def test_a_recurrent_step_gives_numpy_for_numpy(capsys, tmp_path):
    gym = pytest.importorskip("gymnasium")
    out = tmp_path / "run"
    train_json(capsys, "--env", "CartPole-v1", "--network", "gru", *TINY_PPO[:-4],
               "--out", out)
    loaded = rollax.load_run(out)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    carry, jax_carry = loaded.initial_carry(), loaded.initial_carry()
    for _ in range(10):
        carry, action = loaded.step(carry, obs)
        assert isinstance(action, np.integer) and env.action_space.contains(action)
        jax_carry, theirs = loaded.step(jax_carry, jnp.asarray(obs))
        assert isinstance(theirs, jax.Array) and int(theirs) == action
        obs, *_ = env.step(action)

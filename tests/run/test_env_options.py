"""``env_options``: keyword options of the environment's constructor, a setting of every
config (``--env-options KEY=VALUE ...``), stored in config.json so a run folder rebuilds the
same environment."""

import json

import numpy as np
import pytest

import rollax
from helpers import run, train_json
from rollax.envs.registry import make_configured, parse_options
from rollax.run.config import from_settings

TINY = ["--total-steps", "64", "--num-envs", "2", "--num-steps", "8", "--epochs", "1",
        "--minibatches", "1", "--hidden", "4", "--eval-episodes", "2"]


def test_options_are_read_as_booleans_numbers_or_text():
    assert parse_options(("episodic_life=true", "reward_clip=FALSE", "noop_max=30",
                          "dt=0.1", "lr=1e-3", "map_name=4x4", "empty=")) == {
        "episodic_life": True, "reward_clip": False, "noop_max": 30, "dt": 0.1, "lr": 0.001,
        "map_name": "4x4", "empty": ""}
    assert parse_options(()) == {}


@pytest.mark.parametrize("items, message", [
    (("dt",), "env_options must be KEY=VALUE items"),
    (("=3",), "env_options must be KEY=VALUE items"),
    (("two words=1",), "env_options must be KEY=VALUE items"),
    (("dt=1", "dt=2"), "env_options gives dt twice"),
    (("horizon=5",), "env_options cannot give horizon"),
    ("dt=1", "env_options must be a list of KEY=VALUE strings"),
])
def test_malformed_options_name_the_setting(items, message):
    with pytest.raises(ValueError, match=message):
        parse_options(items)


def test_options_reach_the_constructor():
    env = make_configured("custom_envs.point_mass:make", 7, ("dt=0.1",))
    assert (env.horizon, env.dt) == (7, 0.1)
    assert make_configured("custom_envs.point_mass:make").dt == 0.05
    # FrozenLake without slipping: every transition is certain
    _, algo = from_settings({"env": "FrozenLake-v1", "env_options": ("is_slippery=false",)})
    certain = np.asarray(algo.env.to_mdp().transitions)
    assert set(np.unique(certain)) <= {0.0, 1.0}
    _, slippery = from_settings({"env": "FrozenLake-v1"})
    assert not set(np.unique(np.asarray(slippery.env.to_mdp().transitions))) <= {0.0, 1.0}


def test_a_run_folder_rebuilds_its_environment_with_its_options(capsys, tmp_path):
    out = tmp_path / "run"
    train_json(capsys, "--env", "custom_envs.point_mass:make", "--horizon", "8",
               "--env-options", "dt=0.1", *TINY, "--out", out)
    stored = json.loads((out / "config.json").read_text())
    assert stored["config"]["env_options"] == ["dt=0.1"]
    loaded = rollax.load_run(out)
    assert (loaded.env.dt, loaded.env.horizon) == (0.1, 8)
    code, _, err = run(capsys, "eval", out, "--episodes", "2")
    assert code == 0, err


@pytest.mark.parametrize("options, message", [
    (["dt"], "env_options must be KEY=VALUE items"),
    (["mass=2"], "unexpected keyword argument 'mass'"),
])
def test_bad_options_are_one_line_before_anything_is_written(capsys, tmp_path, options,
                                                             message):
    out = tmp_path / "run"
    code, _, err = run(capsys, "train", "--env", "custom_envs.point_mass:make",
                       "--env-options", *options, *TINY, "--out", out)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    code, _, err = run(capsys, "train", "--env", "CartPole-v1", "--env-options", "gravity=3",
                       "--out", out)
    assert code == 2 and "does not take the option(s) ['gravity']" in err
    assert not out.exists()


def test_a_checkpoint_from_before_the_setting_existed_still_matches(tmp_path):
    """A checkpoint records its config's fingerprint; one written before ``env_options`` was a
    setting (its config without the key) matches a config that has it at ``()``, the value it
    was trained with, and no other."""
    import jax.numpy as jnp

    from rollax.run import checkpoint

    state = {"w": jnp.arange(3.0)}
    new = {"kind": "ppo", "config": {"env": "CartPole-v1", "env_options": []}, "seed": 0,
           "older": {"env_options": []}}
    old = {"kind": "ppo", "config": {"env": "CartPole-v1"}, "seed": 0}
    path = checkpoint.save(tmp_path / "old", 1, state, old)
    updates, loaded = checkpoint.load(path, state, new)
    assert updates == 1 and np.array_equal(loaded["w"], [0.0, 1.0, 2.0])
    other = {**new, "config": {"env": "CartPole-v1", "env_options": ["x=1"]}, "older": {}}
    with pytest.raises(checkpoint.CheckpointError, match="written for another config"):
        checkpoint.load(path, state, other)
    # a checkpoint written today matches today's config, with or without "older"
    path = checkpoint.save(tmp_path / "new", 2, state, new)
    assert checkpoint.load(path, state, {k: v for k, v in new.items() if k != "older"})[0] == 2

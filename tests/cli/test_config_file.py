"""Config files in one round trip: every unknown or invalid key of a file in one message, keys
given twice and empty files refused, Stable-Baselines3's habits answered in rollax's names
(``lin_`` schedules, ``batch_size`` for PPO, ``hidden: "64,64"``), and an rl-baselines3-zoo
file answered with its settings as rollax's PPO takes them (the mapping checked against hand
translations of the zoo's entries and Stable-Baselines3's PPO)."""

from __future__ import annotations

import re

import pytest

from rollax.algos import registry
from rollax.algos.ppo_zoo import JOINT_CLIPPING, from_zoo
from rollax.cli import main
from rollax.cli.parse import parse_train

SB3_FLAT = """\
env: CartPole-v1
n_envs: 8
n_timesteps: 1e5
policy: MlpPolicy
n_steps: 32
batch_size: 256
gae_lambda: 0.8
gamma: 0.98
n_epochs: 20
ent_coef: 0.0
learning_rate: lin_0.001
clip_range: lin_0.2
hidden: "64,64"
"""
"""rl-baselines3-zoo's CartPole-v1 PPO entry written flat, with SB3's names (the issue's file)."""

ZOO_CARTPOLE = """\
CartPole-v1:
  n_envs: 8
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 32
  batch_size: 256
  gae_lambda: 0.8
  gamma: 0.98
  n_epochs: 20
  ent_coef: 0.0
  learning_rate: lin_0.001
  clip_range: lin_0.2
"""
"""rl-baselines3-zoo's hyperparams/ppo.yml entry for CartPole-v1."""

ZOO_PENDULUM = """\
Pendulum-v1:
  n_envs: 4
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 1024
  gae_lambda: 0.95
  gamma: 0.9
  n_epochs: 10
  ent_coef: 0.0
  learning_rate: !!float 1e-3
  clip_range: 0.2
  use_sde: True
  sde_sample_freq: 4
"""
"""rl-baselines3-zoo's hyperparams/ppo.yml entry for Pendulum-v1 (gSDE)."""


def refused(capsys, tmp_path, *argv) -> str:
    """The one stderr line of a refused ``rollax train`` (exit 2, nothing on stdout, nothing
    written: --out is not created)."""
    code = main(["train", *argv, "--out", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert not (tmp_path / "run").exists()
    return err.removeprefix("rollax train: error: ").rstrip("\n")


def write(tmp_path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


# --- every problem of a file in one message ----------------------------------------------------

def test_every_problem_of_a_flat_sb3_file_in_one_message(capsys, tmp_path):
    path = write(tmp_path, "sb3.yaml", SB3_FLAT)
    assert refused(capsys, tmp_path, "--config", path) == (
        f"config {path!r} has 9 problems: "
        "(1) unknown key 'n_envs'; did you mean num_envs? "
        "(2) unknown key 'n_timesteps'; did you mean total_steps? "
        "(3) unknown key 'policy'; did you mean network? Its value: network must be one of "
        "auto, mlp, cnn, nature, spatial, gru, lstm, got 'MlpPolicy' "
        "(4) unknown key 'n_steps'; did you mean num_steps? "
        "(5) unknown key 'n_epochs'; did you mean epochs? "
        "(6) unknown key 'learning_rate'; did you mean lr? Its value: lr must be a number, got "
        "'lin_0.001' (a linear schedule of Stable-Baselines3: lr = 0.001 with anneal_lr = true) "
        "(7) unknown key 'clip_range'; did you mean clip_eps? Its value: clip_eps must be a "
        "number, got 'lin_0.2' (a linear schedule of Stable-Baselines3, which rollax has not "
        "for clip_eps: clip_eps = 0.2 keeps it constant) "
        "(8) hidden must be a list of whole numbers, written [64, 64], got '64,64' "
        "(9) batch_size only applies to tabular tasks or --algo reinforce/grpo; CartPole-v1 is "
        "neural and trains with --algo ppo (`rollax train --env CartPole-v1 --help` lists its "
        "settings); here minibatches M sets the minibatch size to num_envs x num_steps / M "
        "(Stable-Baselines3's batch_size B is minibatches = num_envs x num_steps / B)")


def test_the_file_fixed_as_the_message_says_is_read(tmp_path):
    path = write(tmp_path, "fixed.yaml", (
        "env: CartPole-v1\nnum_envs: 8\ntotal_steps: 1e5\nnetwork: mlp\nnum_steps: 32\n"
        "minibatches: 1\ngae_lambda: 0.8\ngamma: 0.98\nepochs: 20\nent_coef: 0.0\n"
        "lr: 0.001\nanneal_lr: true\nclip_eps: 0.2\nhidden: [64, 64]\n"))
    config = parse_train(["train", "--config", path]).config
    assert (config.num_envs, config.total_steps, config.num_steps, config.minibatches,
            config.epochs, config.lr, config.anneal_lr, config.clip_eps, config.hidden) == (
        8, 100_000, 32, 1, 20, 0.001, True, 0.2, (64, 64))


@pytest.mark.parametrize("text, problem", [
    ("lr: lin_0.001", "lr must be a number, got 'lin_0.001' (a linear schedule of "
                      "Stable-Baselines3: lr = 0.001 with anneal_lr = true)"),
    ("hidden: '64, 64'", "hidden must be a list of whole numbers, written [64, 64], "
                         "got '64, 64'"),
    ("hidden: 32 16 8", "hidden must be a list of whole numbers, written [32, 16, 8], "
                        "got '32 16 8'"),
    ("hidden: '[64, 64]'", "hidden must be a list of whole numbers, written [64, 64], "
                           "got '[64, 64]'"),
    ("hidden: abc", "hidden must be a whole number, got 'abc'"),
    ("batch_size: 64", "batch_size only applies to tabular tasks or --algo reinforce/grpo; "
                       "CartPole-v1 is neural and trains with --algo ppo (`rollax train --env "
                       "CartPole-v1 --help` lists its settings); here minibatches M sets the "
                       "minibatch size to num_envs x num_steps / M (Stable-Baselines3's "
                       "batch_size B is minibatches = num_envs x num_steps / B)"),
])
def test_one_problem_is_one_message(capsys, tmp_path, text, problem):
    path = write(tmp_path, "one.yaml", "env: CartPole-v1\n" + text + "\n")
    assert refused(capsys, tmp_path, "--config", path) == f"config {path!r}: {problem}"


@pytest.mark.parametrize("flags, problem", [
    (["--hidden", "64,64"], "written --hidden 64 64, got '64,64'"),
    (["--hidden=32,16,8"], "written --hidden 32 16 8, got '32,16,8'"),
    (["--hidden", "64,", "64"], "written --hidden 64 64, got '64, 64'"),
    (["--hidden", "[64, 64]"], "written --hidden 64 64, got '[64, 64]'"),
    (["--hidden", "64", "x"], "written --hidden 64 64, got '64 x'"),
    (["--algo", "a2c", "--hidden", "16,16"], "written --hidden 16 16, got '16,16'"),
])
def test_the_hidden_flag_gets_the_config_files_hint(capsys, tmp_path, flags, problem):
    """``--hidden 64,64`` is answered as ``hidden: "64,64"`` in a file is, in the flag's
    spelling (tyro's own words were "Could not find valid parse for arguments")."""
    assert refused(capsys, tmp_path, "--env", "CartPole-v1", *flags) == (
        "hidden must be a list of whole numbers, " + problem)


def test_hidden_as_one_number_is_still_one_layer(tmp_path):
    path = write(tmp_path, "one.yaml", "env: CartPole-v1\nhidden: 16\n")
    assert parse_train(["train", "--config", path]).config.hidden == (16,)


def test_a_linear_rate_without_annealing_says_it_stays_constant(capsys, tmp_path):
    path = write(tmp_path, "r.yaml", "env: CartPole-v1\nalgo: reinforce\nlr: lin_0.01\n")
    assert refused(capsys, tmp_path, "--config", path) == (
        f"config {path!r}: lr must be a number, got 'lin_0.01' (a linear schedule of "
        "Stable-Baselines3, which rollax has not for lr: lr = 0.01 keeps it constant)")


def test_batch_size_flag_for_ppo_points_to_minibatches(capsys, tmp_path):
    assert refused(capsys, tmp_path, "--env", "CartPole-v1", "--batch-size", "64") == (
        "--batch-size only applies to tabular tasks or --algo reinforce/grpo; CartPole-v1 is "
        "neural and trains with --algo ppo (`rollax train --env CartPole-v1 --help` lists its "
        "settings); here --minibatches M sets the minibatch size to num_envs x num_steps / M "
        "(Stable-Baselines3's batch_size B is --minibatches num_envs x num_steps / B)")
    # where batch_size is a setting of the algorithm, it is taken
    request = parse_train(["train", "--env", "CartPole-v1", "--algo", "reinforce",
                           "--batch-size", "64"])
    assert request.config.batch_size == 64


# --- duplicates and empty files ----------------------------------------------------------------

@pytest.mark.parametrize("name, text, problem", [
    ("d.toml", "batch-size = 32\nbatch_size = 64\n",
     "'batch-size' and 'batch_size' both set batch_size; keep one"),
    ("d.yaml", "lr: 0.1\nupdates: 2\nlr: 0.2\n", "key 'lr' is given twice (lines 1 and 3); "
                                                 "keep one"),
    ("d.yaml", "lr: 0.1\nlr: 0.2\nlr: 0.3\nbatch-size: 3\nbatch_size: 4\n",
     "key 'lr' is given 3 times (lines 1, 2 and 3), 'batch-size' and 'batch_size' both set "
     "batch_size; keep one of each"),
    ("d.yaml", "CartPole-v1:\n  n_envs: 8\n  n_envs: 4\n",
     "key 'n_envs' is given twice (lines 2 and 3); keep one"),
])
def test_a_key_given_twice_is_refused(capsys, tmp_path, name, text, problem):
    path = write(tmp_path, name, text)
    assert refused(capsys, tmp_path, "--config", path) == f"config {path!r}: {problem}"


def test_a_toml_key_given_twice_is_invalid_toml(capsys, tmp_path):
    path = write(tmp_path, "d.toml", "lr = 0.1\nlr = 0.2\n")
    assert refused(capsys, tmp_path, "--config", path).startswith(
        f"config {path!r} is not valid TOML: Cannot overwrite a value")


def test_a_yaml_merge_key_may_be_overridden(tmp_path):
    path = write(tmp_path, "m.yaml", "<<: {lr: 0.1, updates: 3}\nlr: 0.2\n")
    config = parse_train(["train", "--config", path]).config
    assert (config.lr, config.updates) == (0.2, 3)


@pytest.mark.parametrize("name, text", [
    ("e.toml", ""), ("e.yaml", ""), ("e.yml", "# settings to come\n"), ("e.yaml", "{}\n"),
    ("e.toml", "# nothing yet\n"),
])
def test_an_empty_file_is_refused(capsys, tmp_path, name, text):
    path = write(tmp_path, name, text)
    assert refused(capsys, tmp_path, "--config", path) == f"config {path!r} holds no settings"


# --- rl-baselines3-zoo files -------------------------------------------------------------------

CARTPOLE = dict(
    total_steps=100_000, num_envs=8, num_steps=32, minibatches=1, epochs=20, lr=0.001,
    anneal_lr=True, gamma=0.98, gae_lambda=0.8, clip_eps=0.2, clip_value=False, ent_coef=0.0,
    vf_coef=1.0, max_grad_norm=0.5, normalize_advantages=True, normalize_observations=False,
    reward_scale=1.0, normalize_rewards=False, network="mlp", hidden=(64, 64),
    activation="tanh", init_log_std=0.0)
"""CartPole-v1's zoo entry by hand: minibatches = 8 x 32 / 256; lin_0.001 is 0.001 annealed
to 0; SB3 clips no value (clip_range_vf None); vf_coef 2 x SB3's 0.5 (rollax's value loss is
half the squared error SB3 weighs); SB3 defaults for the rest (max_grad_norm 0.5, advantages
normalised, MlpPolicy 64-64 tanh, log std 0)."""


def test_the_cartpole_entry_by_hand():
    import yaml

    settings, lacks = from_zoo(yaml.safe_load(ZOO_CARTPOLE)["CartPole-v1"])
    assert settings == CARTPOLE and list(settings) == list(CARTPOLE)
    assert lacks == ["clip_range lin_0.2 (rollax's clip_eps is constant)", JOINT_CLIPPING]


def test_an_empty_entry_is_stable_baselines3s_defaults():
    settings, lacks = from_zoo({})
    assert settings == dict(
        num_envs=1, num_steps=2048, minibatches=32, epochs=10, lr=3e-4, anneal_lr=False,
        gamma=0.99, gae_lambda=0.95, clip_eps=0.2, clip_value=False, ent_coef=0.0,
        vf_coef=1.0, max_grad_norm=0.5, normalize_advantages=True,
        normalize_observations=False, reward_scale=1.0, normalize_rewards=False,
        network="mlp", hidden=(64, 64), activation="tanh", init_log_std=0.0)
    assert lacks == [JOINT_CLIPPING]


def test_normalize_and_policy_kwargs_by_hand():
    settings, lacks = from_zoo({
        "normalize": True, "n_envs": 1, "policy": "MlpPolicy", "n_timesteps": 1e6,
        "batch_size": 64, "n_steps": 512, "gamma": 0.98, "learning_rate": 2.0633e-05,
        "ent_coef": 0.000401762, "clip_range": 0.1, "n_epochs": 20, "gae_lambda": 0.92,
        "max_grad_norm": 0.8, "vf_coef": 0.58096,
        "policy_kwargs": "dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU, "
                         "net_arch=dict(pi=[256, 256], vf=[256, 256]))"})
    assert settings == dict(
        total_steps=1_000_000, num_envs=1, num_steps=512, minibatches=8, epochs=20,
        lr=2.0633e-05, anneal_lr=False, gamma=0.98, gae_lambda=0.92, clip_eps=0.1,
        clip_value=False, ent_coef=0.000401762, vf_coef=1.16192, max_grad_norm=0.8,
        normalize_advantages=True, normalize_observations=True, reward_scale=1.0,
        normalize_rewards=True, network="mlp", hidden=(256, 256), activation="relu",
        init_log_std=-2.0)
    assert lacks == [JOINT_CLIPPING, "ortho_init=False (rollax's layers are always orthogonal)"]


@pytest.mark.parametrize("entry, setting, lack", [
    ({"normalize": "{'norm_obs': True, 'norm_reward': False}"},
     ("normalize_observations", True), None),
    ({"normalize": {"norm_obs": False, "norm_reward": True}}, ("normalize_observations", False),
     None),
    ({"normalize": {"norm_obs": False, "norm_reward": True}}, ("normalize_rewards", True), None),
    ({"normalize": "{'norm_obs': True, 'norm_reward': False}"}, ("normalize_rewards", False),
     None),
    ({"policy_kwargs": {"net_arch": [32, 16]}}, ("hidden", (32, 16)), None),
    ({"policy_kwargs": "dict(net_arch=[dict(pi=[8], vf=[8])])"}, ("hidden", (8,)), None),
    ({"policy_kwargs": "dict(net_arch=dict(pi=[64], vf=[128]))"}, ("activation", "tanh"),
     "net_arch {'pi': [64], 'vf': [128]} (rollax's actor and critic have the same hidden "
     "sizes)"),
    ({"policy_kwargs": "dict(activation_fn=th.nn.Tanh, ortho_init=True)"},
     ("activation", "tanh"), None),
    ({"policy_kwargs": "dict(activation_fn=nn.ELU)"}, ("activation", "tanh"),
     "policy_kwargs activation_fn=nn.ELU"),
    ({"clip_range_vf": 0.2}, ("clip_eps", 0.2),
     "clip_range_vf 0.2 (Stable-Baselines3 clips the value prediction; rollax's clip_value "
     "takes the larger of the clipped and unclipped losses, at clip_eps)"),
    ({"n_envs": 3, "n_steps": 10, "batch_size": 7}, ("num_envs", 3),
     "batch_size 7 (rollax's minibatches split n_envs x n_steps = 30 steps evenly)"),
    ({"policy": "CnnPolicy"}, ("epochs", 10),
     "policy CnnPolicy (rollax's networks are its own: the network setting)"),
    ({"learning_rate": "3e-4", "normalize_advantage": False},
     ("normalize_advantages", False), None),
    ({"use_sde": True, "target_kl": 0.01}, ("lr", 3e-4), "target_kl 0.01"),
])
def test_what_maps_and_what_rollax_lacks(entry, setting, lack):
    settings, lacks = from_zoo(entry)
    name, value = setting
    assert settings[name] == value
    if lack is None:
        assert lacks == [JOINT_CLIPPING]
    else:
        assert lack in lacks
    if "net_arch" in str(lack):
        assert "hidden" not in settings  # not mapped: the zoo's actor and critic differ
    if "batch_size" in str(lack):
        assert "minibatches" not in settings


@pytest.mark.parametrize("entry, message", [
    ({"n_envs": "x"}, "n_envs must be a whole number, got 'x'"),
    ({"n_steps": 2.5}, "n_steps must be a whole number, got 2.5"),
    ({"learning_rate": "cos_0.1"}, "learning_rate must be a number or lin_<number>, got "
                                   "'cos_0.1'"),
    ({"normalize": "yes"}, "normalize must be true, false or a dict of norm_obs and "
                           "norm_reward, got 'yes'"),
    ({"policy_kwargs": "dict(net_arch=__import__('os').system('echo hi'))"},
     "policy_kwargs is not a dict: \"dict(net_arch=__import__('os').system('echo hi'))\""),
])
def test_bad_zoo_values_name_the_key(entry, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        from_zoo(entry)


def test_a_zoo_file_is_answered_with_rollax_settings(capsys, tmp_path):
    path = write(tmp_path, "ppo.yml", ZOO_CARTPOLE)
    assert refused(capsys, tmp_path, "--config", path) == (
        f"config {path!r} holds rl-baselines3-zoo settings (a table per environment), and "
        "rollax reads one flat table of its own; the CartPole-v1 entry, as rollax's ppo takes "
        "Stable-Baselines3's settings, is (settings not named are the same already): "
        'env = "CartPole-v1", total_steps = 100000, num_envs = 8, num_steps = 32, '
        "minibatches = 1, epochs = 20, lr = 0.001, gamma = 0.98, gae_lambda = 0.8, "
        'clip_value = false, ent_coef = 0.0, vf_coef = 1.0, network = "mlp"; rollax has no '
        "equivalent of: clip_range lin_0.2 (rollax's clip_eps is constant); max_grad_norm "
        "(Stable-Baselines3 clips all gradients together, rollax the actor's and the critic's "
        "apart)")


def test_a_zoo_file_with_several_entries(capsys, tmp_path):
    path = write(tmp_path, "ppo.yml", ZOO_CARTPOLE + ZOO_PENDULUM)
    assert refused(capsys, tmp_path, "--config", path) == (
        f"config {path!r} holds rl-baselines3-zoo settings for 2 environments (CartPole-v1, "
        "Pendulum-v1), and rollax reads one flat table of its own settings: give --env with "
        "one of them to see its settings in rollax's names")
    assert refused(capsys, tmp_path, "--config", path, "--env", "Acrobot-v1") == (
        f"config {path!r} holds rl-baselines3-zoo settings, but none for Acrobot-v1 (it has "
        "CartPole-v1, Pendulum-v1)")
    # Pendulum-v1's preset differs from the zoo's run in other settings than CartPole-v1's
    assert refused(capsys, tmp_path, "--config", path, "--env", "Pendulum-v1").endswith(
        ': env = "Pendulum-v1", total_steps = 100000, num_envs = 4, num_steps = 1024, '
        "minibatches = 64, anneal_lr = false, gamma = 0.9, clip_value = false, "
        "vf_coef = 1.0, normalize_observations = false, reward_scale = 1.0, "
        'network = "mlp"; rollax has no equivalent of: max_grad_norm (Stable-Baselines3 '
        "clips all gradients together, rollax the actor's and the critic's apart); "
        "use_sde True; sde_sample_freq 4")


def test_a_table_of_tables_without_zoo_keys_is_no_zoo_file(capsys, tmp_path):
    path = write(tmp_path, "t.toml", "[updatez]\nx = 1\n")
    assert refused(capsys, tmp_path, "--config", path) == (
        f"config {path!r}: unknown key 'updatez'; did you mean updates? Its value: updates must "
        "be a single value, not a table, got {'x': 1}")


def test_a_zoo_file_for_an_algorithm_without_a_translation(capsys, tmp_path):
    path = write(tmp_path, "a2c.yml", "CartPole-v1:\n  n_envs: 8\n")
    offered = "/".join(m for s in registry.algorithms() if s.from_zoo for m in s.methods)
    assert refused(capsys, tmp_path, "--config", path, "--algo", "a2c") == (
        f"config {path!r} holds rl-baselines3-zoo settings for CartPole-v1: rollax reads one "
        f"flat table of its own settings, and translates zoo settings for --algo {offered} "
        "only, not a2c")
    path = write(tmp_path, "bad.yml", "CartPole-v1:\n  n_envs: eight\n")
    assert refused(capsys, tmp_path, "--config", path) == (
        f"config {path!r} holds rl-baselines3-zoo settings for CartPole-v1: n_envs must be a "
        "whole number, got 'eight'")


@pytest.mark.parametrize("zoo, env", [(ZOO_CARTPOLE, "CartPole-v1"),
                                      (ZOO_PENDULUM, "Pendulum-v1")])
def test_the_settings_printed_are_the_zoo_run(capsys, tmp_path, zoo, env):
    """The flat table the message prints, written to a TOML file, trains with every setting
    the zoo's entry fixes (those it does not print are rollax's values already)."""
    import yaml

    message = refused(capsys, tmp_path, "--config", write(tmp_path, "z.yml", zoo))
    printed = message.split("(settings not named are the same already): ")[1]
    printed = printed.split("; rollax has no equivalent of")[0]
    toml = write(tmp_path, "flat.toml", "\n".join(re.split(r", (?=\w+ = )", printed)) + "\n")
    config = parse_train(["train", "--config", toml]).config
    settings, _ = from_zoo(yaml.safe_load(zoo)[env])
    assert config.env == env
    assert {k: getattr(config, k) for k in settings} == settings

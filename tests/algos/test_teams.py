"""PPO and A2C on a team of agents (``rollax.envs.agents``; ``tests/custom_envs/team.py``): both
critics learn the toy team, whose agents must each read their own id; the command line trains
it with ``--seeds`` and resumes it bit for bit; the settings a team does not take are refused
in one line, exit 2."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from helpers import run, train_json
from rollax.algos import a2c, ppo
from rollax.algos.base import make_train

TEAM = "custom_envs.team:make"


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "critic"), [("ppo", "own"), ("ppo", "centralised"),
                                              ("a2c", "own")])
def test_a_team_learns_what_each_agent_must_do(algo, critic):
    """Random legal play earns 4 of the 8 a perfect team earns in 4 steps (each agent right
    once in its two legal actions); the shared network must read each agent's id to do
    better than 4 + 2 (one agent right always, the other at random)."""
    module = ppo if algo == "ppo" else a2c
    config = module.SPEC.config_type(env=TEAM, total_steps=64 * 4 * 60, num_envs=64,
                                     num_steps=4, critic=critic, eval_episodes=64, lr=3e-3)
    out = make_train(module.make_algorithm(config))(jax.random.key(0))
    assert float(out.eval_return) > 7.0, float(out.eval_return)
    metrics = out.metrics
    np.testing.assert_allclose(metrics.agent_return, metrics.episode_return / 2, rtol=1e-5)
    assert bool(np.all(metrics.agent_return_min <= metrics.agent_return_max))


def test_continuous_agents_train():
    config = ppo.PPOConfig(env="custom_envs.team:continuous", total_steps=2 * 32, num_envs=8,
                           num_steps=4, critic="centralised", eval_episodes=4)
    out = make_train(ppo.make_algorithm(config))(jax.random.key(0))
    assert np.isfinite(out.metrics.policy_loss).all()


@pytest.mark.slow
def test_the_cli_trains_seeds_and_resumes_bit_for_bit(capsys, tmp_path):
    argv = ["--env", TEAM, "--num-envs", "8", "--num-steps", "4", "--no-anneal-lr",
            "--seeds", "2", "--eval-episodes", "4", "--critic", "centralised"]
    cut = train_json(capsys, *argv, "--total-steps", "64", "--out", tmp_path / "cut")
    assert cut["seeds"] == [0, 1]
    longer = train_json(capsys, "--resume", tmp_path / "cut", "--total-steps", "128")
    whole = train_json(capsys, *argv, "--total-steps", "128", "--out", tmp_path / "whole")
    assert longer["params_sha256"] == whole["params_sha256"] != cut["params_sha256"]
    rows = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").open()]
    assert {"agent_return", "agent_return_min", "agent_return_max"} <= set(rows[-1])
    config = json.loads((tmp_path / "whole" / "config.json").read_text())["config"]
    assert config["critic"] == "centralised" and config["network"] == "mlp"


def test_a_team_shows_its_agents_returns_in_the_table(capsys, tmp_path):
    code, out, err = run(capsys, "train", "--env", TEAM, "--num-envs", "8", "--num-steps", "4",
                         "--total-steps", "64", "--eval-episodes", "4", "--out", tmp_path / "r")
    assert code == 0, err
    assert "agent return min" in out and "agent return max" in out
    code, out, err = run(capsys, "train", "--env", "CartPole-v1", "--total-steps", "64",
                         "--num-envs", "4", "--num-steps", "16", "--eval-episodes", "2",
                         "--out", tmp_path / "c")
    assert code == 0, err
    assert "agent return" not in out


@pytest.mark.parametrize(("argv", "words"), [
    (["--env", "CartPole-v1", "--critic", "centralised"],
     "critic centralised reads the whole team's observations, but env 'CartPole-v1' is not a "
     "team of agents with rewards of their own; use critic own"),
    (["--env", TEAM, "--normalize-rewards"],
     f"normalize_rewards is refused for {TEAM}, a team of agents: its running discounted "
     f"returns are one scalar reward's, not each agent's"),
    (["--env", TEAM, "--network", "gru"],
     f"network gru is refused for env '{TEAM}', a team of 2 agents: one MLP with shared "
     f"parameters acts for every agent; use network mlp or auto"),
    (["--env", TEAM, "--algo", "reinforce"],
     f"env '{TEAM}' is a team of agents with rewards of their own, which only PPO and A2C "
     f"train (each agent's advantages from its own rewards)"),
    (["--env", TEAM, "--critic", "global"], "--critic"),
])
def test_refusals_are_one_line_and_exit_2(argv, words, capsys, tmp_path):
    code, out, err = run(capsys, "train", *argv, "--out", tmp_path / "r")
    assert (code, out) == (2, "")
    assert words in err and len(err.strip().splitlines()) == 1, err

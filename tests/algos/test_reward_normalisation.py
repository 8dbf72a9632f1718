"""Reward normalisation of PPO and A2C (``normalize_rewards``): the running discounted returns
and their statistics against a plain NumPy loop, the rewards GAE reads, a run from the command
line resumed bit for bit, and the setting off or refused."""

import dataclasses
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import checkpoint_digests, run, run_metrics, train_json
from rollax.algos import a2c, ppo
from rollax.algos.experience import ExperienceParts
from rollax.policies import RunningStats
from rollax.returns import reward_norm_init, reward_norm_update, running_returns
from rollax.run.training import load_latest

GAMMA = 0.9

# one stream of T = 6 steps of B = 3 environments:
# env 0 terminates at t = 1 and goes on (auto-reset); env 1 is truncated at t = 3;
# env 2 terminates at t = 2 and is dead (absorbing padding: inactive, reward 0) from t = 3
REWARDS = np.array([[1.0, 0.5, -2.0],
                    [2.0, 1.5, 1.0],
                    [-1.0, 0.25, 3.0],
                    [0.5, 2.0, 0.0],
                    [3.0, -1.0, 0.0],
                    [1.0, 0.75, 0.0]], np.float32)
ACTIVE = np.ones((6, 3), bool)
ACTIVE[3:, 2] = False
TERMINATED = np.zeros((6, 3), bool)
TERMINATED[1, 0] = TERMINATED[2, 2] = True
TRUNCATED = np.zeros((6, 3), bool)
TRUNCATED[3, 1] = True
PREVIOUS = np.array([0.5, -1.0, 2.0], np.float32)
"""Each environment's running return before the stream (carried from an earlier rollout)."""


def reference_returns(previous, rewards, active, terminated, truncated, gamma):
    """Plain loop: ``R = gamma R + r`` on live cells, 0 after any episode end; returns the
    running return of every cell, the carried ones and the live values in cell order."""
    ret = np.array(previous, np.float64)
    out = np.zeros(rewards.shape)
    live = []
    for t in range(rewards.shape[0]):
        for b in range(rewards.shape[1]):
            if active[t, b]:
                ret[b] = gamma * ret[b] + rewards[t, b]
                live.append(ret[b])
            out[t, b] = ret[b]
            if terminated[t, b] or truncated[t, b]:
                ret[b] = 0.0
    return out, ret, live


def pooled(count, mean, var, values):
    """The count, mean and (population) variance of a prior summary pooled with ``values``,
    written from sums (not the incremental merge under test)."""
    values = np.asarray(values, np.float64)
    total = count + len(values)
    new_mean = (count * mean + values.sum()) / total
    new_var = (count * (var + (mean - new_mean) ** 2)
               + ((values - new_mean) ** 2).sum()) / total
    return total, new_mean, new_var


def _jax_returns(previous, rewards, active, terminated, truncated):
    return running_returns(jnp.asarray(previous), jnp.asarray(rewards), jnp.asarray(active),
                           jnp.asarray(terminated), jnp.asarray(truncated), GAMMA)


# --- (a) the running returns and their statistics -----------------------------------------------

def test_running_returns_match_a_plain_loop():
    returns, carried = _jax_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED, TRUNCATED)
    want, want_carried, _ = reference_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED,
                                              TRUNCATED, GAMMA)
    np.testing.assert_allclose(np.asarray(returns)[ACTIVE], want[ACTIVE], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(carried), want_carried, rtol=1e-6)
    # by hand: env 0 goes on from 0.5, ends at t = 1 and restarts from 0 at t = 2
    assert np.asarray(returns)[:3, 0] == pytest.approx([1.45, 3.305, -1.0])
    # env 1 truncated at t = 3 restarts from 0 too; env 2 ended at t = 2 carries 0, dead
    assert float(returns[4, 1]) == pytest.approx(-1.0)
    assert float(carried[2]) == 0.0 and float(returns[5, 2]) == 0.0


def test_the_docstring_example():
    returns, carried = running_returns(jnp.zeros(1), jnp.ones((3, 1)), jnp.ones((3, 1), bool),
                                       jnp.array([[False], [True], [False]]),
                                       jnp.zeros((3, 1), bool), 0.5)
    assert np.asarray(returns)[:, 0].tolist() == [1.0, 1.5, 1.0] and float(carried[0]) == 1.0


def test_a_rollout_split_in_two_goes_on_where_the_first_half_stopped():
    first, carried = _jax_returns(PREVIOUS, REWARDS[:3], ACTIVE[:3], TERMINATED[:3],
                                  TRUNCATED[:3])
    second, _ = _jax_returns(carried, REWARDS[3:], ACTIVE[3:], TERMINATED[3:], TRUNCATED[3:])
    whole, _ = _jax_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED, TRUNCATED)
    np.testing.assert_array_equal(np.concatenate([first, second]), np.asarray(whole))


def test_statistics_are_those_of_the_live_returns_with_the_pseudo_count():
    returns, _ = _jax_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED, TRUNCATED)
    stats = reward_norm_update(reward_norm_init(), returns, jnp.asarray(ACTIVE))
    _, _, live = reference_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED, TRUNCATED, GAMMA)
    assert len(live) == 15  # the three dead cells of env 2 do not count
    count, mean, var = pooled(1e-4, 0.0, 1.0, live)
    assert float(stats.count) == pytest.approx(count, rel=1e-6)
    assert float(stats.mean) == pytest.approx(mean, rel=1e-5)
    assert float(stats.var) == pytest.approx(var, rel=1e-5)


def test_two_rollouts_merged_equal_the_statistics_of_their_concatenated_live_values():
    empty = RunningStats(jnp.float32(0.0), jnp.float32(0.0), jnp.float32(0.0))
    first, carried = _jax_returns(PREVIOUS, REWARDS[:3], ACTIVE[:3], TERMINATED[:3],
                                  TRUNCATED[:3])
    second, _ = _jax_returns(carried, REWARDS[3:], ACTIVE[3:], TERMINATED[3:], TRUNCATED[3:])
    stats = reward_norm_update(empty, first, jnp.asarray(ACTIVE[:3]))
    stats = reward_norm_update(stats, second, jnp.asarray(ACTIVE[3:]))
    _, _, live = reference_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED, TRUNCATED, GAMMA)
    assert float(stats.count) == 15
    assert float(stats.mean) == pytest.approx(np.mean(live), rel=1e-5)
    assert float(stats.var) == pytest.approx(np.var(live), rel=1e-5)


def test_a_rollout_without_live_cells_changes_no_statistic():
    stats = RunningStats(jnp.float32(7.0), jnp.float32(1.5), jnp.float32(2.25))
    after = reward_norm_update(stats, jnp.full((2, 3), 99.0), jnp.zeros((2, 3), bool))
    assert [float(x) for x in after] == [7.0, 1.5, 2.25]


# --- (b) the rewards GAE reads --------------------------------------------------------------------

def _parts(normalize: bool, clip: float = 10.0) -> ExperienceParts:
    # the rewards read no environment or network
    return ExperienceParts(None, None, 3, 6, normalize_rewards=normalize,  # type: ignore[arg-type]
                        reward_clip=clip)


def _stream():
    traj = types.SimpleNamespace(reward=jnp.asarray(REWARDS), active=jnp.asarray(ACTIVE),
                                 terminated=jnp.asarray(TERMINATED),
                                 truncated=jnp.asarray(TRUNCATED))
    prior = RunningStats(jnp.float32(4.0), jnp.float32(0.5), jnp.float32(0.2))
    state = types.SimpleNamespace(discounted_return=jnp.asarray(PREVIOUS), reward_stats=prior)
    hp = types.SimpleNamespace(gamma=GAMMA, reward_scale=2.0)
    return state, traj, hp


def test_scaled_rewards_use_the_statistics_updated_with_this_rollout():
    state, traj, hp = _stream()
    clip = 1.2
    rewards, stats, carried = _parts(True, clip).rewards(state, traj, hp)
    _, want_carried, live = reference_returns(PREVIOUS, REWARDS, ACTIVE, TERMINATED, TRUNCATED,
                                              GAMMA)
    count, mean, var = pooled(4.0, 0.5, 0.2, live)
    want = 2.0 * np.clip(REWARDS / np.sqrt(var + 1e-8), -clip, clip)  # not centred
    assert 0 < np.sum(np.abs(REWARDS / np.sqrt(var + 1e-8)) > clip) < REWARDS.size  # some clip
    np.testing.assert_allclose(np.asarray(rewards), want, rtol=1e-5)
    assert np.all(np.asarray(rewards)[~ACTIVE] == 0.0)  # dead cells stay 0
    assert stats is not None and carried is not None
    assert [float(x) for x in stats] == pytest.approx([count, mean, var], rel=1e-5)
    np.testing.assert_allclose(np.asarray(carried), want_carried, rtol=1e-6)


def test_without_the_setting_the_rewards_are_only_scaled():
    state, traj, hp = _stream()
    rewards, stats, carried = _parts(False).rewards(state, traj, hp)
    np.testing.assert_array_equal(np.asarray(rewards), 2.0 * REWARDS)
    assert stats is None and carried is None


# --- (c) a run from the command line, resumed -----------------------------------------------------

ARGV = ["--env", "CartPole-v1", "--algo", "ppo", "--horizon", "20", "--hidden", "8", "8",
        "--num-envs", "4", "--num-steps", "8", "--epochs", "1", "--minibatches", "2",
        "--no-anneal-lr", "--eval-episodes", "2", "--chunk-size", "1",
        "--checkpoint-every", "1", "--normalize-rewards"]


@pytest.mark.optimized
@pytest.mark.slow
def test_a_normalised_ppo_run_resumes_bit_identical(capsys, tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    summary = train_json(capsys, *ARGV, "--total-steps", "128", "--out", whole)
    assert np.all(np.isfinite(summary["final_episode_return"]))
    train_json(capsys, *ARGV, "--total-steps", "64", "--out", cut)
    train_json(capsys, "--resume", cut, "--total-steps", "128")
    # row 0 and 4 updates
    assert run_metrics(cut) == run_metrics(whole) and len(run_metrics(whole)) == 5
    last = "checkpoints/update-0000004/state.npz"
    assert checkpoint_digests(cut)[last] == checkpoint_digests(whole)[last]

    # the checkpoint holds the statistics of every live step's running return (all 128 live
    # in an auto-reset rollout) and each environment's running return; acting needs neither
    stored, _, _, updates, state = load_latest(whole)
    assert stored.config.normalize_rewards is True and updates == 4
    assert float(state.reward_stats.count[0]) == pytest.approx(128 + 1e-4)
    assert 0 < float(state.reward_stats.var[0]) and state.discounted_return.shape == (1, 4)
    # CartPole pays 1 a step: an episode L steps old has R = 1 + g + ... + g^(L-1), across the
    # updates it spans (8 steps each)
    length = np.asarray(state.episode_length[0], np.float64)
    np.testing.assert_allclose(np.asarray(state.discounted_return[0]),
                               (1 - 0.99 ** length) / (1 - 0.99), rtol=1e-5)
    assert length.max() > 8
    loaded = rollax.load_run(whole)
    assert loaded.act(np.zeros(4, np.float32)).shape == ()


# --- (d) off by default, and refused values ------------------------------------------------------

@pytest.mark.parametrize("module", [ppo, a2c], ids=["ppo", "a2c"])
def test_off_by_default_and_the_state_is_as_without_it(module):
    config = module.preset("CartPole-v1", total_steps=64, num_envs=4, num_steps=8,
                           hidden=(8,))
    assert (config.normalize_rewards, config.reward_clip) == (False, 10.0)
    algo = module.make_algorithm(config)
    state = jax.eval_shape(algo.init, jax.random.key(0), algo.hyperparams)
    assert state.reward_stats is None and state.discounted_return is None
    on = module.make_algorithm(dataclasses.replace(config, normalize_rewards=True))
    state_on = jax.eval_shape(on.init, jax.random.key(0), on.hyperparams)
    assert state_on.discounted_return.shape == (4,) and state_on.reward_stats.count.shape == ()
    extra = len(jax.tree.leaves(state_on)) - len(jax.tree.leaves(state))
    assert extra == 4  # count, mean, var and the running returns: nothing else changes


def test_the_flag_and_its_default(capsys):
    from rollax.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["train", "--env", "CartPole-v1", "--algo", "a2c", "--help"])
    assert exit_.value.code == 0
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", capsys.readouterr().out).split())
    assert re.search(r"--normalize-rewards, --no-normalize-rewards Divide rewards by the running "
                     r"standard deviation .*? \(default: False\)", text)
    assert re.search(r"--reward-clip FLOAT Bound of the normalised rewards .*? \(default: 10.0\)",
                     text)


@pytest.mark.parametrize("argv, message", [
    (["--reward-clip", "0"], "reward_clip must be a number in (0, inf), got 0.0"),
    (["--algo", "a2c", "--reward-clip", "inf"], "reward_clip must be a number in (0, inf), "
                                                "got inf"),
    (["--reward-clip", "-1", "--normalize-rewards"],
     "reward_clip must be a number in (0, inf), got -1.0"),
])
def test_a_bad_reward_clip_is_one_line_and_writes_nothing(argv, message, capsys, tmp_path,
                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "train", "--env", "CartPole-v1", *argv)
    assert (code, out, err) == (2, "", f"rollax train: error: {message}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module", [ppo, a2c], ids=["ppo", "a2c"])
def test_the_api_refuses_a_bad_reward_clip(module):
    with pytest.raises(ValueError, match=r"^reward_clip must be a number in \(0, inf\), got nan$"):
        module.make_algorithm(module.preset("CartPole-v1", reward_clip=float("nan")))


@pytest.mark.parametrize("flag, meant", [("--norm-reward", "--normalize-rewards"),
                                         ("--clip-reward", "--reward-clip")])
def test_stable_baselines3s_names_point_to_the_settings(flag, meant, capsys, tmp_path,
                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "train", "--env", "CartPole-v1", flag, "5")
    assert (code, err) == (2, f"rollax train: error: unrecognized flag {flag}; did you mean "
                              f"{meant}?\n")

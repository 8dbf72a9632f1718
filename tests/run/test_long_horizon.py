"""A continuing task (``horizon=10**9``): evaluation runs on a bounded stretch and keeps no
``(T, B)`` batch, and a run whose batches would not fit in memory is refused in one line
before anything is written."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.cli import main
from rollax.collect import collect, episode_returns
from rollax.envs.cartpole import CartPole
from rollax.evaluation import MAX_EVAL_STEPS, evaluation_steps
from rollax.nets.build import actor_critic
from rollax.run.config import batch_bytes, check_memory

LONG_ENV = '''
from rollax.envs.cartpole import CartPole


def make(horizon=10**9):
    return CartPole(horizon=horizon)
'''


@pytest.fixture
def long_env(tmp_path, monkeypatch):
    (tmp_path / "longenv").mkdir()
    (tmp_path / "longenv" / "__init__.py").write_text("")
    (tmp_path / "longenv" / "env.py").write_text(LONG_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "longenv.env:make"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1"])
def test_episode_returns_are_collects_reward_sums(name):
    env = rollax.make(name)
    if name == "FrozenLake-v1":  # a stochastic environment: transition keys too
        policy = rollax.default_policy(env)
        params = jax.random.normal(jax.random.key(0), policy.init().shape)
    else:
        policy = actor_critic(env, "mlp", (8,), "tanh", 0.0, 8)
        params = policy.init(jax.random.key(0))
    key, steps = jax.random.key(7), min(env.horizon, 60)
    _, traj = collect(env, policy, params, key, 16, steps)
    returns = episode_returns(env, policy, params, key, 16, steps)
    # summed step by step: equal to float32 rounding of the order of the sum
    np.testing.assert_allclose(returns, traj.reward.sum(axis=0), rtol=1e-6, atol=1e-5)
    assert returns.shape == (16,)


def test_evaluation_steps_default_is_bounded():
    assert evaluation_steps(rollax.make("CartPole-v1")) == 500
    assert evaluation_steps(CartPole(horizon=10**9)) == MAX_EVAL_STEPS == 100_000
    assert evaluation_steps(CartPole(horizon=10**9), 250) == 250
    with pytest.raises(ValueError, match="eval_steps must be"):
        evaluation_steps(CartPole(), 0)


def test_evaluate_policy_cuts_episodes_at_num_steps():
    env = rollax.make("CartPole-v1")
    net = actor_critic(env, "mlp", (8,), "tanh", 0.0, 8)
    params = net.init(jax.random.key(0))
    key = jax.random.key(3)
    greedy = rollax.GreedyPolicy(net)
    _, traj = collect(env, greedy, params, key, 8, 20)
    cut = rollax.evaluate_policy(env, net, params, key, 8, num_steps=20)
    assert cut == jnp.mean(traj.reward.sum(axis=0)) and cut <= 20


def test_batch_bytes_by_hand_and_refusal():
    config = rollax.PPOConfig(env="CartPole-v1", num_envs=4, num_steps=16, total_steps=64,
                              hidden=(8, 8))
    algo = rollax.ppo.make_algorithm(config)
    # 64 cells x (2 x 16 observation bytes + 64 + 16 x 16 hidden units) = 22,528
    assert batch_bytes(algo) == 64 * (2 * 16 + 64 + 16 * 16) == 22_528
    check_memory(algo, lanes=2, available=2 * 22_528)
    with pytest.raises(ValueError, match=r"^the run would need about 0\.0 GiB for its batches "
                       r"\(4 x 16 env-step cells per update, 3 lanes\), more memory than the "
                       r"machine has available: lower num_envs or num_steps$"):
        check_memory(algo, lanes=3, available=2 * 22_528)
    check_memory(algo, lanes=3, devices=2, available=2 * 22_528)  # 2 lanes per device


def test_whole_episodes_of_a_continuing_task_are_refused_before_writing(long_env, tmp_path,
                                                                        capsys):
    out_dir = tmp_path / "run"
    assert main(["train", "--env", long_env, "--algo", "reinforce", "--out", str(out_dir)]) == 2
    _, err = capsys.readouterr()
    assert len(err.splitlines()) == 1
    assert err.startswith("rollax train: error: the run would need about ")
    assert "(32 x 1,000,000,000 env-step cells per update, 1 lane)" in err
    assert err.endswith("lower batch_size or horizon\n")
    assert not out_dir.exists()


@pytest.mark.slow
def test_a_continuing_task_trains_with_a_bounded_evaluation(long_env, tmp_path, capsys):
    out_dir = tmp_path / "run"
    code = main(["train", "--env", long_env, "--total-steps", "128", "--num-envs", "2",
                 "--num-steps", "64", "--hidden", "8", "--eval-episodes", "4", "--json",
                 "--out", str(out_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["eval_return"][0] > 0

"""Box2D's Gymnasium environments through ``gymnasium:<id>`` (``pip install rollax[box2d]``):
the collected rows are Gymnasium's own, and PPO trains LunarLander from the command line."""

import jax
import numpy as np
import pytest

import rollax
from helpers import assert_gymnasium_rows, gymnasium_rows, seed_of, train_json
from rollax.collect import collect_autoreset, reset_batch
from rollax.nets.build import actor_critic

pytest.importorskip("Box2D")


@pytest.mark.parametrize("continuous", [False, True])
def test_lunar_lander_rows_are_gymnasiums(continuous):
    env = rollax.make("gymnasium:LunarLander-v3", horizon=30, continuous=continuous)
    assert env.horizon == 30 and env.observation_space.shape == (8,)
    net = actor_critic(env, "mlp", (16,), "tanh", 0.0, 1)
    params = net.init(jax.random.key(0))
    state = reset_batch(env, jax.random.key(1), 2)
    _, traj = collect_autoreset(env, net, params, state, jax.random.key(2), 40)
    assert traj.truncated.any()
    assert_gymnasium_rows(traj, gymnasium_rows(
        "LunarLander-v3", seed_of(jax.random.key(1)), np.asarray(traj.action), horizon=30,
        clip=(-1.0, 1.0) if continuous else None, continuous=continuous))


@pytest.mark.slow
def test_ppo_trains_lunar_lander_from_the_command_line(capsys, tmp_path):
    summary = train_json(capsys, "--env", "gymnasium:LunarLander-v3", "--total-steps", "1024",
                         "--num-envs", "4", "--num-steps", "64", "--eval-episodes", "2",
                         "--out", tmp_path / "run")
    assert summary["env_steps"] == 1024 and np.isfinite(summary["eval_return_mean"])

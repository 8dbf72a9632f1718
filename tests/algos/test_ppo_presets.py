"""PPO's presets for Gymnasium's own tasks: rl-baselines3-zoo's published PPO settings.

The expectations are the zoo's entries (hyperparams/ppo.yml at commit
22e3ff2450fd92033f7f032915e1f64894a09584) worked out by hand into rollax's settings, not read
back through the translator: minibatches = n_envs * n_steps / batch_size (one when the batch is
larger than the rollout), vf_coef twice the zoo's (rollax halves the squared error), a ``lin_``
learning rate is annealed, a ``lin_`` clip range keeps its start value, ``normalize`` is both
observations and rewards.
"""

from __future__ import annotations

import importlib.util

import pytest

from rollax.algos import ppo, registry
from rollax.algos.ppo_presets import MUJOCO

FIELDS = ("total_steps", "num_envs", "num_steps", "minibatches", "epochs", "lr", "anneal_lr",
          "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm",
          "normalize_observations", "normalize_rewards", "hidden", "activation",
          "init_log_std")

SMALL, RELU = (64, 64), (256, 256)
ZOO = {  # FIELDS, from each task's entry of the zoo's ppo.yml
    "CartPole-v1": (100_000, 8, 32, 1, 20, 1e-3, True, 0.98, 0.8, 0.2, 0.0, 1.0, 0.5,
                    False, False, SMALL, "tanh", 0.0),
    "Acrobot-v1": (1_000_000, 16, 256, 64, 4, 3e-4, False, 0.99, 0.94, 0.2, 0.0, 1.0, 0.5,
                   True, True, SMALL, "tanh", 0.0),
    "MountainCar-v0": (1_000_000, 16, 16, 4, 4, 3e-4, False, 0.99, 0.98, 0.2, 0.0, 1.0, 0.5,
                       True, True, SMALL, "tanh", 0.0),
    "MountainCarContinuous-v0": (20_000, 1, 8, 1, 10, 7.77e-5, False, 0.9999, 0.9, 0.1,
                                 0.00429, 0.38, 5.0, True, True, SMALL, "tanh", -3.29),
    "Pendulum-v1": (100_000, 4, 1024, 64, 10, 1e-3, False, 0.9, 0.95, 0.2, 0.0, 1.0, 0.5,
                    False, False, SMALL, "tanh", 0.0),
    "LunarLander-v3": (1_000_000, 16, 1024, 256, 4, 3e-4, False, 0.999, 0.98, 0.2, 0.01, 1.0,
                       0.5, False, False, SMALL, "tanh", 0.0),
    "LunarLanderContinuous-v3": (1_000_000, 16, 1024, 256, 4, 3e-4, False, 0.999, 0.98, 0.2,
                                 0.01, 1.0, 0.5, False, False, SMALL, "tanh", 0.0),
    "BipedalWalker-v3": (5_000_000, 32, 2048, 1024, 10, 3e-4, False, 0.999, 0.95, 0.18, 0.0,
                         1.0, 0.5, True, True, SMALL, "tanh", 0.0),
    "Ant": (1_000_000, 1, 2048, 32, 10, 3e-4, False, 0.99, 0.95, 0.2, 0.0, 1.0, 0.5, True,
            True, SMALL, "tanh", 0.0),
    "Swimmer": (1_000_000, 4, 1024, 16, 10, 6e-4, False, 0.9999, 0.98, 0.2, 0.0, 1.0, 0.5,
                True, True, SMALL, "tanh", 0.0),
    "HalfCheetah": (1_000_000, 1, 512, 8, 20, 2.0633e-05, False, 0.98, 0.92, 0.1, 0.000401762,
                    1.16192, 0.8, True, True, RELU, "relu", -2.0),
    "Hopper": (1_000_000, 1, 512, 16, 5, 9.80828e-05, False, 0.999, 0.99, 0.2, 0.00229519,
               1.671342, 0.7, True, True, RELU, "relu", -2.0),
    "Humanoid": (10_000_000, 1, 512, 2, 5, 3.56987e-05, False, 0.95, 0.9, 0.3, 0.00238306,
                 0.863784, 2.0, True, True, RELU, "relu", -2.0),
    "Walker2d": (1_000_000, 1, 512, 16, 20, 5.05041e-05, False, 0.99, 0.95, 0.1, 0.000585045,
                 1.743846, 1.0, True, True, SMALL, "tanh", 0.0),
}

TASKS = [*(f"gymnasium:{name}" for name in ZOO if "-v" in name),
         *(f"gymnasium:{name}-{version}" for name in ZOO if "-v" not in name
           for version in ("v4", "v5"))]


def _facts(name: str) -> tuple:
    task = name.removeprefix("gymnasium:")
    return ZOO.get(task) or ZOO[task.rsplit("-", 1)[0]]


@pytest.mark.parametrize("name", TASKS)
def test_gymnasium_tasks_have_rl_zoo_settings(name):
    config = ppo.preset(name)
    expected = {field: pytest.approx(fact, rel=1e-12) if isinstance(fact, float) else fact
                for field, fact in zip(FIELDS, _facts(name), strict=True)}
    assert {field: getattr(config, field) for field in FIELDS} == expected
    # Stable-Baselines3 has no value clipping by default, normalises advantages, scales no reward
    assert (config.clip_value, config.normalize_advantages, config.reward_scale) == (
        False, True, 1.0)
    assert registry.by_name("ppo").preset(name) == ppo.PRESETS[name]  # what train takes


def test_tasks_the_zoo_does_not_tune_keep_their_presets():
    for name in ("envpool:HalfCheetah-v4", "gymnasium:Pusher-v5", "gymnasium:Reacher-v4"):
        assert ppo.PRESETS[name] == MUJOCO
    assert ppo.PRESETS["CartPole-v1"] == {}  # rollax's own CartPole keeps PPO's defaults
    assert "gymnasium:Blackjack-v1" not in ppo.PRESETS


BOX2D = importlib.util.find_spec("Box2D") is not None
MUJOCO_RUNS = importlib.util.find_spec("mujoco") is not None


@pytest.mark.parametrize("name", TASKS)
def test_each_preset_is_valid_for_its_environment(name):
    """Every preset passes PPO's checks against the environment it names (minibatches divide
    the rollout, the network reads its observations, the action head fits)."""
    task = name.removeprefix("gymnasium:")
    if not BOX2D and ("Lunar" in task or "Bipedal" in task):
        pytest.skip("needs rollax[box2d]")
    if not MUJOCO_RUNS and task.rsplit("-", 1)[0] in ZOO:
        pytest.skip("needs Gymnasium's MuJoCo")
    ppo.validate(ppo.preset(name))

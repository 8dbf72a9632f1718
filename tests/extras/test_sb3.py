"""Stable-Baselines3 trains on ``rollax.to_gymnasium("CartPole-v1", num_envs=8)`` as it does on
Gymnasium's own CartPole: same PPO settings, budget and seed, and the greedy returns land in the
same band. Needs ``pip install rollax[sb3]`` (torch and SB3); about a minute per run on 1 core.
Its ``MultiInputPolicy`` PPO also learns an exported environment with a ``Dict`` observation
(tests/custom_envs/lookout.py: an image, a vector and a discrete leaf).

SB3 2.9 has no adapter for ``gymnasium.vector.VectorEnv``, so :class:`SameStepVecEnv` below is a
thin bridge for any same-step vector environment, used for both sides alike: SB3's ``VecEnv``
API is same-step too (the returned observation already starts the next episode, the last one is
``infos[b]["terminal_observation"]``, and ``"TimeLimit.truncated"`` marks a time limit).
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from gymnasium.vector import AutoresetMode  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.logger import Logger  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor  # noqa: E402

import rollax  # noqa: E402

TIMESTEPS = 50_000
SEED = 0
PPO_SETTINGS = dict(  # rl-baselines3-zoo's CartPole-v1 settings, shorter budget
    n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
    learning_rate=1e-3, clip_range=0.2,
)


class SameStepVecEnv(VecEnv):
    """SB3's ``VecEnv`` over a Gymnasium vector environment in same-step auto-reset mode."""

    def __init__(self, venv: gym.vector.VectorEnv):
        assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        self.venv = venv
        self.actions = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)

    def reset(self):
        seed = self._seeds[0]  # VecEnv.seed(s) asks for s, s + 1, ...: one vector seed is s
        obs, _ = self.venv.reset(seed=seed)
        self._reset_seeds()
        return obs

    def step_async(self, actions):
        self.actions = actions

    def step_wait(self):
        obs, reward, terminated, truncated, info = self.venv.step(self.actions)
        infos = [{"TimeLimit.truncated": bool(tr and not te)}
                 for te, tr in zip(terminated, truncated)]
        for b in np.flatnonzero(info.get("_final_obs", ())):
            infos[b]["terminal_observation"] = info["final_obs"][b]
        return obs, reward.astype(np.float32), terminated | truncated, infos

    def close(self):
        self.venv.close()

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.venv, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name, value, indices=None):
        raise NotImplementedError

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        raise NotImplementedError

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * len(self._get_indices(indices))


def quiet_logger() -> Logger:
    """A logger that writes nowhere: SB3's default (``verbose=0``) makes a new folder
    ``/tmp/SB3-<date>`` for every ``learn``, outside the test's own folders."""
    return Logger(None, [])


def _train_and_evaluate(venv, eval_env) -> tuple[float, float, float]:
    """``(greedy mean return over 20 episodes, its std, training seconds)``."""
    torch.set_num_threads(1)
    model = sb3.PPO("MlpPolicy", VecMonitor(SameStepVecEnv(venv)), seed=SEED, device="cpu",
                    **PPO_SETTINGS)
    model.set_logger(quiet_logger())
    start = time.perf_counter()
    model.learn(total_timesteps=TIMESTEPS)
    seconds = time.perf_counter() - start
    evaluation = DummyVecEnv([lambda: Monitor(eval_env)])
    evaluation.seed(1234)
    mean, std = evaluate_policy(model, evaluation, n_eval_episodes=20, deterministic=True)
    return float(mean), float(std), seconds


@pytest.mark.slow
def test_sb3_ppo_learns_rollax_cartpole_as_well_as_gymnasiums():
    ours = _train_and_evaluate(rollax.to_gymnasium("CartPole-v1", num_envs=8, seed=SEED),
                               rollax.to_gymnasium("CartPole-v1", seed=1234))
    theirs = _train_and_evaluate(
        gym.make_vec("CartPole-v1", 8, vectorization_mode="sync",
                     vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}),
        gym.make("CartPole-v1"))
    print(f"\nSB3 PPO, {TIMESTEPS} steps, greedy return over 20 episodes: "
          f"rollax {ours[0]:.1f} ± {ours[1]:.1f} ({ours[2]:.0f} s), "
          f"gymnasium {theirs[0]:.1f} ± {theirs[1]:.1f} ({theirs[2]:.0f} s)")
    assert ours[0] >= 175 and theirs[0] >= 175
    assert abs(ours[0] - theirs[0]) <= 250


@pytest.mark.slow
def test_sb3_multi_input_ppo_learns_an_exported_dict_observation_task():
    """tests/custom_envs/lookout.py exported: a ``spaces.Dict`` of a 5x5x1 float image, a
    2-vector and a ``Discrete(2)`` cue, whose right answer needs all three. By hand the optimum
    is 4 an episode, a random policy gets 2 and any policy blind to one leaf at most 3; SB3's
    ``MultiInputPolicy`` PPO (a flattened image, the cue one-hot) must beat 3 clearly, so it
    reads every leaf of the exported observations. About 20 s on 1 core."""
    from custom_envs import lookout

    torch.set_num_threads(1)
    venv = SameStepVecEnv(rollax.to_gymnasium(lookout.make(), num_envs=8, seed=SEED))
    assert isinstance(venv.observation_space, gym.spaces.Dict)
    assert list(venv.observation_space.spaces) == ["cue", "grid", "reading"]
    model = sb3.PPO("MultiInputPolicy", VecMonitor(venv), seed=SEED, device="cpu", n_steps=64,
                    batch_size=128, n_epochs=4, learning_rate=1e-3, ent_coef=0.0)
    model.set_logger(quiet_logger())
    model.learn(total_timesteps=60_000)
    evaluation = DummyVecEnv([lambda: Monitor(rollax.to_gymnasium(lookout.make(), seed=1234))])
    evaluation.seed(1234)
    mean, _ = evaluate_policy(model, evaluation, n_eval_episodes=100, deterministic=True)
    print(f"\nSB3 MultiInputPolicy PPO on the exported lookout task: greedy return {mean:.2f} "
          f"of 4 (blind to a leaf: at most 3)")
    assert 3.6 <= mean <= 4.0

"""to_gymnasium on MultiDiscrete and MultiBinary actions and action masks: the spaces, Gymnasium's
check_env, and info["action_mask"] in the form action_space.sample(mask=...) takes."""

from __future__ import annotations

import warnings

import gymnasium as gym
import jax
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rollax
from custom_envs.guess import multi_binary as guess_binary
from custom_envs.guess import multi_discrete as guess_discrete
from custom_envs.masked_guess import discrete, multi_binary, multi_discrete
from rollax.envs.masks import is_legal
from rollax.gymnasium_export import gym_mask


def flat(mask):
    return np.concatenate(mask) if isinstance(mask, tuple) else np.asarray(mask)


MASKED = {"discrete": discrete, "multi_discrete": multi_discrete, "multi_binary": multi_binary}


def test_multi_spaces_convert_to_gymnasiums():
    env = rollax.to_gymnasium(guess_discrete())
    assert env.action_space == gym.spaces.MultiDiscrete([3, 4])
    env = rollax.to_gymnasium(guess_binary(), num_envs=2)
    assert env.single_action_space == gym.spaces.MultiBinary(3)
    assert env.action_space.shape == (2, 3)


@pytest.mark.parametrize("make_env", [guess_discrete, guess_binary, discrete, multi_discrete,
                                      multi_binary])
def test_gymnasiums_check_env_passes(make_env):
    env = rollax.to_gymnasium(make_env())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        check_env(env, skip_render_check=True)


def test_gym_mask_follows_gymnasiums_sample_convention():
    mask = np.array([True, False, True, False])
    np.testing.assert_array_equal(gym_mask(rollax.Discrete(4), mask), [1, 0, 1, 0])
    multi = np.array([[True, False, True, False], [False, True, True, True]])
    parts = gym_mask(rollax.MultiDiscrete((3, 4)), multi)
    assert isinstance(parts, tuple) and [p.dtype for p in parts] == [np.int8, np.int8]
    np.testing.assert_array_equal(parts[0], [1, 0, 1])
    np.testing.assert_array_equal(parts[1], [0, 1, 1, 1])
    bits = np.array([[True, True], [False, True], [True, False]])
    np.testing.assert_array_equal(gym_mask(rollax.MultiBinary(3), bits), [2, 1, 0])
    assert gym_mask(rollax.Discrete(4), None) is None


@pytest.mark.parametrize("name", list(MASKED))
def test_info_action_mask_is_the_states_mask_and_samples_legal_actions(name):
    task = MASKED[name]()
    env = rollax.to_gymnasium(task, seed=3)
    _, info = env.reset(seed=3)
    state = task.reset(jax.random.split(jax.random.key(3))[1])
    want = gym_mask(task.action_space, task.action_mask(state))
    np.testing.assert_array_equal(flat(info["action_mask"]), flat(want))
    env.action_space.seed(0)
    total = 0.0
    for _ in range(task.horizon):
        action = env.action_space.sample(mask=info["action_mask"])
        # the task's target (so its mask) stays for the episode
        assert bool(is_legal(task.action_space, task.action_mask(state), np.asarray(action)))
        _, reward, _, _, info = env.step(action)
        total += reward
        np.testing.assert_array_equal(flat(info["action_mask"]), flat(want))
    assert total <= len(task.nvec) * task.horizon  # never the illegal bonus


def test_vector_env_batches_the_masks():
    task = multi_discrete()
    envs = rollax.to_gymnasium(task, num_envs=3, seed=0)
    _, info = envs.reset(seed=0)
    parts = info["action_mask"]
    assert [p.shape for p in parts] == [(3, 3), (3, 4)] and info["_action_mask"].all()
    for _ in range(task.horizon + 1):  # through a same-step reset
        actions = np.stack([np.array([np.flatnonzero(parts[0][b])[0],
                                      np.flatnonzero(parts[1][b])[0]]) for b in range(3)])
        _, reward, _, _, info = envs.step(actions)
        parts = info["action_mask"]
        assert (reward <= 2).all()  # legal actions only: no bonus
    assert "action_mask" in info and info["_action_mask"].all()


def test_unmasked_environments_keep_an_empty_info():
    env = rollax.to_gymnasium("CartPole-v1")
    assert env.reset(seed=0)[1] == {}
    assert env.step(0)[4] == {}


def test_the_combo_task_exports_passes_check_env_and_puts_its_mask_in_info():
    """tests/custom_envs/combo.py (a Dict observation of an image, a vector and a discrete leaf,
    a MultiDiscrete((2, 4)) action, a mask): Gymnasium's check_env passes without a warning, and
    every info holds the mask of the returned state, which the observation's cue settles
    (``a[0]`` free, ``a[1]`` in ``{2 cue, 2 cue + 1}``); legal actions never pay the illegal
    bonus."""
    from custom_envs import combo

    env = rollax.to_gymnasium(combo.make(), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)
    assert env.action_space == gym.spaces.MultiDiscrete([2, 4])
    assert isinstance(env.observation_space, gym.spaces.Dict)
    assert list(env.observation_space.spaces) == ["cue", "grid", "reading"]
    obs, info = env.reset(seed=1)
    env.action_space.seed(0)
    cues = set()
    for _ in range(3 * combo.make().horizon):  # through the ends of episodes
        assert env.observation_space.contains(obs)
        first, second = info["action_mask"]
        assert first.dtype == second.dtype == np.int8
        np.testing.assert_array_equal(first, [1, 1])
        np.testing.assert_array_equal(second, np.arange(4) // 2 == obs["cue"])
        cues.add(int(obs["cue"]))
        obs, reward, terminated, truncated, info = env.step(
            env.action_space.sample(mask=info["action_mask"]))
        assert 0 <= reward <= 2 and not terminated
        if truncated:
            obs, info = env.reset()
    assert cues == {0, 1}

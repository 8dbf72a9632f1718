"""Every neural algorithm on tests/custom_envs/combo.py from the command line: a Dict observation
(image, vector, discrete leaf), a MultiDiscrete action and an action mask at once; and PPO
learning it past what any policy blind to a leaf can score, never taking an illegal action.

The one run of each algorithm on the structured spaces: the tiny runs on a dict observation
alone (tests/nets/test_encoders.py), a masked or an unmasked MultiDiscrete action alone
(tests/algos/test_masked_training.py, tests/nets/test_action_spaces.py) take the same code
paths and are not repeated there."""

import jax
import numpy as np
import pytest

import rollax
from custom_envs.combo import make
from helpers import TINY_FLAGS, train_json
from rollax.algos import registry
from rollax.envs.masks import is_legal

NEURAL = [s for s in registry.algorithms() if s.trains.name == "neural"]
EXTRA = {"ppo": ["--normalize-observations"]}
"""PPO also normalises observations (the statistics of the vector leaf only)."""


def states_and_masks(n: int, seed: int = 0):
    env = make()

    @jax.jit  # one program, not one per operation
    def draw(key):
        states = jax.vmap(env.reset)(jax.random.split(key, n))
        return states, jax.vmap(env.observation)(states), jax.vmap(env.action_mask)(states)

    return env, *draw(jax.random.key(seed))


@pytest.mark.slow
@pytest.mark.parametrize("spec", NEURAL, ids=lambda s: s.name)
def test_every_neural_algorithm_trains_the_combo_task(spec, capsys, tmp_path):
    """A tiny run in checked mode (it stops on an illegal action); the greedy evaluation acts
    among the legal actions, so at most 2 a step, 8 an episode (an illegal ``a[1]`` would pay
    3); the saved policy takes the dict observations and masks, one or a batch, greedy and
    sampled."""
    summary = train_json(capsys, "--env", "custom_envs.combo:make", "--algo", spec.methods[0],
                         *TINY_FLAGS[spec.name], *EXTRA.get(spec.name, []), "--hidden", "8",
                         "--eval-episodes", "8", "--checked",
                         "--out", tmp_path / "run")
    assert not summary["diverged"]
    assert 0 <= summary["eval_return_mean"] <= 8
    loaded = rollax.load_run(tmp_path / "run")
    env, _, obs, masks = states_and_masks(16)
    for key in (None, jax.random.key(1)):
        actions = loaded.act(obs, key, mask=masks)
        assert actions.shape == (16, 2)
        assert bool(is_legal(env.action_space, masks, actions).all())
    one = loaded.act(jax.tree.map(lambda x: x[3], obs), mask=masks[3])
    assert one.shape == (2,) and bool(is_legal(env.action_space, masks[3], one))


@pytest.mark.slow  # compiled cheaply: 14 s, against 30 s with the default optimisations
def test_ppo_learns_the_combo_task_and_never_takes_an_illegal_action(capsys, tmp_path):
    """By hand (tests/custom_envs/combo.py): the optimum is 8 an episode, a uniformly random
    legal policy gets 4, a policy blind to the image or to the cue at most 7, one blind to the
    vector at most 5, and only an illegal action scores above 8. PPO's greedy policy must beat
    7 clearly (so it reads all three leaves), answer ``a[1]`` (its vector reading under the
    mask) right in every state, and its sampled episodes never take an illegal action.
    Measured (compiled cheaply as here): seeds 0-5 score 7.37-8.0 over 256 episodes; at the
    earlier ``--lr 0.001`` and 64 episodes seed 0 scored 7.08-7.56 as XLA's code generation
    changed only the last bits of its floats."""
    summary = train_json(capsys, "--env", "custom_envs.combo:make", "--algo", "ppo",
                         "--total-steps", "32768", "--num-envs", "16", "--num-steps", "16",
                         "--minibatches", "4", "--epochs", "4", "--lr", "0.003",
                         "--ent-coef", "0", "--eval-episodes", "256", "--out", tmp_path / "run")
    assert 7.25 <= summary["eval_return_mean"] <= 8
    loaded = rollax.load_run(tmp_path / "run")
    env, states, obs, masks = states_and_masks(2048, seed=5)
    greedy = np.asarray(loaded.act(obs, None, mask=masks))
    answers = np.asarray(jax.vmap(env.answers)(states))
    assert (greedy[:, 1] == answers[:, 1]).mean() >= 0.99
    assert (greedy[:, 0] == answers[:, 0]).mean() > 0.75  # more than blind to a leaf
    _, traj = rollax.collect(env, loaded.policy, loaded.lane_params(0), jax.random.key(7), 256,
                             env.horizon)
    legal = np.asarray(is_legal(env.action_space, traj.action_mask, traj.action))
    assert legal[np.asarray(traj.active)].all()
    returns = np.asarray(traj.reward.sum(axis=0))
    assert returns.max() <= 8 and returns.mean() >= 7.0

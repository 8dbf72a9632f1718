"""Random openings in Pgx's two-player games (``opening_moves``): each training game starts
after ``k ~ U{0 .. K}`` uniformly random legal moves that leave it live, while the evaluations
start from the game's own start; the refusals.

Needs ``pip install rollax[pgx]``; the main test suite skips this folder.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import rollax
import rollax.cli
from helpers import train_refused
from rollax.algos import ppo

pgx = pytest.importorskip("pgx")

N = 4000


def _stones(states) -> np.ndarray:
    """Marks on each tic-tac-toe board (Pgx's observation: (3, 3, 2) planes, the mover's and
    the other's marks)."""
    return np.asarray(states.inner.observation).reshape(len(states.elapsed), -1).sum(axis=1)


def test_the_opening_has_k_uniform_moves_and_leaves_a_live_legal_position():
    env = dataclasses.replace(rollax.make("pgx:tic_tac_toe"), opening_moves=3)
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), N))
    stones = _stones(states)
    counts = np.bincount(stones, minlength=5)
    assert counts[4] == 0  # never more than K moves
    # k uniform on {0, 1, 2, 3} (no move of three can end a game): 1,000 expected each,
    # binomial standard deviation ~27; 5 of them is a generous bound
    np.testing.assert_allclose(counts[:4], N / 4, atol=5 * np.sqrt(N * 0.25 * 0.75))
    assert not np.asarray(states.inner.terminated).any()
    assert not np.asarray(states.done).any() and not np.asarray(states.elapsed).any()
    # the mover alternates: the game's starter (Pgx's init on the reset's first key) moves
    # again after an even number of marks, the other player after an odd one; and the mover's
    # plane holds as many marks as the other's, or one fewer
    keys = jax.random.split(jax.random.key(0), N)
    starts = jax.vmap(lambda k: env.pgx_env.init(jax.random.split(k)[0]))(keys)
    starter = np.asarray(starts.current_player)
    expected = np.where(stones % 2 == 0, starter, 1 - starter)
    np.testing.assert_array_equal(np.asarray(states.inner.current_player), expected)
    planes = np.asarray(states.inner.observation).reshape(N, 9, 2).sum(axis=1)
    np.testing.assert_array_equal(planes[:, 1] - planes[:, 0], stones % 2)
    np.testing.assert_array_equal(np.asarray(states.inner.legal_action_mask).sum(1), 9 - stones)


def test_a_move_that_would_end_the_game_is_not_played():
    # eight random moves would end many games (a line after 5 or more); the opening stops
    # before the move that ends it, so every start is live and a full board never appears
    env = dataclasses.replace(rollax.make("pgx:tic_tac_toe"), opening_moves=8)
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(1), N))
    assert not np.asarray(states.inner.terminated).any()
    stones = _stones(states)
    assert stones.max() == 8 and (stones >= 5).any()
    # without the opening, the same environment starts from the empty board
    plain = jax.vmap(rollax.make("pgx:tic_tac_toe").reset)(jax.random.split(jax.random.key(1), 8))
    assert not _stones(plain).any()


def test_training_opens_at_random_and_evaluation_does_not():
    config = ppo.PPOConfig(env="pgx:tic_tac_toe", total_steps=256, num_envs=8, num_steps=32,
                           opening_moves=2, eval_episodes=4)
    env = ppo.validate(config)
    parts = ppo.make_parts(ppo.resolve(config, env), env)
    played = parts.experience.env
    assert played.opening_moves == 2 and env.opening_moves == 0
    starts = jax.vmap(played.reset)(jax.random.split(jax.random.key(2), 512))
    assert _stones(starts).max() == 2
    # the algorithm's environment (its evaluations, the run folder's) is the game's own
    assert ppo.make_algorithm(config).env == env


@pytest.mark.parametrize("argv,words", [
    (["--env", "CartPole-v1", "--opening-moves", "2"], "opening_moves is refused"),
    (["--env", "pgx:tic_tac_toe", "--opening-moves", "-1"], "opening_moves must be"),
])
def test_refusals_are_one_line_and_exit_2(argv, words, tmp_path, capsys):
    train_refused(capsys, tmp_path, argv, words)


def test_the_opening_is_refused_outside_a_game_of_two_players():
    with pytest.raises(ValueError, match="opening_moves is refused for pgx:2048"):
        dataclasses.replace(rollax.make("pgx:2048"), opening_moves=1)

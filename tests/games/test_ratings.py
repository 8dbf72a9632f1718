"""Bradley-Terry ratings (:mod:`rollax.games.ratings`): a hand-computed pair, the likelihood's
stationarity equations, strengths recovered from games drawn with known ones, and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from rollax.games.ratings import bradley_terry, elo


def test_a_pair_by_hand():
    # A beat B 3 times in 4; one virtual draw: A 3.5 wins of 5, B 1.5; p_B / p_A = 1.5 / 3.5
    ratings = elo(bradley_terry([[0, 3], [1, 0]], prior=1.0))
    assert ratings[0] == 0.0
    assert ratings[1] == pytest.approx(400 * np.log10(1.5 / 3.5), abs=1e-9)  # -147.19


def test_the_fit_solves_the_likelihood_equations():
    rng = np.random.default_rng(0)
    wins = rng.integers(0, 9, (5, 5)).astype(float)
    prior = 0.5
    p = np.exp(bradley_terry(wins, prior=prior))
    w = wins * (1 - np.eye(5)) + prior / 2 * (1 - np.eye(5))
    n = w + w.T
    expected = (n * p[:, None] / (p[:, None] + p[None, :])).sum(axis=1)  # d log L / d log p = 0
    np.testing.assert_allclose(w.sum(axis=1), expected, rtol=1e-9)


def test_known_strengths_are_recovered_from_many_games():
    rng = np.random.default_rng(1)
    truth = np.array([0.0, 1.0, -0.5, 2.0])
    wins = np.zeros((4, 4))
    for i in range(4):
        for j in range(i + 1, 4):
            won = rng.binomial(4000, 1 / (1 + np.exp(truth[j] - truth[i])))
            wins[i, j], wins[j, i] = won, 4000 - won
    np.testing.assert_allclose(bradley_terry(wins, prior=0.0), truth, atol=0.08)


def test_relabelling_the_players_relabels_the_ratings():
    wins = np.array([[0, 5, 2], [1, 0, 4], [3, 2, 0]], float)
    order = [2, 0, 1]
    theta = bradley_terry(wins)
    moved = bradley_terry(wins[np.ix_(order, order)])
    np.testing.assert_allclose(moved, theta[order] - theta[order[0]], atol=1e-9)


def test_players_who_never_met_are_refused():
    with pytest.raises(ValueError, match="never met"):
        bradley_terry([[0, 1, 0], [1, 0, 0], [0, 0, 0]], prior=0.0)
    with pytest.raises(ValueError, match="square"):
        bradley_terry([[0, 1, 2]])

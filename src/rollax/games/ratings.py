"""Ratings of players from the games they played against each other: the Bradley-Terry model,
fitted by maximum likelihood, on the Elo scale.

Player ``i`` has a strength ``p_i > 0`` and beats ``j`` with probability
``p_i / (p_i + p_j)``. Given ``W[i, j]``, the games ``i`` won against ``j`` (a draw counts half
a win to each), the likelihood is the product over games of those probabilities; its maximum
is the fixed point of Hunter's (2004) minorisation-maximisation step::

    p_i <- W_i / sum_{j != i} n_ij / (p_i + p_j)    W_i = sum_j W[i, j], n_ij = W[i, j] + W[j, i]

``prior`` virtual draws between every pair (``prior / 2`` wins each way) keep every strength
finite when a player won or lost all its games. The ratings are ``elo_i = 400 log10(p_i /
p_0)``: player 0 at 0, and 400 points more means 10 to 1 odds.

Example: A beat B in 3 of 4 games; with one virtual draw A has 3.5 wins of 5, B 1.5, so
``p_A / p_B = 3.5 / 1.5`` and A rates ``400 log10(7 / 3) = 147.2`` above B.
"""

from __future__ import annotations

import numpy as np


def bradley_terry(wins, prior: float = 1.0, tol: float = 1e-12, iterations: int = 100_000
                  ) -> np.ndarray:
    """The log-strengths ``theta (S,)`` (``theta[0] = 0``) maximising the Bradley-Terry
    likelihood of ``wins (S, S)`` (``wins[i, j]``: games ``i`` won against ``j``, draws as
    halves; the diagonal is ignored) with ``prior`` virtual draws between every pair. Players
    that never met, directly or through others, cannot be compared: ``ValueError``."""
    w = np.array(wins, np.float64)
    s = w.shape[0]
    if w.ndim != 2 or w.shape[1] != s or s < 1:
        raise ValueError(f"wins must be a square matrix, got shape {w.shape}")
    if np.any(w < 0):
        raise ValueError("wins must be non-negative")
    np.fill_diagonal(w, 0.0)
    w = w + (prior / 2) * (1 - np.eye(s))
    games = w + w.T
    if s > 1 and not _connected(games > 0):
        raise ValueError("some players never met, directly or through others: no common scale")
    total = w.sum(axis=1)
    p = np.ones(s)
    for _ in range(iterations):
        denom = (games / (p[:, None] + p[None, :])).sum(axis=1)
        new = np.where(denom > 0, total / np.where(denom > 0, denom, 1), p)
        new = new / np.exp(np.mean(np.log(new)))  # the scale is free: fix the geometric mean
        done = np.max(np.abs(np.log(new) - np.log(p))) < tol
        p = new
        if done:
            break
    theta = np.log(p)
    return theta - theta[0]


def elo(theta) -> np.ndarray:
    """Log-strengths on the Elo scale: ``400 / ln 10`` per unit (player 0 at 0)."""
    return 400.0 / np.log(10.0) * np.asarray(theta, np.float64)


def _connected(met: np.ndarray) -> bool:
    seen, todo = {0}, [0]
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(met[i]):
            if int(j) not in seen:
                seen.add(int(j))
                todo.append(int(j))
    return len(seen) == met.shape[0]

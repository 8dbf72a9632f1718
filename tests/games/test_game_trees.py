"""Kuhn poker's and Leduc hold'em's trees and their exact evaluation (rollax.games), against
hand calculations, Kuhn's known equilibria and a brute-force best response over every pure
policy. tests/games/test_against_openspiel.py checks the same numbers against OpenSpiel."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax import games
from rollax.games import poker, tree

KUHN = games.kuhn_poker()
LEDUC = games.leduc_poker()
PASS, BET = [1.0, 0.0], [0.0, 1.0]


def kuhn_table(rows: dict[str, list[float]]) -> jnp.ndarray:
    """A Kuhn policy from its rows by information-state name."""
    return jnp.array([rows[name] for name in KUHN.names])


def kuhn_equilibrium(alpha: float) -> jnp.ndarray:
    """Kuhn's equilibria for the first player (alpha in [0, 1/3]) and the second player's."""
    return kuhn_table({
        "J": [1 - alpha, alpha], "Jpb": PASS,
        "Q": PASS, "Qpb": [2 / 3 - alpha, 1 / 3 + alpha],
        "K": [1 - 3 * alpha, 3 * alpha], "Kpb": BET,
        "Jp": [2 / 3, 1 / 3], "Jb": PASS, "Qp": PASS, "Qb": [2 / 3, 1 / 3], "Kp": BET, "Kb": BET,
    })


def random_policy(game: tree.GameTree, seed: int) -> jnp.ndarray:
    """A random table with some actions at probability 0 (some histories never reached)."""
    rng = np.random.default_rng(seed)
    weights = rng.random(game.policy_shape) * (rng.random(game.policy_shape) > 0.2)
    return games.legal_policy(game, jnp.asarray(weights, jnp.float32))


def test_sizes_and_the_documented_order():
    assert (KUHN.num_infostates, KUHN.num_actions, KUHN.num_terminals) == (12, 2, 30)
    assert (LEDUC.num_infostates, LEDUC.num_actions, LEDUC.num_terminals) == (936, 3, 5520)
    assert KUHN.names == ("J", "Jpb", "Q", "Qpb", "K", "Kpb", "Jp", "Jb", "Qp", "Qb", "Kp", "Kb")
    assert LEDUC.names[:3] == ("J1:", "J1:cc/J2:", "J1:cc/J2:cr")
    for game in (KUHN, LEDUC):
        assert list(game.player) == sorted(game.player)  # player 0's rows first
        assert game.player.sum() == game.num_infostates // 2
        assert len(set(game.names)) == game.num_infostates
    # every deal is equally likely: the chance probabilities of one deal's histories are equal
    assert np.allclose(KUHN.chance, 1 / 6) and set(np.round(1 / LEDUC.chance)) == {30, 120}


def test_uniform_exploitability():
    """11/24 in Kuhn poker; 1709/720 in Leduc hold'em, OpenSpiel 2.0.2's number (which
    tests/games/test_against_openspiel.py recomputes)."""
    assert games.exploitability(KUHN, games.uniform_policy(KUHN)) == pytest.approx(11 / 24)
    assert games.exploitability(LEDUC, games.uniform_policy(LEDUC)) == pytest.approx(1709 / 720)


def test_leduc_rules_by_hand():
    # J1 vs Q1, both check, public K1: Q high beats J high, for the antes
    assert poker.leduc_rules((0, 2, 1, 1, 4, 1, 1)).payoff == -1.0
    # J1 vs Q1, public J2: player 0's pair wins; raise, call / raise, raise, call: 1 + 2 + 8
    assert poker.leduc_rules((0, 2, 2, 1, 1, 2, 2, 1)).payoff == 11.0
    # K1 vs K2: a tie splits the pot
    assert poker.leduc_rules((4, 5, 1, 1, 0, 2, 1)).payoff == 0.0
    # player 1 raises, player 0 folds: player 0 loses its ante
    assert poker.leduc_rules((0, 2, 1, 2, 0)).payoff == -1.0
    node = poker.leduc_rules((0, 2, 2, 2))  # two raises: player 0 may fold or call, not raise
    assert (node.player, node.moves, node.name) == (0, ((0, 1.0), (1, 1.0)), "J1:rr")
    assert poker.leduc_rules((0, 2, 1)).moves == ((1, 1.0), (2, 1.0))  # no fold unraised


def test_kuhn_equilibria_are_worth_minus_one_eighteenth_and_unexploitable():
    for alpha in (0.0, 1 / 6, 1 / 3):
        policy = kuhn_equilibrium(alpha)
        assert games.expected_payoff(KUHN, policy) == pytest.approx(-1 / 18, abs=1e-6)
        assert games.best_response_value(KUHN, policy, 0) == pytest.approx(-1 / 18, abs=1e-6)
        assert games.best_response_value(KUHN, policy, 1) == pytest.approx(1 / 18, abs=1e-6)
        assert abs(games.exploitability(KUHN, policy)) < 1e-6


def test_kuhn_by_hand():
    always_bet = kuhn_table(dict.fromkeys(KUHN.names, BET))
    always_pass = kuhn_table(dict.fromkeys(KUHN.names, PASS))
    # both bet and call: every hand a showdown for 2, worth 0 by symmetry
    assert games.expected_payoff(KUHN, always_bet) == pytest.approx(0.0, abs=1e-7)
    # against a player who always bets, the best response calls with K and Q and folds J:
    # (2 + 0 - 1) / 3 for the second player; the first checks J (then folds), bets K: also 1/3
    assert games.best_response_value(KUHN, always_bet, 1) == pytest.approx(1 / 3)
    assert games.best_response_value(KUHN, always_bet, 0) == pytest.approx(1 / 3)
    assert games.nash_conv(KUHN, always_bet) == pytest.approx(2 / 3)
    assert games.exploitability(KUHN, always_bet) == pytest.approx(1 / 3)
    # a bettor against a folder takes the ante every hand
    bettor_vs_folder = games.joint_policy(KUHN, always_bet, always_pass)
    assert games.expected_payoff(KUHN, bettor_vs_folder) == pytest.approx(1.0)


def brute_force_best_response(policy: jnp.ndarray, player: int) -> float:
    """The best of every pure policy of ``player`` (2^6 in Kuhn) against ``policy``."""
    rows = np.flatnonzero(KUHN.player == player)
    pures = []
    for choice in itertools.product((0, 1), repeat=len(rows)):
        pure = np.array(policy)
        pure[rows] = np.eye(2)[list(choice)]
        pures.append(pure)
    values = jax.vmap(functools.partial(games.expected_payoff, KUHN))(jnp.array(pures))
    return float(jnp.max(values if player == 0 else -values))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kuhn_best_response_is_the_best_pure_policy(seed):
    policy = random_policy(KUHN, seed)
    for player in (0, 1):
        value = games.best_response_value(KUHN, policy, player)
        assert value == pytest.approx(brute_force_best_response(policy, player), abs=1e-6)


@pytest.mark.parametrize("game", [KUHN, LEDUC], ids=lambda g: g.name)
def test_the_best_response_policy_earns_the_best_response_value(game):
    policy = random_policy(game, 3)
    for player, sign in ((0, 1.0), (1, -1.0)):
        best = games.best_response(game, policy, player)
        earned = sign * games.expected_payoff(game, best)
        value = float(games.best_response_value(game, policy, player))
        assert earned == pytest.approx(value, abs=1e-5)
        others = game.player != player
        np.testing.assert_array_equal(best[others], policy[others])


@pytest.mark.parametrize("game", [KUHN, LEDUC], ids=lambda g: g.name)
def test_jit_and_vmap_over_policies_agree_with_one_at_a_time(game):
    batch = jnp.stack([games.uniform_policy(game)] + [random_policy(game, s) for s in range(3)])
    one = np.array([[games.exploitability(game, p), games.expected_payoff(game, p)]
                    for p in batch])
    jitted = jax.jit(games.exploitability, static_argnums=0)
    assert jitted(game, batch[1]) == pytest.approx(one[1, 0], abs=1e-6)
    both = jax.jit(jax.vmap(lambda p: jnp.stack([games.exploitability(game, p),
                                                 games.expected_payoff(game, p)])))
    np.testing.assert_allclose(both(batch), one, atol=1e-6)


def test_policy_helpers():
    uniform = games.uniform_policy(LEDUC)
    np.testing.assert_allclose(uniform.sum(-1), 1.0, rtol=1e-6)
    assert not np.any(np.asarray(uniform)[~LEDUC.legal])
    # a row with no legal weight becomes uniform; illegal weight is dropped
    weights = jnp.zeros(LEDUC.policy_shape).at[0].set(jnp.array([5.0, 1.0, 3.0]))
    legal = games.legal_policy(LEDUC, weights)
    assert LEDUC.names[0] == "J1:" and not LEDUC.legal[0, 0]  # unraised: no fold
    np.testing.assert_allclose(legal[0], [0.0, 0.25, 0.75])
    np.testing.assert_allclose(legal[1], uniform[1])
    with pytest.raises(ValueError, match=r"kuhn_poker policy has shape \(N, A\) = \(12, 2\)"):
        games.exploitability(KUHN, jnp.ones((12, 3)))

"""The players' GAE of two-player (and P-player) games (``rollax.returns.player_gae``): a
plain-Python reference that searches each player's next own turn, hand-played games with
values written by hand (a win on the mover's turn, a loss on the opponent's, a player moving
twice in a row, a truncation and a rollout cut), and the single-player case equal to ``gae``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.returns import gae, player_gae, two_player_next_values


def reference(rewards, values, next_values, player, term, trunc, gamma, lam, active=None):
    """Each cell's advantage by its definition: find the actor's next own turn in the
    episode (or the episode's end, or the rollout's), sum its rewards until then, recurse."""
    T, B, _ = rewards.shape
    active = np.ones((T, B), bool) if active is None else active
    adv = np.zeros((T, B))
    for b in range(B):
        for t in reversed(range(T)):
            if not active[t, b]:
                continue
            a, total, k = player[t, b], 0.0, t
            while True:
                total += rewards[k, b, a]
                if term[k, b]:
                    v_next, a_next = 0.0, 0.0
                    break
                if trunc[k, b] or k == T - 1:
                    v_next, a_next = next_values[k, b, a], 0.0
                    break
                k += 1
                if active[k, b] and player[k, b] == a:
                    v_next, a_next = values[k, b], adv[k, b]
                    break
            adv[t, b] = total + gamma * v_next - values[t, b] + gamma * lam * a_next
    return adv


def _random_games(seed, T=40, B=6, P=2):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, B, P)).astype(np.float32)
    rewards *= rng.random((T, B, P)) < 0.3
    values = rng.normal(size=(T, B)).astype(np.float32)
    next_values = rng.normal(size=(T, B, P)).astype(np.float32)
    player = rng.integers(0, P, size=(T, B)).astype(np.int32)  # repeats: chance games
    term = rng.random((T, B)) < 0.1
    trunc = ~term & (rng.random((T, B)) < 0.05)
    active = rng.random((T, B)) < 0.9
    return rewards, values, next_values, player, term, trunc, active


@pytest.mark.parametrize("players", [2, 3])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_the_python_reference(players, masked):
    rewards, values, next_values, player, term, trunc, active = _random_games(players, P=players)
    active = active if masked else None
    got, targets = player_gae(jnp.asarray(rewards), jnp.asarray(values), jnp.asarray(next_values),
                              jnp.asarray(player), term, trunc, 0.9, 0.8, active)
    want = reference(rewards, values, next_values, player, term, trunc, 0.9, 0.8, active)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, want + values, rtol=1e-5, atol=1e-5)


def test_one_player_is_gae():
    """P = 1, the next state's value the next row's within episodes: the GAE of contract §3."""
    rewards, values, next_values, _, term, trunc, _ = _random_games(5, P=1)
    within = ~(term | trunc)
    next_values[:-1, :, 0] = np.where(within[:-1], values[1:], next_values[:-1, :, 0])
    player = np.zeros(values.shape, np.int32)
    got, _ = player_gae(jnp.asarray(rewards), jnp.asarray(values), jnp.asarray(next_values),
                        jnp.asarray(player), term, trunc, 0.97, 0.9)
    want, _ = gae(rewards[..., 0], values, next_values[..., 0], term, trunc, 0.97, 0.9)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _game(rows, values, gamma=1.0, lam=1.0, next_values=None):
    """One lane from rows ``(player, reward to 0, reward to 1, terminated, truncated)``."""
    player, r0, r1, term, trunc = (np.array(c) for c in zip(*rows))
    rewards = np.stack([r0, r1], -1).astype(np.float32)[:, None]
    nv = np.zeros_like(rewards) if next_values is None else np.asarray(
        next_values, np.float32)[:, None]
    adv, _ = player_gae(jnp.asarray(rewards), jnp.asarray(values, jnp.float32)[:, None],
                        jnp.asarray(nv), jnp.asarray(player, jnp.int32)[:, None],
                        term[:, None].astype(bool), trunc[:, None].astype(bool), gamma, lam)
    return np.asarray(adv[:, 0])


def test_tic_tac_toe_won_on_the_movers_turn_by_hand():
    """X (player 0) plays the top row in its turns 0, 2, 4; O (player 1) plays 1 and 3. Pgx
    pays (+1, -1) on X's winning move. With gamma = lam = 1 and the values written below, each
    advantage is the final payoff to the player who acted, minus its value."""
    rows = [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (0, 0, 0, 0, 0), (1, 0, 0, 0, 0),
            (0, 1, -1, 1, 0)]
    values = [0.1, -0.2, 0.3, -0.4, 0.5]
    np.testing.assert_allclose(_game(rows, values), [0.9, -0.8, 0.7, -0.6, 0.5], atol=1e-6)


def test_a_game_lost_on_the_opponents_move_pays_the_loser():
    """O's last move (t = 3) is followed by X's win at t = 4: O's chain ends at the terminal
    state with the -1 paid on X's move, no bootstrap. gamma = 0.5, lam = 0.5, by hand:
    t = 4 (X): 1 - 0.5                      = 0.5
    t = 3 (O): -1 + 0.5 * 0 - (-0.4)        = -0.6
    t = 2 (X): 0 + 0.5 * 0.5 - 0.3 + 0.25 * 0.5       = 0.075
    t = 1 (O): 0 + 0.5 * (-0.4) + 0.2 + 0.25 * (-0.6) = -0.15
    t = 0 (X): 0 + 0.5 * 0.3 - 0.1 + 0.25 * 0.075     = 0.06875"""
    rows = [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (0, 0, 0, 0, 0), (1, 0, 0, 0, 0),
            (0, 1, -1, 1, 0)]
    values = [0.1, -0.2, 0.3, -0.4, 0.5]
    np.testing.assert_allclose(_game(rows, values, 0.5, 0.5),
                               [0.06875, -0.15, 0.075, -0.6, 0.5], atol=1e-6)


def test_consecutive_moves_of_one_player_by_hand():
    """Backgammon-style: player 0 moves at t = 0 and 1, player 1 at 2, player 0 at 3 ending
    the game, paid (+2, -2) (a gammon). gamma = 0.5, lam = 1:
    t = 3 (0): 2 - 0.4                             = 1.6
    t = 2 (1): -2 - 0.3                            = -2.3
    t = 1 (0): 0 + 0.5 * 0.4 - 0.2 + 0.5 * 1.6     = 0.8
    t = 0 (0): 0 + 0.5 * 0.2 - 0.1 + 0.5 * 0.8     = 0.4"""
    rows = [(0, 0, 0, 0, 0), (0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (0, 2, -2, 1, 0)]
    np.testing.assert_allclose(_game(rows, [0.1, 0.2, 0.3, 0.4], 0.5, 1.0),
                               [0.4, 0.8, -2.3, 1.6], atol=1e-6)


def test_truncation_and_rollout_cut_bootstrap_each_players_view():
    """A time limit at t = 2 (X moved) bootstraps X from its view of the final state (0.7) and
    O from its own (-0.7); a new game starts at t = 3 and the rollout is cut after t = 4,
    bootstrapping from next_values[4]. gamma = lam = 1:
    t = 4 (O): 0 + 0.25 - 0.1 = 0.15;  t = 3 (X): 0 + (-0.25) - 0.2 = -0.45  (cut: (-0.25, 0.25))
    t = 2 (X): 0 + 0.7 - 0.3 = 0.4;    t = 1 (O): 0 + (-0.7) - 0.4 = -1.1
    t = 0 (X): 0 + 0.3 - 0.5 + 0.4 = 0.2"""
    rows = [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 0),
            (1, 0, 0, 0, 0)]
    next_values = [(9, 9), (9, 9), (0.7, -0.7), (9, 9), (-0.25, 0.25)]
    got = _game(rows, [0.5, 0.4, 0.3, 0.2, 0.1], next_values=next_values)
    np.testing.assert_allclose(got, [0.2, -1.1, 0.4, -0.45, 0.15], atol=1e-6)


def test_two_player_next_values_flip_the_sign_for_the_other_player():
    v = jnp.array([[0.5, -0.25]])
    got = two_player_next_values(v, jnp.array([[1, 0]]))
    np.testing.assert_allclose(got, [[[-0.5, 0.5], [-0.25, 0.25]]])


def test_compiles_once_under_jit_and_vmap():
    rewards, values, next_values, player, term, trunc, _ = _random_games(7)
    traces = []

    @jax.jit
    def run(r, v, nv, p, te, tr):
        traces.append(1)
        return player_gae(r, v, nv, p, te, tr, 0.99, 0.95)[0]

    one = run(rewards, values, next_values, player, term, trunc)
    run(rewards + 1, values, next_values, player, term, trunc)
    assert len(traces) == 1
    lanes = jax.vmap(run)(*(jnp.stack([x, x]) for x in (rewards, values, next_values, player,
                                                        term, trunc)))
    np.testing.assert_allclose(lanes[1], one, rtol=1e-6)

"""Reward-to-go and the policy-gradient losses against hand calculations and NumPy loops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import f32_rtol

VARIANTS = [pytest.param(lambda f: f, id="eager"), pytest.param(jax.jit, id="jit")]


@pytest.mark.parametrize("variant", VARIANTS)
def test_reward_to_go_hand_example(variant):
    rewards = jnp.array([-0.01, -0.01, 1.0, 0.0])
    np.testing.assert_allclose(variant(rollax.reward_to_go)(rewards), [0.98, 0.99, 1.0, 0.0],
                               rtol=1e-6)


def test_reward_to_go_matches_loop_time_major():
    rewards = np.random.RandomState(0).randn(7, 5).astype(np.float32)
    expected = np.zeros_like(rewards)
    for b in range(5):
        acc = 0.0
        for t in reversed(range(7)):
            acc += rewards[t, b]
            expected[t, b] = acc
    np.testing.assert_allclose(rollax.reward_to_go(rewards), expected, rtol=1e-5, atol=1e-6)
    # under vmap over a leading seed axis, each (T, B) slice is handled alone
    stacked = np.stack([rewards, 2 * rewards])
    np.testing.assert_allclose(jax.vmap(rollax.reward_to_go)(stacked)[1], 2 * expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    "ratio, advantage, expected",
    [(1.4, 1.0, 1.2), (0.6, -1.0, -0.8), (1.1, 1.0, 1.1), (0.6, 1.0, 0.6), (1.4, -1.0, -1.4),
     (0.9, -1.0, -0.9), (1.0, 2.5, 2.5)],
)
def test_ppo_clip_objective_both_signs(variant, ratio, advantage, expected):
    got = variant(rollax.ppo_clip_objective)(jnp.float32(ratio), jnp.float32(advantage), 0.2)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def _cells():
    rng = np.random.RandomState(1)
    log_prob = jnp.asarray(np.log(rng.uniform(0.1, 0.9, (4, 3))), jnp.float32)
    returns = jnp.asarray(rng.randn(4, 3), jnp.float32)
    active = jnp.asarray([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]], bool)
    return log_prob, returns, active


def test_reinforce_loss_divides_by_episodes_not_live_cells():
    log_prob, returns, active = _cells()
    expected = -sum(float(log_prob[t, b] * returns[t, b])
                    for t in range(4) for b in range(3) if active[t, b]) / 3
    np.testing.assert_allclose(rollax.reinforce_loss(log_prob, returns, active), expected,
                               rtol=1e-5)
    # returns are held fixed: no derivative flows into them
    g = jax.grad(rollax.reinforce_loss, argnums=1)(log_prob, returns, active)
    assert (np.asarray(g) == 0).all()
    # the derivative in each live log-prob is -G / B, zero on padding
    g = jax.grad(rollax.reinforce_loss)(log_prob, returns, active)
    np.testing.assert_allclose(g, np.where(active, -returns / 3, 0.0), rtol=1e-6)


def test_ppo_loss_freezes_stored_log_probs_and_targets():
    log_prob, advantages, active = _cells()
    stored = log_prob - 0.1
    d_stored = jax.grad(rollax.ppo_clip_loss, argnums=1)(log_prob, stored, advantages, active)
    d_adv = jax.grad(rollax.ppo_clip_loss, argnums=2)(log_prob, stored, advantages, active)
    assert (np.asarray(d_stored) == 0).all() and (np.asarray(d_adv) == 0).all()


def test_ppo_loss_hand_value_and_reinforce_gradient_at_ratio_one():
    log_prob, advantages, active = _cells()
    ratio = np.exp(np.asarray(log_prob) - np.asarray(log_prob + jnp.float32(-0.3)))  # 1.35
    term = np.minimum(ratio * advantages, np.clip(ratio, 0.8, 1.2) * advantages)
    expected = -np.where(active, term, 0).sum() / 3
    got = rollax.ppo_clip_loss(log_prob, log_prob - 0.3, advantages, active, 0.2)
    np.testing.assert_allclose(got, expected, rtol=f32_rtol(1e-5))
    # at ratio 1 the PPO gradient in the log-probs equals REINFORCE's
    g_ppo = jax.grad(rollax.ppo_clip_loss)(log_prob, log_prob, advantages, active)
    g_pg = jax.grad(rollax.reinforce_loss)(log_prob, advantages, active)
    np.testing.assert_allclose(g_ppo, g_pg, rtol=1e-6)


def test_losses_reject_mismatched_shapes():
    log_prob, returns, active = _cells()
    with pytest.raises(ValueError, match=r"\(T, B\)"):
        rollax.reinforce_loss(log_prob, returns[:, :2], active)
    with pytest.raises(ValueError, match=r"\(T, B\)"):
        rollax.ppo_clip_loss(log_prob[0], log_prob[0], returns[0], active[0])

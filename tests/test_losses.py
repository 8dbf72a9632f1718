"""The losses every algorithm shares (rollax.losses): A2C's loss, the k3 penalty, the
normalised sums and explained variance, each against numbers worked out by hand or in NumPy
here (never by calling the function under test)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import f32_rtol
from rollax.losses import a2c_loss, explained_variance, k3_penalty, normalized_sum

# --- A2C's loss --------------------------------------------------------------------------------

PROBS = np.array([0.5, 0.25, 0.8, 0.1])
ADVANTAGES = np.array([1.0, -0.5, 2.0, -1.5])
VALUES = np.array([1.0, 2.0, 3.0, 0.5])
TARGETS = np.array([1.5, 1.0, 3.0, 2.0])
ENTROPIES = np.array([0.6, 0.7, 0.5, 0.2])


def _a2c_args():
    return (jnp.log(jnp.asarray(PROBS)), jnp.asarray(ADVANTAGES), jnp.asarray(VALUES),
            jnp.asarray(TARGETS), jnp.asarray(ENTROPIES))


def test_a2c_loss_terms_by_hand():
    total, aux = a2c_loss(*_a2c_args(), vf_coef=0.5, ent_coef=0.1)
    value_loss = (0.25 + 1.0 + 0.0 + 2.25) / 4  # the mean squared error: no 0.5
    policy_loss = -np.mean(ADVANTAGES * np.log(PROBS))
    assert float(aux["value_loss"]) == pytest.approx(value_loss)
    assert float(aux["policy_loss"]) == pytest.approx(policy_loss, rel=f32_rtol(1e-6))
    assert float(aux["entropy"]) == pytest.approx(0.5)  # (0.6 + 0.7 + 0.5 + 0.2) / 4
    assert float(total) == pytest.approx(policy_loss + 0.5 * value_loss - 0.1 * 0.5,
                                         rel=f32_rtol(1e-6))


def test_a2c_loss_freezes_advantages_and_targets():
    args = _a2c_args()
    grads = jax.grad(lambda *a: a2c_loss(*a, vf_coef=0.5, ent_coef=0.1)[0],
                     argnums=(0, 1, 2, 3, 4))(*args)
    np.testing.assert_allclose(grads[0], -ADVANTAGES / 4, rtol=1e-6)  # d/d log_prob
    np.testing.assert_array_equal(grads[1], 0.0)  # advantages frozen
    np.testing.assert_allclose(grads[2], 0.5 * 2 * (VALUES - TARGETS) / 4, rtol=1e-6)
    np.testing.assert_array_equal(grads[3], 0.0)  # targets frozen
    np.testing.assert_allclose(grads[4], np.full(4, -0.1 / 4), rtol=1e-6)


def test_a2c_loss_normalises_advantages_with_the_biased_std():
    aux = a2c_loss(*_a2c_args(), vf_coef=0.5, ent_coef=0.0, normalize_advantages=True)[1]
    # mean 0.25; deviations 0.75, -0.75, 1.75, -1.75; biased variance (2 * 0.5625 + 2 *
    # 3.0625) / 4 = 1.8125
    a = (ADVANTAGES - 0.25) / (np.sqrt(1.8125) + 1e-8)
    assert float(aux["policy_loss"]) == pytest.approx(-np.mean(a * np.log(PROBS)), rel=1e-5)


# --- the k3 penalty -----------------------------------------------------------------------------

@pytest.mark.parametrize("pi, pi_ref, expected", [
    (0.5, 0.5, 0.0),                     # the same policy: no penalty
    (0.25, 0.5, 1.0 - np.log(2.0)),      # pi_ref / pi = 2
    (0.5, 0.25, 0.5 + np.log(2.0) - 1),  # pi_ref / pi = 1/2
    (0.9, 0.09, 0.1 + np.log(10.0) - 1),
])
def test_k3_by_hand(pi, pi_ref, expected):
    got = k3_penalty(jnp.log(jnp.float32(pi)), jnp.log(jnp.float32(pi_ref)))
    assert float(got) == pytest.approx(expected, rel=f32_rtol(1e-5), abs=1e-7)


def test_k3_averages_to_the_kl_divergence_over_pis_actions():
    """Over pi's actions the k3 terms average to KL(pi || pi_ref) = sum pi log(pi / pi_ref):
    exactly, when the average weighs each action by its probability."""
    pi, ref = np.array([0.7, 0.2, 0.1]), np.array([0.3, 0.3, 0.4])
    terms = np.asarray(k3_penalty(jnp.log(jnp.asarray(pi)), jnp.log(jnp.asarray(ref))))
    np.testing.assert_allclose(terms, ref / pi - np.log(ref / pi) - 1, rtol=f32_rtol(1e-5))
    assert (terms >= 0).all()
    assert float(np.sum(pi * terms)) == pytest.approx(float(np.sum(pi * np.log(pi / ref))),
                                                      rel=f32_rtol(1e-5))


# --- the normalised sums ------------------------------------------------------------------------

def test_normalized_sums_by_hand():
    x = jnp.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 1.0, 1.0, 1.0]])
    live = jnp.array([[1, 1, 1, 1], [1, 0, 1, 1], [1, 0, 0, 1]], bool)
    # live sums per episode: 15, 2, 10, 13 (lengths 3, 1, 2, 3)
    assert float(normalized_sum(x, live, 2, "episode")) == pytest.approx(40 / 4)
    assert float(normalized_sum(x, live, 2, "step")) == pytest.approx(40 / 9)
    group = ((15 + 2) / 4 + (10 + 13) / 5) / 2
    assert float(normalized_sum(x, live, 2, "group")) == pytest.approx(group)
    # a group without a live cell counts one step: (0 / 1 + 23 / 5) / 2
    dead = live.at[:, :2].set(False)
    assert float(normalized_sum(x, dead, 2, "group")) == pytest.approx(23 / 5 / 2)
    assert float(normalized_sum(x, dead, 2, "step")) == pytest.approx(23 / 5)


# --- explained variance -------------------------------------------------------------------------

def test_explained_variance_by_hand():
    target = jnp.array([1.0, 2.0, 3.0])
    # residuals 0, 0, 1: variance 2/9; the targets' 2/3
    assert float(explained_variance(jnp.array([1.0, 2.0, 2.0]), target)) == pytest.approx(
        1 - (2 / 9) / (2 / 3))
    assert float(explained_variance(target, target)) == pytest.approx(1.0)
    assert float(explained_variance(jnp.full(3, 2.0), target)) == pytest.approx(0.0)
    assert np.isnan(float(explained_variance(target, jnp.ones(3))))  # targets do not vary


def test_explained_variance_over_live_cells_ignores_the_rest():
    target = jnp.array([[1.0, 5.0], [2.0, -7.0], [3.0, 100.0]])
    predicted = jnp.array([[1.0, 0.0], [2.0, 0.0], [2.0, 0.0]])
    live = jnp.array([[True, False], [True, False], [True, False]])
    # only the first column counts: the example above
    got = explained_variance(predicted, target, live)
    assert float(got) == pytest.approx(1 - (2 / 9) / (2 / 3), rel=1e-6)
    # every cell live: NumPy's variances over the six cells
    t, p = np.asarray(target), np.asarray(predicted)
    want = 1 - np.var(t - p) / np.var(t)
    everything = jnp.ones((3, 2), bool)
    assert float(explained_variance(predicted, target, everything)) == pytest.approx(
        want, rel=1e-5)
    assert float(explained_variance(predicted, target)) == pytest.approx(want, rel=1e-5)

"""Action masks: the layout per space (rollax.envs.masks) and the masked distributions
(Categorical, MultiCategorical, Bernoulli) against NumPy references: a softmax over the legal
actions only, computed by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import f32_rtol
from rollax.envs.masks import has_legal, is_legal, mask_problem, mask_shape
from rollax.nets import Bernoulli, Categorical, DiagGaussian, MultiCategorical
from rollax.nets.distributions import MASK_LOGIT, masked

SAMPLES = 40_000


def np_masked_log_softmax(logits, mask):
    """log p over the legal entries (-inf elsewhere), in float64."""
    x = np.where(mask, np.asarray(logits, np.float64), -np.inf)
    top = x.max(axis=-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(axis=-1, keepdims=True))


def np_entropy(log_p):
    p = np.exp(log_p)
    return -np.sum(np.where(p > 0, p * np.where(p > 0, log_p, 0.0), 0.0), axis=-1)


def within_sigmas(counts, probs, n, sigmas=5.0):
    freq = counts / n
    sd = np.sqrt(probs * (1 - probs) / n)
    assert np.all(np.abs(freq - probs) <= sigmas * sd + 1e-12), (freq, probs)


RNG = np.random.default_rng(0)
LOGITS = RNG.normal(0.0, 2.0, (6, 5)).astype(np.float32)
MASK = RNG.random((6, 5)) < 0.5
MASK[np.arange(6), RNG.integers(0, 5, 6)] = True  # at least one legal action per row
MASK[0, 0] = True
LOGITS[0, 1] = 30.0  # a large illegal logit must not win
MASK[0, 1] = False


def test_masked_categorical_matches_numpy():
    dist = Categorical(jnp.asarray(LOGITS)).masked(jnp.asarray(MASK))
    log_p = np_masked_log_softmax(LOGITS, MASK)
    for a in range(5):
        action = jnp.full((6,), a, jnp.int32)
        got = np.asarray(dist.log_prob(action))
        legal = MASK[:, a]
        np.testing.assert_allclose(got[legal], log_p[legal, a], rtol=f32_rtol(1e-5), atol=1e-5)
        assert (got[~legal] < -1e8).all()  # an illegal action: probability 0, finite
    np.testing.assert_allclose(np.asarray(dist.entropy()), np_entropy(log_p), rtol=f32_rtol(1e-5),
                               atol=1e-6)
    np.testing.assert_array_equal(np.asarray(dist.mode()), np.argmax(log_p, axis=-1))
    assert int(dist.mode()[0]) != 1


def test_masked_categorical_samples_only_legal_actions_with_the_masked_probabilities():
    dist = Categorical(jnp.asarray(LOGITS[:2])).masked(jnp.asarray(MASK[:2]))
    keys = jax.random.split(jax.random.key(3), SAMPLES)
    actions = np.asarray(jax.vmap(dist.sample)(keys))  # (S, 2)
    probs = np.exp(np_masked_log_softmax(LOGITS[:2], MASK[:2]))
    for row in range(2):
        counts = np.bincount(actions[:, row], minlength=5)
        assert (counts[~MASK[row]] == 0).all()
        within_sigmas(counts, probs[row], SAMPLES)


def test_masked_gradients_are_finite_and_zero_on_illegal_logits():
    def objective(logits):
        dist = Categorical(logits).masked(jnp.asarray(MASK))
        return jnp.sum(dist.entropy()) + jnp.sum(dist.log_prob(jnp.asarray(np.argmax(
            np.where(MASK, LOGITS, -np.inf), axis=-1), jnp.int32)))

    grad = np.asarray(jax.grad(objective)(jnp.asarray(LOGITS)))
    assert np.isfinite(grad).all()
    assert (grad[~MASK] == 0).all() and (np.abs(grad[MASK]) > 0).any()
    # extreme logits and a single legal action: entropy exactly 0, no NaN from 0 * log 0
    one = np.zeros((1, 5), bool)
    one[0, 2] = True
    dist = Categorical(jnp.asarray([[80.0, -80.0, 0.0, 1e4, -1e4]])).masked(jnp.asarray(one))
    assert float(dist.entropy()[0]) == 0.0 and float(dist.log_prob(jnp.array([2]))[0]) == 0.0


NVEC = (2, 4, 3)
MC_MASK = np.array([[True, False, False, False],
                    [False, True, True, False],
                    [True, True, True, False]])  # padding entries False


def test_masked_multi_categorical_matches_numpy():
    flat = RNG.normal(0.0, 2.0, (4, sum(NVEC))).astype(np.float32)
    dist = MultiCategorical.from_flat(jnp.asarray(flat), NVEC).masked(jnp.asarray(MC_MASK))
    parts = np.split(flat.astype(np.float64), np.cumsum(NVEC)[:-1], axis=-1)
    log_ps = [np_masked_log_softmax(part, MC_MASK[k, :n])
              for k, (part, n) in enumerate(zip(parts, NVEC, strict=True))]
    action = np.array([[0, 1, 0], [0, 2, 2], [0, 1, 1], [0, 2, 0]], np.int32)
    want = sum(log_ps[k][np.arange(4), action[:, k]] for k in range(3))
    np.testing.assert_allclose(np.asarray(dist.log_prob(jnp.asarray(action))), want,
                               rtol=f32_rtol(1e-5))
    np.testing.assert_allclose(np.asarray(dist.entropy()), sum(np_entropy(lp) for lp in log_ps),
                               rtol=f32_rtol(1e-5), atol=1e-6)
    np.testing.assert_array_equal(np.asarray(dist.mode()),
                                  np.stack([np.argmax(lp, axis=-1) for lp in log_ps], axis=-1))
    keys = jax.random.split(jax.random.key(5), SAMPLES)
    samples = np.asarray(jax.vmap(dist.sample)(keys))[:, 0]  # (S, K), row 0
    for k, n in enumerate(NVEC):
        counts = np.bincount(samples[:, k], minlength=n)
        assert counts.size == n and (counts[~MC_MASK[k, :n]] == 0).all()
        within_sigmas(counts, np.exp(log_ps[k][0]), SAMPLES)


def test_a_row_with_no_legal_value_stays_inside_the_component():
    """A finished state's mask may be all False: the component is then uniform over its own
    values, never its padding (MASK_LOGIT lies above PAD_LOGIT)."""
    none = np.zeros((3, 4), bool)
    dist = MultiCategorical.from_flat(jnp.zeros(sum(NVEC)), NVEC).masked(jnp.asarray(none))
    keys = jax.random.split(jax.random.key(0), 2000)
    samples = np.asarray(jax.vmap(dist.sample)(keys))
    assert (samples < np.asarray(NVEC)).all()
    np.testing.assert_allclose(float(dist.entropy()), np.log(NVEC).sum(), rtol=f32_rtol(1e-5))


def test_masked_bernoulli_matches_numpy():
    logits = np.array([[1.5, -0.5, 0.3], [-2.0, 2.0, 0.0]], np.float32)
    mask = np.array([[[True, True], [False, True], [True, False]],
                     [[True, False], [True, True], [False, True]]])  # (2, 3, 2)
    dist = Bernoulli(jnp.asarray(logits)).masked(jnp.asarray(mask))
    p1 = 1 / (1 + np.exp(-logits.astype(np.float64)))
    p1 = np.where(mask[..., 1] & ~mask[..., 0], 1.0, np.where(mask[..., 0] & ~mask[..., 1], 0.0,
                                                              p1))
    action = np.array([[1, 1, 0], [0, 0, 1]], np.int32)
    with np.errstate(divide="ignore"):
        want = np.sum(np.log(np.where(action == 1, p1, 1 - p1)), axis=-1)
        bits = -(np.where(p1 > 0, p1 * np.log(np.maximum(p1, 1e-300)), 0.0)
                 + np.where(p1 < 1, (1 - p1) * np.log(np.maximum(1 - p1, 1e-300)), 0.0))
    np.testing.assert_allclose(np.asarray(dist.log_prob(jnp.asarray(action))), want,
                               rtol=f32_rtol(1e-5))
    np.testing.assert_allclose(np.asarray(dist.entropy()), bits.sum(axis=-1), rtol=f32_rtol(1e-5))
    np.testing.assert_array_equal(np.asarray(dist.mode()), (p1 > 0.5).astype(int))
    keys = jax.random.split(jax.random.key(1), SAMPLES)
    samples = np.asarray(jax.vmap(dist.sample)(keys))  # (S, 2, 3)
    np.testing.assert_array_equal(samples[:, 0, 1], 1)
    np.testing.assert_array_equal(samples[:, 0, 2], 0)
    np.testing.assert_array_equal(samples[:, 1, 0], 0)
    within_sigmas(np.array([samples[:, 0, 0].sum()]), p1[0, :1], SAMPLES)
    grad = jax.grad(lambda x: jnp.sum(Bernoulli(x).masked(jnp.asarray(mask)).entropy()))(
        jnp.asarray(logits))
    assert np.isfinite(np.asarray(grad)).all()


def test_masked_none_is_the_distribution_itself_and_gaussians_refuse_masks():
    dist = Categorical(jnp.asarray(LOGITS))
    assert masked(dist, None) is dist
    with pytest.raises(ValueError, match="action masks need a Discrete, MultiDiscrete or "
                                         "MultiBinary action space, not a Box"):
        DiagGaussian(jnp.zeros(2), jnp.zeros(2)).masked(jnp.ones(2, bool))
    assert MASK_LOGIT > float(np.finfo(np.float32).min) and np.isfinite(MASK_LOGIT)


# --- the layout per space -----------------------------------------------------------------------

def test_mask_shapes_and_legality():
    assert mask_shape(rollax.Discrete(5)) == (5,)
    assert mask_shape(rollax.MultiDiscrete((2, 4, 3))) == (3, 4)
    assert mask_shape(rollax.MultiBinary(3)) == (3, 2)
    assert mask_shape(rollax.Box(-1.0, 1.0, (2,))) is None
    space = rollax.MultiDiscrete(NVEC)
    actions = jnp.array([[0, 1, 2], [1, 1, 2], [0, 3, 0], [0, 2, -1]])
    np.testing.assert_array_equal(np.asarray(is_legal(space, jnp.asarray(MC_MASK), actions)),
                                  [True, False, False, False])
    np.testing.assert_array_equal(
        np.asarray(is_legal(rollax.Discrete(5), jnp.asarray(MASK[0]), jnp.arange(-1, 6))),
        [False, *MASK[0], False])
    padded_only = MC_MASK.copy()
    padded_only[0] = [False, False, True, True]  # only padding entries of component 0
    assert bool(has_legal(space, jnp.asarray(MC_MASK)))
    assert not bool(has_legal(space, jnp.asarray(padded_only)))


def test_mask_problems_name_the_environment_and_the_expected_mask():
    class Env:
        action_space = rollax.Discrete(4)

    assert mask_problem(Env(), jnp.ones(4, bool), "e") is None
    assert mask_problem(Env(), None, "e") is None
    assert mask_problem(Env(), jnp.ones(5, bool), "e") == (
        "environment 'e': action_mask(state) is bool[5], the action space Discrete needs "
        "bool[4]")
    assert mask_problem(Env(), jnp.ones(4, jnp.int32), "e").endswith("is int32[4], the action "
                                                                      "space Discrete needs "
                                                                      "bool[4]")
    Env.action_space = rollax.Box(-1.0, 1.0, (2,))
    assert mask_problem(Env(), jnp.ones(2, bool), "e") == (
        "environment 'e' defines action_mask, but its action space is Box: action masks need a "
        "Discrete, MultiDiscrete or MultiBinary action space")

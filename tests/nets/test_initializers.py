"""The LAPACK-free orthogonal initialisation: the same draw as JAX's LAPACK-based one, exactly
orthogonal, and no LAPACK call left in any network's (or PPO's) compiled program."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.algos import ppo
from rollax.nets import CNNActorCritic, MLPActorCritic, RecurrentActorCritic
from rollax.nets.initializers import householder_q, orthogonal, orthogonal_many

SHAPES = [(64, 4), (4, 64), (64, 64), (1, 64), (2, 64), (384, 64), (256, 1024), (16, 4, 3, 3)]


def numpy_q(z):
    """Reference: NumPy's (float64 LAPACK) thin QR with R's diagonal made positive."""
    q, r = np.linalg.qr(np.asarray(z, np.float64))
    return q * np.sign(np.diag(r))


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_same_draw_as_jax_orthogonal(shape):
    for seed in range(3):
        key = jax.random.key(seed)
        ours = np.asarray(orthogonal(key, shape, 1.5))
        theirs = np.asarray(jax.nn.initializers.orthogonal(1.5)(key, shape, jnp.float32))
        assert ours.shape == theirs.shape == shape
        np.testing.assert_allclose(ours, theirs, atol=3e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_orthonormal_rows_or_columns(shape):
    w = np.asarray(orthogonal(jax.random.key(7), shape, 2.0), np.float64)
    m = w.reshape(-1, shape[-1])  # rows: every axis but the last (column_axis=-1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(m.shape)), atol=2e-5)


def test_householder_q_matches_numpy_qr():
    rng = np.random.default_rng(0)
    for m, n in [(5, 3), (8, 8), (100, 7), (1, 1)]:
        z = rng.standard_normal((m, n)).astype(np.float32)
        q = np.asarray(householder_q(jnp.asarray(z)))
        np.testing.assert_allclose(q, numpy_q(z), atol=2e-5)
        # the factorisation reproduces z with an upper-triangular, positive-diagonal R
        r = q.T.astype(np.float64) @ z
        np.testing.assert_allclose(np.tril(r, -1), 0.0, atol=2e-5)
        assert (np.diag(r) > 0).all()


def test_householder_q_handles_a_zero_column_below_the_diagonal():
    z = jnp.asarray([[1.0, 2.0], [0.0, 3.0], [0.0, 0.0]])   # already upper triangular
    np.testing.assert_allclose(np.asarray(householder_q(z)), np.eye(3, 2), atol=1e-7)


@pytest.mark.slow
def test_orthogonal_many_is_numpy_qr_of_the_documented_draw():
    # one normal draw of all entries, matrix i the next m_i * n_i of them as its tall (m_i, n_i)
    shapes = [(64, 4), (64, 64), (2, 64), (1, 64), (16, 36), (3, 8, 2), (40, 16)]
    gains = [1.0, 2.0, 0.5, 1.0, 1.5, 1.0, 3.0]
    key = jax.random.key(3)
    weights = orthogonal_many(key, shapes, gains)
    talls = [(max(r, c), min(r, c)) for r, c in ((int(np.prod(s[:-1])), s[-1]) for s in shapes)]
    flat = np.asarray(jax.random.normal(key, (sum(m * n for m, n in talls),)))
    start = 0
    for w, shape, gain, (m, n) in zip(weights, shapes, gains, talls):
        q = numpy_q(flat[start:start + m * n].reshape(m, n))
        start += m * n
        rows = int(np.prod(shape[:-1]))
        expected = gain * (q.T if rows < shape[-1] else q).reshape(shape)
        assert w.shape == shape
        np.testing.assert_allclose(np.asarray(w), expected, atol=3e-5 * gain)


def test_orthogonal_many_pads_without_changing_a_matrix():
    # (64, 4) and (64, 2) share a QR padded to width 64 with the (64, 64) one
    key = jax.random.key(5)
    together = orthogonal_many(key, [(64, 4), (64, 64), (2, 64)], [1.0, 1.0, 1.0])
    flat = jax.random.normal(key, (64 * 4 + 64 * 64 + 64 * 2,))
    alone = householder_q(flat[:256].reshape(64, 4))
    np.testing.assert_allclose(np.asarray(together[0]), np.asarray(alone), atol=1e-6)
    with pytest.raises(ValueError, match="2 shapes but 1 gains"):
        orthogonal_many(key, [(2, 2), (3, 3)], [1.0])


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        orthogonal(jax.random.key(0), (5,))
    with pytest.raises(ValueError, match="tall matrix"):
        householder_q(jnp.ones((2, 3)))


def test_vmapped_and_jitted_compiles_once():
    f = jax.jit(jax.vmap(lambda k: orthogonal(k, (8, 3))))
    keys = jax.random.split(jax.random.key(0), 4)
    first = f(keys)
    f(jax.random.split(jax.random.key(1), 4))
    assert f._cache_size() == 1
    np.testing.assert_allclose(np.asarray(first[2]), np.asarray(orthogonal(keys[2], (8, 3))),
                               atol=1e-6)


def _no_lapack(fn, *args):
    """The optimised HLO of ``fn`` under ``jit``: it must call no LAPACK kernel (batched LAPACK
    calls in flight together deadlock jaxlib 0.10.1/0.10.2's CPU thread pool)."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    targets = set(re.findall(r'custom_call_target="([^"]+)"', text))
    assert not {t for t in targets if "lapack" in t.lower()}, targets


NETWORKS = {
    "mlp": MLPActorCritic(observation_size=4, action_size=2, hidden=(64, 64)),
    "cnn": CNNActorCritic(image_shape=(10, 10, 4), num_actions=3),
    "gru": RecurrentActorCritic(observation_size=4, num_actions=2, cell="gru"),
    "lstm": RecurrentActorCritic(observation_size=4, num_actions=2, cell="lstm"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_no_lapack_in_vmapped_initialisation(name):
    keys = jax.random.split(jax.random.key(0), 8)
    _no_lapack(jax.vmap(NETWORKS[name].init), keys)


@pytest.mark.slow
def test_no_lapack_in_the_whole_ppo_program_over_seeds():
    config = ppo.PPOConfig(env="CartPole-v1", total_steps=1024)
    keys = jax.vmap(jax.random.key)(jnp.arange(8))
    _no_lapack(jax.vmap(rollax.make_train(config)), keys)

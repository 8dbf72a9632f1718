"""GAE and discounted returns (termination vs truncation), distributions, observation stats."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import rollax
from helpers import f32_rtol
from rollax.nets.distributions import Categorical, DiagGaussian
from rollax.policies import obs_norm_init, obs_norm_update, obs_normalize
from rollax.returns import discounted_returns, gae


def gae_loop(r, v, nv, term, trunc, gamma, lam):
    """Plain loops, one stream at a time, written from the definition."""
    T, B = r.shape
    adv = np.zeros((T, B))
    for b in range(B):
        nxt = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if term[t, b] else nv[t, b]
            delta = r[t, b] + gamma * bootstrap - v[t, b]
            ended = term[t, b] or trunc[t, b]
            nxt = delta + (0.0 if ended else gamma * lam * nxt)
            adv[t, b] = nxt
    return adv


def returns_loop(r, nv, term, trunc, gamma):
    T, B = r.shape
    out = np.zeros((T, B))
    for b in range(B):
        g = nv[T - 1, b]
        for t in reversed(range(T)):
            if term[t, b]:
                g = r[t, b]
            elif trunc[t, b]:
                g = r[t, b] + gamma * nv[t, b]
            else:
                g = r[t, b] + gamma * g
            out[t, b] = g
    return out


def hand_trajectory():
    # stream 0: terminates at t=1, new episode truncated at t=3, a third cut at the rollout end
    # stream 1: truncated at t=0, then runs to the end (bootstrap from next_values[-1])
    r = np.array([[1.0, 2.0], [1.0, 0.5], [0.0, 1.0], [2.0, 1.0], [1.0, 0.0]])
    v = np.array([[0.5, 1.0], [0.4, 0.2], [0.3, 0.1], [0.2, 0.3], [0.6, 0.7]])
    nv = np.array([[0.4, 9.0], [7.0, 0.1], [0.2, 0.3], [5.0, 0.7], [0.8, 0.9]])
    term = np.zeros((5, 2), bool)
    trunc = np.zeros((5, 2), bool)
    term[1, 0] = True
    trunc[3, 0] = True
    trunc[0, 1] = True
    return r, v, nv, term, trunc


def test_discounted_returns_by_hand():
    r, _, nv, term, trunc = hand_trajectory()
    g = np.asarray(discounted_returns(r, nv, term, trunc, 0.5))
    # stream 0: t=4 cut -> 1 + .5*.8 = 1.4; t=3 truncated -> 2 + .5*5 = 4.5 (not G_4);
    # t=2 -> 0 + .5*4.5 = 2.25; t=1 terminated -> 1 (its next value 7 is never used); t=0 -> 1.5
    np.testing.assert_allclose(g[:, 0], [1.5, 1.0, 2.25, 4.5, 1.4], rtol=1e-6)
    # stream 1: t=0 truncated -> 2 + .5*9 = 6.5; t=4 -> 0 + .5*.9; then back to t=1
    g4 = 0.45
    g3 = 1 + 0.5 * g4
    g2 = 1 + 0.5 * g3
    g1 = 0.5 + 0.5 * g2
    np.testing.assert_allclose(g[:, 1], [6.5, g1, g2, g3, g4], rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("lam", [0.0, 0.9, 1.0])
def test_gae_matches_loop_and_returns(jit, lam):
    r, v, nv, term, trunc = hand_trajectory()
    f = jax.jit(gae, static_argnames=()) if jit else gae
    adv, targets = f(r, v, nv, term, trunc, 0.9, lam)
    np.testing.assert_allclose(adv, gae_loop(r, v, nv, term, trunc, 0.9, lam), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(targets, np.asarray(adv) + v, rtol=1e-6)
    if lam == 1.0:  # lambda = 1: the targets are the discounted returns
        np.testing.assert_allclose(targets, returns_loop(r, nv, term, trunc, 0.9), rtol=1e-5)
    if lam == 0.0:  # lambda = 0: one-step TD errors
        boot = np.where(term, 0.0, nv)
        np.testing.assert_allclose(adv, r + 0.9 * boot - v, rtol=1e-5, atol=1e-6)


def test_gae_random_streams_and_active_mask():
    rng = np.random.RandomState(3)
    T, B = 12, 6
    r, v, nv = rng.randn(T, B), rng.randn(T, B), rng.randn(T, B)
    events = rng.rand(T, B)
    term, trunc = events < 0.15, (events > 0.15) & (events < 0.3)
    adv, _ = gae(r, v, nv, term, trunc, 0.97, 0.8)
    np.testing.assert_allclose(adv, gae_loop(r, v, nv, term, trunc, 0.97, 0.8), rtol=1e-4,
                               atol=1e-5)
    active = np.ones((T, B), bool)
    active[8:, 0] = False
    term2 = term.copy()
    term2[7, 0], term2[8:, 0], trunc[7:, 0] = True, False, False
    adv2, _ = gae(r, v, nv, term2, trunc, 0.97, 0.8, active=active)
    assert (np.asarray(adv2)[8:, 0] == 0).all()
    np.testing.assert_allclose(adv2[7, 0], r[7, 0] - v[7, 0], rtol=1e-5)


@pytest.mark.slow
def test_truncation_bootstraps_and_termination_does_not():
    # the corridor under always-left with horizon 3: every episode is truncated at t = 2
    env = rollax.make("corridor", horizon=3)
    policy = rollax.BernoulliPolicy(3)
    _, traj = rollax.collect(env, policy, jnp.full(3, -30.0), jax.random.key(0), 4, 3)
    assert np.asarray(traj.truncated[2]).all()
    v_final = 0.7  # a critic's value of the final (non-terminal) state
    nv = jnp.full((3, 4), v_final)
    values = jnp.zeros((3, 4))
    g_trunc = discounted_returns(traj.reward, nv, traj.terminated, traj.truncated, 0.9)
    g_term = discounted_returns(traj.reward, nv, traj.truncated, jnp.zeros_like(traj.truncated),
                                0.9)  # the classic bug: the time limit treated as terminal
    # the contract's rule (docs/contract.md §3): at truncation the target is r + gamma V(final);
    # as terminal it is r
    np.testing.assert_allclose(g_trunc[2], -0.01 + 0.9 * v_final, rtol=1e-6)
    np.testing.assert_allclose(g_term[2], -0.01, rtol=1e-6)
    np.testing.assert_allclose(g_trunc[0] - g_term[0], 0.9**3 * v_final, rtol=1e-5)
    adv, _ = gae(traj.reward, values, nv, traj.terminated, traj.truncated, 0.9, 0.95)
    np.testing.assert_allclose(adv[2], -0.01 + 0.9 * v_final, rtol=1e-6)
    # a terminated episode never bootstraps, whatever its next value claims
    _, right = rollax.collect(env, policy, jnp.full(3, 30.0), jax.random.key(0), 4, 3)
    g = discounted_returns(right.reward, jnp.full((3, 4), 100.0), right.terminated,
                           right.truncated, 1.0)
    np.testing.assert_allclose(g[0], np.where(np.asarray(right.observation[0]) == 0, 0.98, 0.99),
                               rtol=1e-5)


def all_horizon_values(mdp, policy_table):
    """V_k(s) for k = 0..H from rollax's evaluator (checked against NumPy in test_exact)."""
    return np.stack([np.zeros(mdp.num_states)] + [
        np.asarray(rollax.policy_values(dataclasses.replace(mdp, horizon=k), policy_table))
        for k in range(1, mdp.horizon + 1)])


@pytest.mark.slow
def test_gae_with_exact_values_is_unbiased_on_a_finite_mdp():
    # corridor, horizon 8, a fixed stochastic policy; the exact values V_{H-t}(s_t) make every
    # advantage a zero-mean quantity, and the lambda-return at t = 0 averages to the exact return
    env = rollax.make("corridor", horizon=8)
    policy = rollax.BernoulliPolicy(3)
    theta = jnp.array([0.3, -0.4, 0.5])
    mdp = env.to_mdp()
    table = rollax.policy_table(policy, theta, 4, 2)
    V = all_horizon_values(mdp, table)  # (H + 1, S)
    B = 2**15
    _, traj = rollax.collect(env, policy, theta, jax.random.key(1), B, 8)
    obs = np.asarray(traj.observation)
    t_index = np.arange(8)[:, None]
    values = V[8 - t_index, obs]
    next_obs = np.vstack([obs[1:], obs[-1:]])
    next_values = np.where(t_index < 7, V[np.maximum(7 - t_index, 0), next_obs], 0.0)
    adv, targets = gae(traj.reward, values, next_values, traj.terminated, traj.truncated, 1.0,
                       0.7, active=traj.active)
    a0 = np.asarray(adv[0])
    assert abs(a0.mean()) < 5 * a0.std() / np.sqrt(B)
    exact = float(rollax.expected_return(mdp, table))
    t0 = np.asarray(targets[0])
    assert abs(t0.mean() - exact) < 5 * t0.std() / np.sqrt(B)


def test_categorical_closed_forms():
    logits = jnp.array([[0.2, -1.0, 1.5], [0.0, 0.0, 0.0]])
    d = Categorical(logits)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(d.log_prob(jnp.array([2, 1])), np.log([probs[0, 2], probs[1, 1]]),
                               rtol=f32_rtol(1e-5))
    np.testing.assert_allclose(d.entropy(), [stats.entropy(q) for q in probs], rtol=1e-5)
    np.testing.assert_allclose(d.entropy()[1], np.log(3), rtol=f32_rtol(1e-6))
    samples = jax.vmap(lambda k: Categorical(logits[0]).sample(k))(
        jax.random.split(jax.random.key(0), 20000))
    freq = np.bincount(np.asarray(samples), minlength=3) / 20000
    np.testing.assert_allclose(freq, probs[0], atol=0.015)
    assert int(Categorical(logits[0]).mode()) == 2


def test_diag_gaussian_closed_forms():
    mean, log_std = jnp.array([0.5, -1.0]), jnp.array([0.1, -0.7])
    d = DiagGaussian(mean, log_std)
    x = jnp.array([0.2, -0.3])
    expected = stats.norm.logpdf(x, mean, np.exp(log_std)).sum()
    np.testing.assert_allclose(d.log_prob(x), expected, rtol=1e-5)
    np.testing.assert_allclose(d.entropy(), stats.norm.entropy(mean, np.exp(log_std)).sum(),
                               rtol=1e-5)
    samples = jax.vmap(d.sample)(jax.random.split(jax.random.key(0), 20000))
    np.testing.assert_allclose(samples.mean(0), mean, atol=0.03)
    np.testing.assert_allclose(samples.std(0), np.exp(log_std), rtol=0.03)
    # entropy = -E[log p]: a Monte Carlo check of the closed form
    np.testing.assert_allclose(-jax.vmap(d.log_prob)(samples).mean(), d.entropy(), rtol=0.02)
    np.testing.assert_array_equal(d.mode(), mean)


def test_observation_statistics_merge_like_numpy():
    rng = np.random.RandomState(0)
    batches = [rng.randn(50, 3) * [1, 5, 0.1] + [2, -1, 0] for _ in range(4)]
    state = obs_norm_init(3)
    for batch in batches:
        state = obs_norm_update(state, jnp.asarray(batch, jnp.float32))
    data = np.concatenate(batches)
    np.testing.assert_allclose(state.mean, data.mean(0), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(state.var, data.var(0), rtol=1e-3)
    z = jax.vmap(lambda o: obs_normalize(state, o))(jnp.asarray(data, jnp.float32))
    np.testing.assert_allclose(np.asarray(z).mean(0), 0, atol=1e-3)
    np.testing.assert_allclose(np.asarray(z).std(0), 1, rtol=1e-3)

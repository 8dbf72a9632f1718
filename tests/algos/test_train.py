"""The seed-sized trainer (docs/contract.md §4): key order, update rule, learning, validation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import f32_atol
from rollax.algos.tabular import resolve_config
from rollax.envs.corridor import Corridor

POLICY = rollax.BernoulliPolicy(3)
MDP = Corridor().to_mdp()


@pytest.fixture(scope="module")
def default_runs():
    return {algo: rollax.train(rollax.TabularConfig(algo=algo)) for algo in ("ppo", "reinforce")}


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "reinforce"])
def test_training_improves_exact_return_well_above_point_nine(default_runs, algo):
    result = default_runs[algo]
    history = np.asarray(result.exact_return)
    assert history.shape == (41,)
    np.testing.assert_allclose(history[0], 0.466875, rtol=1e-5)
    assert history[-1] > 0.93
    assert (np.asarray(result.params) > 0).all()  # every position learns to go right
    # the history is the exact return of the parameters it reports
    np.testing.assert_allclose(history[-1], rollax.policy_return(MDP, POLICY, result.params),
                               rtol=1e-6)


def _batch_gradient(theta, traj):
    """d/dtheta of (1/B) sum_live log pi(a|s) G for the Bernoulli policy, in float64 NumPy."""
    obs, act = np.asarray(traj.observation), np.asarray(traj.action)
    active, reward = np.asarray(traj.active), np.asarray(traj.reward, np.float64)
    returns = np.flip(np.cumsum(np.flip(reward, 0), 0), 0)
    idx = np.minimum(obs, 2)
    p = 1 / (1 + np.exp(-theta[idx]))
    cell = np.where(active, (act - p) * returns, 0.0)
    return np.array([cell[idx == k].sum() for k in range(3)]) / obs.shape[1], returns, idx


def _sample_batch(seed, batch_size):
    _, sample_key = jax.random.split(jax.random.key(seed))  # (next running key, sample key)
    return rollax.collect(Corridor(), POLICY, POLICY.init(), sample_key, batch_size, 8)[1]


def test_first_reinforce_update_by_hand():
    config = rollax.TabularConfig(algo="reinforce", updates=1, batch_size=64, lr=0.5, seed=3)
    result = rollax.train(config)
    grad, _, _ = _batch_gradient(np.zeros(3), _sample_batch(3, 64))
    np.testing.assert_allclose(result.params, 0.5 * grad, rtol=1e-5, atol=1e-7)
    # key order matters: the other half of the split gives a different batch
    wrong = rollax.collect(Corridor(), POLICY, POLICY.init(),
                           jax.random.split(jax.random.key(3))[0], 64, 8)[1]
    assert not np.allclose(0.5 * _batch_gradient(np.zeros(3), wrong)[0], result.params)


def test_first_ppo_update_by_hand():
    config = rollax.TabularConfig(algo="ppo", updates=1, batch_size=64, lr=2.0, seed=5)
    result = rollax.train(config)
    traj = _sample_batch(5, 64)
    _, returns, idx = _batch_gradient(np.zeros(3), traj)
    act, active = np.asarray(traj.action), np.asarray(traj.active)
    stored = np.asarray(traj.log_prob, np.float64)
    theta = np.zeros(3)
    for _ in range(3):  # epochs, each a full-batch plain gradient step on the frozen batch
        logit = theta[idx]
        logp = np.where(act == 1, -np.log1p(np.exp(-logit)), -np.log1p(np.exp(logit)))
        ratio = np.exp(logp - stored)
        unclipped_wins = ratio * returns <= np.clip(ratio, 0.8, 1.2) * returns
        inside = (ratio >= 0.8) & (ratio <= 1.2)
        live = active & (unclipped_wins | inside)
        cell = np.where(live, returns * ratio * (act - 1 / (1 + np.exp(-logit))), 0.0)
        theta = theta + 2.0 * np.array([cell[idx == k].sum() for k in range(3)]) / 64
    np.testing.assert_allclose(result.params, theta, rtol=1e-4, atol=1e-6)
    assert float(result.metrics.clip_fraction[0]) > 0  # lr 2: the clip really engaged


@pytest.mark.optimized
def test_same_key_replays_and_seeds_vmap():
    train = rollax.make_train(rollax.TabularConfig(updates=3, batch_size=32))
    keys = jax.random.split(jax.random.key(0), 3)
    a = train(keys[1])
    b = train(keys[1])
    assert train._cache_size() == 1  # compiled once, reused on the second call
    np.testing.assert_array_equal(a.params, b.params)
    batched = jax.vmap(train)(keys)
    np.testing.assert_allclose(batched.params[1], a.params, rtol=1e-6)
    np.testing.assert_allclose(batched.exact_return[1], a.exact_return, rtol=1e-6)
    assert not np.allclose(batched.params[0], batched.params[2])


def test_metrics_shapes_and_ranges(default_runs):
    m = default_runs["ppo"].metrics
    for name, value in m._asdict().items():
        assert value.shape == (40,), name
        assert np.isfinite(np.asarray(value)).all(), name
    assert (np.asarray(m.episode_length) <= 8).all() and (np.asarray(m.episode_length) >= 2).all()
    # (r - 1) - log r >= 0, up to the rounding of exp and log (none seen on the CPU)
    assert (np.asarray(m.approx_kl) >= -f32_atol(0.0)).all()
    assert (np.asarray(m.ratio_min) <= 1).all() and (np.asarray(m.ratio_max) >= 1).all()
    entropy = np.asarray(m.entropy)
    assert ((entropy > 0) & (entropy < np.log(2))).all()  # Bernoulli entropy, below the coin's
    assert entropy[-1] < entropy[0] < np.log(2) - 1e-3  # the policy grows more certain
    np.testing.assert_array_equal(default_runs["reinforce"].metrics.exact_return,
                                  default_runs["reinforce"].exact_return[1:])


def test_resolved_defaults():
    assert resolve_config(rollax.TabularConfig()).epochs == 3
    assert resolve_config(rollax.TabularConfig(algo="reinforce")).epochs == 1
    assert resolve_config(rollax.TabularConfig()).horizon == 8
    assert resolve_config(rollax.TabularConfig(env="FrozenLake-v1")).horizon == 100


BAD = [
    (dict(updates=0), "updates must be a positive integer"),
    (dict(updates=2.5), "updates must be a positive integer"),
    (dict(batch_size=-4), "batch_size must be a positive integer"),
    (dict(batch_size=True), "batch_size must be a positive integer"),
    (dict(horizon=0), "horizon must be a positive integer"),
    (dict(epochs=0), "epochs must be a positive integer"),
    (dict(algo="reinforce", epochs=3), "epochs must be 1 for algo reinforce"),
    (dict(algo="a2c"), "algo must be one of ppo, reinforce"),
    (dict(lr=0.0), "lr must be a finite number > 0"),
    (dict(lr=-0.5), "lr must be a finite number > 0"),
    (dict(lr=float("nan")), "lr must be a finite number > 0"),
    (dict(lr=float("inf")), "lr must be a finite number > 0"),
    (dict(clip_eps=0.0), r"clip_eps must be a number in \(0, 1\)"),
    (dict(clip_eps=1.5), r"clip_eps must be a number in \(0, 1\)"),
    (dict(seed=-1), r"seed must be an integer in \[0, 2\*\*63\)"),
    (dict(env="coridor"), "unknown environment 'coridor'; did you mean corridor"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_invalid_settings_raise_before_compiling(change, message):
    config = dataclasses.replace(rollax.TabularConfig(), **change)
    with pytest.raises(ValueError, match=message):
        rollax.make_train(config)


def test_trains_a_toy_text_task():
    config = rollax.TabularConfig(env="FrozenLake-v1", algo="ppo", updates=3, batch_size=64,
                                horizon=20)
    result = rollax.train(config)
    assert result.params.shape == (16, 4) and result.exact_return.shape == (4,)
    mdp = rollax.make("FrozenLake-v1", horizon=20).to_mdp()
    np.testing.assert_allclose(result.exact_return[0],
                               rollax.expected_return(mdp, rollax.uniform_policy(mdp)), rtol=1e-5)
    assert bool(jnp.all(jnp.isfinite(result.exact_return)))

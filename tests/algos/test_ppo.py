"""Neural PPO: frozen behaviour log-probs, learning on CartPole, seeds, validation."""

import dataclasses
import importlib.util
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rollax
from rollax.algos import experience, optim, ppo
from rollax.nets import MLPActorCritic, NatureCNNActorCritic


def seeds(n, start=0):
    return jax.vmap(jax.random.key)(jnp.arange(start, start + n))


@pytest.fixture(scope="module")
def cartpole_learning():
    config = ppo.PPOConfig(env="CartPole-v1", total_steps=65536)
    return jax.jit(jax.vmap(rollax.make_train(config)))(seeds(2))


@pytest.mark.slow
def test_ppo_learns_cartpole(cartpole_learning):
    # the benchmark asks >= 475 at 5e5 steps over 8 seeds; here 65536 steps and 2 seeds
    result = cartpole_learning
    eval_return = np.asarray(result.eval_return)
    assert eval_return.shape == (2,)
    assert eval_return.mean() >= 300, eval_return
    ep = np.asarray(result.metrics.episode_return)
    assert np.nanmean(ep[:, -10:]) > 3 * np.nanmean(ep[:, :10])


@pytest.mark.slow
def test_metrics_are_sane(cartpole_learning):
    m = jax.tree_util.tree_map(np.asarray, cartpole_learning.metrics)
    updates = 65536 // 512
    for name, value in m._asdict().items():
        assert value.shape == (2, updates), name
    np.testing.assert_array_equal(m.env_steps[0], 512 * np.arange(1, updates + 1))
    lr = m.learning_rate[0]
    assert lr[0] == pytest.approx(2.5e-4) and (np.diff(lr) < 0).all()  # linear annealing
    assert (m.approx_kl >= -1e-6).all() and (m.clip_fraction >= 0).all()
    assert (m.clip_fraction <= 1).all() and (m.ratio_min <= 1).all() and (m.ratio_max >= 1).all()
    assert (m.entropy <= np.log(2) + 1e-6).all() and m.entropy[:, -1].mean() < np.log(2)
    ev = m.explained_variance
    assert (ev[np.isfinite(ev)] <= 1).all() and np.nanmax(ev) > 0
    # episode statistics come from completed episodes only
    assert (m.episodes > 0).any() and (np.nan_to_num(m.episode_length) <= 500).all()
    assert np.isnan(m.episode_return[m.episodes == 0]).all()


@pytest.mark.slow
@pytest.mark.parametrize(
    "env, normalize", [("CartPole-v1", False), ("Pendulum-v1", True)], ids=["discrete", "gauss"]
)
def test_first_step_ratio_is_exactly_one(env, normalize):
    # one epoch of one minibatch: the ratio is evaluated before the only gradient step, so the
    # recomputed log-probs must equal the stored behaviour log-probs (same normalisation too)
    config = ppo.PPOConfig(env=env, total_steps=2 * 256, num_envs=4, num_steps=64, epochs=1,
                           minibatches=1, normalize_observations=normalize, eval_episodes=2)
    result = rollax.make_train(config)(jax.random.key(0))
    np.testing.assert_allclose(result.metrics.ratio_min, 1.0, rtol=1e-5)
    np.testing.assert_allclose(result.metrics.ratio_max, 1.0, rtol=1e-5)
    assert np.isfinite(np.asarray(result.eval_return))


@pytest.mark.slow
def test_seeds_vmap_equals_single_runs_and_compiles_once():
    config = ppo.PPOConfig(env="CartPole-v1", total_steps=1024, num_envs=4, num_steps=64,
                           eval_episodes=2)
    train = rollax.make_train(config)
    keys = seeds(3, start=5)
    single = train(keys[1])
    again = train(keys[1])
    assert train._cache_size() == 1
    leaves = jax.tree_util.tree_leaves
    for a, b in zip(leaves(single.params), leaves(again.params)):
        np.testing.assert_array_equal(a, b)
    batched = jax.jit(jax.vmap(train))(keys)
    for a, b in zip(leaves(single.params), leaves(batched.params)):
        np.testing.assert_allclose(b[1], a, rtol=1e-4, atol=1e-5)
    first, third = leaves(batched.params)[0][0], leaves(batched.params)[0][2]
    assert not np.allclose(first, third)


@pytest.mark.optimized
@pytest.mark.parametrize("chunk", [1, 8, 10**6], ids=["rows", "remainder", "one-call"])
def test_critic_values_in_chunks_equal_one_vmap(monkeypatch, chunk):
    # (T, B) = (5, 4): chunks of max(1, chunk // 4) whole rows (1, 2 with a remainder of 1, 5)
    config = ppo.resolve(ppo.PPOConfig(env="CartPole-v1", hidden=(8,)))
    net = ppo.make_network(rollax.make("CartPole-v1"), config)
    params = net.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (5, 4, 4))
    monkeypatch.setattr(experience, "CRITIC_CHUNK", chunk)
    got = experience.critic_values(net, params, obs)
    want = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, obs)
    assert got.shape == (5, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("chunk", [3, 10**6], ids=["chunks-with-remainder", "one-call"])
def test_a_nature_minibatch_read_in_chunks_equals_one_vmap(monkeypatch, chunk):
    """The Nature CNN's minibatch, ``cells_per_call`` cells at a time: the same log-probs,
    values and entropies, and the same gradient, as all cells in one ``vmap``."""
    net = NatureCNNActorCritic(image_shape=(36, 37, 2), num_actions=3, hidden=(8,),
                               input_scale=1 / 255)
    params = jax.jit(net.init)(jax.random.key(0))
    n = 10
    obs = jax.random.uniform(jax.random.key(1), (n, net.observation_size), maxval=255.0)
    zeros = jnp.zeros(n)
    data = experience.Batch(obs, jnp.arange(n) % 3, zeros, zeros, zeros, zeros, None)

    def read(params):
        scored = experience.score_cells(net, params, data)
        return jnp.sum(scored.log_prob + scored.value + scored.entropy), scored

    monkeypatch.setattr(NatureCNNActorCritic, "cells_per_call", chunk)
    (_, got), g_got = jax.jit(jax.value_and_grad(read, has_aux=True))(params)

    @jax.jit  # one program, not one per operation
    def want(params):
        dist, value = jax.vmap(net.distribution_value, (None, 0))(params, obs)
        return value, dist.log_prob(data.action), dist.entropy()

    for a, b in zip((got.value, got.log_prob, got.entropy), want(params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    g_want = jax.jit(jax.grad(lambda p: jnp.sum(
        jax.vmap(net.log_prob, (None, 0, 0))(p, obs, data.action)
        + jax.vmap(net.value, (None, 0))(p, obs)
        + jax.vmap(lambda o: net.distribution(p, o).entropy())(obs))))(params)
    for a, b in zip(jax.tree.leaves(g_got), jax.tree.leaves(g_want)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_network_shapes_and_initialisation():
    net = MLPActorCritic(observation_size=3, action_size=2, hidden=(16, 8))
    params = net.init(jax.random.key(0))
    w = np.asarray(params.actor[0].weight)
    assert w.shape == (16, 3)
    np.testing.assert_allclose(w @ w.T if w.shape[0] < w.shape[1] else w.T @ w,
                               2.0 * np.eye(min(w.shape)), atol=1e-5)  # orthogonal, gain sqrt 2
    assert np.abs(np.asarray(params.actor[-1].weight)).max() < 0.02  # Gaussian mean: gain 0.01
    assert (np.asarray(params.actor[0].bias) == 0).all()
    dist = net.distribution(params, jnp.ones(3))
    assert dist.mean.shape == (2,) and params.log_std.shape == (2,)
    assert net.value(params, jnp.ones(3)).shape == ()
    action, log_prob = net.sample(params, jnp.ones(3), jax.random.key(1))
    assert action.shape == (2,) and log_prob.shape == ()
    np.testing.assert_allclose(net.log_prob(params, jnp.ones(3), action), log_prob, rtol=1e-6)

    discrete = MLPActorCritic(observation_size=3, num_actions=4, hidden=(16, 8))
    out = np.asarray(discrete.init(jax.random.key(0)).actor[-1].weight)  # (4, 8): logits gain 1
    np.testing.assert_allclose(out @ out.T, np.eye(4), atol=1e-5)


def test_clip_per_network_clips_each_part_by_its_own_norm():
    """Each part scaled as optax.clip_by_global_norm scales it alone: the actor (layers and
    log_std together), the critic, and any other field (a recurrent torso) as one shared part."""
    class Params(NamedTuple):
        embed: jax.Array
        actor: tuple
        critic: tuple
        log_std: jax.Array

    grads = Params(embed=jnp.full(4, 0.1), actor=(jnp.full((2, 2), 1.5),),
                   critic=(jnp.asarray([30.0, -40.0]), jnp.zeros(3)), log_std=jnp.asarray([2.0]))
    out, _ = optim.clip_per_network(0.5).update(grads, optax.EmptyState())
    alone = optax.clip_by_global_norm(0.5)
    actor, _ = alone.update((grads.actor, grads.log_std), alone.init(None))
    critic, _ = alone.update(grads.critic, alone.init(None))
    np.testing.assert_allclose(out.actor[0], actor[0][0], rtol=1e-6)      # norm sqrt(13) -> 0.5
    np.testing.assert_allclose(out.log_std, actor[1], rtol=1e-6)
    np.testing.assert_allclose(out.critic[0], critic[0], rtol=1e-6)
    np.testing.assert_allclose(out.critic[0], [0.3, -0.4], rtol=1e-6)     # norm 50 -> 0.5
    np.testing.assert_allclose(out.embed, grads.embed)                    # norm 0.2: unchanged
    joint, _ = alone.update(grads, alone.init(None))                      # the old, joint clip
    assert np.abs(np.asarray(joint.actor[0])).max() < 0.02


BAD = [
    (dict(num_envs=0), "num_envs must be a positive integer"),
    (dict(num_steps=-1), "num_steps must be a positive integer"),
    (dict(total_steps=100), "total_steps must be at least num_envs \\* num_steps = 512"),
    (dict(minibatches=3), "minibatches must divide num_envs \\* num_steps = 512"),
    (dict(epochs=0), "epochs must be a positive integer"),
    (dict(lr=0.0), "lr must be a number in \\(0, inf\\)"),
    (dict(lr=float("nan")), "lr must be a number in"),
    (dict(gamma=1.5), "gamma must be a number in \\(0, 1\\]"),
    (dict(gae_lambda=-0.1), "gae_lambda must be a number in \\[0, 1\\]"),
    (dict(clip_eps=1.0), "clip_eps must be a number in \\(0, 1\\)"),
    (dict(ent_coef=-1.0), "ent_coef must be a number in \\[0, inf\\)"),
    (dict(max_grad_norm=0.0), "max_grad_norm must be a number in \\(0, inf\\)"),
    (dict(normalize_observations=1), "^normalize_observations must be true or false, got 1$"),
    (dict(hidden=()), "hidden must be positive layer sizes"),
    (dict(activation="gelu"), "activation must be one of tanh, relu"),
    (dict(env="CartPole-v2"), "unknown environment 'CartPole-v2'; did you mean CartPole-v1"),
    (dict(env="corridor", network="cnn"), "network cnn needs an image observation leaf"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_invalid_settings_raise_before_compiling(change, message):
    with pytest.raises(ValueError, match=message):
        rollax.make_train(dataclasses.replace(ppo.PPOConfig(), **change))


def test_presets_are_valid():
    for env in ppo.PRESETS:
        suite = env.split(":")[0] if ":" in env else None
        if suite is not None and importlib.util.find_spec(suite) is None:
            continue  # the MinAtar presets need the optional gymnax or pgx
        config = ppo.preset(env)
        try:
            ppo.validate(config)
        except ValueError as error:  # Gymnasium's MuJoCo or Box2D tasks without their
            # packages, or Pusher-v4, which Gymnasium refuses on mujoco>=3
            assert ("pip install 'gymnasium[mujoco]'" in str(error)
                    or "pip install 'rollax[box2d]'" in str(error)
                    or "cannot be built with the packages installed here" in str(error)), error
            continue
        assert ppo.num_updates(config) >= 1


@pytest.mark.parametrize("gymnax, pgx", [("Asterix", "asterix"), ("Breakout", "breakout"),
                                         ("Freeway", "freeway"), ("Seaquest", "seaquest"),
                                         ("SpaceInvaders", "space_invaders")])
def test_a_minatar_game_has_one_preset_in_gymnax_and_pgx(gymnax, pgx):
    """The same game through either suite trains with gymnax-blines' settings."""
    config = ppo.preset(f"gymnax:{gymnax}-MinAtar")
    assert (config.total_steps, config.num_envs, config.network) == (10_000_000, 64, "cnn")
    assert ppo.PRESETS[f"pgx:minatar-{pgx}"] == ppo.PRESETS[f"gymnax:{gymnax}-MinAtar"]

"""The convolutional actor-critic: shapes, initialisation, the torso against a NumPy reference,
the network choice of PPO, and a tiny PPO run on MinAtar Breakout."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.algos import ppo
from rollax.algos.ppo import make_network
from rollax.cli.parse import parse_train
from rollax.envs.registry import make
from rollax.nets import CNNActorCritic, MLPActorCritic, image_shape
from rollax.run.config import from_settings
from rollax.run.stored import config_from_dict, config_to_dict

MINATAR = "gymnax:Breakout-MinAtar"


def seeds(n, start=0):
    return jax.vmap(jax.random.key)(jnp.arange(start, start + n))


@pytest.fixture(scope="module")
def breakout_net():
    net = CNNActorCritic(image_shape=(10, 10, 4), num_actions=3)
    return net, jax.jit(net.init)(jax.random.key(0))


@pytest.mark.slow
def test_shapes_and_methods(breakout_net):
    net, params = breakout_net
    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (5, 400)).astype(jnp.float32)
    keys = jax.random.split(jax.random.key(2), 5)

    @jax.jit  # one program, not one per operation
    def methods(params, obs, keys):
        action, log_prob = jax.vmap(net.sample, (None, 0, 0))(params, obs, keys)
        return (action, log_prob, jax.vmap(net.log_prob, (None, 0, 0))(params, obs, action),
                jax.vmap(net.value, (None, 0))(params, obs),
                jax.vmap(net.greedy, (None, 0))(params, obs), net.torso(params.actor, obs[0]))

    action, log_prob, again, value, greedy, torso = methods(params, obs, keys)
    assert action.shape == (5,) and action.dtype == jnp.int32 and log_prob.shape == (5,)
    np.testing.assert_allclose(again, log_prob, rtol=1e-6)
    assert value.shape == (5,) and greedy.shape == (5,)
    assert torso.shape == (16 * 8 * 8,)
    assert net.observation_size == 400 and net.feature_map == (16, 8, 8)
    assert params.log_std.shape == (0,)
    gauss = CNNActorCritic(image_shape=(6, 5, 2), action_size=2, channels=(4, 8),
                           init_log_std=-0.5)
    gp = jax.jit(gauss.init)(jax.random.key(3))
    assert gauss.sample(gp, jnp.ones(60), jax.random.key(4))[0].shape == (2,)
    np.testing.assert_array_equal(gp.log_std, [-0.5, -0.5])
    assert gauss.torso(gp.critic, jnp.ones(60)).shape == (8 * 2 * 1,)


@pytest.mark.slow
def test_params_vmap_over_seeds_like_the_mlp(breakout_net):
    net, params = breakout_net
    batched = jax.jit(jax.vmap(net.init))(seeds(2))
    single = jax.tree_util.tree_leaves(params)
    for one, both in zip(single, jax.tree_util.tree_leaves(batched)):
        assert both.shape == (2, *one.shape)
    np.testing.assert_array_equal(jax.tree_util.tree_leaves(batched)[0][0], single[0])
    assert (jax.tree_util.tree_structure(eqx.filter(params, eqx.is_array))
            == jax.tree_util.tree_structure(eqx.filter(
                jax.tree_util.tree_map(lambda x: x[0], batched), eqx.is_array)))


def _check_orthogonal(matrix, gain):
    m = np.asarray(matrix, np.float64).reshape(matrix.shape[0], -1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(10, 10, 4), (7, 6, 1)], ids=["wide", "tall-kernel"])
def test_initialisation_conventions(shape):
    # 4 channels: a (16, 36) kernel matrix with orthogonal rows; 1 channel: (16, 9), columns
    net = CNNActorCritic(image_shape=shape, num_actions=3)
    params = net.init(jax.random.key(7))
    for layers, out_gain in ((params.actor, 1.0), (params.critic, 1.0)):  # logits: gain 1
        conv, *hidden, out = layers
        assert isinstance(conv, eqx.nn.Conv2d) and conv.weight.shape[:2] == (16, shape[2])
        for layer, gain in [(conv, math.sqrt(2)), *[(h, math.sqrt(2)) for h in hidden],
                            (out, out_gain)]:
            _check_orthogonal(layer.weight, gain)
            assert not np.asarray(layer.bias).any()
    assert not np.allclose(params.actor[0].weight, params.critic[0].weight)


def test_initial_policy_is_stochastic_and_reads_the_observation(breakout_net):
    # logits drawn with gain 1 (ACTOR_OUT_GAIN): every action likely, entropy near log 3, but
    # the logits depend on the observation (CleanRL's 0.01 made them nearly constant)
    net, params = breakout_net
    obs = jax.random.bernoulli(jax.random.key(5), 0.5, (64, 400)).astype(jnp.float32)
    dist = jax.vmap(net.distribution, (None, 0))(params, obs)
    logits = np.asarray(dist.logits)
    assert np.abs(logits).max() < 3
    assert np.asarray(jax.nn.softmax(logits)).min() > 0.03
    assert np.asarray(dist.entropy()).mean() > 0.8 * np.log(3)
    assert logits.std(axis=0).min() > 0.05


def test_torso_equals_numpy_loops():
    h, w, c, out, k = 5, 4, 2, 3, 3
    net = CNNActorCritic(image_shape=(h, w, c), num_actions=2, channels=(out,), hidden=(4,))
    params = net.init(jax.random.key(11))
    bias = jnp.asarray([0.3, -0.2, 0.1]).reshape(out, 1, 1)  # non-zero to check it is added
    layers = eqx.tree_at(lambda ls: ls[0].bias, params.actor, bias)
    obs = np.asarray(jax.random.normal(jax.random.key(12), (h * w * c,)), np.float64)
    image = obs.reshape(h, w, c)
    weight = np.asarray(layers[0].weight, np.float64)  # (out, in, k, k)
    expected = np.zeros((out, h - k + 1, w - k + 1))
    for o in range(out):
        for i in range(h - k + 1):
            for j in range(w - k + 1):
                total = float(bias[o, 0, 0])
                for ch in range(c):
                    for di in range(k):
                        for dj in range(k):
                            total += weight[o, ch, di, dj] * image[i + di, j + dj, ch]
                expected[o, i, j] = max(total, 0.0)
    got = net.torso(layers, jnp.asarray(obs, jnp.float32))
    np.testing.assert_allclose(got, expected.reshape(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_torso_is_the_convolution_it_computes_as_a_matmul():
    # conv_hwc (patches x kernel matrix, channels last) against equinox's Conv2d on the
    # (C, H, W) image (the formulation before) and lax.conv_general_dilated on an NCHW batch:
    # two convolutions, a non-square image, non-zero biases; outputs and parameter gradients
    net = CNNActorCritic(image_shape=(7, 6, 3), num_actions=2, channels=(4, 5), hidden=(8,))
    params = net.init(jax.random.key(21))
    biases = [jax.random.normal(k, (n, 1, 1)) for k, n in
              zip(jax.random.split(jax.random.key(22)), net.channels)]
    layers = eqx.tree_at(lambda ls: (ls[0].bias, ls[1].bias), params.critic, tuple(biases))
    obs = jax.random.normal(jax.random.key(23), (3, net.observation_size))
    cotangent = jax.random.normal(jax.random.key(24), (3, math.prod(net.feature_map)))

    def equinox_conv(layers, o):
        x = jnp.transpose(o.reshape(net.image_shape), (2, 0, 1))
        for layer in layers[:2]:
            x = jax.nn.relu(layer(x))
        return x.reshape(-1)

    def lax_conv(layers, obs):
        x = jnp.transpose(obs.reshape(-1, *net.image_shape), (0, 3, 1, 2))  # NCHW
        for layer in layers[:2]:
            x = jax.nn.relu(jax.lax.conv_general_dilated(
                x, layer.weight, (1, 1), "VALID", precision=jax.lax.Precision.HIGHEST)
                + layer.bias[None])
        return x.reshape(len(obs), -1)

    torsos = {"rollax": jax.vmap(net.torso, (None, 0)), "equinox": jax.vmap(equinox_conv,
              (None, 0)), "lax": lax_conv}
    # each compiled whole (op by op, the gradients alone take tens of seconds to dispatch)
    outputs = {name: jax.jit(f)(layers, obs) for name, f in torsos.items()}
    grads = {name: jax.jit(jax.grad(lambda ls, f=f: jnp.sum(f(ls, obs) * cotangent)))(layers)[:2]
             for name, f in torsos.items()}
    assert outputs["rollax"].shape == (3, 5 * 3 * 2)
    assert np.asarray(outputs["rollax"]).any() and not np.asarray(outputs["rollax"]).all()
    for name in ("equinox", "lax"):
        np.testing.assert_allclose(outputs["rollax"], outputs[name], rtol=1e-5, atol=1e-5)
        for got, want in zip(jax.tree_util.tree_leaves(grads["rollax"]),
                             jax.tree_util.tree_leaves(grads[name])):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_auto_picks_cnn_for_images_and_mlp_for_vectors():
    breakout = make(MINATAR)
    assert image_shape(breakout) == (10, 10, 4)
    assert image_shape(make("gymnax:Catch-bsuite")) is None  # (10, 5): rank 2
    config = ppo.resolve(ppo.PPOConfig(env=MINATAR))
    assert config.network == "cnn"
    net = make_network(breakout, config)
    assert isinstance(net, CNNActorCritic) and net.image_shape == (10, 10, 4)
    cartpole = ppo.resolve(ppo.PPOConfig(env="CartPole-v1"))
    assert cartpole.network == "mlp"
    assert isinstance(make_network(make("CartPole-v1"), cartpole), MLPActorCritic)
    forced = ppo.resolve(ppo.PPOConfig(env=MINATAR, network="mlp"))
    assert isinstance(make_network(breakout, forced), MLPActorCritic)


def test_cnn_without_an_image_is_refused_before_compiling():
    with pytest.raises(ValueError, match="network cnn needs image observations"):
        ppo.make_algorithm(ppo.PPOConfig(env="CartPole-v1", network="cnn"))
    with pytest.raises(ValueError, match="network must be one of"):
        ppo.validate(ppo.PPOConfig(network="conv"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="network"):
        from_settings({"env": "CartPole-v1", "network": "cnn"})


def test_network_is_a_run_setting_and_stored_resolved():
    request = parse_train(["train", "--env", "CartPole-v1", "--network", "gru"])
    assert request.config.network == "gru"
    run, _ = from_settings({"env": MINATAR, "total_steps": 64, "num_envs": 4,
                            "num_steps": 16, "minibatches": 2})
    assert run.to_json()["config"]["network"] == "cnn"


@pytest.mark.slow
def test_tiny_ppo_run_on_minatar_compiles_once_and_vmaps():
    config = ppo.preset(MINATAR, horizon=40, total_steps=2 * 64, num_envs=4, num_steps=16,
                        minibatches=2, epochs=1, eval_episodes=2)
    train = jax.jit(jax.vmap(rollax.make_train(config)))
    first = train(seeds(2))
    second = train(seeds(2, start=2))
    assert train._cache_size() == 1
    for result in (first, second):
        assert result.params.actor[0].weight.shape == (2, 16, 4, 3, 3)
        metrics = {k: np.asarray(v) for k, v in result.metrics._asdict().items()}
        for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "learning_rate"):
            assert metrics[name].shape == (2, 2) and np.isfinite(metrics[name]).all(), name
        assert np.isfinite(np.asarray(result.eval_return)).all()
    assert not np.array_equal(first.params.actor[0].weight, second.params.actor[0].weight)


def test_a_config_json_from_before_network_reads_back_as_the_mlp_it_trained():
    stored = config_to_dict(ppo.preset("gymnax:Breakout-MinAtar"))
    del stored["network"]  # as written before the setting existed
    assert config_from_dict(ppo.PPOConfig, stored).network == "mlp"
    stored["network"] = "cnn"
    assert config_from_dict(ppo.PPOConfig, stored).network == "cnn"

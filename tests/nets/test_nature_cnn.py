"""The Nature-DQN actor-critic: its torso against lax's strided convolutions, its shapes and
initialisation, the torso shared by actor and critic, and the network choice (``auto`` picks it
for images of 36x36 pixels and more; ``nature`` refused where it cannot read the observation)."""

import functools
import json
import math
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import train_json
from rollax.algos.optim import clip_per_network
from rollax.envs.base import Box, Discrete
from rollax.nets import CNNActorCritic
from rollax.nets.build import actor_critic, check_network, network_choice, pixel_scale
from rollax.nets.cnn import NatureCNNActorCritic, conv, conv_hwc


def image_env(h, w, c, high=255.0):
    """What the network choice reads of an environment with ``(h, w, c)`` image observations."""
    size = h * w * c
    return types.SimpleNamespace(
        observation_space=Box(np.zeros(size), np.full(size, high), (size,)),
        action_space=Discrete(4), raw_observation_shape=(h, w, c))


def test_strided_conv_is_lax_convolution():
    # conv_hwc with stride 4 and 2 (patches x kernel matrix, channels last) against lax's
    # convolution with those window strides on the (C, H, W) image, non-zero biases
    image = jax.random.normal(jax.random.key(0), (23, 18, 3))

    @functools.partial(jax.jit, static_argnums=(0, 1))  # one program a layer
    def outputs(kernel, stride):
        layer = conv(jax.random.normal(jax.random.key(kernel), (5, 3 * kernel * kernel)),
                     kernel, stride)
        layer = eqx.tree_at(lambda c: c.bias, layer, jnp.arange(5.0).reshape(5, 1, 1))
        chw = jnp.transpose(image, (2, 0, 1))
        want = jax.lax.conv_general_dilated(
            chw[None], layer.weight, (stride, stride), "VALID",
            precision=jax.lax.Precision.HIGHEST)[0] + layer.bias
        return conv_hwc(layer, image), want, layer(chw)  # the last: equinox's own

    for kernel, stride in [(8, 4), (4, 2), (3, 1)]:
        got, want, equinox = outputs(kernel, stride)
        assert got.shape == ((23 - kernel) // stride + 1, (18 - kernel) // stride + 1, 5)
        np.testing.assert_allclose(jnp.transpose(got, (2, 0, 1)), want, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(jnp.transpose(got, (2, 0, 1)), equinox, rtol=1e-5,
                                   atol=1e-4)


@pytest.fixture(scope="module")
def small():
    """The smallest image the torso takes, two channels, byte pixels, and random biases."""
    net = NatureCNNActorCritic(image_shape=(36, 37, 2), num_actions=3, hidden=(16,),
                               input_scale=1 / 255)
    params = net.init(jax.random.key(1))
    keys = jax.random.split(jax.random.key(2), 4)
    torso = eqx.tree_at(
        lambda t: tuple(layer.bias for layer in t), params.torso,
        tuple(0.1 * jax.random.normal(k, layer.bias.shape) for k, layer in zip(keys, params.torso)))
    return net, params._replace(torso=torso)


def test_torso_equals_lax_convolutions_on_scaled_pixels(small):
    net, params = small
    pixels = jax.random.randint(jax.random.key(3), (5, net.observation_size), 0, 256)
    obs = pixels.astype(jnp.float32)

    def reference(torso, obs):  # NCHW, lax's strided convolutions, then the dense layer
        x = jnp.transpose(obs.reshape(-1, *net.image_shape), (0, 3, 1, 2)) / 255.0
        for layer, stride in zip(torso[:3], (4, 2, 1)):
            x = jax.nn.relu(jax.lax.conv_general_dilated(
                x, layer.weight, (stride, stride), "VALID",
                precision=jax.lax.Precision.HIGHEST) + layer.bias[None])
        x = x.reshape(len(obs), -1)
        dense = torso[3]
        return jax.nn.relu(x @ dense.weight.T + dense.bias[None])

    got = jax.jit(jax.vmap(net.features, (None, 0)))(params.torso, obs)
    want = jax.jit(reference)(params.torso, obs)
    assert got.shape == (5, 16) and np.asarray(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    cotangent = jax.random.normal(jax.random.key(4), got.shape)
    g_got, g_want = (jax.jit(jax.grad(lambda t, f=f: jnp.sum(f(t, obs) * cotangent)))(
        params.torso) for f in (jax.vmap(net.features, (None, 0)), reference))
    for a, b in zip(jax.tree.leaves(g_got), jax.tree.leaves(g_want)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def test_atari_shapes_and_orthogonal_initialisation():
    net = NatureCNNActorCritic(image_shape=(84, 84, 4), num_actions=6)
    params = jax.jit(net.init)(jax.random.key(5))
    assert net.feature_map == (64, 7, 7)  # 84 -> 20 -> 9 -> 7
    assert [layer.weight.shape for layer in params.torso] == [
        (32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3), (512, 3136)]
    assert params.actor[0].weight.shape == (6, 512) and params.critic[0].weight.shape == (1, 512)
    assert params.log_std.shape == (0,)
    assert sum(x.size for x in jax.tree.leaves(params)) == (
        32 * 4 * 64 + 32 + 64 * 32 * 16 + 64 + 64 * 64 * 9 + 64 + 3136 * 512 + 512
        + 6 * 512 + 6 + 512 + 1)
    for layer in params.torso:  # gain sqrt(2): W W^T = 2 I (rows fewer than columns)
        w = np.asarray(layer.weight, np.float64).reshape(layer.weight.shape[0], -1)
        np.testing.assert_allclose(w @ w.T, 2 * np.eye(len(w)), atol=1e-4)
        assert not np.asarray(layer.bias).any()
    actor = np.asarray(params.actor[0].weight, np.float64)
    np.testing.assert_allclose(actor @ actor.T, np.eye(6), atol=1e-5)  # logits: gain 1.0
    np.testing.assert_allclose(np.linalg.norm(params.critic[0].weight), 1.0, rtol=1e-5)


def test_actor_and_critic_share_the_torso_and_nothing_else(small):
    net, params = small
    obs = jax.random.uniform(jax.random.key(6), (net.observation_size,), maxval=255.0)
    g_actor = jax.jit(jax.grad(lambda p: net.log_prob(p, obs, jnp.int32(1))))(params)
    g_critic = jax.jit(jax.grad(lambda p: net.value(p, obs)))(params)
    assert all(np.asarray(g).any() for g in jax.tree.leaves(g_actor.torso)[:2])
    assert all(np.asarray(g).any() for g in jax.tree.leaves(g_critic.torso)[:2])
    assert not any(np.asarray(g).any() for g in jax.tree.leaves(g_actor.critic))
    assert not any(np.asarray(g).any() for g in jax.tree.leaves(g_critic.actor))
    # per-network clipping treats the torso as its own group
    grads = jax.tree.map(jnp.ones_like, params)
    clipped, _ = jax.jit(clip_per_network(1.0).update)(grads, None)
    for field in ("torso", "actor", "critic"):
        leaves = jax.tree.leaves(getattr(clipped, field))
        norm = math.sqrt(sum(np.sum(np.square(g)) for g in leaves))
        assert norm == pytest.approx(1.0, rel=1e-5)


def test_both_heads_read_one_pass_of_the_torso(small):
    """``distribution_value`` (what the losses call) equals the two heads called apart, with
    the same gradient, at a cost XLA counts as about 60 % of the two calls': the torso's
    backward pass runs once, not once per head."""
    net, params = small
    obs = jax.random.uniform(jax.random.key(9), (8, net.observation_size), maxval=255.0)
    action = jnp.arange(8) % 3

    def loss(params, both):
        if both:
            dist, value = jax.vmap(net.distribution_value, (None, 0))(params, obs)
        else:
            dist = jax.vmap(net.distribution, (None, 0))(params, obs)
            value = jax.vmap(net.value, (None, 0))(params, obs)
        return jnp.mean(dist.log_prob(action) + 0.1 * dist.entropy() + value ** 2)

    grads = [jax.jit(jax.grad(loss), static_argnums=1)(params, both) for both in (True, False)]
    for a, b in zip(*(jax.tree.leaves(g) for g in grads)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    flops = [jax.jit(jax.grad(loss), static_argnums=1).lower(params, both).compile()
             .cost_analysis()["flops"] for both in (True, False)]
    assert flops[0] < 0.7 * flops[1]


def test_policy_methods_agree(small):
    net, params = small
    obs = jax.random.uniform(jax.random.key(7), (4, net.observation_size), maxval=255.0)
    action, log_prob = jax.jit(jax.vmap(net.sample, (None, 0, 0)))(
        params, obs, jax.random.split(jax.random.key(8), 4))
    assert action.shape == (4,) and action.dtype == jnp.int32
    np.testing.assert_allclose(jax.jit(jax.vmap(net.log_prob, (None, 0, 0)))(params, obs, action),
                               log_prob, rtol=1e-6)
    logits = jax.jit(jax.vmap(lambda p, o: p.actor[0](net.features(p.torso, o)), (None, 0)))(
        params, obs)
    np.testing.assert_array_equal(jax.jit(jax.vmap(net.greedy, (None, 0)))(params, obs),
                                  jnp.argmax(logits, -1))
    mask = jnp.array([False, True, False])
    assert int(jax.jit(net.greedy)(params, obs[0], mask)) == 1
    gauss = NatureCNNActorCritic(image_shape=(36, 36, 1), action_size=2, hidden=(8,),
                                 init_log_std=-0.5)
    gp = jax.jit(gauss.init)(jax.random.key(9))
    np.testing.assert_array_equal(gp.log_std, [-0.5, -0.5])
    assert jax.jit(gauss.sample)(gp, jnp.ones(36 * 36), jax.random.key(10))[0].shape == (2,)


def test_pixel_scale_reads_the_space_bounds():
    assert pixel_scale(image_env(36, 36, 1).observation_space) == pytest.approx(1 / 255)
    assert pixel_scale(image_env(36, 36, 1, high=1.0).observation_space) == 1.0
    assert pixel_scale(image_env(36, 36, 1, high=np.inf).observation_space) == 1.0
    uneven = Box(np.zeros(2), np.array([255.0, 3.0]), (2,))
    assert pixel_scale(uneven) == 1.0


def test_auto_picks_nature_for_large_images_and_the_small_cnn_below_36():
    atari, minatar, edge = image_env(84, 84, 4), image_env(10, 10, 4, 1.0), image_env(35, 80, 1)
    assert network_choice("auto", atari) == "nature"
    assert network_choice("auto", minatar) == "cnn"
    assert network_choice("auto", edge) == "cnn"
    assert network_choice("auto", image_env(36, 36, 1)) == "nature"
    net = actor_critic(atari, "auto", (512,), "relu", 0.0, 64)
    assert isinstance(net, NatureCNNActorCritic)
    assert net.input_scale == pytest.approx(1 / 255) and net.num_actions == 4
    assert isinstance(actor_critic(atari, "cnn", (64,), "relu", 0.0, 64), CNNActorCritic)


def test_nature_refused_where_it_cannot_read_the_observation():
    vector = types.SimpleNamespace(observation_space=Box(np.zeros(4), np.ones(4), (4,)),
                                   action_space=Discrete(2))
    with pytest.raises(ValueError, match=r"^network nature needs image observations, but env "
                                         r"'v' has no raw_observation_shape"):
        check_network(vector, "nature", (8,), "relu", 0.0, 8, env_name="v")
    with pytest.raises(ValueError, match=r"^network nature needs images of at least 36x36 "
                                         r"pixels, but env 'm'.s are \(10, 10, 4\); use"):
        check_network(image_env(10, 10, 4), "nature", (8,), "relu", 0.0, 8, env_name="m")
    with pytest.raises(ValueError, match="at least 36x36"):
        NatureCNNActorCritic(image_shape=(30, 84, 4), num_actions=2)
    discrete = types.SimpleNamespace(observation_space=Discrete(5), action_space=Discrete(2))
    with pytest.raises(ValueError, match=r"^network nature reads one image observation"):
        check_network(discrete, "nature", (8,), "relu", 0.0, 8, env_name="d")


@pytest.mark.slow
def test_ppo_picks_it_for_byte_frames_and_learns_which_side_is_bright(capsys, tmp_path):
    """tests/custom_envs/bright_side.py: only the frame tells the answer (optimum 4 per
    episode, a random policy 2); ``auto`` builds the Nature CNN with pixels scaled by 1/255,
    and the greedy policy must get nearly every answer right. Compiled cheaply, 2,048 steps
    (8 updates) take 8 s here, against 12 s for 4,096 steps and 18 s for 8,192 compiled as
    ``rollax`` does (the convolutions' optimised compile alone takes 13 s); seeds 0 to 7
    evaluate to 3.94, 4.0, 3.94, 4.0, 3.97, 4.0, 3.97 and 3.92."""
    summary = train_json(capsys, "--env", "custom_envs.bright_side:make", "--algo", "ppo",
                         "--total-steps", "2048", "--num-envs", "16", "--num-steps", "16",
                         "--minibatches", "4", "--epochs", "4", "--lr", "0.001",
                         "--hidden", "64", "--activation", "relu", "--eval-episodes", "64",
                         "--out", tmp_path / "run")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["config"]["network"] == "nature"
    assert summary["eval_return_mean"] >= 3.8

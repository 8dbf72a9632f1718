"""The team's actor-critic (``rollax.nets.team``): one network shared by the agents, each
agent's logits and value a plain NumPy forward pass of its own row and one-hot id, the
centralised critic reading every agent's observation where the own critic reads one, and the
Gaussian of continuous agents."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import f32_atol, f32_rtol
from rollax.nets.team import TeamActorCritic


def numpy_mlp(layers, x):
    """tanh after every layer but the last, in float64 (a TPU's float32 tanh is within the
    tolerances of :func:`helpers.f32_rtol`)."""
    x = np.asarray(x, np.float64)
    for k, layer in enumerate(layers):
        x = np.asarray(layer.weight, np.float64) @ x + np.asarray(layer.bias, np.float64)
        if k < len(layers) - 1:
            x = np.tanh(x)
    return x


def test_every_agent_reads_its_own_row_and_id_with_the_shared_parameters():
    net = TeamActorCritic(num_agents=3, observation_size=4, num_actions=5, hidden=(8,))
    params = net.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (3, 4))
    dist, values = net.distribution(params, obs), net.value(params, obs)
    assert dist.logits.shape == (3, 5) and values.shape == (3,)
    for i in range(3):
        x = np.concatenate([np.asarray(obs[i]), np.eye(3)[i]])
        np.testing.assert_allclose(dist.logits[i], numpy_mlp(params.actor, x),
                                   rtol=f32_rtol(1e-5), atol=f32_atol(1e-6))
        np.testing.assert_allclose(values[i], numpy_mlp(params.critic, x)[0],
                                   rtol=f32_rtol(1e-5), atol=f32_atol(1e-6))
    same = jnp.broadcast_to(obs[0], (3, 4))  # one view, three ids: three policies
    logits = net.distribution(params, same).logits
    assert not np.allclose(logits[0], logits[1])


def test_the_centralised_critic_reads_the_whole_team():
    own = TeamActorCritic(num_agents=2, observation_size=3, num_actions=2)
    central = TeamActorCritic(num_agents=2, observation_size=3, num_actions=2, centralised=True)
    assert central.critic_inputs == 2 * 3 + 2 and own.critic_inputs == 3 + 2
    obs = jax.random.normal(jax.random.key(1), (2, 3))
    moved = obs.at[1].add(1.0)  # only agent 1 sees something else
    for net, agent0_changes in ((own, False), (central, True)):
        params = net.init(jax.random.key(0))
        before, after = net.value(params, obs), net.value(params, moved)
        assert (not np.allclose(before[0], after[0])) == agent0_changes
        assert not np.allclose(before[1], after[1])
        x = np.concatenate([np.asarray(obs).reshape(-1), [1.0, 0.0]])
        if net.centralised:
            np.testing.assert_allclose(before[0], numpy_mlp(params.critic, x)[0],
                                       rtol=f32_rtol(1e-5), atol=f32_atol(1e-6))
        # the actor reads the agent's own row either way
        np.testing.assert_allclose(net.distribution(params, obs).logits[0],
                                   net.distribution(params, moved).logits[0])


def test_masked_sampling_gives_each_agent_a_legal_action_and_its_own_log_prob():
    net = TeamActorCritic(num_agents=2, observation_size=3, num_actions=4)
    params = net.init(jax.random.key(0))
    mask = jnp.asarray([[True, False, False, True], [False, True, False, False]])
    keys = jax.random.split(jax.random.key(1), 500)
    obs = jnp.ones((2, 3))
    actions, log_probs = jax.vmap(lambda k: net.sample(params, obs, k, mask))(keys)
    assert actions.shape == log_probs.shape == (500, 2)
    assert set(np.unique(actions[:, 0])) == {0, 3} and set(np.unique(actions[:, 1])) == {1}
    np.testing.assert_allclose(log_probs[:, 1], 0.0, atol=1e-6)


def test_continuous_agents_have_a_gaussian_each():
    net = TeamActorCritic(num_agents=3, observation_size=2, action_size=2, init_log_std=-1.0)
    params = net.init(jax.random.key(0))
    action, log_prob = net.sample(params, jnp.zeros((3, 2)), jax.random.key(1))
    assert action.shape == (3, 2) and log_prob.shape == (3,)
    assert net.distribution(params, jnp.zeros((3, 2))).entropy().shape == (3,)
    batch = jax.vmap(net.distribution, (None, 0))(params, jnp.zeros((4, 3, 2)))
    assert batch.log_prob(jnp.zeros((4, 3, 2))).shape == (4, 3)


def test_an_agents_action_is_given_once():
    with pytest.raises(ValueError, match="give exactly one of num_actions"):
        TeamActorCritic(num_agents=2, observation_size=3)

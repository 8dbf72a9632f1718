"""A team's agent axis through the data path (``rollax.envs.agents``): each agent's GAE
(``rollax.returns.team_gae``) against a plain NumPy loop per agent on a hand-made trajectory,
the collectors' records of each agent's rewards, and the flattening of the agents into the
cells the loss reads (each environment's agents side by side, their own rows)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from custom_envs.team import make
from helpers import f32_rtol
from rollax.algos.experience import Batch, agent_episode_stats, score_cells
from rollax.collect import collect, collect_autoreset, reset_batch
from rollax.envs.agents import agent_space, is_team, num_agents, team_problem
from rollax.nets.team import TeamActorCritic
from rollax.returns import team_gae


def numpy_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """One chain's GAE by its definition, backwards over time, in float64."""
    T = len(rewards)
    adv = np.zeros(T)
    following = 0.0
    for t in reversed(range(T)):
        bootstrap = 0.0 if terminated[t] else next_values[t]
        delta = rewards[t] + gamma * bootstrap - values[t]
        carry = 0.0 if (terminated[t] or truncated[t]) else following
        adv[t] = delta + gamma * lam * carry
        following = adv[t]
    return adv


def test_team_gae_is_each_agents_own_gae():
    rng = np.random.default_rng(0)
    T, B, N = 7, 3, 4
    rewards = rng.normal(size=(T, B, N)).astype(np.float32)
    values = rng.normal(size=(T, B, N)).astype(np.float32)
    next_values = rng.normal(size=(T, B, N)).astype(np.float32)
    terminated = np.zeros((T, B), bool)
    truncated = np.zeros((T, B), bool)
    terminated[2, 0] = truncated[4, 1] = terminated[6, 2] = truncated[1, 2] = True
    advantage, target = team_gae(jnp.asarray(rewards), jnp.asarray(values),
                                 jnp.asarray(next_values), terminated, truncated, 0.9, 0.8)
    assert advantage.shape == target.shape == (T, B, N)
    for b in range(B):
        for i in range(N):
            want = numpy_gae(rewards[:, b, i], values[:, b, i], next_values[:, b, i],
                             terminated[:, b], truncated[:, b], 0.9, 0.8)
            np.testing.assert_allclose(advantage[:, b, i], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target, advantage + values, rtol=1e-6)


def test_an_agents_advantages_read_only_its_own_rewards():
    T, B, N = 5, 2, 3
    rewards = jnp.zeros((T, B, N)).at[2, 1, 0].set(1.0)
    zeros = jnp.zeros((T, B, N))
    never = jnp.zeros((T, B), bool)
    advantage, _ = team_gae(rewards, zeros, zeros, never, never, 0.5, 1.0)
    np.testing.assert_allclose(advantage[:, 1, 0], [0.25, 0.5, 1.0, 0.0, 0.0])
    assert float(jnp.abs(advantage).sum()) == 1.75  # nobody else's


def test_the_toy_team_is_a_team():
    env = make()
    assert is_team(env) and num_agents(env) == 2 and team_problem(env) is None
    assert agent_space(env.action_space, 2) == ("discrete", 3)
    assert not is_team(rollax.make("CartPole-v1"))
    report = rollax.check_env(env)
    assert report.ok, report


def test_collectors_record_each_agents_rewards_and_their_sum_is_the_reward():
    env = make(horizon=6)
    net = TeamActorCritic(num_agents=2, observation_size=3, num_actions=3)
    params = net.init(jax.random.key(0))
    _, traj = collect(env, net, params, jax.random.key(1), 8, 6)
    assert traj.agent_rewards.shape == (6, 8, 2)
    assert traj.log_prob.shape == traj.action.shape == (6, 8, 2)
    assert traj.observation.shape == (6, 8, 2, 3)
    np.testing.assert_allclose(traj.agent_rewards.sum(-1), traj.reward, rtol=1e-6)
    _, traj = collect_autoreset(env, net, params, reset_batch(env, jax.random.key(2), 4),
                                jax.random.key(3), 10)
    assert traj.agent_rewards.shape == (10, 4, 2)
    np.testing.assert_allclose(traj.agent_rewards.sum(-1), traj.reward, rtol=1e-6)
    assert collect(rollax.make("CartPole-v1"), rollax.MLPActorCritic(4, 2),
                   rollax.MLPActorCritic(4, 2).init(jax.random.key(0)), jax.random.key(0),
                   2, 3)[1].agent_rewards is None


def test_the_sampled_actions_honour_each_agents_mask_over_many_steps():
    env = make(horizon=50)
    net = TeamActorCritic(num_agents=2, observation_size=3, num_actions=3)
    _, traj = collect(env, net, net.init(jax.random.key(0)), jax.random.key(1), 64, 50)
    picked = jnp.take_along_axis(traj.action_mask, traj.action[..., None], axis=-1)[..., 0]
    assert bool(jnp.all(picked)) and bool(jnp.all(traj.agent_rewards <= 1.0))
    assert traj.action_mask.shape == (50, 64, 2, 3)


def test_scoring_flattens_each_environments_agents_side_by_side():
    net = TeamActorCritic(num_agents=3, observation_size=2, num_actions=4)
    params = net.init(jax.random.key(0))
    M, N = 5, 3
    obs = jax.random.normal(jax.random.key(1), (M, N, 2))
    action = jax.random.randint(jax.random.key(2), (M, N), 0, 4)
    tag = jnp.arange(M * N, dtype=jnp.float32).reshape(M, N)  # cell m, agent i: m * N + i
    data = Batch(obs, action, tag, tag, tag, tag)
    scored = score_cells(net, params, data)
    assert scored.log_prob.shape == (M * N,)
    np.testing.assert_array_equal(scored.advantage, np.arange(M * N))
    for m in range(M):
        dist = net.distribution(params, obs[m])
        values = net.value(params, obs[m])
        for i in range(N):
            # two programs (a batch of cells, one cell): a few units in the last place apart
            np.testing.assert_allclose(scored.log_prob[m * N + i],
                                       dist.log_prob(action[m])[i], rtol=f32_rtol(1e-5))
            np.testing.assert_allclose(scored.value[m * N + i], values[i], rtol=f32_rtol(1e-5))


def test_each_agents_episode_returns():
    rewards = jnp.asarray([[[1.0, 0.0]], [[2.0, 1.0]], [[0.0, 4.0]]])  # (T=3, B=1, N=2)
    done = jnp.asarray([[False], [True], [False]])
    running, mean = agent_episode_stats(jnp.asarray([[10.0, 0.0]]), rewards, done)
    np.testing.assert_allclose(mean, [13.0, 1.0])
    np.testing.assert_allclose(running, [[0.0, 4.0]])
    _, none = agent_episode_stats(jnp.zeros((1, 2)), rewards, jnp.zeros((3, 1), bool))
    assert bool(jnp.all(jnp.isnan(none)))

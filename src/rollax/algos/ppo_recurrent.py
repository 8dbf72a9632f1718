"""The parts of a PPO update that differ for a recurrent actor-critic (``--network gru|lstm``).

::

    carry0 = state.carry                                       # each env's memory, kept
    env_state, carry, traj = collect_autoreset_recurrent(env, policy, params, env_state,
                                                         carry0, rollout_key, T)
    starts = episode_starts(traj)                              # resets inside the rollout
    replay from carry0 with starts: V[t] = critic(h[t]);  V'[t] = critic(cell(h[t], next_obs[t]))
    A, targets = gae(...)                                      # as for the feedforward networks
    repeat `epochs`: permute the B environments, split them into `minibatches` groups; each
        group replays its whole sequences (T, B / minibatches) from its stored carry0 with the
        same starts, and takes one gradient step on the actor-critic loss

Minibatches split environments, never time, so every sequence is replayed from the carry it was
collected with. With one epoch and one minibatch the first replay uses the collecting
parameters and gives the stored log-probabilities back exactly (ratio 1).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rollax.collect import collect_autoreset_recurrent
from rollax.losses import actor_critic_loss
from rollax.recurrent import episode_starts, unroll
from rollax.returns import gae
from rollax.sharding import constrain_envs


class Sequences(NamedTuple):
    """The frozen rollout of a recurrent update, time-major ``(T, B, ...)``, with each
    environment's carry at the rollout's start ``(B, ...)``."""

    carry: Any
    observation: jax.Array
    start: jax.Array
    """``(T, B)`` bool: reset the carry before this cell (:func:`episode_starts`)."""
    action: jax.Array
    log_prob: jax.Array
    advantage: jax.Array
    target: jax.Array
    value: jax.Array


def rollout_batch(setup, state, key: jax.Array, hp):
    """Collect ``T`` steps of the ``B`` environments with their memories and compute GAE:
    ``(env_state, carry, traj, values, targets, Sequences)``."""
    net = setup.net
    env_state, carry, traj = collect_autoreset_recurrent(
        setup.env, setup.policy, setup.policy_params(state.params, state.obs_stats),
        state.env_state, state.carry, key, setup.config.num_steps)
    obs, next_obs = setup.observed(state, traj)
    starts = episode_starts(traj)
    replay = unroll(net, state.params, state.carry, obs, starts)
    batched = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))
    values = batched(state.params, replay.features)
    # the true next observation read by the memory of the episode it ends (or continues)
    step = jax.vmap(jax.vmap(net.step, (None, 0, 0)), (None, 0, 0))
    _, next_features = step(state.params, replay.carry, next_obs)
    next_values = batched(state.params, next_features)
    advantages, targets = gae(traj.reward * hp.reward_scale, values, next_values,
                              traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
    data = Sequences(state.carry, obs, starts, traj.action, traj.log_prob, advantages, targets,
                     values)
    return env_state, carry, traj, values, targets, data


def minibatches(setup, data: Sequences, key: jax.Array) -> Sequences:
    """The environments in a random order, split into ``minibatches`` groups: fields
    ``(minibatches, T, B / minibatches, ...)``, carries ``(minibatches, B / minibatches, ...)``."""
    B, M = setup.config.num_envs, setup.config.minibatches
    perm = jax.random.permutation(key, B)

    def split(x, axis):
        x = jnp.take(x, perm, axis=axis)
        x = x.reshape(x.shape[:axis] + (M, B // M) + x.shape[axis + 1:])
        return jnp.moveaxis(x, axis, 0)

    carry = constrain_envs(jax.tree_util.tree_map(lambda x: split(x, 0), data.carry), axis=1)
    rest = constrain_envs(jax.tree_util.tree_map(lambda x: split(x, 1), data[1:]), axis=2)
    return Sequences(carry, *rest)


def loss(setup, params, data: Sequences, hp):
    """:func:`rollax.losses.actor_critic_loss` of one minibatch of whole sequences, replayed
    from their stored carries with their resets."""
    net, config = setup.net, setup.config
    replay = unroll(net, params, data.carry, data.observation, data.start, data.action)
    value = jax.vmap(jax.vmap(net.value, (None, 0)), (None, 0))(params, replay.features)
    flat = jax.tree_util.tree_map(lambda x: x.reshape(-1), (
        replay.log_prob, data.log_prob, data.advantage, value, data.value, data.target,
        replay.entropy))
    return actor_critic_loss(
        *flat, clip_eps=hp.clip_eps, vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
        clip_value=config.clip_value, normalize_advantages=config.normalize_advantages)

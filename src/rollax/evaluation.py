"""Evaluating a policy by sampling: the mean return of fresh absorbing episodes."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rollax.collect import collect
from rollax.envs.base import Environment
from rollax.policies import GreedyPolicy, Policy
from rollax.recurrent import GreedyRecurrent, RecurrentPolicy, is_recurrent


def evaluate_policy(env: Environment, policy: Policy | RecurrentPolicy, params, key: jax.Array,
                    episodes: int, greedy: bool = True) -> jax.Array:
    """Mean return of ``episodes`` absorbing episodes (one per environment, ``env.horizon``
    steps, keys from ``key`` as :func:`rollax.collect` owns them), acting with the policy's
    mode (``greedy``) or by sampling; a recurrent policy starts each episode from its initial
    carry. Returns a scalar::

        mean_b sum_t reward[t, b]

    Example::

        env = rollax.make("CartPole-v1")
        net = rollax.MLPActorCritic(observation_size=4, num_actions=2)
        rollax.evaluate_policy(env, net, net.init(jax.random.key(0)), jax.random.key(1), 32)
    """
    actor: Any = policy
    if greedy:
        actor = GreedyRecurrent(actor) if is_recurrent(actor) else GreedyPolicy(actor)
    _, traj = collect(env, actor, params, key, episodes, env.horizon)
    return jnp.mean(jnp.sum(traj.reward, axis=0))

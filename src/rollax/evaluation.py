"""Evaluating a policy by sampling: the mean return of fresh absorbing episodes."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rollax.collect import episode_returns
from rollax.envs.base import Environment
from rollax.policies import GreedyPolicy, Policy
from rollax.recurrent import GreedyRecurrent, RecurrentPolicy, is_recurrent
from rollax.validate import check_count

MAX_EVAL_STEPS = 100_000
"""The longest evaluation episode by default: an environment whose horizon is longer (a
continuing task, e.g. ``horizon=10**9``) is evaluated on its first ``MAX_EVAL_STEPS`` steps
unless ``eval_steps`` says otherwise."""


def evaluation_steps(env: Environment, eval_steps: int | None = None) -> int:
    """The steps of each evaluation episode: ``eval_steps``, or by default the environment's
    horizon, at most :data:`MAX_EVAL_STEPS`."""
    if eval_steps is None:
        return min(env.horizon, MAX_EVAL_STEPS)
    check_count("eval_steps", eval_steps)
    return int(eval_steps)


def scoring_env(env: Environment) -> Environment:
    """The environment whose returns are the task's score: ``env`` itself, unless its
    training signal differs from the task's (a host environment's ``scoring``: EnvPool's Atari
    trained with ``episodic_life`` (an episode per life) or ``reward_clip`` (rewards' signs) is
    scored on whole, unclipped games). Evaluation plays this one."""
    return getattr(env, "scoring", None) or env


def evaluate_policy(env: Environment, policy: Policy | RecurrentPolicy, params, key: jax.Array,
                    episodes: int, greedy: bool = True, num_steps: int | None = None
                    ) -> jax.Array:
    """Mean return of ``episodes`` absorbing episodes of the task's score
    (:func:`scoring_env`: ``env`` itself but for EnvPool's Atari trained per life or on clipped
    rewards), one per environment, keys from ``key`` as :func:`rollax.collect` owns them, each
    cut after ``num_steps`` steps (:func:`evaluation_steps`: by default ``env.horizon``, at
    most :data:`MAX_EVAL_STEPS`), acting with the policy's mode (``greedy``) or by sampling; a
    recurrent policy starts each episode from its initial carry. Returns a scalar::

        mean_b sum_t reward[t, b]

    The returns are summed as the episodes run (:func:`rollax.collect.episode_returns`):
    memory grows with ``episodes``, not with the horizon.

    Example::

        env = rollax.make("CartPole-v1")
        net = rollax.MLPActorCritic(observation_size=4, num_actions=2)
        rollax.evaluate_policy(env, net, net.init(jax.random.key(0)), jax.random.key(1), 32)
    """
    env = scoring_env(env)
    actor: Any = policy
    if greedy:
        actor = GreedyRecurrent(actor) if is_recurrent(actor) else GreedyPolicy(actor)
    steps = evaluation_steps(env, num_steps)
    return jnp.mean(episode_returns(env, actor, params, key, episodes, steps))

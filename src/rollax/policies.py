"""Tabular policies, written directly (no distribution library).

A policy is an immutable object with pure methods over one environment's observation
(``vmap`` adds the batch):

- ``init() -> params`` (zero logits);
- ``sample(params, observation, key) -> (action, log_prob)``;
- ``log_prob(params, observation, action) -> log pi(action | observation)``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class BernoulliPolicy:
    """Two actions, one logit per non-goal position: ``P(1 | s) = sigmoid(theta[min(s, n-1)])``.

    For the corridor ``n = 3`` (positions 0, 1, 2; a finished environment may sit on the goal
    3 and reads logit 2). Log-probabilities use the stable forms ``log_sigmoid(theta)`` and
    ``log_sigmoid(-theta)``, never the log of a rounded probability.

    Example::

        policy = BernoulliPolicy(3)
        action, log_prob = policy.sample(policy.init(), jnp.int32(0), jax.random.key(0))
    """

    num_logits: int = 3

    def init(self) -> jax.Array:
        return jnp.zeros(self.num_logits, jnp.float32)

    def logit(self, params: jax.Array, observation: jax.Array) -> jax.Array:
        return params[jnp.minimum(observation, self.num_logits - 1)]

    def log_prob(self, params, observation, action) -> jax.Array:
        logit = self.logit(params, observation)
        return jnp.where(action == 1, jax.nn.log_sigmoid(logit), jax.nn.log_sigmoid(-logit))

    def sample(self, params, observation, key):
        logit = self.logit(params, observation)
        action = jax.random.bernoulli(key, jax.nn.sigmoid(logit)).astype(jnp.int32)
        return action, self.log_prob(params, observation, action)

    def greedy(self, params, observation) -> jax.Array:
        return (self.logit(params, observation) > 0).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class SoftmaxPolicy:
    """``pi(a | s) = softmax(logits[s])[a]`` with a logit table of shape ``(S, A)``."""

    num_states: int
    num_actions: int

    def init(self) -> jax.Array:
        return jnp.zeros((self.num_states, self.num_actions), jnp.float32)

    def log_prob(self, params, observation, action) -> jax.Array:
        return jax.nn.log_softmax(params[observation])[action]

    def sample(self, params, observation, key):
        action = jax.random.categorical(key, params[observation]).astype(jnp.int32)
        return action, self.log_prob(params, observation, action)

    def greedy(self, params, observation) -> jax.Array:
        return jnp.argmax(params[observation]).astype(jnp.int32)


def default_policy(env):
    """The tabular policy the trainer uses for ``env``: Bernoulli for the corridor, softmax
    over actions for any other finite task."""
    from rollax.envs.corridor import GOAL, Corridor

    if isinstance(env, Corridor):
        return BernoulliPolicy(num_logits=GOAL)
    space = env.observation_space
    return SoftmaxPolicy(space.n, env.action_space.n)

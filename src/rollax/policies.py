"""Policies: the :class:`Policy` protocol, tabular policies written directly (no distribution
library), observation normalisation (:class:`NormalizedPolicy`), and the greedy wrapper used
for evaluation. The neural actor-critics are in :mod:`rollax.nets`.

A policy is an immutable object with pure methods over one environment's observation
(``vmap`` adds the batch); :class:`Policy` types what collectors and algorithms call:

- ``sample(params, observation, key) -> (action, log_prob)``;
- ``log_prob(params, observation, action) -> log pi(action | observation)``;
- ``greedy(params, observation) -> action`` (the mode).

Tabular policies start from ``init() -> params`` (zero logits); networks from ``init(key)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp

from rollax.distributions import Categorical


@runtime_checkable
class Policy(Protocol):
    """What collectors and algorithms call on a policy (one observation; ``vmap`` batches).

    A policy for an environment with ``action_mask`` also takes the state's mask
    (:mod:`rollax.envs.masks`) as a last argument of each method, ``sample(params, observation,
    key, mask)``, and restricts it to the legal actions; collectors pass it only for such an
    environment (the actor-critics and the wrappers here take it; the tabular policies do
    not)."""

    def sample(self, params, observation: jax.Array, key: jax.Array
               ) -> tuple[jax.Array, jax.Array]:
        """``(action, log pi(action | observation))`` drawn with ``key``."""
        ...

    def log_prob(self, params, observation: jax.Array, action: jax.Array) -> jax.Array:
        """``log pi(action | observation)``."""
        ...

    def greedy(self, params, observation: jax.Array) -> jax.Array:
        """The most probable action (the mean for continuous actions)."""
        ...


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

    def distribution(self, params, observation):
        """The two actions' :class:`rollax.distributions.Categorical`, logits
        ``(0, theta)``: ``softmax`` gives ``P(1) = sigmoid(theta)``."""
        logit = self.logit(params, observation)
        return Categorical(jnp.stack([jnp.zeros_like(logit), logit]))


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

    def distribution(self, params, observation):
        """``Categorical(logits[s])`` (:class:`rollax.distributions.Categorical`)."""
        return Categorical(params[observation])


def default_policy(env):
    """The tabular policy the trainer uses for ``env``: Bernoulli for the corridor, softmax
    over actions for any other finite task."""
    from rollax.envs.corridor import GOAL, Corridor

    if isinstance(env, Corridor):
        return BernoulliPolicy(num_logits=GOAL)
    space = env.observation_space
    return SoftmaxPolicy(space.n, env.action_space.n)


# ---------------------------------------------------------------------------------------------
# Observation normalisation and the greedy wrapper


class RunningStats(NamedTuple):
    """Running count, mean and variance, merged batch by batch (:func:`merge_moments`): of
    observations (:func:`obs_norm_init`) and of discounted returns, the reward statistics
    (:func:`rollax.returns.reward_norm_init`). For an observation of
    several leaves (a ``Dict`` or ``Tuple`` space) ``mean`` and ``var`` are observation-shaped
    pytrees holding an array for each normalised leaf and None for the others (images,
    discrete and integer leaves); ``count`` is shared."""

    count: jax.Array
    mean: Any
    var: Any


ObsNormState = RunningStats
"""Deprecated: the old name of :class:`RunningStats` (it also holds the reward statistics)."""


def _is_vector(stats: Any) -> bool:
    """Statistics of one observation vector (not a pytree of leaves)."""
    return hasattr(stats, "shape")


def obs_norm_init(observation: int | Any) -> RunningStats:
    """Fresh statistics: for ``observation_size`` (an int) of one vector, or for an
    observation-shaped template (``rollax.nets.encoders.ObservationEncoder.stats_template``:
    an array per normalised leaf, None elsewhere): mean 0, variance 1, count 1e-4."""
    if isinstance(observation, int):
        return RunningStats(jnp.float32(1e-4), jnp.zeros(observation, jnp.float32),
                            jnp.ones(observation, jnp.float32))
    return RunningStats(jnp.float32(1e-4), jax.tree.map(jnp.zeros_like, observation),
                        jax.tree.map(jnp.ones_like, observation))


def merge_moments(count, mean, var, batch_count, batch_mean, batch_var):
    """Chan et al.'s parallel merge of running statistics ``(count, mean, var)`` with a batch's
    ``(batch_count, batch_mean, batch_var)`` (population variances): the ``(count, mean,
    var)`` of all the values together. The one merge of the observation statistics
    (:func:`obs_norm_update`) and the reward statistics
    (:func:`rollax.returns.reward_norm_update`); a batch of count 0 leaves the statistics
    exactly as they were."""
    total = count + batch_count
    delta = batch_mean - mean
    new_mean = mean + delta * batch_count / total
    m2 = var * count + batch_var * batch_count + delta**2 * count * batch_count / total
    return total, new_mean, m2 / total


def _merge(count, mean, var, batch, n):
    _, new_mean, new_var = merge_moments(count, mean, var, n, jnp.mean(batch, axis=0),
                                         jnp.var(batch, axis=0))
    return new_mean, new_var


def obs_norm_update(state: RunningStats, batch: Any) -> RunningStats:
    """Merge a batch ``(..., observation_size)`` into the running statistics (Chan et al.); for
    statistics of several leaves, each normalised leaf's batch ``(..., *leaf_shape)``."""
    if _is_vector(state.mean):
        batch = batch.reshape(-1, state.mean.shape[0])
        n = jnp.float32(batch.shape[0])
        return RunningStats(*merge_moments(state.count, state.mean, state.var, n,
                                           jnp.mean(batch, axis=0), jnp.var(batch, axis=0)))
    leaves = [(m, v, b) for m, v, b in zip(_flat(state.mean, batch), _flat(state.var, batch),
                                           jax.tree.leaves(batch)) if m is not None]
    if not leaves:
        return state
    rows = [b.reshape((-1, *m.shape)).astype(jnp.float32) for m, _, b in leaves]
    n = jnp.float32(rows[0].shape[0])
    total = state.count + n
    merged = iter([_merge(state.count, m, v, r, n)
                   for (m, v, _), r in zip(leaves, rows)])
    new = [next(merged) if m is not None else (None, None)
           for m in _flat(state.mean, batch)]
    treedef = jax.tree.structure(batch)
    return RunningStats(total, treedef.unflatten([m for m, _ in new]),
                        treedef.unflatten([v for _, v in new]))


def _flat(stats: Any, observation: Any) -> list:
    """``stats`` (observation-shaped, None for a leaf without statistics) as a list lined up
    with ``jax.tree.leaves(observation)``."""
    return jax.tree.structure(observation).flatten_up_to(stats)


def _z(x: jax.Array, mean: jax.Array, var: jax.Array, clip: float) -> jax.Array:
    mean = jnp.broadcast_to(mean, x.shape)
    scale = jnp.broadcast_to(jnp.sqrt(var + 1e-8), x.shape)
    return jnp.clip((x - mean) / scale, -clip, clip)


def obs_normalize(state: RunningStats, observation: Any, clip: float = 10.0) -> Any:
    """``clip((o - mean) / sqrt(var + 1e-8), -clip, clip)``; ``observation`` may carry leading
    batch axes ``(..., observation_size)``. Statistics of several leaves normalise the leaves
    that have statistics and leave the others as they are."""
    if _is_vector(state.mean):
        mean = jnp.broadcast_to(state.mean, observation.shape)
        scale = jnp.broadcast_to(jnp.sqrt(state.var + 1e-8), observation.shape)
        z = (observation - mean) / scale
        return jnp.clip(z, -clip, clip)
    out = [x if m is None else _z(x, m, v, clip)
           for x, m, v in zip(jax.tree.leaves(observation), _flat(state.mean, observation),
                              _flat(state.var, observation))]
    return jax.tree.structure(observation).unflatten(out)


@dataclasses.dataclass(frozen=True)
class NormalizedPolicy:
    """A policy whose params are ``(inner_params, stats)``: it normalises observations with
    the statistics first (with ``normalize=False`` it carries them unused)."""

    inner: Policy
    """The actor-critic (``rollax.nets.MLPActorCritic`` or ``rollax.nets.CNNActorCritic``)."""
    normalize: bool = True

    def _observed(self, stats, observation):
        return obs_normalize(stats, observation) if self.normalize else observation

    def sample(self, params, observation, key, *mask):
        inner_params, stats = params
        return self.inner.sample(inner_params, self._observed(stats, observation), key, *mask)

    def log_prob(self, params, observation, action, *mask):
        inner_params, stats = params
        return self.inner.log_prob(inner_params, self._observed(stats, observation), action,
                                   *mask)

    def greedy(self, params, observation, *mask):
        inner_params, stats = params
        return self.inner.greedy(inner_params, self._observed(stats, observation), *mask)

    def distribution(self, params, observation):
        """The inner policy's action distribution of the normalised observation (the
        actor-critics have one; a policy without it raises ``AttributeError``)."""
        inner_params, stats = params
        inner: Any = self.inner
        return inner.distribution(inner_params, self._observed(stats, observation))


@dataclasses.dataclass(frozen=True)
class GreedyPolicy:
    """The mode of another policy's distribution (for evaluation); log-prob 0."""

    inner: Policy

    def sample(self, params, observation, key, *mask):
        return self.inner.greedy(params, observation, *mask), jnp.zeros((), jnp.float32)

    def greedy(self, params, observation, *mask):
        return self.inner.greedy(params, observation, *mask)

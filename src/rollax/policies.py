"""Policies: tabular ones written directly (no distribution library), the MLP actor-critic,
observation normalisation, and the greedy wrapper used for evaluation.

A policy is an immutable object with pure methods over one environment's observation
(``vmap`` adds the batch); :class:`Policy` types what collectors and algorithms call:

- ``sample(params, observation, key) -> (action, log_prob)``;
- ``log_prob(params, observation, action) -> log pi(action | observation)``;
- ``greedy(params, observation) -> action`` (the mode).

Tabular policies start from ``init() -> params`` (zero logits); networks from ``init(key)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import NamedTuple, Protocol, runtime_checkable

import equinox as eqx
import jax
import jax.numpy as jnp

from rollax.distributions import Categorical, DiagGaussian
from rollax.initializers import orthogonal_many


@runtime_checkable
class Policy(Protocol):
    """What collectors and algorithms call on a policy (one observation; ``vmap`` batches)."""

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


# ---------------------------------------------------------------------------------------------
# Neural actor-critic


class ActorCriticParams(NamedTuple):
    """Parameters of :class:`MLPActorCritic` (a pytree of arrays only)."""

    actor: tuple
    """Actor layers (``equinox.nn.Linear``), the last one giving logits or the Gaussian mean."""
    critic: tuple
    """Critic layers, the last one giving the scalar value."""
    log_std: jax.Array
    """State-independent log standard deviations ``(action_size,)``; ``(0,)`` when discrete."""


def linear(weight: jax.Array) -> eqx.nn.Linear:
    """The ``equinox.nn.Linear`` with this ``(n_out, n_in)`` weight and a zero bias (its own
    random initialisation is only shape-evaluated, so no draw is compiled)."""
    n_out, n_in = weight.shape
    layer = jax.eval_shape(lambda: eqx.nn.Linear(n_in, n_out, key=jax.random.key(0)))
    return eqx.tree_at(lambda lin: (lin.weight, lin.bias), layer,
                       (weight, jnp.zeros(n_out, weight.dtype)))


def mlp_plan(sizes: tuple[int, ...], out_gain: float) -> tuple[list, list]:
    """Weight shapes ``(n_out, n_in)`` and orthogonal gains of an MLP with these layer sizes:
    sqrt(2) for the hidden layers, ``out_gain`` for the last."""
    shapes = [(b, a) for a, b in itertools.pairwise(sizes)]
    return shapes, [math.sqrt(2.0)] * (len(shapes) - 1) + [out_gain]


ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu}
"""Hidden activations of the actor-critics, by name."""


def check_head(net) -> None:
    """What every actor-critic checks of its settings: exactly one of ``num_actions``
    (categorical) or ``action_size`` (Gaussian), and an ``activation`` of
    :data:`ACTIVATIONS`."""
    if (net.num_actions is None) == (net.action_size is None):
        raise ValueError("give exactly one of num_actions (discrete) or action_size")
    if net.activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, "
                         f"got {net.activation!r}")


class ActorCriticHeads:
    """The policy and value methods of an actor-critic, from its ``forward(layers,
    observation)`` (the output of the actor's or the critic's layers) and ``discrete``: the
    actor's output is categorical logits (discrete) or the mean of a diagonal Gaussian with
    ``params.log_std``; the value is the critic's single output."""

    @property
    def discrete(self) -> bool:
        raise NotImplementedError

    def forward(self, layers, observation: jax.Array) -> jax.Array:
        raise NotImplementedError

    def distribution(self, params: ActorCriticParams, observation: jax.Array):
        out = self.forward(params.actor, observation)
        if self.discrete:
            return Categorical(out)
        return DiagGaussian(out, params.log_std)

    def value(self, params: ActorCriticParams, observation: jax.Array) -> jax.Array:
        return self.forward(params.critic, observation)[0]

    def sample(self, params, observation, key):
        dist = self.distribution(params, observation)
        action = dist.sample(key)
        return action, dist.log_prob(action)

    def log_prob(self, params, observation, action) -> jax.Array:
        return self.distribution(params, observation).log_prob(action)

    def greedy(self, params, observation) -> jax.Array:
        return self.distribution(params, observation).mode()


@dataclasses.dataclass(frozen=True)
class MLPActorCritic(ActorCriticHeads):
    """Separate MLP actor and critic (orthogonal initialisation, as in CleanRL/PureJaxRL).

    Hidden layers use gain sqrt(2), the actor's output gain 0.01 and the critic's 1.0. With
    ``num_actions`` the actor gives categorical logits; with ``action_size`` it gives the mean
    of a diagonal Gaussian whose log standard deviation is a free parameter vector.

    Shapes: one observation ``(observation_size,)``; ``vmap`` adds batch axes.

    Example::

        net = MLPActorCritic(observation_size=4, num_actions=2)
        params = net.init(jax.random.key(0))
        action, log_prob = net.sample(params, jnp.zeros(4), jax.random.key(1))
    """

    observation_size: int
    num_actions: int | None = None
    action_size: int | None = None
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    init_log_std: float = 0.0

    def __post_init__(self):
        check_head(self)

    @property
    def discrete(self) -> bool:
        return self.num_actions is not None

    def init(self, key: jax.Array) -> ActorCriticParams:
        out = self.num_actions if self.discrete else self.action_size
        assert out is not None
        sizes = (self.observation_size, *self.hidden)
        actor_shapes, actor_gains = mlp_plan((*sizes, out), 0.01)
        critic_shapes, critic_gains = mlp_plan((*sizes, 1), 1.0)
        weights = [linear(w) for w in orthogonal_many(
            key, actor_shapes + critic_shapes, actor_gains + critic_gains)]
        actor, critic = tuple(weights[:len(actor_shapes)]), tuple(weights[len(actor_shapes):])
        log_std = jnp.full((0 if self.discrete else self.action_size,), self.init_log_std,
                           jnp.float32)
        return ActorCriticParams(actor, critic, log_std)

    def forward(self, layers, x):
        act = ACTIVATIONS[self.activation]
        for layer in layers[:-1]:
            x = act(layer(x))
        return layers[-1](x)


class ObsNormState(NamedTuple):
    """Running mean and variance of observations (merged batch by batch)."""

    count: jax.Array
    mean: jax.Array
    var: jax.Array


def obs_norm_init(observation_size: int) -> ObsNormState:
    return ObsNormState(jnp.float32(1e-4), jnp.zeros(observation_size, jnp.float32),
                        jnp.ones(observation_size, jnp.float32))


def obs_norm_update(state: ObsNormState, batch: jax.Array) -> ObsNormState:
    """Merge a batch ``(..., observation_size)`` into the running statistics (Chan et al.)."""
    batch = batch.reshape(-1, state.mean.shape[0])
    n = jnp.float32(batch.shape[0])
    mean, var = jnp.mean(batch, axis=0), jnp.var(batch, axis=0)
    total = state.count + n
    delta = mean - state.mean
    new_mean = state.mean + delta * n / total
    m2 = state.var * state.count + var * n + delta**2 * state.count * n / total
    return ObsNormState(total, new_mean, m2 / total)


def obs_normalize(state: ObsNormState, observation: jax.Array, clip: float = 10.0) -> jax.Array:
    """``clip((o - mean) / sqrt(var + 1e-8), -clip, clip)``; ``observation`` may carry leading
    batch axes ``(..., observation_size)``."""
    mean = jnp.broadcast_to(state.mean, observation.shape)
    scale = jnp.broadcast_to(jnp.sqrt(state.var + 1e-8), observation.shape)
    z = (observation - mean) / scale
    return jnp.clip(z, -clip, clip)


@dataclasses.dataclass(frozen=True)
class NormalizedPolicy:
    """A policy that normalises observations first: its params are ``(inner_params, stats)``."""

    inner: Policy
    """The actor-critic (:class:`MLPActorCritic` or ``rollax.networks.CNNActorCritic``)."""

    def sample(self, params, observation, key):
        inner_params, stats = params
        return self.inner.sample(inner_params, obs_normalize(stats, observation), key)

    def log_prob(self, params, observation, action):
        inner_params, stats = params
        return self.inner.log_prob(inner_params, obs_normalize(stats, observation), action)

    def greedy(self, params, observation):
        inner_params, stats = params
        return self.inner.greedy(inner_params, obs_normalize(stats, observation))


@dataclasses.dataclass(frozen=True)
class GreedyPolicy:
    """The mode of another policy's distribution (for evaluation); log-prob 0."""

    inner: Policy

    def sample(self, params, observation, key):
        return self.inner.greedy(params, observation), jnp.zeros((), jnp.float32)

    def greedy(self, params, observation):
        return self.inner.greedy(params, observation)

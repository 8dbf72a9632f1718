"""The head every actor-critic here ends in (MLP, CNN, GRU/LSTM), written once.

Each network reads its features (the observation itself, the flattened convolutions, or the
memory's output), then two separate dense heads: the actor, ``len(hidden)`` layers with the
activation then the output layer (categorical logits for ``num_actions``, the mean of a
diagonal Gaussian with a free ``log_std`` for ``action_size``, ``sum(nvec)`` logits of a
factorised categorical for ``action_nvec``, one Bernoulli logit per bit for ``action_bits``),
and the critic, the same hidden sizes then one value. The heads are drawn by one rule:
orthogonal weights with gain sqrt(2) for hidden layers, :data:`ACTOR_OUT_GAIN` for the actor's
output (1.0 for logits of every kind, 0.01 for a Gaussian mean) and 1.0 for the critic's, zero
biases.

- :data:`ACTIVATIONS`, :func:`linear`, :func:`mlp_plan`: the dense layers' activations, an
  ``equinox.nn.Linear`` from a drawn matrix, the shapes and gains of a stack of them;
- :func:`orthogonal_plans`: a whole network's matrices from one
  :func:`rollax.nets.initializers.orthogonal_many` draw, split back by part;
- :class:`ActorCriticHead`: the settings check (:func:`check_head`), the heads' plan, the
  forward loop (:meth:`ActorCriticHead.dense`), the action distribution and the initial
  ``log_std``, the base of all three networks;
- :class:`ActorCriticParams` and :class:`FeedForwardHeads`: the feed-forward networks' (MLP,
  CNN) parameters, and their policy methods from one ``forward(layers, observation)``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from rollax.distributions import (
    Bernoulli,
    Categorical,
    DiagGaussian,
    Distribution,
    MultiCategorical,
    masked,
)
from rollax.nets.initializers import orthogonal_many

__all__ = ["ACTION_KINDS", "ACTIVATIONS", "ACTOR_OUT_GAIN", "ActorCriticHead", "ActorCriticParams",
           "FeedForwardHeads", "check_head", "linear", "mlp_plan", "orthogonal_plans"]

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu}
"""Hidden activations of the actor-critics, by name."""

ACTOR_OUT_GAIN = {"logits": 1.0, "mean": 0.01}
"""Orthogonal gain of the actor's output layer. Logits: 1.0; CleanRL's 0.01 starts from an
almost uniform policy whose logits barely depend on the observation, and with few gradient steps
(1,024 CartPole environments x 16 updates: 256) PPO stays near it (greedy 125 where gain 1.0
with per-network clipping gets 425; benchmarks/NOTES.md, "Wide batches"). Gaussian means keep
0.01 (actions start near the middle of their range)."""

Plan = tuple[list, list]
"""Weight shapes ``(n_out, n_in)`` (kernels as matrices) and their orthogonal gains."""


def linear(weight: jax.Array) -> eqx.nn.Linear:
    """The ``equinox.nn.Linear`` with this ``(n_out, n_in)`` weight and a zero bias (its own
    random initialisation is only shape-evaluated, so no draw is compiled)."""
    n_out, n_in = weight.shape
    layer = jax.eval_shape(lambda: eqx.nn.Linear(n_in, n_out, key=jax.random.key(0)))
    return eqx.tree_at(lambda lin: (lin.weight, lin.bias), layer,
                       (weight, jnp.zeros(n_out, weight.dtype)))


def mlp_plan(sizes: tuple[int, ...], out_gain: float) -> Plan:
    """Weight shapes ``(n_out, n_in)`` and orthogonal gains of an MLP with these layer sizes:
    sqrt(2) for the hidden layers, ``out_gain`` for the last."""
    shapes = [(b, a) for a, b in itertools.pairwise(sizes)]
    return shapes, [math.sqrt(2.0)] * (len(shapes) - 1) + [out_gain]


def orthogonal_plans(key: jax.Array, plans: Sequence[Plan]) -> list[list[jax.Array]]:
    """The matrices of every plan, drawn together by one ``orthogonal_many`` call in the order
    given (so the order of ``plans`` fixes the draw), split back into one list per plan."""
    shapes = [s for plan_shapes, _ in plans for s in plan_shapes]
    gains = [g for _, plan_gains in plans for g in plan_gains]
    weights = orthogonal_many(key, shapes, gains)
    starts = list(itertools.accumulate((len(s) for s, _ in plans), initial=0))
    return [weights[a:b] for a, b in itertools.pairwise(starts)]


ACTION_KINDS = ("num_actions", "action_size", "action_nvec", "action_bits")
"""The settings of an actor-critic's action, of which exactly one is given: ``num_actions``
(``Discrete``: a categorical), ``action_size`` (``Box``: a diagonal Gaussian),
``action_nvec`` (``MultiDiscrete``: a factorised categorical), ``action_bits``
(``MultiBinary``: a Bernoulli per bit)."""


def check_head(net) -> None:
    """What every actor-critic checks of its settings: exactly one of :data:`ACTION_KINDS`
    (``action_nvec`` a non-empty tuple of positive ints), and an ``activation`` of
    :data:`ACTIVATIONS`."""
    given = [name for name in ACTION_KINDS if getattr(net, name, None) is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of num_actions (discrete) or action_size "
                         "(or action_nvec, action_bits)")
    nvec = getattr(net, "action_nvec", None)
    if nvec is not None and (not isinstance(nvec, tuple) or not nvec
                             or not all(isinstance(n, int) and n >= 1 for n in nvec)):
        raise ValueError(f"action_nvec must be a non-empty tuple of positive ints, got {nvec!r}")
    if net.activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, "
                         f"got {net.activation!r}")


class ActorCriticHead:
    """The actor and critic heads of a network. A subclass is a frozen dataclass with the
    fields below; its construction checks them (:func:`check_head`). ``action_nvec`` and
    ``action_bits`` default to None here, so a subclass without them keeps working."""

    num_actions: int | None
    action_size: int | None
    action_nvec: tuple[int, ...] | None = None
    action_bits: int | None = None
    hidden: tuple[int, ...]
    activation: str
    init_log_std: float

    def __post_init__(self) -> None:
        check_head(self)

    @property
    def discrete(self) -> bool:
        """Whether the actor gives logits (every kind but the Gaussian's ``action_size``)."""
        return self.action_size is None

    @property
    def num_outputs(self) -> int:
        """The actor's output size: ``num_actions`` logits, ``action_size`` means,
        ``sum(action_nvec)`` logits or ``action_bits`` logits."""
        if self.action_nvec is not None:
            return sum(self.action_nvec)
        return next(n for n in (self.num_actions, self.action_size, self.action_bits)
                    if n is not None)

    def head_plans(self, num_features: int) -> tuple[Plan, Plan]:
        """The actor's and the critic's dense heads over ``num_features`` inputs."""
        sizes = (num_features, *self.hidden)
        gain = ACTOR_OUT_GAIN["logits" if self.discrete else "mean"]
        return mlp_plan((*sizes, self.num_outputs), gain), mlp_plan((*sizes, 1), 1.0)

    def initial_log_std(self) -> jax.Array:
        """``init_log_std`` for each action dimension; ``(0,)`` when discrete."""
        size = 0 if self.discrete else self.num_outputs
        return jnp.full((size,), self.init_log_std, jnp.float32)

    def dense(self, layers: Sequence, x: jax.Array) -> jax.Array:
        """The MLP forward loop: the activation after every layer but the last."""
        act = ACTIVATIONS[self.activation]
        for layer in layers[:-1]:
            x = act(layer(x))
        return layers[-1](x)

    def action_distribution(self, out: jax.Array, log_std: jax.Array) -> Distribution:
        """The actor's output as a distribution: categorical logits, a Gaussian mean with
        ``log_std``, a factorised categorical's flat logits or the Bernoulli logits."""
        if self.action_nvec is not None:
            return MultiCategorical.from_flat(out, self.action_nvec)
        if self.action_bits is not None:
            return Bernoulli(out)
        return Categorical(out) if self.discrete else DiagGaussian(out, log_std)


class ActorCriticParams(NamedTuple):
    """Parameters of a feed-forward actor-critic (:class:`rollax.nets.mlp.MLPActorCritic`,
    :class:`rollax.nets.cnn.CNNActorCritic`): a pytree of arrays only."""

    actor: tuple
    """Actor layers, the last one giving logits or the Gaussian mean."""
    critic: tuple
    """Critic layers, the last one giving the scalar value."""
    log_std: jax.Array
    """State-independent log standard deviations ``(action_size,)``; ``(0,)`` when discrete."""


def read_cells(net, params, observation) -> tuple[Distribution, jax.Array]:
    """``net.distribution_value`` of each of ``N`` observations (leaves ``(N, ...)``): the
    distributions (leaves ``(N, ...)``) and the values ``(N,)``. A network with a
    ``cells_per_call`` reads them that many at a time (``lax.map``, its gradient too: the
    Nature CNN's patches of a few frames stay in the caches, where a whole minibatch's do not);
    others read all at once (``vmap``). The same numbers either way."""
    chunk = getattr(net, "cells_per_call", None)
    if chunk is None or chunk >= len(jax.tree.leaves(observation)[0]):
        return jax.vmap(net.distribution_value, (None, 0))(params, observation)
    return jax.lax.map(lambda o: net.distribution_value(params, o), observation,
                       batch_size=chunk)


class FeedForwardHeads(ActorCriticHead):
    """The policy methods (:class:`rollax.policies.Policy`) and ``value`` of a feed-forward
    actor-critic, from ``forward(layers, observation)``: the output of the actor's or the
    critic's layers (by default :meth:`ActorCriticHead.dense` on the observation). The policy
    methods take the state's action mask (``None``: every action legal) and act, score and
    pick the mode among the legal actions only."""

    def forward(self, layers: tuple, observation: jax.Array) -> jax.Array:
        return self.dense(layers, observation)

    def distribution(self, params: ActorCriticParams, observation: jax.Array) -> Distribution:
        return self.action_distribution(self.forward(params.actor, observation), params.log_std)

    def value(self, params: ActorCriticParams, observation: jax.Array) -> jax.Array:
        return self.forward(params.critic, observation)[0]

    def distribution_value(self, params, observation: jax.Array) -> tuple[Distribution,
                                                                          jax.Array]:
        """``(distribution, value)`` of one observation, as a loss reads both: a network whose
        actor and critic share a torso computes it once here, so its gradient flows back
        through the torso once (separate calls would run the torso's backward pass twice)."""
        return self.distribution(params, observation), self.value(params, observation)

    def sample(self, params, observation, key, mask=None):
        dist = masked(self.distribution(params, observation), mask)
        action = dist.sample(key)
        return action, dist.log_prob(action)

    def log_prob(self, params, observation, action, mask=None) -> jax.Array:
        return masked(self.distribution(params, observation), mask).log_prob(action)

    def greedy(self, params, observation, mask=None) -> jax.Array:
        return masked(self.distribution(params, observation), mask).mode()

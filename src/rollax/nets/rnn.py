"""The recurrent actor-critic: an embedding, a GRU or LSTM memory, and the shared actor and
critic heads on the memory's output (:class:`RecurrentActorCritic`, its parameters
:class:`RecurrentParams`).

What makes it a recurrent policy (the ``RecurrentPolicy`` protocol, ``sample``/``greedy`` from
``step`` and ``distribution``, where carries are reset and how rollouts are replayed) lives in
:mod:`rollax.recurrent`; this module is only the network.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from rollax.distributions import Distribution
from rollax.nets.heads import ACTIVATIONS, ActorCriticHead, linear, orthogonal_plans
from rollax.recurrent import RecurrentHeads

__all__ = ["RecurrentActorCritic", "RecurrentParams"]


class RecurrentParams(NamedTuple):
    """Parameters of :class:`RecurrentActorCritic` (arrays only)."""

    embed: eqx.nn.Linear
    """Observation -> ``embed_size`` features (then the activation)."""
    cell: eqx.nn.GRUCell | eqx.nn.LSTMCell
    """The memory: ``cell(features, carry) -> carry``."""
    actor: tuple
    """Actor layers from the memory's output: hidden layers, then logits or Gaussian mean."""
    critic: tuple
    """Critic layers from the memory's output: hidden layers, then the value."""
    log_std: jax.Array
    """State-independent log standard deviations; ``(0,)`` when discrete."""


def _cell(kind: str, weight_ih: jax.Array, weight_hh: jax.Array):
    """A GRU or LSTM cell with these input and recurrent matrices and zero biases (no random
    draw compiled)."""
    cell_type = eqx.nn.GRUCell if kind == "gru" else eqx.nn.LSTMCell
    n_hidden, n_in = weight_hh.shape[1], weight_ih.shape[1]
    cell = jax.eval_shape(lambda: cell_type(n_in, n_hidden, key=jax.random.key(0)))
    zeros = jnp.zeros(weight_ih.shape[0], jnp.float32)
    cell = eqx.tree_at(lambda c: (c.weight_ih, c.weight_hh, c.bias), cell,
                       (weight_ih, weight_hh, zeros))
    if kind == "gru":
        cell = eqx.tree_at(lambda c: c.bias_n, cell, jnp.zeros(n_hidden, jnp.float32))
    return cell


@dataclasses.dataclass(frozen=True)
class RecurrentActorCritic(RecurrentHeads, ActorCriticHead):
    """A GRU (or LSTM) actor-critic: ``embed -> cell -> separate actor and critic heads``.

    Each step reads one observation ``(observation_size,)``: ``x = act(embed(o))``, the memory
    moves on, ``h = cell(x, carry)`` (GRU: the carry is ``h (memory_size,)``; LSTM: ``(h, c)``),
    and the heads read ``h``: ``len(hidden)`` layers then logits (``num_actions``) or a Gaussian
    mean (``action_size``), and the same shape ending in one value for the critic (the shared
    head, :class:`rollax.nets.heads.ActorCriticHead`). The actor and critic share the embedding
    and the memory (as in PureJaxRL's recurrent PPO); each episode starts from a zero carry.

    Initialisation follows the MLP: orthogonal dense layers with gain sqrt(2), 1.0 on the
    actor's logits (0.01 on a Gaussian mean) and 1.0 on the critic's output, zero biases; the
    cell's input and recurrent matrices orthogonal (gain 1) with zero biases.

    Example::

        net = RecurrentActorCritic(observation_size=3, num_actions=2)
        params = net.init(jax.random.key(0))
        carry = net.initial_carry(params)
        carry, action, log_prob = net.sample(params, carry, jnp.zeros(3), jax.random.key(1))
    """

    observation_size: int
    num_actions: int | None = None
    action_size: int | None = None
    cell: str = "gru"
    embed_size: int = 128
    memory_size: int = 128
    hidden: tuple[int, ...] = (128,)
    activation: str = "relu"
    init_log_std: float = 0.0
    action_nvec: tuple[int, ...] | None = None
    """``MultiDiscrete`` actions: the number of choices of each component."""
    action_bits: int | None = None
    """``MultiBinary`` actions: the number of bits."""
    encoder: Any = None
    """An observation of several leaves (or a discrete one): the
    :class:`rollax.nets.encoders.ObservationEncoder` (without torsos) whose code of
    ``observation_size`` floats the embedding reads; None: the observation is that vector."""

    def __post_init__(self):
        super().__post_init__()
        if self.encoder is not None and self.encoder.num_torso_layers:
            raise ValueError("a recurrent network's encoder has no convolutional torso")
        if self.cell not in ("gru", "lstm"):
            raise ValueError(f"cell must be one of gru, lstm, got {self.cell!r}")

    def init(self, key: jax.Array) -> RecurrentParams:
        """Drawn in the order embedding, cell input, cell recurrent, actor head, critic head
        (one ``orthogonal_many`` call)."""
        gates = (3 if self.cell == "gru" else 4) * self.memory_size
        memory = ([(self.embed_size, self.observation_size), (gates, self.embed_size),
                   (gates, self.memory_size)], [math.sqrt(2.0), 1.0, 1.0])
        (embed, weight_ih, weight_hh), actor, critic = orthogonal_plans(
            key, [memory, *self.head_plans(self.memory_size)])
        return RecurrentParams(
            embed=linear(embed), cell=_cell(self.cell, weight_ih, weight_hh),
            actor=tuple(linear(w) for w in actor), critic=tuple(linear(w) for w in critic),
            log_std=self.initial_log_std())

    def initial_carry(self, params: RecurrentParams):
        """Zeros: ``(memory_size,)`` for a GRU, a pair of them ``(h, c)`` for an LSTM."""
        zeros = jnp.zeros(self.memory_size, jnp.float32)
        return zeros if self.cell == "gru" else (zeros, zeros)

    def step(self, params: RecurrentParams, carry, observation):
        if self.encoder is not None:
            observation = self.encoder.encode((), observation)
        x = ACTIVATIONS[self.activation](params.embed(observation))
        carry = params.cell(x, carry)
        features = carry if self.cell == "gru" else carry[0]
        return carry, features

    def distribution(self, params: RecurrentParams, features: jax.Array) -> Distribution:
        return self.action_distribution(self.dense(params.actor, features), params.log_std)

    def value(self, params: RecurrentParams, features: jax.Array) -> jax.Array:
        """The critic's value of a step's features."""
        return self.dense(params.critic, features)[0]

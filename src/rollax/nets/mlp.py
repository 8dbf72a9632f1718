"""The MLP actor-critic: separate actor and critic perceptrons over one observation vector."""

from __future__ import annotations

import dataclasses

import jax

from rollax.nets.heads import ActorCriticParams, FeedForwardHeads, linear, orthogonal_plans

__all__ = ["MLPActorCritic"]


@dataclasses.dataclass(frozen=True)
class MLPActorCritic(FeedForwardHeads):
    """Separate MLP actor and critic (orthogonal initialisation, as in CleanRL/PureJaxRL).

    Hidden layers use gain sqrt(2), the actor's output 1.0 for logits (0.01 for a Gaussian
    mean, ``rollax.nets.heads.ACTOR_OUT_GAIN``) and the critic's 1.0. With
    ``num_actions`` the actor gives categorical logits; with ``action_size`` it gives the mean
    of a diagonal Gaussian whose log standard deviation is a free parameter vector.

    Shapes: one observation ``(observation_size,)``; ``vmap`` adds batch axes. Both networks
    are the shared head (:class:`rollax.nets.heads.ActorCriticHead`) read on the observation.

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
    action_nvec: tuple[int, ...] | None = None
    """``MultiDiscrete`` actions: the number of choices of each component."""
    action_bits: int | None = None
    """``MultiBinary`` actions: the number of bits."""

    def init(self, key: jax.Array) -> ActorCriticParams:
        """Actor layers drawn first, then critic layers, by one ``orthogonal_many`` call."""
        actor, critic = orthogonal_plans(key, self.head_plans(self.observation_size))
        return ActorCriticParams(tuple(linear(w) for w in actor),
                                 tuple(linear(w) for w in critic), self.initial_log_std())

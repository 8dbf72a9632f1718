"""The actor-critic of a team (:mod:`rollax.envs.agents`): one network, its parameters shared by
every agent, read on each agent's own observation with the agent's one-hot id appended (so
shared parameters can still act differently per agent).

Shapes, for a team of ``N`` agents whose observation is ``(N, D)``::

    x_i   = concat(o_i, onehot(i))                       (D + N,)    the actor's input
    pi_i  = actor(x_i)                                   a categorical over agent i's n actions,
                                                         or a Gaussian of its k values
    V_i   = critic(x_i)                                  own critic (IPPO)
    V_i   = critic(concat(o_1, ..., o_N, onehot(i)))     (N * D + N,) centralised (MAPPO)

:meth:`TeamActorCritic.distribution` is one distribution with batch shape ``(N,)``: its
``log_prob`` and ``entropy`` are each agent's, ``(N,)``, and a sample is the team's action
``(N,)`` (``(N, k)`` continuous), so the collectors record ``(T, B, N)`` log-probabilities and
the losses weigh each agent's ratio on its own. ``value`` is ``(N,)``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from rollax.distributions import Distribution
from rollax.nets.heads import ActorCriticParams, FeedForwardHeads, linear, orthogonal_plans

__all__ = ["CRITICS", "TeamActorCritic"]

CRITICS = ("own", "centralised")
"""The values of a config's ``critic`` setting: each agent's critic reads its own observation
(IPPO), or the whole team's (MAPPO)."""


@dataclasses.dataclass(frozen=True)
class TeamActorCritic(FeedForwardHeads):
    """Separate MLP actor and critic shared by ``num_agents`` agents (module docstring), drawn
    by the rule of :class:`rollax.nets.mlp.MLPActorCritic` (its heads' plans over the wider
    inputs). One observation is the team's ``(num_agents, observation_size)``; ``vmap`` adds
    batch axes.

    Example::

        net = TeamActorCritic(num_agents=2, observation_size=5, num_actions=3)
        params = net.init(jax.random.key(0))
        action, log_prob = net.sample(params, jnp.zeros((2, 5)), jax.random.key(1))  # (2,) each
    """

    num_agents: int
    observation_size: int
    """One agent's observation size ``D`` (observation statistics are per feature, shared by
    the agents)."""
    num_actions: int | None = None
    """One agent's actions (a categorical each)."""
    action_size: int | None = None
    """One agent's continuous values (a diagonal Gaussian each)."""
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    init_log_std: float = 0.0
    centralised: bool = False
    """The critic reads the whole team's observation (MAPPO), not the agent's own."""

    @property
    def critic_inputs(self) -> int:
        """The critic's input size: ``D + N``, or ``N * D + N`` centralised."""
        agents = self.num_agents
        return (agents if self.centralised else 1) * self.observation_size + agents

    def init(self, key: jax.Array) -> ActorCriticParams:
        """The actor's layers drawn first, then the critic's, by one ``orthogonal_many``
        call."""
        actor, _ = self.head_plans(self.observation_size + self.num_agents)
        _, critic = self.head_plans(self.critic_inputs)
        actor_w, critic_w = orthogonal_plans(key, [actor, critic])
        return ActorCriticParams(tuple(linear(w) for w in actor_w),
                                 tuple(linear(w) for w in critic_w), self.initial_log_std())

    def ids(self) -> jax.Array:
        """The agents' one-hot ids ``(N, N)``."""
        return jnp.eye(self.num_agents, dtype=jnp.float32)

    def actor_input(self, observation: jax.Array) -> jax.Array:
        """``(N, D + N)``: each agent's observation and its id."""
        return jnp.concatenate([observation, self.ids()], axis=-1)

    def critic_input(self, observation: jax.Array) -> jax.Array:
        """``(N, D + N)``, or centralised ``(N, N * D + N)``: the team's observation in every
        row, then the agent's id."""
        if not self.centralised:
            return self.actor_input(observation)
        team = jnp.broadcast_to(observation.reshape(1, -1),
                                (self.num_agents, observation.size))
        return jnp.concatenate([team, self.ids()], axis=-1)

    def distribution(self, params: ActorCriticParams, observation: jax.Array) -> Distribution:
        out = jax.vmap(self.dense, (None, 0))(params.actor, self.actor_input(observation))
        # each agent's log_std row: a batch of teams then batches the Gaussian's fields alike
        log_std = params.log_std if self.discrete else jnp.broadcast_to(params.log_std, out.shape)
        return self.action_distribution(out, log_std)

    def value(self, params: ActorCriticParams, observation: jax.Array) -> jax.Array:
        out = jax.vmap(self.dense, (None, 0))(params.critic, self.critic_input(observation))
        return out[:, 0]

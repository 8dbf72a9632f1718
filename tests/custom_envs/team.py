"""A team of agents with rewards of their own (``rollax.envs.agents``), written as a user would:
``N`` agents each see the same cue (a one-hot of ``K`` values, drawn per step) and choose one of
``K`` actions at once. Agent ``i`` is paid 1 when its action is ``(cue + i) % K``, so one
network shared by the agents can only be right for all of them by reading its agent id. Agent
``i`` may not take action ``(cue + i + 1) % K`` (``action_mask``): taking it anyway pays
:data:`TRAP`, more than a right answer, so a policy ignoring the mask would learn it.

- :func:`make`: the discrete team, ``MultiDiscrete((K,) * N)``, mask ``(N, K)``;
- :func:`continuous`: agent ``i`` acts with one value in ``[-1, 1]`` (``Box`` ``(N, 1)``) and
  is paid ``-(a_i - target_i)^2``, ``target_i = (i / (N - 1)) * 2 - 1``.

Episodes end by truncation only (``horizon`` steps); the team's reward is the sum of its
agents'.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters

TRAP = 3.0
"""What agent ``i`` is paid for its illegal action (more than a right answer's 1)."""


class TeamState(NamedTuple):
    key: jax.Array
    cue: jax.Array
    """int32 (): this step's cue."""
    rewards: jax.Array
    """float32 (N,): each agent's reward in the last step."""
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class Team(rollax.Environment):
    """``num_agents`` agents, ``num_values`` cues and actions (module docstring)."""

    num_agents: int = 2
    num_values: int = 3
    horizon: int = 4
    kind: str = "discrete"

    def reset(self, key):
        key, draw = jax.random.split(key)
        cue = jax.random.randint(draw, (), 0, self.num_values, jnp.int32)
        return TeamState(jax.random.key_data(key), cue,
                         jnp.zeros((self.num_agents,), jnp.float32), *start_counters())

    def targets(self, state) -> jax.Array:
        return (state.cue + jnp.arange(self.num_agents)) % self.num_values

    def action_mask(self, state):
        if self.kind != "discrete":
            return None
        banned = (self.targets(state) + 1) % self.num_values
        return jnp.arange(self.num_values)[None, :] != banned[:, None]

    def transition(self, state, action, key):
        if self.kind == "discrete":
            action = jnp.asarray(action, jnp.int32)
            targets = self.targets(state)
            rewards = jnp.where(action == targets, 1.0, 0.0)
            rewards = jnp.where(action == (targets + 1) % self.num_values, TRAP, rewards)
        else:
            goal = jnp.linspace(-1.0, 1.0, self.num_agents)
            rewards = -(jnp.clip(action[:, 0], -1.0, 1.0) - goal) ** 2
        key, draw = jax.random.split(jax.random.wrap_key_data(state.key))
        cue = jax.random.randint(draw, (), 0, self.num_values, jnp.int32)
        rewards = rewards.astype(jnp.float32)
        moved = state._replace(key=jax.random.key_data(key), cue=cue, rewards=rewards)
        return moved, jnp.sum(rewards), jnp.zeros((), bool)

    def agent_rewards(self, state):
        return state.rewards

    def observation(self, state):
        cue = jax.nn.one_hot(state.cue, self.num_values, dtype=jnp.float32)
        return jnp.broadcast_to(cue, (self.num_agents, self.num_values))

    @property
    def observation_space(self):
        return rollax.Box(np.float32(0.0), np.float32(1.0), (self.num_agents, self.num_values))

    @property
    def action_space(self):
        if self.kind == "discrete":
            return rollax.MultiDiscrete((self.num_values,) * self.num_agents)
        return rollax.Box(np.float32(-1.0), np.float32(1.0), (self.num_agents, 1))


def make(horizon: int = 4) -> Team:
    return Team(horizon=horizon)


def continuous(horizon: int = 4) -> Team:
    return Team(horizon=horizon, kind="continuous")

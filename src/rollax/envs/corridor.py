"""The corridor: the reference task of ``docs/contract.md §1`` (positions 0..3, goal 3)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Discrete, Environment, start_counters
from rollax.validate import check_horizon

NUM_POSITIONS = 4
GOAL = NUM_POSITIONS - 1
GOAL_REWARD = 1.0
STEP_COST = 0.01
LEFT, RIGHT = 0, 1


class CorridorState(NamedTuple):
    position: jax.Array
    """int32 ``()``: 0..3."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


@dataclasses.dataclass(frozen=True)
class Corridor(Environment):
    """Positions 0..3, goal 3; action 0 moves left, 1 right (clipped to [0, 3]).

    ``reset`` starts at 0 or 1 with equal probability (``randint(key, (), 0, 2)``). Reaching 3
    terminates with reward +1; every other step costs -0.01.
    """

    horizon: int = 8

    def __post_init__(self):
        check_horizon(self.horizon)

    def reset(self, key: jax.Array) -> CorridorState:
        position = jax.random.randint(key, (), 0, 2).astype(jnp.int32)
        return CorridorState(position, *start_counters())

    def transition(self, state: CorridorState, action: jax.Array, key: jax.Array | None):
        move = jnp.where(action == RIGHT, 1, -1)
        position = jnp.clip(state.position + move, 0, GOAL).astype(jnp.int32)
        reached = position == GOAL
        reward = jnp.where(reached, GOAL_REWARD, -STEP_COST)
        return state._replace(position=position), reward, reached

    def observation(self, state: CorridorState) -> jax.Array:
        return state.position

    @property
    def observation_space(self) -> Discrete:
        return Discrete(NUM_POSITIONS)

    @property
    def action_space(self) -> Discrete:
        return Discrete(2)

    def to_mdp(self):
        """The corridor as a :class:`rollax.exact.FiniteMDP` (goal absorbing, same horizon)."""
        from rollax.exact import FiniteMDP

        p = np.zeros((NUM_POSITIONS, 2, NUM_POSITIONS))
        r = np.zeros_like(p)
        term = np.zeros_like(p, dtype=bool)
        for s in range(GOAL):
            for a, move in ((LEFT, -1), (RIGHT, 1)):
                s2 = min(max(s + move, 0), GOAL)
                p[s, a, s2] = 1.0
                r[s, a, s2] = GOAL_REWARD if s2 == GOAL else -STEP_COST
                term[s, a, s2] = s2 == GOAL
        p[GOAL, :, GOAL] = 1.0  # never reached live: the goal terminates
        term[GOAL, :, GOAL] = True
        start = np.array([0.5, 0.5, 0.0, 0.0])
        return FiniteMDP(p, r, term, start, self.horizon)

"""MountainCar-v0 in JAX: Gymnasium's under-powered car in a valley (discrete pushes)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, Environment, start_counters
from rollax.validate import check_horizon

MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.5
FORCE = 0.001
GRAVITY = 0.0025
RESET_LOW, RESET_HIGH = -0.6, -0.4


class MountainCarState(NamedTuple):
    position: jax.Array
    """float32 ``()``: in [-1.2, 0.6]."""
    velocity: jax.Array
    """float32 ``()``: in [-0.07, 0.07]."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


@dataclasses.dataclass(frozen=True)
class MountainCar(Environment):
    """Drive a car up the right hill; actions 0, 1, 2 push left, not at all, right.

    Matches Gymnasium's ``MountainCar-v0``: every live step gives reward -1; the episode
    terminates once ``position >= 0.5`` and ``velocity >= goal_velocity``. The left wall at
    -1.2 is inelastic (a car pushed into it stops). ``reset`` draws the position uniformly
    from ``(-0.6, -0.4)`` with zero velocity.
    """

    horizon: int = 200
    goal_velocity: float = 0.0

    def __post_init__(self):
        check_horizon(self.horizon)

    def reset(self, key: jax.Array) -> MountainCarState:
        position = jax.random.uniform(key, (), jnp.float32, RESET_LOW, RESET_HIGH)
        zero = jnp.zeros((), jnp.float32)
        return MountainCarState(position, zero, *start_counters())

    def transition(self, state: MountainCarState, action: jax.Array, key: jax.Array | None):
        push = (jnp.asarray(action, jnp.int32) - 1).astype(jnp.float32)
        velocity = state.velocity + push * FORCE - GRAVITY * jnp.cos(3 * state.position)
        velocity = jnp.clip(velocity, -MAX_SPEED, MAX_SPEED)
        position = jnp.clip(state.position + velocity, MIN_POSITION, MAX_POSITION)
        at_wall = (position == jnp.float32(MIN_POSITION)) & (velocity < 0)
        velocity = jnp.where(at_wall, 0.0, velocity).astype(jnp.float32)

        arrived = (position >= GOAL_POSITION) & (velocity >= self.goal_velocity)
        return state._replace(position=position, velocity=velocity), -1.0, arrived

    def observation(self, state: MountainCarState) -> jax.Array:
        return jnp.stack([state.position, state.velocity]).astype(jnp.float32)

    @property
    def observation_space(self) -> Box:
        low = np.array([MIN_POSITION, -MAX_SPEED], np.float32)
        high = np.array([MAX_POSITION, MAX_SPEED], np.float32)
        return Box(low, high, (2,))

    @property
    def action_space(self) -> Discrete:
        return Discrete(3)

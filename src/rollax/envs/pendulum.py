"""Pendulum-v1 in JAX: Gymnasium's torque-limited swing-up with a continuous action."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Environment, start_counters
from rollax.validate import check_horizon

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
MASS = 1.0
LENGTH = 1.0
RESET_THETA = math.pi
RESET_THETA_DOT = 1.0


class PendulumState(NamedTuple):
    theta: jax.Array
    """float32 ``()``: angle from upright (radians, not wrapped, as in Gymnasium)."""
    theta_dot: jax.Array
    """float32 ``()``: angular velocity, in [-8, 8]."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has been truncated (it never terminates)."""


def _angle_normalize(theta: jax.Array) -> jax.Array:
    """``theta`` shifted by whole turns into ``[-pi, pi)``."""
    return (theta + math.pi) % (2 * math.pi) - math.pi


@dataclasses.dataclass(frozen=True)
class Pendulum(Environment):
    """Swing a pendulum up and hold it; the action is a torque, shape ``(1,)``, clipped to ±2.

    Matches Gymnasium's ``Pendulum-v1``: the reward of a step is
    ``-(angle^2 + 0.1 theta_dot^2 + 0.001 u^2)`` evaluated at the state before the step (angle
    normalized to [-pi, pi), ``u`` the clipped torque); the task never terminates. ``reset``
    draws ``theta`` uniformly from ``(-pi, pi)`` and ``theta_dot`` from ``(-1, 1)``.
    """

    horizon: int = 200
    g: float = 10.0

    def __post_init__(self):
        check_horizon(self.horizon)

    def reset(self, key: jax.Array) -> PendulumState:
        high = jnp.asarray([RESET_THETA, RESET_THETA_DOT], jnp.float32)
        theta, theta_dot = jax.random.uniform(key, (2,), jnp.float32, -high, high)
        return PendulumState(theta, theta_dot, *start_counters())

    def transition(self, state: PendulumState, action: jax.Array, key: jax.Array | None):
        action = jnp.asarray(action, jnp.float32)
        if action.shape != (1,):
            raise ValueError(f"Pendulum's action has shape (1,), got {action.shape}")
        u = jnp.clip(action[0], -MAX_TORQUE, MAX_TORQUE)
        theta, theta_dot = state.theta, state.theta_dot
        cost = _angle_normalize(theta) ** 2 + 0.1 * theta_dot**2 + 0.001 * u**2
        # Semi-implicit Euler: the angle advances with the new (clipped) velocity.
        accel = 3 * self.g / (2 * LENGTH) * jnp.sin(theta) + 3.0 / (MASS * LENGTH**2) * u
        new_theta_dot = jnp.clip(theta_dot + accel * DT, -MAX_SPEED, MAX_SPEED)
        new_theta = theta + new_theta_dot * DT

        moved = state._replace(
            theta=new_theta.astype(jnp.float32), theta_dot=new_theta_dot.astype(jnp.float32)
        )
        return moved, -cost, jnp.zeros((), bool)

    def observation(self, state: PendulumState) -> jax.Array:
        return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot]).astype(
            jnp.float32
        )

    @property
    def observation_space(self) -> Box:
        high = np.array([1.0, 1.0, MAX_SPEED], np.float32)
        return Box(-high, high, (3,))

    @property
    def action_space(self) -> Box:
        return Box(-MAX_TORQUE, MAX_TORQUE, (1,))

"""Acrobot-v1 in JAX: Gymnasium's two-link pendulum ('book' dynamics, one RK4 step of 0.2 s)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, Environment, start_counters
from rollax.validate import check_horizon

DT = 0.2
LENGTH_1 = 1.0
MASS_1 = 1.0
MASS_2 = 1.0
COM_1 = 0.5  # distance from each joint to its link's centre of mass
COM_2 = 0.5
INERTIA = 1.0  # moment of inertia of either link about its centre
GRAVITY = 9.8
MAX_VEL_1 = 4 * math.pi
MAX_VEL_2 = 9 * math.pi
TORQUES = (-1.0, 0.0, 1.0)
RESET_BOUND = 0.1


class AcrobotState(NamedTuple):
    theta1: jax.Array
    """float32 ``()``: angle of the first link from hanging straight down, in [-pi, pi]."""
    theta2: jax.Array
    """float32 ``()``: angle of the second link relative to the first, in [-pi, pi]."""
    dtheta1: jax.Array
    """float32 ``()``: angular velocity of joint 1, in [-4 pi, 4 pi]."""
    dtheta2: jax.Array
    """float32 ``()``: angular velocity of joint 2, in [-9 pi, 9 pi]."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


def _derivatives(y: jax.Array, torque: jax.Array) -> jax.Array:
    """Time derivative of ``(theta1, theta2, dtheta1, dtheta2)`` under ``torque`` at joint 2."""
    theta1, theta2, dtheta1, dtheta2 = y[0], y[1], y[2], y[3]
    m1, m2, l1, lc1, lc2 = MASS_1, MASS_2, LENGTH_1, COM_1, COM_2
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * jnp.cos(theta2)) + 2 * INERTIA
    d2 = m2 * (lc2**2 + l1 * lc2 * jnp.cos(theta2)) + INERTIA
    phi2 = m2 * lc2 * GRAVITY * jnp.cos(theta1 + theta2 - math.pi / 2)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * jnp.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * jnp.sin(theta2)
        + (m1 * lc1 + m2 * l1) * GRAVITY * jnp.cos(theta1 - math.pi / 2)
        + phi2
    )
    # The 'book' form (Sutton & Barto) keeps the dtheta1^2 coupling term.
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * jnp.sin(theta2) - phi2) / (
        m2 * lc2**2 + INERTIA - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return jnp.stack([dtheta1, dtheta2, ddtheta1, ddtheta2])


def _rk4(y: jax.Array, torque: jax.Array, dt: float) -> jax.Array:
    """One classical Runge-Kutta step of size ``dt`` (torque held constant)."""
    k1 = _derivatives(y, torque)
    k2 = _derivatives(y + dt / 2 * k1, torque)
    k3 = _derivatives(y + dt / 2 * k2, torque)
    k4 = _derivatives(y + dt * k3, torque)
    return y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def _wrap(x: jax.Array, low: float, high: float) -> jax.Array:
    """Shift ``x`` by whole periods ``high - low`` into ``[low, high]`` (identity if inside)."""
    period = high - low
    above = x - period * jnp.ceil((x - high) / period)
    below = x + period * jnp.ceil((low - x) / period)
    return jnp.where(x > high, above, jnp.where(x < low, below, x))


@dataclasses.dataclass(frozen=True)
class Acrobot(Environment):
    """Swing the tip of a two-link chain above the bar; actions 0, 1, 2 apply torque -1, 0, +1.

    Matches Gymnasium's ``Acrobot-v1`` (no torque noise): each live step costs -1, except the
    terminating one, which gives 0; the episode terminates once
    ``-cos(theta1) - cos(theta1 + theta2) > 1``. ``reset`` draws all four variables uniformly
    from ``(-0.1, 0.1)``.
    """

    horizon: int = 500

    def __post_init__(self):
        check_horizon(self.horizon)

    def reset(self, key: jax.Array) -> AcrobotState:
        theta1, theta2, dtheta1, dtheta2 = jax.random.uniform(
            key, (4,), jnp.float32, -RESET_BOUND, RESET_BOUND
        )
        return AcrobotState(theta1, theta2, dtheta1, dtheta2, *start_counters())

    def transition(self, state: AcrobotState, action: jax.Array, key: jax.Array | None):
        torque = jnp.asarray(TORQUES, jnp.float32)[action]
        y = jnp.stack([state.theta1, state.theta2, state.dtheta1, state.dtheta2])
        y = _rk4(y, torque, DT)
        theta1 = _wrap(y[0], -math.pi, math.pi)
        theta2 = _wrap(y[1], -math.pi, math.pi)
        dtheta1 = jnp.clip(y[2], -MAX_VEL_1, MAX_VEL_1)
        dtheta2 = jnp.clip(y[3], -MAX_VEL_2, MAX_VEL_2)

        swung_up = -jnp.cos(theta1) - jnp.cos(theta1 + theta2) > 1.0
        reward = jnp.where(swung_up, 0.0, -1.0)
        moved = state._replace(theta1=theta1, theta2=theta2, dtheta1=dtheta1, dtheta2=dtheta2)
        return moved, reward, swung_up

    def observation(self, state: AcrobotState) -> jax.Array:
        return jnp.stack(
            [
                jnp.cos(state.theta1),
                jnp.sin(state.theta1),
                jnp.cos(state.theta2),
                jnp.sin(state.theta2),
                state.dtheta1,
                state.dtheta2,
            ]
        ).astype(jnp.float32)

    @property
    def observation_space(self) -> Box:
        high = np.array([1.0, 1.0, 1.0, 1.0, MAX_VEL_1, MAX_VEL_2], np.float32)
        return Box(-high, high, (6,))

    @property
    def action_space(self) -> Discrete:
        return Discrete(3)

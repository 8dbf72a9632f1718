"""CartPole-v1 in JAX: Gymnasium's cart-pole dynamics (explicit Euler, tau = 0.02)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, Environment, start_counters
from rollax.validate import check_horizon

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLE_MOMENT = MASS_POLE * HALF_LENGTH
FORCE = 10.0
TAU = 0.02
THETA_LIMIT = 12 * 2 * math.pi / 360  # 12 degrees, in radians
X_LIMIT = 2.4
RESET_BOUND = 0.05


class CartPoleState(NamedTuple):
    x: jax.Array
    """float32 ``()``: cart position."""
    x_dot: jax.Array
    """float32 ``()``: cart velocity."""
    theta: jax.Array
    """float32 ``()``: pole angle from upright (radians)."""
    theta_dot: jax.Array
    """float32 ``()``: pole angular velocity."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


@dataclasses.dataclass(frozen=True)
class CartPole(Environment):
    """Balance a pole on a cart; action 0 pushes the cart left, 1 pushes it right.

    Matches Gymnasium's ``CartPole-v1``: every live step, the terminating one included, gives
    reward +1; the episode terminates once ``|x| > 2.4`` or ``|theta| > 12`` degrees. ``reset``
    draws all four variables uniformly from ``(-0.05, 0.05)``.
    """

    horizon: int = 500

    def __post_init__(self):
        check_horizon(self.horizon)

    def reset(self, key: jax.Array) -> CartPoleState:
        x, x_dot, theta, theta_dot = jax.random.uniform(
            key, (4,), jnp.float32, -RESET_BOUND, RESET_BOUND
        )
        return CartPoleState(x, x_dot, theta, theta_dot, *start_counters())

    def transition(self, state: CartPoleState, action: jax.Array, key: jax.Array | None):
        force = jnp.where(action == 1, FORCE, -FORCE).astype(jnp.float32)
        cos, sin = jnp.cos(state.theta), jnp.sin(state.theta)
        # Pole and cart accelerations of the frictionless cart-pole (Barto, Sutton, Anderson).
        common = (force + POLE_MOMENT * state.theta_dot**2 * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * common) / (
            HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos**2 / TOTAL_MASS)
        )
        x_acc = common - POLE_MOMENT * theta_acc * cos / TOTAL_MASS
        # Explicit Euler: positions advance with the old velocities.
        x = state.x + TAU * state.x_dot
        x_dot = state.x_dot + TAU * x_acc
        theta = state.theta + TAU * state.theta_dot
        theta_dot = state.theta_dot + TAU * theta_acc

        fell = (jnp.abs(x) > X_LIMIT) | (jnp.abs(theta) > THETA_LIMIT)
        moved = state._replace(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot)
        return moved, 1.0, fell

    def observation(self, state: CartPoleState) -> jax.Array:
        return jnp.stack([state.x, state.x_dot, state.theta, state.theta_dot]).astype(jnp.float32)

    @property
    def observation_space(self) -> Box:
        high = np.array([2 * X_LIMIT, np.inf, 2 * THETA_LIMIT, np.inf], np.float32)
        return Box(-high, high, (4,))

    @property
    def action_space(self) -> Discrete:
        return Discrete(2)

"""Returns over time-major ``(T, B)`` arrays."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def reward_to_go(rewards: jax.Array) -> jax.Array:
    """Undiscounted reward-to-go ``G_t = sum_{k >= t} r_k`` along the time axis 0.

    For complete absorbing episodes (padding rewards are 0) this is the return from each step.
    Shapes: ``rewards (T, ...)`` -> ``(T, ...)``. Example: rewards ``(-0.01, -0.01, 1, 0)`` give
    ``(0.98, 0.99, 1, 0)``.
    """
    rewards = jnp.asarray(rewards)
    if rewards.ndim < 1:
        raise ValueError(f"rewards must have a leading time axis, got shape {rewards.shape}")
    return jnp.flip(jnp.cumsum(jnp.flip(rewards, 0), axis=0), 0)

"""A 1-D point mass pushed by a bounded force: a continuous-action environment with a two-term
reward, ``-(x**2) - 0.01 * a**2``, and no terminal state (episodes end by truncation only)."""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters

DT = 0.05


class PointMassState(NamedTuple):
    x: jax.Array
    """float32 ``()``: position."""
    v: jax.Array
    """float32 ``()``: velocity."""
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class PointMass(rollax.Environment):
    """Start at ``x`` uniform in [-1, 1] at rest; the action, shape ``(1,)`` in [-1, 1], is
    the force of one step (semi-implicit Euler); the reward of a step is ``-(x**2) - 0.01 *
    a**2`` at the position it reaches."""

    horizon: int = 100
    dt: float = DT
    """The step's duration (an option: ``make(..., dt=0.1)``, ``--env-options dt=0.1``)."""

    def reset(self, key):
        x = jax.random.uniform(key, (), jnp.float32, -1.0, 1.0)
        return PointMassState(x, jnp.float32(0.0), *start_counters())

    def transition(self, state, action, key):
        a = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        v = state.v + self.dt * a[0]
        x = state.x + self.dt * v
        reward = -(x**2) - 0.01 * jnp.sum(a**2)
        return state._replace(x=x, v=v), reward, jnp.zeros((), bool)

    def observation(self, state):
        return jnp.stack([state.x, state.v])

    @property
    def observation_space(self):
        return rollax.Box(np.float32(-np.inf), np.float32(np.inf), (2,))

    @property
    def action_space(self):
        return rollax.Box(np.float32(-1.0), np.float32(1.0), (1,))


def make(horizon: int = 100, dt: float = DT) -> PointMass:
    return PointMass(horizon=horizon, dt=dt)


def continuing(horizon: int = 10**9) -> PointMass:
    """A continuing task: the time limit is so far away that no episode reaches it."""
    return PointMass(horizon=horizon)

"""An environment written for JAX's default rank promotion (``"allow"``), as MuJoCo's MJX is:
its step multiplies a ``(3, 3)`` matrix by a ``(3,)`` vector elementwise, which broadcasts the
vector over the rows.

The state is a vector ``x`` of 3 floats, 0 at reset; a step adds ``mean(M * x, axis=0) + a``
(``M`` all ones, so the mean over rows is ``x``: the step doubles ``x`` and adds the action
index to each entry), clipped to ``[-10, 10]``. The reward is 1 for action 0, 0 for action 1;
episodes end by truncation after ``horizon`` steps.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters


class BroadcastingState(NamedTuple):
    x: jax.Array
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class Broadcasting(rollax.Environment):
    """The task of the module docstring."""

    horizon: int = 4

    def reset(self, key):
        return BroadcastingState(jnp.zeros(3), *start_counters())

    def transition(self, state, action, key):
        rows = jnp.ones((3, 3)) * state.x  # (3, 3) * (3,): an implicit rank promotion
        x = jnp.clip(jnp.mean(rows, axis=0) + state.x + action, -10.0, 10.0)
        reward = (jnp.asarray(action) == 0).astype(jnp.float32)
        return state._replace(x=x), reward, jnp.zeros((), bool)

    def observation(self, state):
        return state.x

    @property
    def observation_space(self):
        return rollax.Box(np.float32(-10.0), np.float32(10.0), (3,))

    @property
    def action_space(self):
        return rollax.Discrete(2)


def make(horizon: int = 4) -> Broadcasting:
    return Broadcasting(horizon=horizon)

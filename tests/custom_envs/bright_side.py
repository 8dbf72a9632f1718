"""A task seen only through byte frames: which half of a 40x40 picture holds the bright square.

Each step shows a fresh frame: a 40x40x1 image of noise in ``[0, 60]`` (integers, as bytes)
with one 6x6 square of 255 whose top-left corner is uniform over the columns ``0..14`` (left
half) or ``20..34`` (right half), side uniform, row uniform over ``0..34``. The answer is the
side (0 left, 1 right); the reward is 1 for it, 0 otherwise; episodes end by truncation after
``horizon`` steps. The observation space is a ``Box`` of bounds ``[0, 255]``, flattened, with
``raw_observation_shape`` ``(40, 40, 1)``: ``--network auto`` reads it with the Nature CNN
(the image is at least 36x36), its pixels scaled by 1/255.

By hand: the optimum is ``horizon``, a uniformly random policy gets ``horizon / 2``.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters

SIZE = 40
SQUARE = 6


class BrightSideState(NamedTuple):
    frame: jax.Array
    """float32 (SIZE * SIZE,): the flattened frame."""
    side: jax.Array
    """int32: 0 the square is in the left half, 1 in the right."""
    elapsed: jax.Array
    done: jax.Array


def _draw(key):
    k_noise, k_side, k_row, k_col = jax.random.split(key, 4)
    side = jax.random.bernoulli(k_side).astype(jnp.int32)
    row = jax.random.randint(k_row, (), 0, SIZE - SQUARE + 1)
    col = jax.random.randint(k_col, (), 0, SIZE // 2 - SQUARE + 1) + side * (SIZE // 2)
    noise = jax.random.randint(k_noise, (SIZE, SIZE), 0, 61).astype(jnp.float32)
    square = jax.lax.dynamic_update_slice(noise, jnp.full((SQUARE, SQUARE), 255.0), (row, col))
    return square.reshape(-1), side


@dataclasses.dataclass(frozen=True)
class BrightSide(rollax.Environment):
    """The task of the module docstring."""

    horizon: int = 4
    stochastic = True
    raw_observation_shape = (SIZE, SIZE, 1)

    def reset(self, key):
        return BrightSideState(*_draw(key), *start_counters())

    def transition(self, state, action, key):
        reward = (jnp.asarray(action, jnp.int32) == state.side).astype(jnp.float32)
        frame, side = _draw(key)
        return state._replace(frame=frame, side=side), reward, jnp.zeros((), bool)

    def observation(self, state):
        return state.frame

    @property
    def observation_space(self):
        return rollax.Box(np.float32(0.0), np.float32(255.0), (SIZE * SIZE,))

    @property
    def action_space(self):
        return rollax.Discrete(2)


def make(horizon: int = 4) -> BrightSide:
    return BrightSide(horizon=horizon)

"""A task whose observation is a ``Dict`` of an image, a vector and a discrete cue, where the
right action needs all three.

Each step shows a fresh draw: ``grid`` a 5x5x1 image with one lit cell, in the two left columns
or the two right ones (side uniform); ``reading`` a vector of 2 floats, the first of magnitude
in ``[0.2, 1]`` and random sign, the second noise in ``[-1, 1]``; ``cue`` a ``Discrete(2)``.
The answer is the lit cell's side (0 left, 1 right) when ``cue == 0``, and the sign of
``reading[0]`` (0 negative, 1 positive) when ``cue == 1``; the reward is 1 for the answer, 0
otherwise. Episodes end by truncation after ``horizon`` steps.

By hand: the optimum is ``horizon``; a uniformly random policy gets ``horizon / 2``; a policy
blind to any one leaf gets at most ``3 / 4`` per step (blind to the cue: it is right for sure
only when side and sign agree, half the time; blind to the image or to the vector: right for
sure under one cue, at chance under the other), so ``0.75 * horizon``.

Factories: :func:`make` (the task), :func:`tuple_obs` (the same task observing a ``Tuple``
``(grid, (reading, cue))``), :func:`bad_cue` (the cue reads 2, outside its space, on every
third step: ``check-env`` fails ``observation_in_space`` naming the leaf ``['cue']``).
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters


class LookoutState(NamedTuple):
    side: jax.Array
    """int32: 0 the lit cell is in the left two columns, 1 in the right two."""
    cell: jax.Array
    """int32 (2,): the lit cell's row and column."""
    reading: jax.Array
    """float32 (2,)."""
    cue: jax.Array
    """int32: 0 read the image, 1 read the vector."""
    elapsed: jax.Array
    done: jax.Array


def _draw(key):
    k_side, k_row, k_col, k_mag, k_sign, k_noise, k_cue = jax.random.split(key, 7)
    side = jax.random.bernoulli(k_side).astype(jnp.int32)
    row = jax.random.randint(k_row, (), 0, 5, jnp.int32)
    col = jax.random.randint(k_col, (), 0, 2, jnp.int32) + 3 * side
    sign = jnp.where(jax.random.bernoulli(k_sign), 1.0, -1.0)
    magnitude = jax.random.uniform(k_mag, (), jnp.float32, 0.2, 1.0)
    noise = jax.random.uniform(k_noise, (), jnp.float32, -1.0, 1.0)
    cue = jax.random.bernoulli(k_cue).astype(jnp.int32)
    return side, jnp.stack([row, col]), jnp.stack([sign * magnitude, noise]), cue


@dataclasses.dataclass(frozen=True)
class Lookout(rollax.Environment):
    """The task of the module docstring; ``layout`` ``"dict"`` or ``"tuple"``; ``bad_cue``
    plants an observation outside its space."""

    horizon: int = 4
    layout: str = "dict"
    bad_cue: bool = False
    stochastic = True

    def reset(self, key):
        return LookoutState(*_draw(key), *start_counters())

    def answer(self, state):
        sign = (state.reading[0] > 0).astype(jnp.int32)
        return jnp.where(state.cue == 0, state.side, sign)

    def transition(self, state, action, key):
        reward = (jnp.asarray(action, jnp.int32) == self.answer(state)).astype(jnp.float32)
        return state._replace(**dict(zip(("side", "cell", "reading", "cue"), _draw(key)))), \
            reward, jnp.zeros((), bool)

    def observation(self, state):
        grid = jnp.zeros((5, 5, 1), jnp.float32).at[state.cell[0], state.cell[1], 0].set(1.0)
        cue = state.cue
        if self.bad_cue:
            cue = jnp.where(state.elapsed % 3 == 2, jnp.int32(2), cue)
        if self.layout == "tuple":
            return (grid, (state.reading, cue))
        return {"grid": grid, "reading": state.reading, "cue": cue}

    @property
    def observation_space(self):
        grid = rollax.Box(np.float32(0.0), np.float32(1.0), (5, 5, 1))
        reading = rollax.Box(np.float32(-1.0), np.float32(1.0), (2,))
        cue = rollax.Discrete(2)
        if self.layout == "tuple":
            return rollax.Tuple((grid, rollax.Tuple((reading, cue))))
        return rollax.Dict({"grid": grid, "reading": reading, "cue": cue})

    @property
    def action_space(self):
        return rollax.Discrete(2)


def make(horizon: int = 4) -> Lookout:
    return Lookout(horizon=horizon)


def tuple_obs(horizon: int = 4) -> Lookout:
    return Lookout(horizon=horizon, layout="tuple")


def bad_cue(horizon: int = 4) -> Lookout:
    return Lookout(horizon=horizon, bad_cue=True)

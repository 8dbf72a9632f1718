"""Guessing tasks with factorised actions: each episode draws a target, shown in the
observation, and every step's reward is the number of action components equal to it.

- :func:`multi_discrete`: a ``MultiDiscrete(nvec)`` action (default ``(3, 4)``), the target
  shown one-hot per component (``sum(nvec)`` floats);
- :func:`multi_binary`: a ``MultiBinary(n)`` action (default 3 bits), the target's bits shown
  as floats.

Episodes end by truncation only; the best return is ``len(nvec) * horizon``, a uniformly
random policy's ``horizon * sum(1 / nvec)``.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters


class GuessState(NamedTuple):
    target: jax.Array
    """int32 ``(K,)``: the components to guess, fixed for the episode."""
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class Guess(rollax.Environment):
    """Guess a target vector ``t`` (component ``k`` uniform in ``0 .. nvec[k]-1``, drawn at
    reset): the reward of a step is ``sum_k [a_k == t_k]``. ``binary`` makes the action space
    ``MultiBinary(len(nvec))`` (``nvec`` all 2) and the observation the bits themselves."""

    nvec: tuple[int, ...] = (3, 4)
    binary: bool = False
    horizon: int = 4

    def reset(self, key):
        high = jnp.asarray(self.nvec, jnp.int32)
        target = jax.random.randint(key, (len(self.nvec),), 0, high, jnp.int32)
        return GuessState(target, *start_counters())

    def transition(self, state, action, key):
        hits = jnp.sum(jnp.asarray(action, jnp.int32) == state.target)
        return state, hits.astype(jnp.float32), jnp.zeros((), bool)

    def observation(self, state):
        if self.binary:
            return state.target.astype(jnp.float32)
        return jnp.concatenate([jax.nn.one_hot(t, n, dtype=jnp.float32)
                                for t, n in zip(state.target, self.nvec, strict=True)])

    @property
    def observation_space(self):
        size = len(self.nvec) if self.binary else sum(self.nvec)
        return rollax.Box(np.float32(0.0), np.float32(1.0), (size,))

    @property
    def action_space(self):
        if self.binary:
            return rollax.MultiBinary(len(self.nvec))
        return rollax.MultiDiscrete(self.nvec)


def multi_discrete(horizon: int = 4) -> Guess:
    return Guess(nvec=(3, 4), horizon=horizon)


def multi_binary(horizon: int = 4) -> Guess:
    return Guess(nvec=(2, 2, 2), binary=True, horizon=horizon)

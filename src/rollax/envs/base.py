"""The functional environment interface and its spaces.

An environment is a small immutable object (a frozen dataclass) holding static settings; all
of its behaviour is pure functions over a pytree state, so it can be used under ``jit``,
``vmap`` and ``lax.scan``:

- ``reset(key) -> state`` for one environment (``vmap`` adds the batch);
- ``step(state, action) -> (next_state, reward, terminated, truncated)`` for a deterministic
  environment, ``step(state, action, key)`` for one whose transitions are random
  (``stochastic = True``);
- ``observation(state)``: what a policy sees;
- ``done(state)``: whether the episode has already ended (the live mask is ``~done`` of the
  state *before* a step).

``terminated`` and ``truncated`` are events: true on exactly the transition where they happen.
A finished state absorbs: stepping it returns it unchanged with reward 0 and no events.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

State = Any


@dataclasses.dataclass(frozen=True)
class Discrete:
    """``n`` actions or observations ``0 .. n-1`` of integer ``dtype``, scalar shape."""

    n: int
    dtype: Any = jnp.int32
    shape: tuple[int, ...] = ()

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.bool_(False)
        return jnp.all((x >= 0) & (x < self.n))


@dataclasses.dataclass(frozen=True)
class Box:
    """Real vectors of ``shape`` with elementwise bounds ``low <= x <= high``."""

    low: Any
    high: Any
    shape: tuple[int, ...]
    dtype: Any = jnp.float32

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape:
            return jnp.bool_(False)
        low = np.broadcast_to(np.asarray(self.low), self.shape)
        high = np.broadcast_to(np.asarray(self.high), self.shape)
        return jnp.all((x >= low) & (x <= high))


class Environment(abc.ABC):
    """Base class of functional environments (subclasses are frozen dataclasses)."""

    stochastic: ClassVar[bool] = False
    """True when ``step`` takes a key (random transitions)."""

    horizon: int
    """Live steps after which an episode is truncated."""

    @abc.abstractmethod
    def reset(self, key: jax.Array) -> State:
        """One environment's start state from its own reset key."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array, key: jax.Array | None = None):
        """``(next_state, reward, terminated, truncated)`` for one environment."""

    @abc.abstractmethod
    def observation(self, state: State) -> jax.Array:
        """The observation a policy sees in ``state``."""

    def done(self, state: State) -> jax.Array:
        """Whether the episode ended before ``state`` (terminated or truncated)."""
        return state.done

    @property
    @abc.abstractmethod
    def observation_space(self) -> Discrete | Box: ...

    @property
    @abc.abstractmethod
    def action_space(self) -> Discrete | Box: ...


def step_with_key(env: Environment, state: State, action: jax.Array, key: jax.Array | None = None):
    """``env.step`` for any environment: ``key`` (the transition key) reaches a stochastic
    environment only; a deterministic one is stepped without it. Returns ``(next_state, reward,
    terminated, truncated)``."""
    if env.stochastic:
        return env.step(state, action, key)
    return env.step(state, action)

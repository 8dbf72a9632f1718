"""Guessing tasks with action masks, and their planted bugs: each episode draws a target
vector ``t`` (shown one-hot in the observation); component ``k`` of an action may take only two
values, ``t_k`` and ``(t_k + 1) % n_k`` (``action_mask``). A step's reward is the number of
components equal to the target, plus a bonus of :data:`TRAP` for every component set to an
illegal value: a policy that ignored the mask would learn to take illegal actions, so the best
return under the mask, ``K * horizon``, is reached only by a policy that honours it.

- :func:`discrete`: a ``Discrete(4)`` action, mask ``(4,)``;
- :func:`multi_discrete`: a ``MultiDiscrete((3, 4))`` action, mask ``(2, 4)`` (the padding
  entry of component 0 False);
- :func:`multi_binary`: a ``MultiBinary(3)`` action, mask ``(3, 2)``: bit 0 must equal its
  target (one legal value), bits 1 and 2 may take both values;
- planted bugs: :func:`no_legal` (a live state with no legal action), :func:`wrong_shape` (a
  ``(5,)`` mask for ``Discrete(4)``), :func:`int_mask` (an int32 mask).

Episodes end by truncation only (``horizon`` 4 by default).
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.envs.base import start_counters

TRAP = 3.0
"""The reward of each component set to an illegal value (more than a correct guess's 1)."""


class MaskedGuessState(NamedTuple):
    target: jax.Array
    """int32 ``(K,)``: the components to guess, fixed for the episode."""
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class MaskedGuess(rollax.Environment):
    """Guess ``t`` among the legal values ``{t_k, t_k + 1 mod n_k}``; ``kind`` is the action
    space (``discrete``: ``nvec`` must have one entry), ``bug`` a planted mask bug."""

    nvec: tuple[int, ...] = (3, 4)
    kind: str = "multi_discrete"
    horizon: int = 4
    bug: str | None = None

    def reset(self, key):
        high = jnp.asarray(self.nvec, jnp.int32)
        target = jax.random.randint(key, (len(self.nvec),), 0, high, jnp.int32)
        return MaskedGuessState(target, *start_counters())

    def legal(self, state) -> jax.Array:
        """bool ``(K, max(nvec))``: ``legal[k, v]``, component ``k`` may take value ``v``."""
        values = jnp.arange(max(self.nvec))[None, :]
        n = jnp.asarray(self.nvec, jnp.int32)[:, None]
        t = state.target[:, None]
        allowed = (values == t) | (values == (t + 1) % n)
        if self.kind == "multi_binary":  # bit 0: its target only; the others: both values
            allowed = allowed.at[0].set(values[0] == t[0])
        return allowed & (values < n)

    def action_mask(self, state):
        legal = self.legal(state)
        if self.bug == "no_legal":  # every action illegal on the second step
            legal = legal & (state.elapsed != 1)
        if self.kind == "discrete":
            legal = legal[0]
            if self.bug == "wrong_shape":
                legal = jnp.concatenate([legal, jnp.ones(1, bool)])
        if self.bug == "int_mask":
            return legal.astype(jnp.int32)
        return legal

    def transition(self, state, action, key):
        action = jnp.atleast_1d(jnp.asarray(action, jnp.int32))
        legal = self.legal(state)
        index = jnp.clip(action, 0, max(self.nvec) - 1)[:, None]
        ok = jnp.take_along_axis(legal, index, axis=1)[:, 0]
        hits = jnp.sum(action == state.target) + TRAP * jnp.sum(~ok)
        return state, hits.astype(jnp.float32), jnp.zeros((), bool)

    def observation(self, state):
        return jnp.concatenate([jax.nn.one_hot(t, n, dtype=jnp.float32)
                                for t, n in zip(state.target, self.nvec, strict=True)])

    @property
    def observation_space(self):
        return rollax.Box(np.float32(0.0), np.float32(1.0), (sum(self.nvec),))

    @property
    def action_space(self):
        if self.kind == "discrete":
            return rollax.Discrete(self.nvec[0])
        if self.kind == "multi_binary":
            return rollax.MultiBinary(len(self.nvec))
        return rollax.MultiDiscrete(self.nvec)


def discrete(horizon: int = 4) -> MaskedGuess:
    return MaskedGuess(nvec=(4,), kind="discrete", horizon=horizon)


def multi_discrete(horizon: int = 4) -> MaskedGuess:
    return MaskedGuess(nvec=(3, 4), horizon=horizon)


def multi_binary(horizon: int = 4) -> MaskedGuess:
    return MaskedGuess(nvec=(2, 2, 2), kind="multi_binary", horizon=horizon)


def no_legal(horizon: int = 4) -> MaskedGuess:
    return MaskedGuess(nvec=(3, 4), horizon=horizon, bug="no_legal")


def wrong_shape(horizon: int = 4) -> MaskedGuess:
    return MaskedGuess(nvec=(4,), kind="discrete", horizon=horizon, bug="wrong_shape")


def int_mask(horizon: int = 4) -> MaskedGuess:
    return MaskedGuess(nvec=(4,), kind="discrete", horizon=horizon, bug="int_mask")

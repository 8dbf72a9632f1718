"""Recurrent policies: a memory (the *carry*) per environment, read and updated at every step,
reset where an episode starts.

A recurrent policy (:class:`RecurrentPolicy`) splits acting into two pure functions over one
environment (``vmap`` adds the batch)::

    carry', features = step(params, carry, observation)       # read one observation
    dist = distribution(params, features)                       # then act from the features

``initial_carry(params)`` is the memory an episode starts from (zeros for rollax's GRU/LSTM).
:class:`RecurrentHeads` derives what collectors call from those two:
``sample(params, carry, observation, key) -> (carry', action, log_prob)`` and
``greedy(params, carry, observation) -> (carry', action)``.

Where the memory is reset (``docs/contract.md`` §7):

- The absorbing collector starts every environment from ``initial_carry`` and freezes the carry
  of an environment whose episode has ended (padding cells do not move it).
- The auto-reset collector resets, after each step, the carry of exactly the environments that
  restarted; the carry it hands to the next rollout is therefore already reset where needed.
- A rollout is replayed from the carry it started with (the caller keeps it) and the trajectory:
  :func:`episode_starts` marks the cells whose observation opens an episode inside the rollout
  (``done`` of the previous cell; never the first cell, whose carry is the stored one), and
  :func:`unroll` resets the carry before reading those observations. Replaying with the
  parameters that collected gives the stored log-probabilities back exactly.

This module holds that machinery: the protocol, :class:`RecurrentHeads`, the carry helpers
(:func:`reset_where`, :func:`initial_carries`, :func:`episode_starts`), the replay
(:func:`unroll`, :func:`replay_log_prob`) and the wrappers :class:`NormalizedRecurrent` and
:class:`GreedyRecurrent`. The GRU/LSTM network itself is
:class:`rollax.nets.rnn.RecurrentActorCritic`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp

from rollax.policies import obs_normalize

__all__ = [
    "GreedyRecurrent",
    "NormalizedRecurrent",
    "RecurrentHeads",
    "RecurrentPolicy",
    "Replay",
    "episode_starts",
    "initial_carries",
    "is_recurrent",
    "replay_log_prob",
    "reset_where",
    "unroll",
]


@runtime_checkable
class RecurrentPolicy(Protocol):
    """What collectors and recurrent PPO call on a recurrent policy (one environment)."""

    recurrent: bool
    """Always ``True``: collectors carry a memory for the policy."""

    def initial_carry(self, params) -> Any:
        """The memory an episode starts from."""
        ...

    def step(self, params, carry, observation: jax.Array) -> tuple[Any, jax.Array]:
        """``(carry', features)`` after reading ``observation``."""
        ...

    def distribution(self, params, features: jax.Array) -> Any:
        """The action distribution given the features of a step."""
        ...


def is_recurrent(policy) -> bool:
    """Whether ``policy`` carries a memory (has ``recurrent = True``)."""
    return bool(getattr(policy, "recurrent", False))


class RecurrentHeads:
    """``sample`` and ``greedy`` of a recurrent policy, from its ``step`` and
    ``distribution``."""

    recurrent = True

    def step(self, params, carry, observation):
        raise NotImplementedError

    def distribution(self, params, features):
        raise NotImplementedError

    def sample(self, params, carry, observation, key, mask=None):
        """``(carry', action, log pi(action | history))``, among the legal actions of
        ``mask`` (the state's action mask; ``None``: every action)."""
        carry, features = self.step(params, carry, observation)
        dist = _masked(self.distribution(params, features), mask)
        action = dist.sample(key)
        return carry, action, dist.log_prob(action)

    def greedy(self, params, carry, observation, mask=None):
        """``(carry', the distribution's mode)`` among the legal actions of ``mask``."""
        carry, features = self.step(params, carry, observation)
        return carry, _masked(self.distribution(params, features), mask).mode()


def _masked(dist, mask):
    """``dist.masked(mask)`` (:mod:`rollax.distributions`), ``dist`` without a mask."""
    return dist if mask is None else dist.masked(mask)


def reset_where(start: jax.Array, initial, carry):
    """``initial`` where ``start`` (``(B,)`` bool), else ``carry`` (batched carries ``(B, ...)``;
    ``initial`` is one environment's)."""

    def pick(init, c):
        mask = start.reshape(start.shape + (1,) * (c.ndim - start.ndim))
        return jnp.where(mask, init, c)

    return jax.tree_util.tree_map(pick, initial, carry)


def initial_carries(policy, params, batch_size: int):
    """``batch_size`` copies of ``policy.initial_carry(params)``, stacked ``(B, ...)``."""
    initial = policy.initial_carry(params)
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch_size, *x.shape)), initial)


def episode_starts(traj) -> jax.Array:
    """``(T, B)`` bool: the cells of an auto-reset trajectory whose observation opens an episode
    inside the rollout, ``terminated[t-1] | truncated[t-1]`` for ``t >= 1`` and False at
    ``t = 0`` (the rollout's first carry is the stored one, reset already if needed)."""
    done = traj.terminated | traj.truncated
    return jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]], axis=0)


class Replay(NamedTuple):
    """What :func:`unroll` gives for each cell ``(T, B)`` of the replayed sequences."""

    carry: Any
    """The carry after the step ``(T, B, ...)``."""
    features: jax.Array
    """The step's features ``(T, B, ...)``."""
    log_prob: jax.Array | None
    """``log pi(action | history)`` of the given actions (``None`` without actions)."""
    entropy: jax.Array | None
    """The entropy of the step's action distribution (``None`` without actions)."""


def unroll(policy, params, carry, observations: jax.Array, starts: jax.Array,
           actions: jax.Array | None = None, masks: jax.Array | None = None) -> Replay:
    """Replay ``B`` sequences: for ``t = 0 .. T-1``, reset the carry where ``starts[t]``, read
    ``observations[t]``, and (given ``actions``) score ``actions[t]``, under the action mask
    ``masks[t]`` when given (the one stored at collection). ``carry (B, ...)``,
    ``observations (T, B, ...)``, ``starts (T, B)``, ``actions`` and ``masks (T, B, ...)``.

    The action distribution is evaluated inside the loop, step by step as the collector does,
    so that a replay with the collecting parameters gives the stored log-probabilities back to
    the last bit (evaluated on all ``T * B`` features at once, XLA's different fusion may move
    the last bit)."""
    initial = policy.initial_carry(params)
    step = jax.vmap(policy.step, (None, 0, 0))

    def score(features, action, mask):
        dist = _masked(policy.distribution(params, features), mask)
        return dist.log_prob(action), dist.entropy()

    def body(carry, x):
        observation, start, action, mask = x
        carry, features = step(params, reset_where(start, initial, carry), observation)
        scored = (None, None) if action is None else jax.vmap(score)(features, action, mask)
        return carry, Replay(carry, features, *scored)

    return jax.lax.scan(body, carry, (observations, starts, actions, masks))[1]


def replay_log_prob(policy, params, carry, traj) -> jax.Array:
    """``(T, B)`` log-probabilities of ``traj.action`` replayed from ``carry`` (the carry the
    auto-reset rollout started with) with the trajectory's own resets (:func:`episode_starts`).
    With the collecting parameters this equals ``traj.log_prob`` exactly."""
    replay = unroll(policy, params, carry, traj.observation, episode_starts(traj), traj.action,
                    getattr(traj, "action_mask", None))
    assert replay.log_prob is not None
    return replay.log_prob


# ---------------------------------------------------------------------------------------------
# Wrappers


@dataclasses.dataclass(frozen=True)
class NormalizedRecurrent(RecurrentHeads):
    """A recurrent policy whose params are ``(inner_params, stats)``: it normalises
    observations with the statistics first (with ``normalize=False`` it carries them unused;
    the recurrent counterpart of :class:`rollax.policies.NormalizedPolicy`)."""

    inner: Any
    normalize: bool = True

    def initial_carry(self, params):
        return self.inner.initial_carry(params[0])

    def step(self, params, carry, observation):
        inner_params, stats = params
        if self.normalize:
            observation = obs_normalize(stats, observation)
        return self.inner.step(inner_params, carry, observation)

    def distribution(self, params, features):
        return self.inner.distribution(params[0], features)


@dataclasses.dataclass(frozen=True)
class GreedyRecurrent(RecurrentHeads):
    """Acts with the mode of a recurrent policy (for evaluation); log-prob 0."""

    inner: Any

    def initial_carry(self, params):
        return self.inner.initial_carry(params)

    def step(self, params, carry, observation):
        return self.inner.step(params, carry, observation)

    def distribution(self, params, features):
        return self.inner.distribution(params, features)

    def sample(self, params, carry, observation, key, *mask):
        carry, action = self.inner.greedy(params, carry, observation, *mask)
        return carry, action, jnp.zeros((), jnp.float32)

"""What the environment checks look at: :class:`EnvRun` drives one environment (abstract
shapes, the traced rollout, the derived per-cell flags) for the checks of ``check_env``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from rollax.contracts.probe import (
    Setup,
    describe,
    mutable,
    sample_action,
    unhashable,
    unsupported_observation,
)
from rollax.contracts.registry import NotRun
from rollax.contracts.tracer import Trace, cached, collection_key_data, make_tracer, no_override
from rollax.contracts.trees import any_last, host, scalar_cells
from rollax.envs.base import Environment, step_with_key
from rollax.envs.masks import action_mask


class Shapes(NamedTuple):
    """Abstract values (``jax.eval_shape``) of one reset and one step."""

    state: Any
    observation: Any
    done: Any
    next_state: Any
    reward: Any
    terminated: Any
    truncated: Any
    next_observation: Any
    transition_terminated: Any
    """The ``terminated`` that ``transition`` returns (before ``step`` casts it to bool), or
    None when the environment writes its own ``step``."""
    action_mask: Any = None
    """``action_mask(state)`` of the start state (:mod:`rollax.envs.masks`), None without
    masks."""


def abstract_shapes(env: Any, policy: Any, params: Any, key: jax.Array) -> Shapes:
    """One reset and one step of ``env`` with ``policy``'s action, evaluated abstractly."""
    state = jax.eval_shape(env.reset, key)
    obs = jax.eval_shape(env.observation, state)
    done = jax.eval_shape(env.done, state)
    mask = jax.eval_shape(lambda s: action_mask(env, s), state)
    action = jax.eval_shape(lambda s, k: sample_action(policy, params, env, s, k), state, key)
    next_state, reward, terminated, truncated = jax.eval_shape(
        lambda s, a, k: step_with_key(env, s, a, k), state, action, key)
    next_obs = jax.eval_shape(env.observation, next_state)
    raw = None
    if type(env).step is Environment.step:
        raw = jax.eval_shape(env.transition, state, action,
                             key if env.stochastic else None)[2]
    return Shapes(state, obs, done, next_state, reward, terminated, truncated, next_obs, raw,
                  mask)


class Flags(NamedTuple):
    """Per-cell flags of a trace: ``done`` (T + 1, B); the rest (T, B) (``reward`` (T, B, R))."""

    done: np.ndarray
    done_before: np.ndarray
    done_after: np.ndarray
    reward: np.ndarray
    term: np.ndarray
    trunc: np.ndarray
    event: np.ndarray


@dataclasses.dataclass
class EnvRun(Setup):
    """One ``check_env`` call: its setup, and what :meth:`start` computes."""

    from_horizon: bool
    autoreset_fn: Callable | None
    shapes: Shapes | None = None
    keys: Any = None
    trace: Trace | None = None
    _compiled: Callable | None = None
    _no_override: tuple | None = None

    def start(self) -> None:
        """Abstract shapes, then the compiled tracer and the first trace (may raise; a
        ``TypeError`` for an unhashable environment, which ``jit`` cannot take as a static
        argument, a mutable one, and for an observation that is not one array)."""
        self.shapes = abstract_shapes(self.env, self.policy, self.params,
                                      jax.random.key(self.seed))
        name = describe(self.env)
        problem = (unhashable(self.env, name) or mutable(self.env, name)
                   or unsupported_observation(self.shapes.observation,
                                               self.env.observation_space, name))
        if problem is not None:
            raise TypeError(problem)
        self._compiled = cached(make_tracer, self.env, self.policy, self.params)
        self._no_override = no_override(self.env, self.policy, self.params, self.batch_size,
                                        self.num_steps)
        self.keys = self.key_data(self.seed)
        self.trace = self.run(self.keys, self.identity)

    def require_shapes(self) -> Shapes:
        """The abstract shapes; :class:`NotRun` when they could not be evaluated."""
        if self.shapes is None:
            raise NotRun
        return self.shapes

    def require_trace(self) -> Trace:
        """The trace; :class:`NotRun` when it could not be computed."""
        if self.trace is None:
            raise NotRun
        return self.trace

    @property
    def identity(self) -> np.ndarray:
        """The identity permutation of the batch."""
        return np.arange(self.batch_size, dtype=np.int32)

    def key_data(self, seed: int) -> Any:
        """The collection keys of ``seed`` (as ``rollax.collect`` derives them), as key data."""
        return collection_key_data(self.batch_size, self.num_steps, bool(self.env.stochastic),
                                   seed)

    def run(self, keys: Any, perm: np.ndarray, override: bool = False,
            overrides: tuple | None = None) -> Trace:
        """A trace (host arrays) from ``keys`` with the batch permuted by ``perm``; with
        ``override``, one absorbing step from each of ``overrides = (states, actions)``."""
        assert self._compiled is not None and self._no_override is not None  # set by start()
        overrides = self._no_override if overrides is None else overrides
        return host(self._compiled(keys, perm, np.bool_(override), *overrides))

    @property
    def horizon(self) -> int | None:
        """``env.horizon`` when it is an integer."""
        horizon = getattr(self.env, "horizon", None)
        return int(horizon) if isinstance(horizon, (int, np.integer)) else None

    @functools.cached_property
    def flags(self) -> Flags:
        """The trace's per-cell flags."""
        trace = self.require_trace()
        done = any_last(scalar_cells(trace.done, 2))
        term = any_last(scalar_cells(trace.terminated, 2).astype(bool))
        trunc = any_last(scalar_cells(trace.truncated, 2).astype(bool))
        return Flags(done, done[:-1], done[1:], scalar_cells(trace.reward, 2), term, trunc,
                     term | trunc)


def state_step(i: int) -> int | None:
    """The step that produced state index ``i`` of a ``(T + 1)`` axis (None: reset)."""
    return None if i == 0 else i - 1

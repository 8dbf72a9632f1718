"""``autoreset_final_observation``: an auto-reset collector keeps each episode's true final
observation. The collector runs on a recording wrapper of the environment (each row shows the
state and transition key it came from) and every row is compared with an absorbing re-step
from the same state, action and key by the tracer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.contracts.report import Finding
from rollax.contracts.trees import (
    any_last,
    cell_mismatch_close,
    cell_values,
    first_cell,
    host,
    scalar_cells,
    trees_mismatch,
)
from rollax.envs.base import Environment, step_with_key
from rollax.keys import AbstractValue, eval_shape, is_key


class RecordedState(NamedTuple):
    """A state of :class:`Recording`: the inner state and the key that produced it."""

    inner: Any
    key: jax.Array | np.ndarray
    """uint32 key data of the transition key that produced this state (zeros after reset)."""


@dataclasses.dataclass(frozen=True)
class Recording(Environment):
    """``inner`` with observations ``(inner observation, state)`` and the transition key kept
    in the state, so an auto-reset trajectory shows which state and key each row came from."""

    inner: Any
    key_shape: tuple[int, ...] = (0,)

    @property
    def stochastic(self) -> bool:  # type: ignore[override]
        return bool(self.inner.stochastic)

    @property
    def horizon(self) -> int | None:  # type: ignore[override]
        return getattr(self.inner, "horizon", None)

    def reset(self, key: jax.Array) -> RecordedState:
        return RecordedState(self.inner.reset(key), jnp.zeros(self.key_shape, jnp.uint32))

    def step(self, state: RecordedState, action: jax.Array,
             key: jax.Array | None = None) -> tuple:
        next_state, reward, terminated, truncated = step_with_key(self.inner, state.inner,
                                                                  action, key)
        data = (jax.random.key_data(key) if key is not None and self.stochastic
                else jnp.zeros(self.key_shape, jnp.uint32))
        return RecordedState(next_state, data.astype(jnp.uint32)), reward, terminated, truncated

    def observation(self, state: RecordedState) -> tuple:
        return (self.inner.observation(state.inner), state)

    def done(self, state: RecordedState) -> jax.Array:
        return self.inner.done(state.inner)

    @property
    def observation_space(self) -> Any:
        return self.inner.observation_space

    @property
    def action_space(self) -> Any:
        return self.inner.action_space


@dataclasses.dataclass(frozen=True)
class FirstOf:
    """The policy reading only the first element of a recorded observation."""

    policy: Any

    def sample(self, params: Any, observation: tuple, key: jax.Array) -> tuple:
        """``policy.sample`` on the inner observation."""
        return self.policy.sample(params, observation[0], key)


class Rows(NamedTuple):
    """An auto-reset trajectory (host arrays, ``(T, B, ...)``) next to its absorbing re-step."""

    observation: Any
    next_observation: Any
    """``(T, B, ...)`` arrays, or pytrees of them (a ``Dict`` / ``Tuple`` observation)."""
    before: Any
    """Inner state each row started from."""
    after: Any
    """Inner state each row's step produced (before any reset)."""
    ending: np.ndarray
    """``terminated | truncated``."""
    expected_observation: Any
    expected_state: Any
    expected_done: np.ndarray
    step_done: np.ndarray
    """Whether the state each row started from was done."""


def like(types: AbstractValue, data: Any) -> Any:
    """``data`` (host arrays, a tree like ``types.value``) with each leaf that is a typed key
    in ``types`` wrapped back into a key of the same implementation."""
    tree = jax.tree.structure(types.value)
    return tree.unflatten([
        x if i not in types.key_impls or is_key(x)
        else jax.random.wrap_key_data(x, impl=types.key_impls[i])
        for i, x in enumerate(tree.flatten_up_to(data))])


def record_rows(env: Any, policy: Any, params: Any, autoreset_fn: Callable, start_states: Any,
                key: jax.Array, keys: Any, run: Callable) -> Rows:
    """Run ``autoreset_fn`` on a :class:`Recording` of ``env`` from ``start_states`` (B,) and
    re-step every row absorbingly from the same state, action and transition key (``run``:
    the tracer with the states overridden)."""
    key_shape = tuple(jax.random.key_data(key).shape)
    # recorded states are host arrays (a typed key in a state as its key data): stepping and
    # resetting need the state's own types back, read off a trace (an environment reset op by
    # op compiles each operation: 609 programs for Playground's CartpoleBalance)
    types = eval_shape(env.reset, key)
    start_states = like(types, start_states)
    B = jax.tree.leaves(start_states)[0].shape[0]
    T = keys[1].shape[0]
    state = RecordedState(start_states, np.zeros((B,) + key_shape, np.uint32))
    _, traj = autoreset_fn(Recording(env, key_shape), FirstOf(policy), params, state, key, T)
    (obs, before), (next_obs, after) = host((traj.observation, traj.next_observation))
    restep_keys = (keys[0], keys[1], after.key if env.stochastic else None)
    restepped = run(restep_keys, np.arange(B, dtype=np.int32), True,
                    (like(types, before.inner), np.asarray(traj.action)))
    ending = np.asarray(traj.terminated, bool) | np.asarray(traj.truncated, bool)
    return Rows(obs, next_obs, before.inner, after.inner, ending,
                jax.tree.map(lambda x: x[1:], restepped.observation),
                jax.tree.map(lambda x: x[1:], host(restepped.states)),
                any_last(scalar_cells(restepped.done[1:], 2)),
                any_last(scalar_cells(restepped.step_done, 2)))


def next_observation_findings(rows: Rows) -> list[Finding]:
    """``next_observation`` is the observation of the stepped state (up to rounding): the true
    final observation at an episode end, the carried one inside an episode."""
    next_obs, expected = rows.next_observation, rows.expected_observation
    pairs = list(zip(jax.tree.leaves(next_obs), jax.tree.leaves(expected)))
    masks = [cell_mismatch_close(x, y, 2) for x, y in pairs]
    if (jax.tree.structure(next_obs) != jax.tree.structure(expected)
            or any(m is None for m in masks)):
        shapes = ", ".join(f"{np.asarray(x).dtype}{list(np.shape(x))}"
                           for x in jax.tree.leaves(next_obs))
        return [Finding(None, None, "next_observation has the wrong shape or dtype",
                        {"next_observation": shapes})]
    mismatch = np.logical_or.reduce([np.asarray(m) for m in masks])
    findings = []
    for mask, what in ((rows.ending, "final observation lost at an episode end"),
                       (~rows.ending, ("next_observation is not the observation of the "
                                       "stepped state"))):
        cell = first_cell(mismatch & mask)
        if cell is not None:
            findings.append(Finding(*cell, what, {
                **cell_values("next_observation", next_obs, cell),
                **cell_values("observation of the stepped state", expected, cell)}))
    return findings


def final_state_findings(rows: Rows) -> list[Finding]:
    """At an episode end the stepped state is an absorbing step's, and it is done."""
    findings = []
    state_diff = trees_mismatch(rows.after, rows.expected_state, rows.ending.shape,
                                close=True)
    cell = first_cell(state_diff & rows.ending)
    if cell is not None:
        findings.append(Finding(*cell, "final state differs from an absorbing step from the "
                                "same state, action and key", {}, 1))
    cell = first_cell(rows.ending & ~rows.expected_done)
    if cell is not None:
        findings.append(Finding(*cell, "ending transition leaves a state that is not done", {},
                                2))
    return findings


def carry_findings(rows: Rows) -> list[Finding]:
    """Inside an episode the next row starts where this one ended; after an ending it starts
    a fresh, live episode."""
    if rows.ending.shape[0] < 2:
        return []
    findings = []
    inside = ~rows.ending[:-1]
    next_obs, obs = rows.next_observation, rows.observation
    cell = first_cell(trees_mismatch(jax.tree.map(lambda x: np.asarray(x)[:-1], next_obs),
                                     jax.tree.map(lambda x: np.asarray(x)[1:], obs),
                                     inside.shape) & inside)
    if cell is not None:
        t, b = cell
        findings.append(Finding(t, b, "next_observation[t] != observation[t + 1] inside an "
                                "episode", {**cell_values("next_observation", next_obs, (t, b)),
                                            **cell_values("observation[t + 1]", obs,
                                                          (t + 1, b))}, 3))
    carried = trees_mismatch(jax.tree.map(lambda x: np.asarray(x)[:-1], rows.after),
                             jax.tree.map(lambda x: np.asarray(x)[1:], rows.before),
                             inside.shape)
    cell = first_cell(carried & inside)
    if cell is not None:
        findings.append(Finding(*cell, "the state carried to the next step is not the "
                                "stepped state inside an episode", {}, 4))
    cell = first_cell(rows.ending[:-1] & rows.step_done[1:])
    if cell is not None:
        findings.append(Finding(cell[0] + 1, cell[1], "the row after an episode end is not "
                                "a live fresh episode", {}, 5))
    return findings


def final_observation_findings(rows: Rows) -> list[Finding]:
    """Every finding of ``autoreset_final_observation`` on recorded rows."""
    return next_observation_findings(rows) + final_state_findings(rows) + carry_findings(rows)

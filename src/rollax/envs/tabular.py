"""Finite MDPs as functional environments, and the import of Gymnasium toy-text tasks."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Discrete, Environment, start_counters
from rollax.exact import FiniteMDP

TOY_TEXT = ("FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4", "CliffWalking-v1")


class FiniteMDPState(NamedTuple):
    state: jax.Array
    """int32 ``()``: the MDP state index."""
    elapsed: jax.Array
    """int32 ``()``: live steps taken so far."""
    done: jax.Array
    """bool ``()``: the episode has terminated or been truncated."""


@dataclasses.dataclass(frozen=True, eq=False)
class TabularEnv(Environment):
    """Samples a :class:`FiniteMDP`: ``reset`` draws from ``start``; ``step`` (which takes a
    key) draws ``s'`` from ``transitions[s, a]``. The horizon is ``mdp.horizon``."""

    mdp: FiniteMDP
    name: str = "tabular"
    options: tuple[tuple[str, Any], ...] = ()
    """The Gymnasium keyword arguments a toy-text task was built with (``(name, value)``
    pairs, e.g. FrozenLake's ``map_name``), so that Gymnasium's own environment can draw its
    states (:func:`rollax.envs.frames.frame_renderer`)."""
    stochastic = True

    @property
    def horizon(self) -> int:  # type: ignore[override]
        return self.mdp.horizon

    def reset(self, key: jax.Array) -> FiniteMDPState:
        logits = jnp.log(jnp.asarray(self.mdp.start, jnp.float32))
        s = jax.random.categorical(key, logits).astype(jnp.int32)
        return FiniteMDPState(s, *start_counters())

    def transition(self, state: FiniteMDPState, action: jax.Array, key: jax.Array | None):
        assert key is not None  # stochastic: step() refuses a missing key
        p = jnp.asarray(self.mdp.transitions, jnp.float32)[state.state, action]
        s2 = jax.random.categorical(key, jnp.log(p)).astype(jnp.int32)
        reward = jnp.asarray(self.mdp.rewards, jnp.float32)[state.state, action, s2]
        ends = jnp.asarray(self.mdp.terminal, bool)[state.state, action, s2]
        return state._replace(state=s2), reward, ends

    def observation(self, state: FiniteMDPState) -> jax.Array:
        return state.state

    @property
    def observation_space(self) -> Discrete:
        return Discrete(self.mdp.num_states)

    @property
    def action_space(self) -> Discrete:
        return Discrete(self.mdp.num_actions)

    def to_mdp(self) -> FiniteMDP:
        return self.mdp


def mdp_from_gymnasium(env_id: str, horizon: int | None = None, **kwargs) -> FiniteMDP:
    """Build a :class:`FiniteMDP` from a Gymnasium toy-text environment's ``P`` table.

    ``P[s][a]`` lists ``(probability, next_state, reward, terminated)``; the start distribution
    is the environment's ``initial_state_distrib``. The horizon is ``horizon`` when given, else
    the registered ``max_episode_steps``; an environment that registers none needs ``horizon``.
    """
    import gymnasium

    try:
        spec = gymnasium.spec(env_id)
    except Exception as err:
        raise ValueError(f"unknown Gymnasium environment {env_id!r}: {err}") from None
    if horizon is None:
        horizon = spec.max_episode_steps
        if horizon is None:
            raise ValueError(
                f"{env_id} registers no episode limit: give horizon (--horizon H), "
                f"a positive integer"
            )
    env = gymnasium.make(env_id, **kwargs).unwrapped
    table = getattr(env, "P", None)
    if table is None or not hasattr(env, "initial_state_distrib"):
        raise ValueError(f"{env_id} has no transition table P: not a toy-text environment")
    # toy-text spaces are Discrete (they have .n); gymnasium types them as plain Space
    n_s, n_a = int(env.observation_space.n), int(env.action_space.n)  # pyright: ignore[reportAttributeAccessIssue]
    p = np.zeros((n_s, n_a, n_s))
    r = np.zeros((n_s, n_a, n_s))
    term = np.zeros((n_s, n_a, n_s), dtype=bool)
    seen = np.zeros((n_s, n_a, n_s), dtype=bool)
    for s in range(n_s):
        for a in range(n_a):
            for prob, s2, reward, terminated in table[s][a]:
                if seen[s, a, s2] and (r[s, a, s2] != reward or term[s, a, s2] != terminated):
                    raise ValueError(
                        f"{env_id}: outcome ({s}, {a}) -> {s2} has two rewards or endings"
                    )
                p[s, a, s2] += prob
                r[s, a, s2], term[s, a, s2], seen[s, a, s2] = reward, terminated, True
    # checked with hasattr above; only toy-text environments have it, so gymnasium's Env lacks it
    start = np.asarray(env.initial_state_distrib, dtype=np.float64)  # pyright: ignore[reportAttributeAccessIssue]
    return FiniteMDP(p, r, term, start, int(horizon))

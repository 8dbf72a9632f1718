"""Exact finite-horizon evaluation of finite MDPs by dynamic programming (no sampling).

A :class:`FiniteMDP` has ``S`` states and ``A`` actions:

- ``transitions[s, a, s']``: probability of moving to ``s'``;
- ``rewards[s, a, s']``: reward received on that transition;
- ``terminal[s, a, s']``: whether that transition terminates the episode (no value follows);
- ``start[s]``: start distribution; ``horizon``: number of live steps (truncation after it).

With ``V_0 = 0`` the policy backup, applied once per remaining step, is::

    Q_k(s, a) = sum_s' P(s'|s,a) [ R(s,a,s') + (1 - term(s,a,s')) V_{k-1}(s') ]
    V_k(s)    = sum_a pi(a|s) Q_k(s, a)          (policy evaluation)
    V_k(s)    = max_a Q_k(s, a)                  (optimal value)

and the expected return is ``sum_s start(s) V_H(s)``. Everything is differentiable in the
policy table, so ``jax.grad`` gives the exact policy gradient.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class FiniteMDP:
    """A finite MDP with a start distribution and a finite horizon (see module docs)."""

    transitions: Any
    rewards: Any
    terminal: Any
    start: Any
    horizon: int

    def __post_init__(self):
        p = np.asarray(self.transitions, dtype=np.float64)
        if p.ndim != 3 or p.shape[0] != p.shape[2]:
            raise ValueError(f"transitions must have shape (S, A, S), got {p.shape}")
        if np.asarray(self.rewards).shape != p.shape:
            raise ValueError(f"rewards must have shape {p.shape}, got {np.shape(self.rewards)}")
        if np.asarray(self.terminal).shape != p.shape:
            raise ValueError(f"terminal must have shape {p.shape}, got {np.shape(self.terminal)}")
        if np.asarray(self.start).shape != (p.shape[0],):
            raise ValueError(f"start must have shape ({p.shape[0]},), got {np.shape(self.start)}")
        if (p < 0).any() or not np.allclose(p.sum(-1), 1.0, atol=1e-6):
            raise ValueError("transitions[s, a, :] must be probabilities summing to 1")
        start = np.asarray(self.start, dtype=np.float64)
        if (start < 0).any() or not np.isclose(start.sum(), 1.0, atol=1e-6):
            raise ValueError("start must be probabilities summing to 1")
        from rollax.validate import check_horizon

        check_horizon(self.horizon)

    @property
    def num_states(self) -> int:
        return int(np.shape(self.transitions)[0])

    @property
    def num_actions(self) -> int:
        return int(np.shape(self.transitions)[1])

    def expected_rewards(self) -> jax.Array:
        """``r[s, a] = sum_s' P(s'|s,a) R(s,a,s')``, shape ``(S, A)``."""
        p = jnp.asarray(self.transitions, jnp.float32)
        return jnp.sum(p * jnp.asarray(self.rewards, jnp.float32), axis=-1)

    def continuation(self) -> jax.Array:
        """``C[s, a, s'] = P(s'|s,a) (1 - term(s,a,s'))``, shape ``(S, A, S)``."""
        p = jnp.asarray(self.transitions, jnp.float32)
        return p * (1.0 - jnp.asarray(self.terminal, jnp.float32))


def _backup(mdp: FiniteMDP, combine) -> jax.Array:
    r, c = mdp.expected_rewards(), mdp.continuation()

    def step(v, _):
        q = r + jnp.einsum("sat,t->sa", c, v)
        return combine(q), None

    v, _ = jax.lax.scan(step, jnp.zeros(mdp.num_states, jnp.float32), None, length=mdp.horizon)
    return v


def policy_values(mdp: FiniteMDP, policy: jax.Array) -> jax.Array:
    """``V_H(s)``, shape ``(S,)``, of a stochastic policy table ``policy[s, a]`` ``(S, A)``."""
    policy = jnp.asarray(policy)
    if policy.shape != (mdp.num_states, mdp.num_actions):
        raise ValueError(
            f"policy must have shape (S, A) = {(mdp.num_states, mdp.num_actions)}, "
            f"got {policy.shape}"
        )
    return _backup(mdp, lambda q: jnp.sum(policy * q, axis=-1))


def expected_return(mdp: FiniteMDP, policy: jax.Array) -> jax.Array:
    """Exact expected return ``sum_s start(s) V_H(s)`` of the policy table ``policy[s, a]``.

    Example: the corridor (horizon 8) under the uniform policy gives 0.466875::

        mdp = rollax.make("corridor").to_mdp()
        expected_return(mdp, jnp.full((4, 2), 0.5))
    """
    return jnp.dot(jnp.asarray(mdp.start, jnp.float32), policy_values(mdp, policy))


def optimal_values(mdp: FiniteMDP) -> jax.Array:
    """Optimal finite-horizon values ``V*_H(s)``, shape ``(S,)``."""
    return _backup(mdp, lambda q: jnp.max(q, axis=-1))


def optimal_return(mdp: FiniteMDP) -> jax.Array:
    """The best expected return any policy achieves within the horizon."""
    return jnp.dot(jnp.asarray(mdp.start, jnp.float32), optimal_values(mdp))


def uniform_policy(mdp: FiniteMDP) -> jax.Array:
    """The uniform policy table, shape ``(S, A)``."""
    return jnp.full((mdp.num_states, mdp.num_actions), 1.0 / mdp.num_actions, jnp.float32)


def policy_table(policy, params, num_states: int, num_actions: int) -> jax.Array:
    """``pi[s, a] = exp(policy.log_prob(params, s, a))`` for every state and action."""
    states = jnp.arange(num_states, dtype=jnp.int32)
    actions = jnp.arange(num_actions, dtype=jnp.int32)
    log_prob = jax.vmap(
        jax.vmap(policy.log_prob, in_axes=(None, None, 0)), in_axes=(None, 0, None)
    )(params, states, actions)
    return jnp.exp(log_prob)


def policy_return(mdp: FiniteMDP, policy, params) -> jax.Array:
    """Exact expected return of a tabular ``policy`` with ``params``; differentiable in params."""
    return expected_return(mdp, policy_table(policy, params, mdp.num_states, mdp.num_actions))

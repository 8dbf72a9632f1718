"""Exact expected payoffs, best responses and exploitability of tabular policies, in JAX.

A policy is a table ``pi[I, a]`` of shape ``(N, A)`` over a :class:`GameTree`'s information
states: each row a distribution over the legal actions (0 on illegal ones). One table holds
both players' rows; :func:`~rollax.games.tree.joint_policy` sets two policies against each
other. Everything is a pure function of the table, compiled once per tree (a ``GameTree`` hashes by
identity: a static argument) and player: ``jax.vmap`` it over a batch of tables.

With ``c(z)`` chance's probability of terminal history ``z``, ``u_i(z)`` player ``i``'s payoff
(``u_1 = -u_0``) and ``pi_i(z)`` the product of player ``i``'s action probabilities along ``z``:

    v_i(pi)    = sum_z c(z) pi_0(z) pi_1(z) u_i(z)                       (expected payoff)
    BR_i(pi)   = max over pure policies b of v_i(b at i's rows, pi elsewhere)
    NashConv   = sum_i ( BR_i(pi) - v_i(pi) ) = BR_0(pi) + BR_1(pi)      (zero-sum)
    exploitability = NashConv / 2

which is OpenSpiel's convention: its ``exploitability(game, policy)`` is
``(sum_i BR_i - utility_sum) / num_players``, and its ``nash_conv`` the sum. The best response
is one backward pass over player ``i``'s sequences ``(I, a)``: the counterfactual payoff
``w(z) = c(z) pi_{-i}(z) u_i(z)`` of each terminal history is summed at ``i``'s last sequence
on it, and then, deepest information states first,

    q(I, a) = sum_{z: last_i(z) = (I, a)} w(z) + sum_{J: parent(J) = (I, a)} V(J)
    V(I)    = max_{a legal} q(I, a)

with ``BR_i`` the same sum at the empty sequence. ``q(I, a)`` sums over every history of
``I`` weighted by the opponent's and chance's reach (perfect recall).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from rollax.games.tree import GameTree

_per_tree = functools.partial(jax.jit, static_argnames="tree")
_per_player = functools.partial(jax.jit, static_argnames=("tree", "player"))
"""Each function compiles once per tree (and player), called alone or inside a program."""


def _check(tree: GameTree, policy: jax.Array) -> jax.Array:
    policy = jnp.asarray(policy)
    if policy.shape != tree.policy_shape:
        raise ValueError(f"a {tree.name} policy has shape (N, A) = {tree.policy_shape}, "
                         f"got {policy.shape}")
    return policy


@_per_player
def reach(tree: GameTree, policy: jax.Array, player: int) -> jax.Array:
    """``pi_i(z)``, shape ``(Z,)``: player ``i``'s own probability of each terminal history."""
    padded = jnp.concatenate([_check(tree, policy), jnp.ones((1, tree.num_actions))])
    probs = padded[tree.path[..., 0], tree.path[..., 1]]  # (Z, D)
    return jnp.prod(jnp.where(tree.owner == player, probs, 1.0), axis=-1)


@_per_tree
def expected_payoff(tree: GameTree, policy: jax.Array) -> jax.Array:
    """``v_0(pi)``: player 0's expected payoff when both players follow ``policy``."""
    both = reach(tree, policy, 0) * reach(tree, policy, 1)
    return jnp.sum(tree.chance * both * tree.payoff)


@_per_player
def action_values(tree: GameTree, policy: jax.Array,
                  player: int) -> tuple[jax.Array, jax.Array]:
    """``(q, BR_i)``: ``q(I, a)`` ``(N, A)`` of a best responder ``player`` against
    ``policy`` (0 at the other player's rows) and its value ``BR_i(pi)`` (see module docs)."""
    n, a = tree.policy_shape
    sign = 1.0 - 2.0 * player
    w = tree.chance * reach(tree, policy, 1 - player) * sign * tree.payoff
    q = jax.ops.segment_sum(w, tree.last[player], num_segments=n * a + 1)
    for layer in tree.layers[player]:
        rows = q[:-1].reshape(n, a)[layer]
        best = jnp.max(jnp.where(tree.legal[layer], rows, -jnp.inf), axis=-1)
        q = q.at[tree.parent[layer]].add(best)
    return q[:-1].reshape(n, a), q[-1]


@_per_player
def best_response_value(tree: GameTree, policy: jax.Array, player: int) -> jax.Array:
    """``BR_i(pi)``: the most ``player`` can expect against the other player's rows."""
    return action_values(tree, policy, player)[1]


@_per_player
def best_response(tree: GameTree, policy: jax.Array, player: int) -> jax.Array:
    """``policy`` with ``player``'s rows replaced by a pure best response (the first best
    legal action of each information state)."""
    q, _ = action_values(tree, policy, player)
    choice = jnp.argmax(jnp.where(tree.legal, q, -jnp.inf), axis=-1)
    pure = jax.nn.one_hot(choice, tree.num_actions, dtype=policy.dtype)
    return jnp.where((tree.player == player)[:, None], pure, policy)


@_per_tree
def nash_conv(tree: GameTree, policy: jax.Array) -> jax.Array:
    """``sum_i BR_i(pi) - v_i(pi)``: what both players gain by best responding."""
    # v_0(pi) + v_1(pi) = 0
    return best_response_value(tree, policy, 0) + best_response_value(tree, policy, 1)


@_per_tree
def exploitability(tree: GameTree, policy: jax.Array) -> jax.Array:
    """``NashConv / 2``, as OpenSpiel's ``exploitability`` (0 exactly at a Nash equilibrium)."""
    return nash_conv(tree, policy) / 2

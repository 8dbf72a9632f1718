"""A search player for games of two players (:mod:`rollax.envs.players`, zero-sum): Monte Carlo
tree search whose leaves are valued by random rollouts, on mctx's tree (``mctx.search``).

A node is a state ``s`` of the environment, seen from its player to move ``p = to_act(s)``.
One **simulation** walks down the tree from the root by the UCT rule, adds one new node (the
state after one untried move, stepped with the environment's own ``step``), values it by one
**rollout** and adds that value to every node on the path back to the root:

- selection (UCT, Kocsis and Szepesvari 2006): at a node of ``N`` visits, among the legal
  moves ``a``, a move not tried yet first (ties broken at random), else the largest
  ``Q(s, a) + c sqrt(ln N / n(s, a))``, ``n(s, a)`` the move's visits and ``c`` the
  exploration constant (:data:`EXPLORATION`);
- the rollout value of a new node ``s``: its player ``p`` plays on with the opponent, both
  choosing uniformly among the legal moves, until the game ends, and
  ``v(s) = sum_{t >= 0} r_{t + 1}[p]``, ``p``'s rewards (``player_rewards``) over the rest of
  the game (:func:`rollout_value`); 0 at a state where the game is over;
- backup, in mctx's convention: the edge ``(s, a)`` to ``s'`` holds the mover's reward
  ``r = player_rewards(s')[p]`` and the discount ``d = +1`` if ``p`` moves again in ``s'``,
  ``-1`` if the other player does (zero-sum: my value is minus yours), so
  ``Q(s, a) = r + d V(s')`` is the mean, from ``p``'s side, of the values backed up through
  ``a``;
- after ``simulations`` simulations the player plays the legal root move visited most (ties:
  the larger ``Q``).

Every legal move has the same prior (logits 0, ``-inf`` for illegal moves, stored in mctx's
tree); UCT does not weight by it. A search of ``S`` simulations holds ``S + 1`` nodes, and
costs ``S`` environment steps and ``S`` rollouts per move. The player sees the whole state it
searches: it would see the cards an imperfect-information game hides, and a chance outcome
is drawn once when its node is added. ``mctx`` is imported when a search is built
(``pip install 'rollax[pgx]'``).
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp

from rollax.envs.base import step_with_key
from rollax.envs.masks import action_mask

__all__ = ["EXPLORATION", "check_search", "import_mctx", "rollout_value", "search_action",
           "search_moves", "search_player", "search_tree"]

EXPLORATION = math.sqrt(2.0)
"""The UCT exploration constant ``c`` (UCB1's sqrt 2)."""

INSTALL = "pip install 'rollax[pgx]'"
"""What installs mctx (the ``pgx`` extra)."""

UNTRIED = 1e9
"""The UCT score of a legal move not tried yet (above any ``Q + bonus``)."""


def import_mctx() -> ModuleType:
    """The ``mctx`` module; a ``ValueError`` of one line with the install command when it is
    missing."""
    try:
        return importlib.import_module("mctx")
    except ImportError as error:
        raise ValueError(f"the search player needs mctx: `{INSTALL}` (importing mctx failed: "
                         f"{error})") from error


def check_search(env: Any, simulations: Any, name: str,
                 setting: str = "eval_search_simulations") -> None:
    """The one check of a search player's setting (``setting``: ``eval_search_simulations``,
    or ``rollax eval``'s ``search_simulations``) for ``env`` (named ``name``): ``ValueError``
    in one line for a value that is not an integer >= 0, and,
    when it is positive, for an environment that is not a game of two players
    (:mod:`rollax.envs.players`), for a game that hides part of its state from the players
    (``perfect_information`` false: the search would read the hidden cards), or without mctx
    installed. 0 (no search player) passes for any environment."""
    from rollax.envs.players import num_players
    from rollax.validate import is_int

    if not is_int(simulations) or simulations < 0:
        raise ValueError(f"{setting} must be an integer >= 0 (0: no search player), got "
                         f"{simulations!r}")
    if not simulations:
        return
    if num_players(env) != 2:
        raise ValueError(f"{setting} is refused for {name}: the search player plays games "
                         f"of two players only (pgx:tic_tac_toe, pgx:connect_four, ...)")
    if not getattr(env, "perfect_information", True):
        raise ValueError(f"{setting} is refused for {name}: the game hides part of its state "
                         f"(cards) from the players, and the search player would read it")
    import_mctx()


def legal_moves(env: Any, state: Any) -> jax.Array:
    """The legal moves of ``state``, bool ``(num_actions,)``: the environment's mask, or all
    true for an environment without one."""
    mask = action_mask(env, state)
    if mask is None:
        return jnp.ones((env.action_space.n,), bool)
    return jnp.asarray(mask, bool)


def random_move(env: Any, state: Any, key: jax.Array) -> jax.Array:
    """A move drawn uniformly among the legal moves of ``state`` (int32 ``()``)."""
    logits = jnp.where(legal_moves(env, state), 0.0, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def rollout_value(env: Any, state: Any, key: jax.Array) -> jax.Array:
    """One random rollout's value of ``state`` to its player to move ``p = to_act(state)``
    (float32 ``()``): both players choose uniformly among the legal moves until the game ends
    (or ``env.horizon`` steps), and the value is ``sum_t r_{t + 1}[p]``, ``p``'s rewards over
    those steps; 0 when the game is already over. Step ``t`` draws its move and transition
    from ``split(fold_in(key, t))``."""
    me = env.to_act(state)

    def body(loop):
        t, state, total = loop
        move_key, step_key = jax.random.split(jax.random.fold_in(key, t))
        live = ~env.done(state)
        state = step_with_key(env, state, random_move(env, state, move_key), step_key)[0]
        return t + 1, state, total + jnp.where(live, env.player_rewards(state)[me], 0.0)

    def running(loop):
        return (loop[0] < env.horizon) & ~env.done(loop[1])

    start = (jnp.zeros((), jnp.int32), state, jnp.zeros((), jnp.float32))
    return jax.lax.while_loop(running, body, start)[2]


def _prior(legal: jax.Array) -> jax.Array:
    """The uniform prior over the legal moves as logits: 0 where legal, -inf elsewhere."""
    return jnp.where(legal, 0.0, -jnp.inf)


def _child(env: Any, node: tuple, action: jax.Array):
    """What mctx stores for the edge from ``node = (state, key)`` by ``action``: the mover's
    reward, the discount (+1 when the mover moves again, -1 when the other player does), the
    child's prior logits and rollout value, and the child node ``(state, key)``. The child's
    keys come from ``fold_in(split(key)[0], action)``: its transition, rollout and own key."""
    state, key = node
    step_key, rollout_key, child_key = jax.random.split(
        jax.random.fold_in(jax.random.split(key)[0], action), 3)
    mover, live = env.to_act(state), ~env.done(state)
    child = step_with_key(env, state, action, step_key)[0]
    reward = jnp.where(live, env.player_rewards(child)[mover], 0.0)
    discount = jnp.where(env.to_act(child) == mover, 1.0, -1.0)
    return (reward, discount, _prior(legal_moves(env, child)),
            rollout_value(env, child, rollout_key), (child, child_key))


def _uct(env: Any, exploration: float, unused_key: jax.Array, tree: Any, node: jax.Array,
         depth: Any = None) -> jax.Array:
    """The UCT move at ``node`` of one (unbatched) mctx tree (module docstring): an untried
    legal move first, else the largest ``Q + c sqrt(ln N / n)``; ties broken by noise below
    1e-6 drawn from ``fold_in(split(key)[1], N)``, ``key`` the node's own. int32 ``()``."""
    del unused_key, depth
    state, key = jax.tree.map(lambda x: x[node], tree.embeddings)
    visits = tree.children_visits[node]
    tried = jnp.maximum(visits, 1).astype(jnp.float32)
    total = tree.node_visits[node]
    bonus = jnp.sqrt(jnp.log(jnp.maximum(total, 1).astype(jnp.float32)) / tried)
    score = jnp.where(visits > 0, jnp.asarray(tree.qvalues(node)) + exploration * bonus,
                      UNTRIED)
    noise = jax.random.uniform(jax.random.fold_in(jax.random.split(key)[1], total),
                               score.shape)
    score = score + 1e-6 * noise
    return jnp.argmax(jnp.where(legal_moves(env, state), score, -jnp.inf)).astype(jnp.int32)


def search_tree(env: Any, states: Any, keys: jax.Array, simulations: int,
                exploration: float = EXPLORATION) -> Any:
    """The batch of mctx trees after ``simulations`` UCT simulations from each of ``states``
    (``(G, ...)``; module docstring), their roots' value 0 (unused by UCT). Node ``i`` of game
    ``g`` holds ``(state, key)``, the root ``keys[g]``: game ``g``'s draws come from its key
    alone (mctx's own key, which UCT does not read, is a constant)."""
    mctx = import_mctx()

    def recurrent(params, unused_key, action, nodes):
        del params, unused_key
        reward, discount, logits, value, child = jax.vmap(functools.partial(_child, env))(
            nodes, action)
        out = mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits,
                                     value=value)
        return out, child

    legal = jax.vmap(functools.partial(legal_moves, env))(states)
    root = mctx.RootFnOutput(prior_logits=_prior(legal), value=jnp.zeros(legal.shape[:1]),
                             embedding=(states, keys))
    select = functools.partial(_uct, env, exploration)
    return mctx.search(params=(), rng_key=jax.random.key(0), root=root,
                       recurrent_fn=recurrent, root_action_selection_fn=select,
                       interior_action_selection_fn=select, num_simulations=simulations,
                       invalid_actions=~legal)


def search_moves(env: Any, states: Any, keys: jax.Array, simulations: int,
                 exploration: float = EXPLORATION) -> jax.Array:
    """The search player's moves in ``states`` (``(G, ...)`` states, ``(G,)`` keys -> ``(G,)``
    int32): in each game the legal root move visited most by :func:`search_tree`, ties to the
    larger ``Q``."""
    summary = search_tree(env, states, keys, simulations, exploration).summary()
    legal = jax.vmap(functools.partial(legal_moves, env))(states)
    most = legal & (summary.visit_counts == jnp.max(summary.visit_counts, -1, keepdims=True))
    return jnp.argmax(jnp.where(most, jnp.asarray(summary.qvalues), -jnp.inf),
                      -1).astype(jnp.int32)


def search_action(env: Any, state: Any, key: jax.Array, simulations: int,
                  exploration: float = EXPLORATION) -> jax.Array:
    """:func:`search_moves` of one state (int32 ``()``)."""
    states = jax.tree.map(lambda x: x[None], state)
    return search_moves(env, states, key[None], simulations, exploration)[0]


def search_player(env: Any, simulations: int, exploration: float = EXPLORATION
                  ) -> Callable[[Any, jax.Array], jax.Array]:
    """``(states, keys) -> moves``: :func:`search_moves` of ``simulations`` simulations;
    mctx is imported now, so a missing one is a ``ValueError`` before anything is traced."""
    import_mctx()
    return functools.partial(search_moves, env, simulations=simulations,
                             exploration=exploration)

"""A small two-player zero-sum game of imperfect information as flat arrays, built once.

A game's rules are one function from a history (a tuple of action ids: chance outcomes and
players' actions, numbered as OpenSpiel numbers them) to a :class:`Node`. :func:`build` walks
every history depth first and keeps what exact evaluation needs. With ``N`` information
states, ``A`` actions, ``Z`` terminal histories and at most ``D`` decisions on one:

- ``player[I]`` ``(N,)``: who acts at information state ``I``; ``legal[I, a]`` ``(N, A)``;
- ``chance[z]`` ``(Z,)``: the product of chance's probabilities along ``z``;
- ``payoff[z]`` ``(Z,)``: player 0's payoff at ``z`` (player 1's is ``-payoff[z]``);
- ``path[z, d]`` ``(Z, D, 2)``: the ``d``-th decision on ``z``, ``(I, a)``, padded with
  ``(N, 0)``; ``owner[z, d]`` ``(Z, D)``: who made it, ``-1`` in the padding;
- sequences ``I * A + a`` (a player's action at one of its information states; ``N * A``, the
  empty sequence, is where each player starts): ``last[i, z]`` ``(2, Z)``, player ``i``'s last
  sequence on ``z``, and ``parent[I]`` ``(N,)``, the acting player's last sequence before
  ``I``; ``layers[i]``: player ``i``'s information states grouped by how many decisions of its
  own precede them, deepest group first.

Perfect recall (checked by :func:`build`) makes ``parent`` well defined: every history of one
information state has the same sequence of the acting player's own decisions behind it.

**Information-state order.** Player 0's information states come first, then player 1's; each
player's are sorted by the player's view of the history, the tuple of its own private card
followed by the public actions and cards in OpenSpiel's numbering (the opponent's card left
out), compared as tuples (a prefix first). In Kuhn poker (cards J, Q, K; ``p`` pass, ``b``
bet) that is ``J, Jpb, Q, Qpb, K, Kpb`` then ``Jp, Jb, Qp, Qb, Kp, Kb``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

CHANCE, TERMINAL = -1, -2
"""``Node.player`` of a chance node and of a terminal history."""

History = tuple[int, ...]


class Node(NamedTuple):
    """What a game's rules say about one history."""

    player: int
    """0 or 1 to act, :data:`CHANCE` or :data:`TERMINAL`."""
    moves: tuple[tuple[int, float], ...] = ()
    """``(action, probability)`` of each chance outcome; ``(action, 1.0)`` of each legal action."""
    payoff: float = 0.0
    """Player 0's payoff at a terminal history."""
    view: History = ()
    """What the acting player knows: histories with one view share an information state."""
    name: str = ""
    """The information state's readable name."""


class _Infostate(NamedTuple):
    player: int
    legal: tuple[int, ...]
    parent: tuple | None  # (view key, action) of the player's previous decision
    depth: int
    name: str


@dataclasses.dataclass(frozen=True, eq=False)
class GameTree:
    """A game's information states and terminal histories as arrays (see module docs).

    Hashed by identity, so it may be a static argument of ``jax.jit``.
    """

    name: str
    num_actions: int
    names: tuple[str, ...]
    player: np.ndarray
    legal: np.ndarray
    parent: np.ndarray
    layers: tuple[tuple[np.ndarray, ...], ...]
    chance: np.ndarray
    payoff: np.ndarray
    path: np.ndarray
    owner: np.ndarray
    last: np.ndarray
    infostate_of: Mapping[History, int]
    """Every decision history -> its information state."""

    @property
    def num_infostates(self) -> int:
        return len(self.names)

    @property
    def num_terminals(self) -> int:
        return len(self.payoff)

    @property
    def policy_shape(self) -> tuple[int, int]:
        """``(N, A)``: the shape of a policy table."""
        return (self.num_infostates, self.num_actions)


def build(name: str, rules: Callable[[History], Node], num_actions: int) -> GameTree:
    """Walk every history of ``rules`` from ``()`` and return its :class:`GameTree`."""
    infostates: dict[tuple, _Infostate] = {}
    decisions: dict[History, tuple] = {}
    terminals: list[tuple[float, float, list]] = []  # (chance, payoff, [(key, action)])

    def walk(history: History, prob: float, path: list) -> None:
        node = rules(history)
        if node.player == TERMINAL:
            terminals.append((prob, node.payoff, path))
            return
        if node.player == CHANCE:
            for outcome, p in node.moves:
                walk((*history, outcome), prob * p, path)
            return
        key = (node.player, node.view)
        own = [step for step in path if step[0][0] == node.player]
        seen = _Infostate(node.player, tuple(a for a, _ in node.moves),
                          own[-1] if own else None, len(own), node.name)
        if infostates.setdefault(key, seen) != seen:
            raise ValueError(f"{name}: {node.name!r} breaks perfect recall or its legal actions")
        decisions[history] = key
        for action in seen.legal:
            walk((*history, action), prob, [*path, (key, action)])

    walk((), 1.0, [])
    return _arrays(name, num_actions, infostates, decisions, terminals)


def _arrays(name, num_actions, infostates, decisions, terminals) -> GameTree:
    keys = sorted(infostates)  # (player, view): player 0 first, then each player's views
    index = {key: i for i, key in enumerate(keys)}
    n, a = len(keys), num_actions
    info = [infostates[k] for k in keys]

    def sequence(step) -> int:
        return n * a if step is None else index[step[0]] * a + step[1]

    legal = np.zeros((n, a), bool)
    for i, s in enumerate(info):
        legal[i, list(s.legal)] = True
    player = np.array([s.player for s in info], np.int32)
    depth = np.array([s.depth for s in info])
    layers = tuple(tuple(np.flatnonzero((player == p) & (depth == d)).astype(np.int32)
                         for d in range(depth[player == p].max(), -1, -1)) for p in (0, 1))
    return GameTree(
        name=name, num_actions=a, names=tuple(s.name for s in info), player=player,
        legal=legal, parent=np.array([sequence(s.parent) for s in info], np.int32),
        layers=layers,
        chance=np.array([t[0] for t in terminals]), payoff=np.array([t[1] for t in terminals]),
        **_paths([t[2] for t in terminals], index, sequence, n * a),
        infostate_of={h: index[key] for h, key in decisions.items()},
    )


def _paths(paths: list, index: dict, sequence, empty: int) -> dict[str, np.ndarray]:
    """``path``, ``owner`` and ``last`` of the terminal histories' decision paths."""
    width = max(len(steps) for steps in paths)
    path = np.zeros((len(paths), width, 2), np.int32)
    path[..., 0] = len(index)
    owner = np.full((len(paths), width), -1, np.int32)
    last = np.full((2, len(paths)), empty, np.int32)
    for z, steps in enumerate(paths):
        for d, (key, action) in enumerate(steps):
            path[z, d] = index[key], action
            owner[z, d] = key[0]
            last[key[0], z] = sequence((key, action))  # the player's later steps overwrite it
    return {"path": path, "owner": owner, "last": last}


def uniform_policy(tree: GameTree) -> jax.Array:
    """``pi[I, a] = 1 / |legal(I)|`` on legal actions, 0 elsewhere; ``(N, A)``."""
    return legal_policy(tree, jnp.ones(tree.policy_shape))


def legal_policy(tree: GameTree, weights: jax.Array) -> jax.Array:
    """Non-negative ``weights`` ``(N, A)`` restricted to legal actions, each row summing to 1
    (a row with no legal weight becomes uniform); ``vmap`` it over a batch."""
    w = jnp.where(tree.legal, weights, 0.0)
    total = w.sum(axis=-1, keepdims=True)
    uniform = tree.legal / tree.legal.sum(axis=-1, keepdims=True)
    return jnp.where(total > 0, w / jnp.where(total > 0, total, 1.0), uniform)


def joint_policy(tree: GameTree, first: jax.Array, second: jax.Array) -> jax.Array:
    """The table that plays ``first``'s rows at player 0's information states and
    ``second``'s at player 1's: two policies facing each other, as one ``(N, A)`` table."""
    return jnp.where((tree.player == 0)[:, None], first, second)

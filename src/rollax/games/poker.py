"""Kuhn poker and Leduc hold'em, as OpenSpiel plays them (two players, default parameters).

Each game is its rules, a function from a history to a :class:`~rollax.games.tree.Node`, and
its :class:`~rollax.games.tree.GameTree`, built once on first use. Histories use OpenSpiel's
action ids: a dealt card is its id, then the players' actions.

**Kuhn poker.** Cards 0, 1, 2 (J, Q, K); each player antes 1 and is dealt one card. Actions
0 pass, 1 bet (1 chip); player 0 acts first. ``pp`` goes to showdown for 1, ``bb`` and ``pbb``
for 2; a pass facing a bet folds. 12 information states, 30 terminal histories.

**Leduc hold'em.** Six cards 0..5 (J1 J2 Q1 Q2 K1 K2: rank ``card // 2``); each player antes
1 and is dealt one card, a public card follows the first round. Actions 0 fold, 1 call
(check), 2 raise; player 0 opens both rounds; raises are 2 chips in the first round, 4 in the
second, at most two a round; folding is legal only facing a raise. A round ends when both
have checked, or the last raise is called. At showdown a pair with the public card wins, else
the higher card (rank), ties split. 936 information states, 5520 terminal histories.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from rollax.games.tree import CHANCE, TERMINAL, GameTree, History, Node, build

KUHN_CARDS = "JQK"
LEDUC_CARDS = ("J1", "J2", "Q1", "Q2", "K1", "K2")
FOLD, CALL, RAISE = 0, 1, 2
"""Leduc's actions (Kuhn's are 0 pass, 1 bet)."""


def _deal(dealt: History, cards: int) -> Node:
    """Chance deals one of the ``cards`` not ``dealt`` yet, uniformly."""
    left = [c for c in range(cards) if c not in dealt]
    return Node(CHANCE, tuple((c, 1.0 / len(left)) for c in left))


def kuhn_rules(history: History) -> Node:
    """Kuhn poker's node at ``history`` = ``(card0, card1, *actions)``."""
    if len(history) < 2:
        return _deal(history, 3)
    cards, bets = history[:2], history[2:]
    won = 1.0 if cards[0] > cards[1] else -1.0
    if bets in ((0, 0), (1, 1), (0, 1, 1)):  # showdown
        return Node(TERMINAL, payoff=won * (1 + bets[-1]))
    if bets in ((1, 0), (0, 1, 0)):  # a pass facing a bet folds: the bettor wins the ante
        return Node(TERMINAL, payoff=1.0 if len(bets) == 2 else -1.0)
    player = len(bets) % 2
    name = KUHN_CARDS[cards[player]] + "".join("pb"[b] for b in bets)
    return Node(player, ((0, 1.0), (1, 1.0)), view=(cards[player], *bets), name=name)


class _Round(NamedTuple):
    """One betting round of Leduc replayed: ``paid`` is each player's total in the pot."""

    paid: tuple[int, int]
    to_act: int = 0
    raises: int = 0
    calls: int = 0
    folded: int | None = None

    @property
    def over(self) -> bool:
        closed = self.calls == (1 if self.raises else 2)
        return self.folded is not None or closed

    def legal(self) -> tuple[int, ...]:
        facing = self.paid[self.to_act] < max(self.paid)
        return (FOLD,) * facing + (CALL,) + (RAISE,) * (self.raises < 2)

    def play(self, action: int, raise_size: int) -> _Round:
        me, stakes = self.to_act, max(self.paid)
        if action == FOLD:
            return self._replace(folded=me)
        add = stakes - self.paid[me] + (raise_size if action == RAISE else 0)
        paid = (self.paid[0] + add, self.paid[1]) if me == 0 else (self.paid[0], self.paid[1] + add)
        if action == RAISE:
            return _Round(paid, 1 - me, self.raises + 1, 0)
        return _Round(paid, 1 - me, self.raises, self.calls + 1)


def _leduc_rank(card: int, public: int) -> tuple[int, ...]:
    """A hand's strength: a pair beats any high card; then the higher rank, then the lower."""
    mine, board = card // 2, public // 2
    return (1, mine) if mine == board else (0, max(mine, board), min(mine, board))


def leduc_rules(history: History) -> Node:
    """Leduc hold'em's node at ``history`` = ``(card0, card1, *round1, public, *round2)``."""
    if len(history) < 2:
        return _deal(history, 6)
    cards, rest = history[:2], history[2:]
    betting, seen, public_at = _Round((1, 1)), 0, len(rest)
    for raise_size in (2, 4):
        if raise_size == 4:
            if seen == len(rest):
                return _deal(cards, 6)
            betting, seen, public_at = _Round(betting.paid), seen + 1, seen
        while not betting.over:
            if seen == len(rest):
                return _leduc_decision(cards, rest, public_at, betting)
            betting, seen = betting.play(rest[seen], raise_size), seen + 1
        if betting.folded is not None:
            paid = betting.paid
            return Node(TERMINAL, payoff=float(paid[1] if betting.folded == 1 else -paid[0]))
    ranks = [_leduc_rank(card, rest[public_at]) for card in cards]
    won = (ranks[0] > ranks[1]) - (ranks[0] < ranks[1])
    return Node(TERMINAL, payoff=float(won * betting.paid[0]))


def _leduc_decision(cards: History, rest: History, public_at: int, betting: _Round) -> Node:
    """The acting player's node: its view is its card and the public history; its name reads
    e.g. ``Q1:cr/K2:r`` (card, first round, public card, second round)."""
    player = betting.to_act
    name = LEDUC_CARDS[cards[player]] + ":" + "".join("fcr"[a] for a in rest[:public_at])
    if public_at < len(rest):
        second = "".join("fcr"[a] for a in rest[public_at + 1:])
        name += f"/{LEDUC_CARDS[rest[public_at]]}:{second}"
    return Node(player, tuple((a, 1.0) for a in betting.legal()),
                view=(cards[player], *rest), name=name)


@functools.cache
def kuhn_poker() -> GameTree:
    """Kuhn poker's tree (12 information states, 2 actions), built once."""
    return build("kuhn_poker", kuhn_rules, num_actions=2)


@functools.cache
def leduc_poker() -> GameTree:
    """Leduc hold'em's tree (936 information states, 3 actions), built once."""
    return build("leduc_poker", leduc_rules, num_actions=3)

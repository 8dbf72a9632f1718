"""Each information state of Kuhn poker and Leduc hold'em as Pgx 2.6 shows it to the player to
act: the observation, the legal-action mask and the action ids of ``pgx:kuhn_poker`` and
``pgx:leduc_holdem``; and a policy trained on Pgx's games as a table over
:mod:`rollax.games.poker`'s trees (:func:`policy_table`), whose exploitability
:mod:`rollax.games.exact` computes (``rollax.evaluation`` during training,
``rollax.run.exploitability`` for a run folder).

Nothing here imports Pgx: the encodings are read in its source (``pgx/kuhn_poker.py``,
``pgx/leduc_holdem.py`` of pgx 2.6.0), and ``tests/suites/test_pgx_exploitability.py`` checks
them against the states reached by playing Pgx's games to every decision history.

**Kuhn poker.** Pgx's actions are 0 bet, 1 pass (the tree's are 0 pass, 1 bet). The observation
is 7 bits: ``[0:3]`` the player's card (J, Q, K), ``[3:5]`` the chips it has bet beyond the ante
(0 or 1), ``[5:7]`` the opponent's.

**Leduc hold'em.** Pgx's actions are 0 call (check), 1 raise, 2 fold (the tree's are 0 fold,
1 call, 2 raise); its cards are ranks 0, 1, 2 (the tree's card ``c`` has rank ``c // 2``). The
observation is 34 bits: ``[0:3]`` the player's rank, ``[3:6]`` the public card's rank (in the
second round only), ``[6:20]`` the player's chips in the pot (ante included, 1..13),
``[20:34]`` the opponent's.

**What the observation does not tell.** Neither game's observation names the seat or the
betting history, only the chips, so information states alias: in Kuhn ``J`` (first to act)
and ``Jp`` (second, after a pass) look alike, and so do ``Jpb`` and ``Jb``; in Leduc the two
cards of a rank, and every history with the same chips, look alike. A policy reading Pgx's
observations plays one distribution at all the information states of one observation (and
mask): its table has equal rows there. The mask is the tree's (Pgx's own at that state): in
Leduc's second round the chips do not tell whether a raise is still allowed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.games.poker import kuhn_poker, leduc_poker
from rollax.games.tree import GameTree, History, legal_policy

KUHN_PGX_ACTIONS = (1, 0)
"""Pgx's action id of each of the tree's Kuhn actions: pass is Pgx's 1, bet its 0."""
LEDUC_PGX_ACTIONS = (2, 0, 1)
"""Pgx's action id of each of the tree's Leduc actions: fold 2, call 0, raise 1."""


class PgxView(NamedTuple):
    """A game's information states as Pgx shows them (``N`` information states, ``A``
    actions, ``D`` observation bits)."""

    tree: GameTree
    """The game (:func:`rollax.games.poker.kuhn_poker` or ``leduc_poker``)."""
    observations: np.ndarray
    """float32 ``(N, D)``: the player to act's Pgx observation at each information state (as
    the adapter flattens and casts it)."""
    masks: np.ndarray
    """bool ``(N, A)``: the legal actions, in Pgx's action order."""
    actions: np.ndarray
    """int32 ``(A,)``: Pgx's id of each of the tree's actions (``actions[a]`` for tree
    action ``a``)."""
    histories: tuple[History, ...]
    """One decision history of each information state (the first in the tree's walk)."""


def _kuhn_observation(history: History) -> np.ndarray:
    """Pgx's 7 bits for the player to act after ``history = (card0, card1, *bets)``."""
    cards, bets = history[:2], history[2:]
    me = len(bets) % 2  # the tree's players alternate; player 0 moves first
    bet = [sum(b for b in bets[p::2]) for p in (0, 1)]  # tree action 1 is a bet of 1
    obs = np.zeros(7, np.float32)
    obs[[cards[me], 3 + bet[me], 5 + bet[1 - me]]] = 1.0
    return obs


def _leduc_observation(history: History) -> np.ndarray:
    """Pgx's 34 bits for the player to act after ``history = (card0, card1, *round1, public,
    *round2)``: the betting replayed for the chips (a round ends at a call that is not its
    first action)."""
    cards, rest = history[:2], history[2:]
    chips, public, me, acted, size = [1, 1], None, 0, 0, 2
    for action in rest:
        if public is None and size == 4:  # the first round is over: this is the public card
            public, me, acted = action, 0, 0
            continue
        if action == 2:  # raise: match, then add the round's raise
            chips[me] = max(chips) + size
        elif action == 1:  # call (check)
            chips[me] = max(chips)
            if acted:
                size, me, acted = 4, 0, 0
                continue
        acted, me = acted + 1, 1 - me
    obs = np.zeros(34, np.float32)
    obs[[cards[me] // 2, 6 + chips[me], 20 + chips[1 - me]]] = 1.0
    if public is not None:
        obs[3 + public // 2] = 1.0
    return obs


_GAMES: dict[str, tuple[Callable[[], GameTree], Callable, tuple[int, ...]]] = {
    "kuhn_poker": (kuhn_poker, _kuhn_observation, KUHN_PGX_ACTIONS),
    "leduc_holdem": (leduc_poker, _leduc_observation, LEDUC_PGX_ACTIONS),
}
PGX_GAMES = tuple(_GAMES)
"""The Pgx ids with a tree here."""


@functools.cache
def pgx_view(env_id: str) -> PgxView:
    """The :class:`PgxView` of Pgx's ``kuhn_poker`` or ``leduc_holdem`` (built once)."""
    if env_id not in _GAMES:
        raise ValueError(f"pgx:{env_id} has no exact game tree here; these do: "
                         f"{', '.join('pgx:' + g for g in PGX_GAMES)}")
    build, observe, to_pgx = _GAMES[env_id]
    tree = build()
    first: dict[int, History] = {}
    for history, infostate in tree.infostate_of.items():
        first.setdefault(infostate, history)
    histories = tuple(first[i] for i in range(tree.num_infostates))
    actions = np.asarray(to_pgx, np.int32)
    masks = np.zeros(tree.policy_shape, bool)
    masks[:, actions] = tree.legal
    observations = np.stack([observe(h) for h in histories])
    return PgxView(tree, observations, masks, actions, histories)


def env_view(env: Any) -> PgxView | None:
    """The :class:`PgxView` of a ``pgx:kuhn_poker`` or ``pgx:leduc_holdem`` environment (the
    Pgx adapter, without options), ``None`` for any other (read from its ``name`` and
    ``pgx_env``: nothing is imported)."""
    pgx_env = getattr(env, "pgx_env", None)
    name = getattr(env, "name", None)
    if pgx_env is None or name not in _GAMES or getattr(env, "env_kwargs", ()):
        return None
    return pgx_view(name)


def policy_table(policy: Any, params: Any, view: PgxView, greedy: bool = False) -> jax.Array:
    """``pi[I, a]`` ``(N, A)`` over ``view.tree``: ``policy`` (a :class:`rollax.policies.Policy`
    taking an action mask, with ``params``) at each information state's Pgx observation and
    legal actions, its columns in the tree's action order. The probabilities are
    ``exp log_prob`` of each legal action, renormalised over the legal ones (a masked policy's
    illegal actions hold about ``e^-1e9`` of the mass); ``greedy``: 1 at the policy's mode.
    Pure: works under ``jit`` and ``vmap`` (over ``params``)."""
    obs, masks = jnp.asarray(view.observations), jnp.asarray(view.masks)
    num_pgx = masks.shape[-1]
    if greedy:
        modes = jax.vmap(lambda o, m: policy.greedy(params, o, m))(obs, masks)
        pgx_probs = jax.nn.one_hot(modes, num_pgx)
    else:
        def probs(o, m):
            logp = jax.vmap(lambda a: policy.log_prob(params, o, a, m))(jnp.arange(num_pgx))
            return jnp.exp(logp)

        pgx_probs = jax.vmap(probs)(obs, masks)
    return legal_policy(view.tree, pgx_probs[:, jnp.asarray(view.actions)])

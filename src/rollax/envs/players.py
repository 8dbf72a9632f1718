"""Games of several players taking turns (``docs/contract.md §8``): what an environment adds
to be one, and how rollax reads it.

An environment is a game when it has ``num_players >= 2`` and two functions of a state:

- ``to_act(state) -> int32 ()``: the player whose turn it is, ``0 .. num_players - 1``; the
  observation and the action mask of ``state`` are that player's;
- ``player_rewards(state) -> float32 (num_players,)``: what each player received in the
  transition that reached ``state`` (a game pays the loser on the winner's move). It is read
  right after a live step only; a finished state absorbs and pays nothing more.

Its scalar ``reward`` (the one ``step`` returns) stays player 0's, so the single-player
machinery (episode returns, checks) reads a game as player 0 sees it. One policy plays every
seat by self-play; its experience is recorded per turn (:class:`Turns`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Turns", "is_game", "num_players", "turns"]


class Turns(NamedTuple):
    """Who acted and who was paid in one transition of a game (each ``(T, B, ...)`` in a
    trajectory)."""

    player: jax.Array
    """int32: the player who acted (``to_act`` of the state before the step)."""
    next_player: jax.Array
    """int32: the player to act in the state after the step (before any reset)."""
    rewards: jax.Array
    """float32 ``(num_players,)``: every player's reward in the transition (0 where the
    episode had already ended)."""
    learner: Any = None
    """bool: the learner's policy acted, not a pool's opponent (a league,
    :func:`rollax.collect.collect_league`): the cells the loss weighs. None by self-play, where
    the one policy acts in every cell."""


def num_players(env: Any) -> int:
    """The players of ``env``: its ``num_players``, 1 for an environment without one."""
    return int(getattr(env, "num_players", 1))


def is_game(env: Any) -> bool:
    """Whether ``env`` is a game of two or more players (module docstring)."""
    return num_players(env) > 1


def turns(env: Any, state: Any, next_state: Any, active: jax.Array) -> Turns | None:
    """The :class:`Turns` of one environment's step from ``state`` to ``next_state``
    (``active``: live before it), or ``None`` for an environment that is not a game."""
    if not is_game(env):
        return None
    rewards = jnp.asarray(env.player_rewards(next_state), jnp.float32)
    return Turns(jnp.asarray(env.to_act(state), jnp.int32),
                 jnp.asarray(env.to_act(next_state), jnp.int32),
                 jnp.where(active, rewards, 0.0))

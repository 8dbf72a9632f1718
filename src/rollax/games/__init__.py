"""Small two-player zero-sum games solved exactly: Kuhn poker and Leduc hold'em as flat game
trees (:mod:`rollax.games.tree`, :mod:`rollax.games.poker`), and the expected payoff, best
responses, NashConv and exploitability of tabular policies over them, in JAX
(:mod:`rollax.games.exact`); tic-tac-toe solved by minimax (:mod:`rollax.games.tictactoe`).
docs/games.md has the equations and an example."""

from rollax.games.exact import (
    action_values,
    best_response,
    best_response_value,
    expected_payoff,
    exploitability,
    nash_conv,
    reach,
)
from rollax.games.poker import kuhn_poker, leduc_poker
from rollax.games.tree import GameTree, joint_policy, legal_policy, uniform_policy

__all__ = [
    "GameTree",
    "action_values",
    "best_response",
    "best_response_value",
    "expected_payoff",
    "exploitability",
    "joint_policy",
    "kuhn_poker",
    "leduc_poker",
    "legal_policy",
    "nash_conv",
    "reach",
    "uniform_policy",
]

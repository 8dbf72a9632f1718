"""rollax.games against OpenSpiel on the same games and the same tabular policies: its rules
(every history's player, legal actions, chance probabilities and payoffs), its information
states (one to one with rollax's), and its ``exploitability``, ``nash_conv`` and expected
payoffs on the uniform policy and random ones. Skipped where OpenSpiel is not installed (it is
in the ``test`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from rollax import games
from rollax.games import poker, tree

pyspiel = pytest.importorskip("pyspiel")
from open_spiel.python import policy as openspiel_policy  # noqa: E402
from open_spiel.python.algorithms import expected_game_score, exploitability  # noqa: E402

GAMES = {"kuhn_poker": (games.kuhn_poker, poker.kuhn_rules),
         "leduc_poker": (games.leduc_poker, poker.leduc_rules)}


def walk(state, prob=1.0):
    """Every non-chance state of OpenSpiel's tree below ``state``, with chance's probability."""
    if state.is_chance_node():
        for outcome, p in state.chance_outcomes():
            yield from walk(state.child(outcome), prob * p)
        return
    yield state, prob
    if not state.is_terminal():
        for action in state.legal_actions():
            yield from walk(state.child(action), prob)


@pytest.fixture(scope="module", params=sorted(GAMES))
def game(request):
    """(OpenSpiel's game, rollax's tree, rollax's rules, OpenSpiel's states with their chance
    probabilities, OpenSpiel's information-state string -> rollax's index)."""
    build, rules = GAMES[request.param]
    spiel = pyspiel.load_game(request.param)
    states = list(walk(spiel.new_initial_state()))
    ours = build()
    index = {s.information_state_string(): ours.infostate_of[tuple(s.history())]
             for s, _ in states if not s.is_terminal()}
    return spiel, ours, rules, states, index


def to_openspiel(spiel, index: dict[str, int], table) -> openspiel_policy.TabularPolicy:
    """rollax's table as OpenSpiel's ``TabularPolicy``."""
    out = openspiel_policy.TabularPolicy(spiel)
    for key, row in index.items():
        out.action_probability_array[out.state_lookup[key]] = np.asarray(table[row])
    return out


def policy(ours: tree.GameTree, kind: str):
    """A tabular policy of ``kind``: uniform, random, sparse (some actions at probability 0:
    some histories never reached) or pure."""
    rng = np.random.default_rng(len(kind))
    weights = rng.random(ours.policy_shape)
    if kind == "uniform":
        return games.uniform_policy(ours)
    if kind == "sparse":
        weights *= rng.random(ours.policy_shape) > 0.4
    elif kind == "pure":
        weights = weights * ours.legal == (weights * ours.legal).max(-1, keepdims=True)
    return games.legal_policy(ours, weights)


def test_the_rules_are_openspiels(game):
    _, ours, rules, states, _ = game
    terminals = 0
    for state, _ in states:
        node = rules(tuple(state.history()))
        if state.is_terminal():
            terminals += 1
            assert node.player == tree.TERMINAL and node.payoff == state.returns()[0]
            continue
        assert node.player == state.current_player()
        assert [a for a, _ in node.moves] == state.legal_actions()
    assert terminals == ours.num_terminals
    assert sorted(ours.chance) == pytest.approx(sorted(p for s, p in states if s.is_terminal()))


def test_information_states_are_one_to_one_with_openspiels(game):
    spiel, ours, _, states, index = game
    assert len(index) == ours.num_infostates == len(set(index.values()))
    assert ours.num_infostates == len(openspiel_policy.TabularPolicy(spiel).state_lookup)
    for state, _ in states:
        if not state.is_terminal():
            row = ours.infostate_of[tuple(state.history())]
            assert np.flatnonzero(ours.legal[row]).tolist() == state.legal_actions()
            assert ours.player[row] == state.current_player()


@pytest.mark.parametrize("kind", ["uniform", "random", "sparse", "pure"])
def test_exploitability_and_values_are_openspiels(game, kind):
    spiel, ours, _, _, index = game
    table = policy(ours, kind)
    theirs = to_openspiel(spiel, index, table)
    expected = exploitability.nash_conv(spiel, theirs, return_only_nash_conv=False,
                                        use_cpp_br=True)
    values = expected_game_score.policy_value(spiel.new_initial_state(), [theirs] * 2)
    payoff = float(games.expected_payoff(ours, table))
    assert payoff == pytest.approx(values[0], abs=1e-5)
    gains = [float(games.best_response_value(ours, table, p)) - v
             for p, v in ((0, payoff), (1, -payoff))]
    assert gains == pytest.approx(expected.player_improvements, abs=1e-5)
    assert games.nash_conv(ours, table) == pytest.approx(expected.nash_conv, abs=1e-5)
    assert games.exploitability(ours, table) == pytest.approx(
        exploitability.exploitability(spiel, theirs), abs=1e-5)


def test_uniform_exploitability(game):
    """The uniform policy's exploitability, as OpenSpiel computes it: 11/24 in Kuhn poker."""
    spiel, ours, _, _, _ = game
    theirs = exploitability.exploitability(spiel, openspiel_policy.TabularPolicy(spiel))
    assert games.exploitability(ours, games.uniform_policy(ours)) == pytest.approx(theirs,
                                                                                   abs=1e-5)
    if spiel.get_type().short_name == "kuhn_poker":
        assert theirs == pytest.approx(11 / 24)

"""``network: spatial`` on the suites' boards: its logits in Pgx's tic-tac-toe action order and
in Jumanji's Minesweeper ``(row, col)`` order, checked with a hand-set network whose logit is
one plane of the board; its grid of Minesweeper's fields; a few legal updates of each; the
refusal of Connect Four's column actions; and, slow, Minesweeper learnt with the preset.

Needs ``pip install rollax[pgx]`` and ``rollax[jumanji]`` (each test skips without its suite).
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from rollax.algos import ppo
from rollax.algos.base import make_train
from rollax.collect import collect_autoreset
from rollax.nets.build import actor_critic
from rollax.nets.spatial import CellPart, GlobalPart, GridLayout


def passes_channels(params, weights):
    """``params`` whose actor's logit of a cell is ``sum_c weights[c] * x[cell, c]``, ``x`` the
    grid read from the observation (only the 3x3 kernels' centre taps and one unit used)."""
    first, *middle, out = params.actor
    w = jnp.zeros_like(first.weight).at[0, :, 1, 1].set(jnp.asarray(weights, jnp.float32))
    layers = [eqx.tree_at(lambda lay: lay.weight, first, w)]
    layers += [eqx.tree_at(lambda lay: lay.weight, lay,
                           jnp.zeros_like(lay.weight).at[0, 0, 1, 1].set(1.0)) for lay in middle]
    layers.append(eqx.tree_at(lambda lay: lay.weight, out,
                              jnp.zeros_like(out.weight).at[0, 0, 0, 0].set(1.0)))
    return params._replace(actor=tuple(layers))


@pytest.fixture(scope="module")
def tic_tac_toe():
    pytest.importorskip("pgx")
    env = rollax.make("pgx:tic_tac_toe")
    net = actor_critic(env, "spatial", (8, 8), "relu", 0.0, 8)
    return env, net, net.init(jax.random.key(0))


def test_tic_tac_toe_action_r3_plus_c_is_the_cell_its_logit_reads(tic_tac_toe):
    # Pgx's planes are the player to act's: (..., 0) its own marks, (..., 1) the opponent's.
    # A logit of "the opponent's mark here" peaks at the cell the opponent just took
    env, net, params = tic_tac_toe
    hand = passes_channels(params, [0.0, 1.0])
    for action in (0, 5, 7):
        state = env.reset(jax.random.key(action))
        state, *_ = env.step(state, jnp.int32(action), jax.random.key(9))
        obs, mask = env.observation(state), env.action_mask(state)
        assert not bool(mask[action])
        logits = net.distribution(hand, obs).logits
        assert int(jnp.argmax(logits)) == action
        assert int(net.greedy(hand, obs, mask)) != action  # masked: never played again


@pytest.fixture(scope="module")
def minesweeper():
    pytest.importorskip("jumanji")
    env = rollax.make("jumanji:Minesweeper-v0")
    net = actor_critic(env, "spatial", (8,), "relu", 0.0, 8)
    return env, net, net.init(jax.random.key(0))


def test_minesweeper_reads_board_one_hot_mask_and_mine_count(minesweeper):
    _, net, _ = minesweeper
    assert net.layout == GridLayout(10, 10, (CellPart(0, 1, -1, 10), CellPart(100, 1)),
                                    (GlobalPart(200, 1, 1 / 99),), 201)
    assert net.num_actions == 100 and net.kinds == 1


def test_minesweeper_action_10_row_plus_col_is_the_cell_its_logit_reads(minesweeper):
    # one-hot channels 1-9 are a revealed cell's values 0-8: after revealing (row, col) the
    # logit of "revealed" peaks at action 10 row + col
    env, net, params = minesweeper
    hand = passes_channels(params, [0.0, *[1.0] * 9, 0.0, 0.0])
    for row, col in [(0, 0), (2, 7), (9, 4)]:
        action = 10 * row + col
        np.testing.assert_array_equal(env.jumanji_action(jnp.int32(action)), [row, col])
        for seed in range(20):  # a start whose first reveal is no mine
            state = env.reset(jax.random.key(seed))
            state, _, terminated, _ = env.step(state, jnp.int32(action))
            if not bool(terminated):
                break
        else:
            pytest.fail("every start had a mine there")
        obs, mask = env.observation(state), env.action_mask(state)
        logits = net.distribution(hand, obs).logits
        assert int(jnp.argmax(logits)) == action and not bool(mask[action])
        assert int(net.greedy(hand, obs, mask)) != action


def _trains_legally(env_name, **settings):
    config = ppo.preset(env_name, total_steps=128, num_envs=4, num_steps=16, minibatches=2,
                        epochs=1, eval_episodes=2, eval_steps=32, **settings)
    algo = ppo.make_algorithm(config)
    result = make_train(algo)(jax.random.key(0))
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(result.params))
    _, traj = collect_autoreset(algo.env, algo.policy, algo.params(result.state),
                                result.state.env_state, jax.random.key(2), 16)
    chosen = jnp.take_along_axis(traj.action_mask, traj.action[..., None], axis=-1)
    assert bool(jnp.all(chosen)), f"{env_name}: an illegal move"


def test_the_tic_tac_toe_preset_is_spatial_and_trains_a_few_updates_legally():
    pytest.importorskip("pgx")
    ppo.validate(ppo.preset("pgx:tic_tac_toe"))
    assert ppo.preset("pgx:tic_tac_toe").network == "spatial"
    _trains_legally("pgx:tic_tac_toe", hidden=(8,))


def test_the_minesweeper_preset_is_spatial_and_trains_a_few_updates_legally():
    pytest.importorskip("jumanji")
    config = ppo.preset("jumanji:Minesweeper-v0")
    assert (config.network, config.hidden, config.activation) == ("spatial", (32, 32, 32),
                                                                  "relu")
    _trains_legally("jumanji:Minesweeper-v0", hidden=(8,))


def test_connect_fours_column_actions_are_refused_in_one_line(tmp_path, capsys):
    pytest.importorskip("pgx")
    code = rollax.cli.main(["train", "--env", "pgx:connect_four", "--network", "spatial",
                            "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert ("network spatial gives one logit per cell of a grid, but env 'pgx:connect_four': "
            "its 7 actions are not one per cell (and kind) of its 6x7 grid" in err), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ROLLAX_ALL_GAMES") != "1",
                    reason="ROLLAX_ALL_GAMES=1 trains it (about 4 min; not in every CI run)")
def test_ppo_with_the_preset_learns_minesweeper_far_above_the_random_legal_policy():
    """The random legal policy reveals about 8.2 safe cells before a mine; a flat MLP stays
    there (benchmarks/QUALITY.md). The preset's spatial network at 32,768 steps: seed 0
    measured 48.8 over 200 episodes (about 4 min here, so it trains with ROLLAX_ALL_GAMES=1,
    as the largest Pgx boards do; QUALITY.md has the 256k-step row)."""
    pytest.importorskip("jumanji")
    config = ppo.preset("jumanji:Minesweeper-v0", total_steps=32768, eval_episodes=200)
    algo = ppo.make_algorithm(config)
    result = make_train(algo)(jax.random.key(0))
    assert float(result.eval_return) > 20.0, result.eval_return


@pytest.mark.slow
def test_the_tic_tac_toe_preset_is_spatial_and_beats_a_random_player_from_both_seats():
    """The preset at an eighth of its steps (64 updates of 32 x 32 steps, random openings of
    up to 6 moves): seed 0 measured, 500 games a seat, won 97.8 % first and 87.8 % second,
    lost 0 % and 0.6 %, mean payoff 0.925 (without openings: lost 0 % and 4 %, mean payoff
    0.86; the flat 64-64 MLP without openings: lost 7 % and 34 %, mean payoff 0.57)."""
    pytest.importorskip("pgx")
    config = ppo.preset("pgx:tic_tac_toe", total_steps=65_536, eval_episodes=500)
    assert config.network == "spatial" and config.opening_moves == 6
    algo = ppo.make_algorithm(config)
    scores = algo.evaluate(make_train(algo)(jax.random.key(0)).state, algo.hyperparams)
    assert scores["eval_loss_first"] < 0.03 and scores["eval_loss_second"] < 0.04, scores
    assert scores["eval_return"] > 0.85, scores


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ROLLAX_ALL_GAMES") != "1",
                    reason="ROLLAX_ALL_GAMES=1 trains it (about 4 min; not in every CI run)")
def test_the_tic_tac_toe_preset_never_loses_to_perfect_play_from_either_seat():
    """The preset as it is (524,288 steps, random openings of up to 6 moves), seed 0: its
    greedy policy against every line of perfect play (the minimax opponent playing each of its
    optimal moves in turn) draws or wins every game, moving first and moving second."""
    pytest.importorskip("pgx")
    from rollax.games.tictactoe import against_perfect_play

    algo = ppo.make_algorithm(ppo.preset("pgx:tic_tac_toe", eval_episodes=1))
    params = algo.params(make_train(algo)(jax.random.key(0)).state)
    greedy = jax.jit(algo.policy.greedy)

    def move(obs, mask) -> int:
        return int(greedy(params, jnp.asarray(obs), jnp.asarray(mask)))

    for first in (True, False):
        worst, games = against_perfect_play(move, first)
        assert worst == 0 and games > 1, (first, worst, games)

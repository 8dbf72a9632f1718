"""Self-play in Pgx's two-player games (``docs/contract.md §8``): a hand-played tic-tac-toe
game through the adapter and the collector, its players' turns, rewards and advantages written
by hand; the self-play advantages of a rollout; every two-player game trained a few updates
(no NaN, legal moves only); the evaluation against a random player; the refusals; and a
learning check.

Needs ``pip install rollax[pgx]``; the main test suite skips this folder.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from rollax.algos import a2c, ppo
from rollax.algos.base import make_train
from rollax.collect import collect, collect_autoreset, collection_keys
from rollax.evaluation import GAME_SCORES, game_payoffs, game_scores
from rollax.games import tictactoe
from rollax.returns import player_gae, two_player_next_values

pgx = pytest.importorskip("pgx")


@dataclasses.dataclass(frozen=True)
class Scripted:
    """Plays the first legal cell of ``params`` (an order of the 9 cells): a hand-played
    game."""

    def sample(self, params, observation, key, mask):
        return self.greedy(params, observation, mask), jnp.zeros((), jnp.float32)

    def greedy(self, params, observation, mask):
        return params[jnp.argmax(mask[params])].astype(jnp.int32)

    def log_prob(self, params, observation, action, mask=None):
        return jnp.zeros((), jnp.float32)


TOP_ROW = jnp.array([0, 3, 1, 4, 2, 5, 6, 7, 8])
"""X: 0, O: 3, X: 1, O: 4, X: 2 wins the top row on the fifth move."""
DRAW = jnp.array([0, 1, 2, 4, 3, 5, 7, 6, 8])
"""X 0, O 1, X 2, O 4, X 3, O 5, X 7, O 6, X 8: a full board, no line."""


def _hand_played(order, steps=7):
    """One game of ``Scripted`` against itself (absorbing), and the player id Pgx dealt to X,
    the first mover, from the start state's ``current_player``."""
    env = rollax.make("pgx:tic_tac_toe")
    reset_key = collection_keys(jax.random.key(0), 1, steps)[0][0]
    x = int(env.to_act(env.reset(reset_key)))
    _, traj = collect(env, Scripted(), order, jax.random.key(0), 1, steps)
    return env, x, jax.tree.map(lambda x: np.asarray(x[:, 0]), traj)


def test_a_hand_played_win_records_each_players_turns_and_rewards():
    env, x, traj = _hand_played(TOP_ROW)
    o = 1 - x
    assert env.num_players == 2
    np.testing.assert_array_equal(traj.action[:5], [0, 3, 1, 4, 2])
    np.testing.assert_array_equal(traj.turns.player[:5], [x, o, x, o, x])
    np.testing.assert_array_equal(traj.turns.next_player[:4], [o, x, o, x])
    np.testing.assert_array_equal(traj.active, [1, 1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(traj.terminated, [0, 0, 0, 0, 1, 0, 0])
    paid = np.zeros((7, 2))
    paid[4, x], paid[4, o] = 1, -1  # Pgx pays the loser on the winner's move
    np.testing.assert_array_equal(traj.turns.rewards, paid)
    np.testing.assert_array_equal(traj.reward, paid[:, 0])  # the scalar reward: player 0's
    for t in range(5):  # the mask is the player to act's: the cells still empty
        np.testing.assert_array_equal(traj.action_mask[t].sum(), 9 - t)


def _advantages(traj, values, gamma=1.0, lam=1.0):
    to_2d = lambda a: jnp.asarray(a)[:, None]  # noqa: E731
    next_values = two_player_next_values(jnp.zeros((7, 1)), to_2d(traj.turns.next_player))
    adv, target = player_gae(to_2d(traj.turns.rewards), to_2d(values), next_values,
                             to_2d(traj.turns.player), to_2d(traj.terminated),
                             to_2d(traj.truncated), gamma, lam, to_2d(traj.active))
    return np.asarray(adv[:, 0]), np.asarray(target[:, 0])


def test_the_hand_played_win_gives_each_player_its_own_returns():
    """With gamma = lam = 1 the targets are each mover's final payoff: +1 at X's three moves,
    -1 at O's two (its loss paid on X's move, after its own last turn); padding 0."""
    _, _, traj = _hand_played(TOP_ROW)
    values = np.array([0.1, -0.2, 0.3, -0.4, 0.5, 9.0, 9.0], np.float32)
    adv, target = _advantages(traj, values)
    np.testing.assert_allclose(adv, [0.9, -0.8, 0.7, -0.6, 0.5, 0, 0], atol=1e-6)
    np.testing.assert_allclose(target[:5], [1, -1, 1, -1, 1], atol=1e-6)
    half, _ = _advantages(traj, values, 0.5, 0.5)  # per own turn: O's t = 1 sees its t = 3
    np.testing.assert_allclose(half[:5], [0.06875, -0.15, 0.075, -0.6, 0.5], atol=1e-6)


def test_a_hand_played_draw_pays_nobody():
    _, x, traj = _hand_played(DRAW, steps=10)
    np.testing.assert_array_equal(traj.action[:9], np.asarray(DRAW))
    assert traj.terminated[8] and traj.active[:9].all() and not traj.active[9]
    assert not traj.turns.rewards.any()
    np.testing.assert_array_equal(traj.turns.player[:9], [x, 1 - x] * 4 + [x])


def test_self_play_advantages_of_an_autoreset_rollout():
    """ExperienceParts.advantages of a game is player_gae of the recorded turns, the critic's
    next values negated for the player not to act; every transition's actor is the player to
    act before it, and the next player that of the state after."""
    config = ppo.PPOConfig(env="pgx:tic_tac_toe", total_steps=256, num_envs=4, num_steps=32,
                           network="mlp", hidden=(16,))
    algo = ppo.make_algorithm(config)
    parts = ppo.make_parts(algo.config, algo.env)
    state = parts.init(jax.random.key(0), algo.hyperparams)
    collected = parts.experience.collect(state, jax.random.key(1))
    turns, traj = collected.traj.turns, collected.traj
    within = ~(traj.terminated | traj.truncated)[:-1]
    assert (np.asarray(turns.next_player[:-1] == turns.player[1:]) | ~np.asarray(within)).all()
    adv = parts.experience.advantages(state, collected, algo.hyperparams)
    next_values = two_player_next_values(collected.next_values, turns.next_player)
    want, _ = player_gae(turns.rewards, collected.values, next_values, turns.player,
                         traj.terminated, traj.truncated, config.gamma, config.gae_lambda)
    np.testing.assert_array_equal(adv.advantage, want)
    assert np.isfinite(adv.target).all()


def _legal(traj) -> bool:
    chosen = jnp.take_along_axis(traj.action_mask, traj.action[..., None], axis=-1)
    return bool(jnp.all(chosen))


FAST = ("tic_tac_toe", "connect_four", "kuhn_poker", "leduc_holdem", "othello")
HEAVY = ("backgammon", "hex", "go_9x9", "gardner_chess", "chess")
LARGEST = ("animal_shogi", "go_19x19", "shogi")
"""Larger boards of the same rules as ``go_9x9`` and ``chess`` through the same adapter: their
steps alone take 22-56 s to compile here, so they train only with ``ROLLAX_ALL_GAMES=1`` (CI
leaves them out; the session that added them ran all three)."""


def _smoke(name, algo_module=ppo):
    config = algo_module.PPOConfig if algo_module is ppo else a2c.A2CConfig
    settings = dict(env=f"pgx:{name}", total_steps=128, num_envs=4, num_steps=16,
                    network="mlp", hidden=(16,), eval_episodes=2, eval_steps=64)
    algo = algo_module.make_algorithm(config(**settings))
    result = make_train(algo)(jax.random.key(0))
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(result.params)), name
    for field, values in result.metrics._asdict().items():  # NaN returns: no episode ended
        assert field.startswith("episode") or np.isfinite(np.asarray(values)).all(), field
    state = result.state
    _, traj = collect_autoreset(algo.env, algo.policy, algo.params(state), state.env_state,
                                jax.random.key(2), 16)
    assert _legal(traj), f"{name}: an illegal move"
    assert traj.turns.rewards.shape == (16, 4, 2)


@pytest.mark.parametrize("name", FAST)
def test_every_fast_game_trains_a_few_updates_legally(name):
    _smoke(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*HEAVY, *(pytest.param(name, marks=pytest.mark.skipif(
    os.environ.get("ROLLAX_ALL_GAMES") != "1", reason="ROLLAX_ALL_GAMES=1 trains it"))
    for name in LARGEST)])
def test_every_other_game_trains_a_few_updates_legally(name):
    # Pgx's go, chess and shogi games broadcast ranks implicitly; rollax's conftest makes that
    # an error for its own code (which the fast games above run under it)
    with jax.numpy_rank_promotion("allow"):
        _smoke(name)


def test_a2c_trains_a_game_by_self_play():
    _smoke("tic_tac_toe", a2c)


def test_check_env_on_games():
    for name in ("tic_tac_toe", "kuhn_poker"):
        report = rollax.check_env(rollax.make(f"pgx:{name}"))
        assert report.ok, report


def test_the_random_player_plays_legally_and_the_seats_alternate():
    env = rollax.make("pgx:tic_tac_toe")
    payoffs = game_payoffs(env, Scripted(), TOP_ROW, jax.random.key(0),
                           jnp.arange(400) < 200)
    first, second = np.asarray(payoffs[:200]), np.asarray(payoffs[200:])
    assert set(np.unique(payoffs)) <= {-1.0, 0.0, 1.0}
    assert first.mean() > second.mean()  # moving first helps against a random player
    scores = game_scores(env, Scripted(), TOP_ROW, jax.random.key(0), 200)
    assert tuple(sorted(scores)) == tuple(sorted(("eval_return", *GAME_SCORES)))
    for seat in ("first", "second"):
        total = sum(float(scores[f"eval_{o}_{seat}"]) for o in ("win", "draw", "loss"))
        assert total == pytest.approx(1.0)
    np.testing.assert_allclose(scores["eval_return"], np.mean(payoffs), atol=1e-6)


@pytest.mark.parametrize("argv,words", [
    (["--env", "pgx:sparrow_mahjong"], "is a 3-player game"),
    (["--env", "pgx:tic_tac_toe", "--network", "gru"], "network gru is refused"),
    (["--env", "pgx:tic_tac_toe", "--normalize-rewards"], "normalize_rewards is refused"),
    (["--env", "pgx:tic_tac_toe", "--algo", "reinforce"], "only PPO and A2C train"),
])
def test_refusals_are_one_line_and_exit_2(argv, words, tmp_path, capsys):
    code = rollax.cli.main(["train", *argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and words in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("opponents", [{}, {"opponents": "pool", "pool_size": 4, "pool_every": 4}],
                         ids=["self-play", "league"])
def test_self_play_beats_a_random_player_more_often_from_both_seats(opponents):
    """PPO on tic-tac-toe, 64k steps, by self-play and against a pool of 4 snapshots (one every
    4 updates): the greedy policy's wins against a random legal player rise from both seats
    (500 games each; seed 0 measured, first seat 0.60 -> 0.89 by self-play, 0.92 in the league;
    second 0.33 -> 0.64, 0.74; mean payoff 0.04 -> 0.56, 0.69)."""
    config = ppo.PPOConfig(env="pgx:tic_tac_toe", total_steps=65536, num_envs=32,
                           num_steps=32, network="mlp", hidden=(64, 64), lr=3e-3,
                           ent_coef=0.0, eval_episodes=500, **opponents)
    algo = ppo.make_algorithm(config)
    hp = algo.hyperparams
    before = algo.evaluate(algo.init(jax.random.key(0), hp), hp)
    after = algo.evaluate(make_train(algo)(jax.random.key(0)).state, hp)
    for seat in ("first", "second"):
        gain = after[f"eval_win_{seat}"] - before[f"eval_win_{seat}"]
        assert gain > 0.15, (seat, before, after)
    assert after["eval_loss_first"] < 0.15 and after["eval_return"] > 0.4, after


def test_cli_trains_connect_four_by_self_play_and_reports_the_rates(tmp_path, capsys):
    """``rollax train --env pgx:connect_four``: the rates against a random player on the
    update-0 lines, on the ``--eval-every`` lines and per lane in summary.json; ``rollax eval``
    plays the same games (its ``mean_return`` the mean payoff)."""
    run = tmp_path / "c4"
    code = rollax.cli.main(["train", "--env", "pgx:connect_four", "--total-steps", "256",
                            "--num-envs", "4", "--num-steps", "32", "--network", "mlp",
                            "--eval-episodes", "4", "--eval-every", "1", "--out", str(run)])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert set(GAME_SCORES) <= set(rows[0]) and "eval_return" in rows[0]
    assert set(GAME_SCORES) <= set(rows[-1]) and "greedy_return" in rows[-1]
    lane = json.loads((run / "summary.json").read_text())["lanes"][0]
    assert set(GAME_SCORES) <= set(lane)
    for seat in ("first", "second"):
        assert sum(lane[f"eval_{o}_{seat}"] for o in ("win", "draw", "loss")) == 1.0
    capsys.readouterr()
    assert rollax.cli.main(["eval", str(run), "--json", "--episodes", "4"]) == 0
    evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["lanes"][0]
    assert set(GAME_SCORES) <= set(evaluated) and "mean_return" in evaluated


# --- tic-tac-toe's minimax player (rollax.games.tictactoe) as an opponent --------------------

Perfect = tictactoe.PerfectPlayer
"""The minimax player (rollax.games.tictactoe)."""


def test_the_minimax_player_never_loses_to_a_random_player_from_either_seat():
    env = rollax.make("pgx:tic_tac_toe")
    payoffs = np.asarray(game_payoffs(env, Perfect(), None, jax.random.key(1),
                                      jnp.arange(400) < 200))
    assert payoffs.min() >= 0.0, "the minimax player lost a game"
    assert (payoffs[:200] == 1).mean() > 0.9 and (payoffs[200:] == 1).mean() > 0.6


def test_the_minimax_player_draws_against_itself_in_pgx():

    env = pgx.make("tic_tac_toe")
    state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 8))
    for _ in range(9):
        action = jnp.maximum(tictactoe.perfect_action(state.observation), 0)
        state = jax.vmap(env.step)(state, action)
    assert bool(jnp.all(state.terminated)) and not bool(jnp.any(state.rewards))


# --- ratings of players from a round robin (rollax.evaluation.rate_players) ----------------

@dataclasses.dataclass(frozen=True)
class PerfectOrScripted:
    """``params = (perfect, order)``: the minimax player where ``perfect``, else the first legal
    cell of ``order``."""

    def greedy(self, params, observation, mask):
        perfect, order = params
        return jnp.where(perfect, Perfect().greedy(None, observation, mask),
                         Scripted().greedy(order, observation, mask)).astype(jnp.int32)

    def sample(self, params, observation, key, mask):
        return self.greedy(params, observation, mask), jnp.zeros((), jnp.float32)


def test_a_round_robin_rates_the_minimax_player_first():
    """Two scripted players and the minimax player twice, 3 games a seat per pair. By hand: the
    first-free-cell player (X: 0, 2, 4, 6 wins the anti-diagonal first) and the TOP_ROW-order
    player each win every game they open against the other (0 1 2 for the first; 0 3 6 for the
    second), so their ratings are equal; the minimax player never loses, so it rates above
    both, and draws every game against itself."""
    from rollax.evaluation import rate_players

    env = rollax.make("pgx:tic_tac_toe")
    players = [(jnp.bool_(False), jnp.arange(9)), (jnp.bool_(False), TOP_ROW),
               (jnp.bool_(True), jnp.arange(9)), (jnp.bool_(True), TOP_ROW)]
    wins, ratings = rate_players(env, PerfectOrScripted(), players, jax.random.key(0), 3)
    assert wins[0, 1] == 3 and wins[1, 0] == 3
    assert wins[2, 3] == 3 and wins[3, 2] == 3  # minimax against itself: 6 draws, half each
    assert abs(ratings[3] - ratings[2]) < 1e-6
    assert abs(ratings[1] - ratings[0]) < 1e-6
    for other in (0, 1):
        assert wins[2, other] + wins[other, 2] == 6
        payoff = game_payoffs(env, PerfectOrScripted(), players[2], jax.random.key(1),
                              jnp.arange(6) < 3, other_params=players[other])
        assert float(payoff.min()) >= 0.0  # the minimax player never loses a game
        assert ratings[2] > ratings[other]

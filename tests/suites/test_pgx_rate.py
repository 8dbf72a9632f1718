"""``rollax rate``: Bradley-Terry ratings of a run's saved snapshots and the random player in a
two-player game, checked by the round robin's counts, by the likelihood equations the fit
must satisfy and, for one snapshot, by the closed form; its refusals."""

import contextlib
import io
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rollax.cli import main
from rollax.evaluation import game_payoffs
from rollax.run.rating import open_game_run, snapshots

pgx = pytest.importorskip("pgx")

pytestmark = pytest.mark.slow  # two tiny trainings shared by the module (~10 s each)

TRAIN = ["train", "--env", "pgx:tic_tac_toe", "--total-steps", "2048", "--num-envs", "16",
         "--num-steps", "16", "--network", "mlp", "--hidden", "16", "16", "--eval-episodes", "4"]
"""8 updates of 256 steps."""
GAMES = 12


def _quiet(argv) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rate")
    paths = {"three": root / "three", "one": root / "one"}
    # checkpoints at updates 2, 4, 6 and 8, the last three kept; and one at the end only
    assert _quiet([*TRAIN, "--chunk-size", "2", "--checkpoint-every", "2",
                   "--out", str(paths["three"])]) == 0
    assert _quiet([*TRAIN, "--seed", "1", "--checkpoint-every", "8",
                   "--out", str(paths["one"])]) == 0
    return paths


def _rate(capsys, *argv) -> tuple[int, str, str]:
    code = main(["rate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_round_robin_plays_every_pair_and_the_fit_solves_the_likelihood(capsys, runs):
    code, out, err = _rate(capsys, runs["three"], "--games", GAMES, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["order"] == ["random", *(f"{runs['three']}@{u}" for u in (4, 6, 8))]
    wins = np.array(result["wins"])
    s = len(result["order"])
    off = ~np.eye(s, dtype=bool)
    assert np.all((wins + wins.T)[off] == 2 * GAMES)  # every pair: GAMES games from each seat
    assert np.all(wins * 2 == np.round(wins * 2))  # whole games, draws as halves
    elo = {p["name"]: p["elo"] for p in result["players"]}
    assert elo["random"] == 0.0
    assert [p["elo"] for p in result["players"]] == sorted(elo.values(), reverse=True)
    # the maximum-likelihood equations with one virtual draw per pair: for every player,
    # the points won equal the points expected, sum_j n_ij / (1 + 10^((elo_j - elo_i) / 400))
    theta = np.array([elo[name] for name in result["order"]])
    virtual = wins + 0.5 * off
    n = virtual + virtual.T
    expected = (n / (1 + 10 ** ((theta[None, :] - theta[:, None]) / 400)) * off).sum(axis=1)
    np.testing.assert_allclose(expected, virtual.sum(axis=1), rtol=1e-9)
    for player in result["players"]:
        i = result["order"].index(player["name"])
        assert player["games"] == 2 * GAMES * (s - 1)
        assert player["score"] == pytest.approx(wins[i].sum() / player["games"])


def test_one_snapshot_against_the_random_player_rates_in_closed_form(capsys, runs):
    code, out, err = _rate(capsys, runs["one"], "--games", GAMES, "--json")
    assert code == 0, err
    result = json.loads(out)
    (snapshot,) = [p for p in result["players"] if p["name"] != "random"]
    assert snapshot["update"] == 8 and snapshot["lane"] == {"seed": 1}
    won = np.array(result["wins"])[1, 0]
    # two players, one virtual draw: p_snapshot / p_random = (won + 1/2) / (lost + 1/2)
    by_hand = 400 * math.log10((won + 0.5) / (2 * GAMES - won + 0.5))
    assert snapshot["elo"] == pytest.approx(by_hand, abs=1e-6)
    # the points are the snapshot's own payoffs against the random player, as game_payoffs
    # (the evaluation's games) gives them for the pair's key, fold_in(key(seed), 0 * 2 + 1)
    algo = open_game_run(runs["one"])[2]
    (params,) = snapshots(runs["one"])[1]
    first = jnp.arange(2 * GAMES) < GAMES
    payoff = np.asarray(game_payoffs(algo.env, algo.policy, params,
                                     jax.random.fold_in(jax.random.key(0), 1), first,
                                     greedy=False))
    assert won == np.sum(payoff > 0) + 0.5 * np.sum(payoff == 0)


def test_the_table_lists_every_player_best_first(capsys, runs):
    code, out, err = _rate(capsys, runs["one"], runs["three"], "--games", 4)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert "the random legal player at 0" in lines[0]
    rows = [line.split() for line in lines[1:]]
    assert [int(r[0]) for r in rows] == list(range(1, 6))
    assert sorted(r[1] for r in rows) == sorted(
        ["random", f"{runs['one']}@8", *(f"{runs['three']}@{u}" for u in (4, 6, 8))])
    elos = [float(r[2]) for r in rows]
    assert elos == sorted(elos, reverse=True)


def test_refusals_name_the_problem_in_one_line(capsys, runs, tmp_path):
    corridor = tmp_path / "corridor"
    assert _quiet(["train", "--updates", "2", "--out", str(corridor)]) == 0
    other_net = tmp_path / "wide"
    assert _quiet(["train", "--env", "pgx:tic_tac_toe", "--total-steps", "256", "--num-envs",
                   "16", "--num-steps", "16", "--network", "mlp", "--hidden", "8",
                   "--eval-episodes", "4", "--out", str(other_net)]) == 0
    cases = [
        ((corridor,), "runs of a two-player game; "),
        ((runs["one"], runs["one"]), "given twice"),
        ((runs["one"], other_net), "share one network"),
        ((runs["one"], "--games", 0), "games must be a positive integer"),
        ((tmp_path / "missing",), "is not a folder"),
    ]
    for argv, message in cases:
        code, out, err = _rate(capsys, *argv)
        assert code == 2 and message in err and out == "", (argv, err)
        assert len(err.strip().splitlines()) == 1, err

"""``rollax render RUN --versus RUN2``: games of tic-tac-toe between two kept snapshots, filmed.
Each side's moves are replayed move by move with that snapshot's own greedy action
(``load_run(...).act``, or the snapshot's parameters), the seats alternate, the frames count the
moves, the payoffs are the evaluation's (:func:`rollax.evaluation.game_payoffs`) for the same
key, greedy and sampled; the captions name each move's player and the result; the refusals are
one line, exit status 2, nothing written."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import gif_ends, run
from rollax.evaluation import game_payoffs
from rollax.run.rating import snapshots
from rollax.run.video import record_games
from rollax.run.watch import versus_captions

pgx = pytest.importorskip("pgx")

pytestmark = pytest.mark.slow  # two tiny trainings shared by the module (~20 s each)

TRAIN = ["train", "--env", "pgx:tic_tac_toe", "--total-steps", "2048", "--num-envs", "16",
         "--num-steps", "16", "--network", "mlp", "--hidden", "16", "16", "--eval-episodes", "4"]
"""8 updates of 256 steps."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    from rollax.cli import main

    root = tmp_path_factory.mktemp("versus")
    paths = {"a": root / "a", "b": root / "b"}
    # checkpoints at updates 2, 4, 6 and 8, the last three kept; and one at the end only
    assert main([*TRAIN, "--json", "--chunk-size", "2", "--checkpoint-every", "2",
                 "--out", str(paths["a"])]) == 0
    assert main([*TRAIN, "--json", "--seed", "1", "--checkpoint-every", "8",
                 "--out", str(paths["b"])]) == 0
    return paths


def _render(capsys, *argv) -> dict:
    code, out, err = run(capsys, "render", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _replay(env, game: dict, reset_key, acts) -> list[float]:
    """Play ``game``'s recorded moves from the reset of ``reset_key``, checking each against
    ``acts[side](observation, mask)`` of the side to move (side 0 moving first when
    ``game["first"] == 0``); returns each side's payoff."""
    state = env.reset(reset_key)
    starter = int(env.to_act(state))
    player = {game["first"]: starter, 1 - game["first"]: 1 - starter}  # side -> player id
    paid = [0.0, 0.0]
    for t, (side, action) in enumerate(game["moves"]):
        assert side == (game["first"] + t) % 2  # the sides take turns, the first side first
        assert int(env.to_act(state)) == player[side]
        mine = acts[side](np.asarray(env.observation(state)), np.asarray(env.action_mask(state)))
        assert int(mine) == action, (t, side)
        state = env.step(state, jnp.int32(action), jax.random.key(0))[0]
        rewards = np.asarray(env.player_rewards(state))
        paid = [paid[s] + float(rewards[player[s]]) for s in (0, 1)]
    assert bool(env.done(state)) == game["ended"]
    return paid


def test_the_games_are_each_snapshots_greedy_moves_seats_alternating(capsys, runs, tmp_path):
    out = tmp_path / "game.gif"
    result = _render(capsys, runs["a"], "--versus", runs["b"], "--episodes", 4, "--seed", 3,
                     "--out", out)
    assert [p["name"] for p in result["players"]] == [f"{runs['a']}@8", f"{runs['b']}@8"]
    assert result["env"] == "pgx:tic_tac_toe" and result["policy"] == "greedy"
    games = result["games"]
    assert [g["first"] for g in games] == [0, 1, 0, 1]
    assert result["lengths"] == [len(g["moves"]) for g in games]
    assert result["frames"] == sum(result["lengths"]) + 4
    assert gif_ends(out)[0] == result["frames"]
    loaded = [rollax.load_run(runs["a"]), rollax.load_run(runs["b"])]
    acts = [lambda obs, mask, lo=lo: lo.act(obs, mask=mask) for lo in loaded]
    resets = jax.random.split(jax.random.split(jax.random.key(3), 4)[0], 4)
    outcome = {1.0: "win", 0.0: "draw", -1.0: "loss"}
    for g, game in enumerate(games):
        assert game["ended"] and 5 <= len(game["moves"]) <= 9
        paid = _replay(loaded[0].env, game, resets[g], acts)
        assert paid == game["payoffs"] and paid[0] == -paid[1]
        assert game["results"] == [outcome[p] for p in paid]
    # the evaluation's games for the same key: side 0 the policy, side 1 other_params
    first = jnp.arange(4) % 2 == 0
    payoff = game_payoffs(loaded[0].env, loaded[0].policy, loaded[0].lane_params(0),
                          jax.random.key(3), first, other_params=loaded[1].lane_params(0))
    assert np.asarray(payoff).tolist() == [g["payoffs"][0] for g in games]


def test_sampled_games_are_the_evaluations_sampled_games(capsys, runs, tmp_path):
    result = _render(capsys, runs["a"], "--versus", runs["b"], "--episodes", 6, "--sample",
                     "--seed", 5, "--out", tmp_path / "sampled.gif")
    assert result["policy"] == "sampled"
    loaded = [rollax.load_run(runs["a"]), rollax.load_run(runs["b"])]
    first = jnp.arange(6) % 2 == 0
    payoff = game_payoffs(loaded[0].env, loaded[0].policy, loaded[0].lane_params(0),
                          jax.random.key(5), first, greedy=False,
                          other_params=loaded[1].lane_params(0))
    assert np.asarray(payoff).tolist() == [g["payoffs"][0] for g in result["games"]]
    assert [g["first"] for g in result["games"]] == [0, 1] * 3


def test_a_kept_update_against_the_same_run_and_the_text(capsys, runs, tmp_path):
    result = _render(capsys, runs["a"], "--versus", runs["a"], "--update", 4,
                     "--out", tmp_path / "self.gif", "--episodes", 2)
    assert [(p["run"], p["update"]) for p in result["players"]] == [(str(runs["a"]), 4),
                                                                    (str(runs["a"]), 8)]
    players, params = snapshots(runs["a"])
    assert [p["update"] for p in players] == [4, 6, 8]
    env, policy = rollax.load_run(runs["a"]).env, rollax.load_run(runs["a"]).policy
    greedy = jax.jit(policy.greedy)
    acts = [lambda obs, mask, p=p: greedy(p, obs, mask) for p in (params[0], params[2])]
    resets = jax.random.split(jax.random.split(jax.random.key(0), 4)[0], 2)
    for g, game in enumerate(result["games"]):
        _replay(env, game, resets[g], acts)
    code, out, err = run(capsys, "render", runs["a"], "--versus", runs["a"], "--update", 4,
                         "--out", tmp_path / "self.gif", "--episodes", 2)
    assert code == 0, err
    lines = out.strip().splitlines()
    names = [f"{runs['a']}@4", f"{runs['a']}@8"]
    assert lines[0].startswith(f"game 1: {names[0]} first, {names[1]} second: ")
    assert lines[1].startswith(f"game 2: {names[1]} first, {names[0]} second: ")
    for line, game in zip(lines, result["games"]):  # the same games as the JSON's
        won = game["results"].index("win") if "win" in game["results"] else None
        seat = "first" if won == game["first"] else "second"
        assert line.endswith((f": {names[won]} ({seat}) wins, " if won is not None
                              else ": a draw, ") + f"{len(game['moves'])} moves")
    assert lines[-1] == f"wrote {tmp_path / 'self.gif'} ({result['frames']} frames)"


def test_the_captions_name_each_mover_and_the_result(runs):
    _, params = snapshots(runs["b"])
    env = rollax.load_run(runs["b"]).env
    first = np.array([True, False])
    games = record_games(env, rollax.load_run(runs["b"]).policy, params[0], params[0],
                         jax.random.key(0), jnp.asarray(first), 9)
    lines = versus_captions(games, first, ["A", "B"])
    assert len(lines) == sum(games.recorded.lengths) + 2
    assert lines[0] == "game 1/2  start: A (first) against B (second)"
    assert lines[1] == f"game 1/2  move 1  A (first) plays {int(games.recorded.actions[0, 0])}"
    assert lines[2].startswith("game 1/2  move 2  B (second) plays ")
    second = int(games.recorded.lengths[0]) + 1
    assert lines[second] == "game 2/2  start: B (first) against A (second)"
    assert lines[second + 1].startswith("game 2/2  move 1  B (first) plays ")
    for g, end in ((0, second - 1), (1, len(lines) - 1)):
        assert games.ended[g]
        seat = {"A": "first" if first[g] else "second", "B": "second" if first[g] else "first"}
        payoff = games.payoffs[g, 0]
        winner = "A" if payoff > 0 else "B"
        assert lines[end].endswith(f"  -  {winner} ({seat[winner]}) wins" if payoff
                                   else "  -  a draw")
    assert sum("  -  " in line for line in lines) == 2  # the result on each game's last frame


def test_refusals_are_one_line_and_write_nothing(capsys, runs, tmp_path):
    corridor = tmp_path / "corridor"
    assert run(capsys, "train", "--updates", "2", "--out", corridor)[0] == 0
    other_game = tmp_path / "connect_four"  # its config.json is all that is read
    other_game.mkdir()
    config = json.loads((runs["b"] / "config.json").read_text())
    config["config"]["env"] = "pgx:connect_four"
    (other_game / "config.json").write_text(json.dumps(config))
    out = tmp_path / "never.gif"
    cases = [
        (("pgx:tic_tac_toe", "--versus", runs["a"]), "target 'pgx:tic_tac_toe' is not one"),
        ((runs["a"], "--versus", "pgx:tic_tac_toe"), "versus 'pgx:tic_tac_toe' is not one"),
        ((corridor, "--versus", runs["a"]), "come from runs of a two-player game; "),
        ((runs["a"], "--versus", corridor), "come from runs of a two-player game; "),
        ((runs["a"], "--versus", other_game), "come from runs of one game: "),
        ((runs["a"], "--versus", runs["b"], "--update", 2),
         "update 2 was not kept in " + repr(str(runs["a"])) + ": its kept checkpoints are at "
         "updates 4, 6, 8"),
        ((runs["a"], "--versus", runs["b"], "--versus-update", 4),
         "versus_update 4 was not kept in " + repr(str(runs["b"])) + ": its kept checkpoints "
         "are at updates 8"),
        ((runs["a"], "--versus", runs["b"], "--versus-lane", 1), "versus_lane must be in [0, 1)"),
        ((runs["a"], "--versus", runs["b"], "--episodes", 0), "episodes must be"),
        ((runs["a"], "--update", 4), "update picks a snapshot of a game between two runs"),
        ((runs["a"], "--versus-lane", 1), "versus_lane picks a snapshot"),
    ]
    for argv, message in cases:
        code, got, err = run(capsys, "render", *argv, "--out", out)
        assert code == 2 and message in err and got == "", (argv, err)
        assert len(err.strip().splitlines()) == 1, err
        assert not out.exists()

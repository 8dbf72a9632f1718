"""``rollax rate``: Bradley-Terry ratings, on the Elo scale, of the policies saved in run
folders of one two-player game, against each other and a uniformly random legal player.

The players are the random player (rated 0, the scale's anchor) and every lane of every
checkpoint kept in each run folder (``checkpoints/update-N``, oldest first; a run keeps its
last three). Each pair plays ``games`` games with each of them moving first
(:func:`rollax.evaluation.rate_players`: a draw counts half a win to each, one virtual draw
per pair keeps every rating finite), and :func:`rollax.games.ratings.bradley_terry` fits the
strengths: ``elo_i = 400 log10(p_i / p_random)``, so 400 points above the random player is
10 to 1 odds against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from rollax.envs.players import num_players
from rollax.validate import check_count, check_seed

__all__ = ["RATED", "open_game_run", "rate_runs", "same_game", "snapshots"]

RATED = "the players rated"
"""Who the refusals of :func:`open_game_run` and :func:`same_game` name by default (``rollax
rate``'s players; ``rollax render --versus`` names its own)."""


def open_game_run(path: str | Path, who: str = RATED):
    """``(run folder, run, algorithm)`` of a run folder, refused in one line unless it trained
    a game of two players (nothing but config.json read); ``who`` names the players in the
    refusal."""
    from rollax.run.folder import RunFolder
    from rollax.run.training import read_run

    folder = RunFolder(Path(path))
    folder.check_exists()
    run = read_run(folder)
    algo = run.build()
    if num_players(algo.env) != 2:
        raise ValueError(f"{who} come from runs of a two-player game; "
                         f"{str(path)!r} trained {run.config.env}")
    return folder, run, algo


def snapshots(path: str | Path, opened: tuple | None = None) -> tuple[list[dict], list]:
    """``(players, params)`` of one run folder (``opened``: its :func:`open_game_run`, when read
    already): a player ``{name, run, update, lane}`` (``lane``: its label, seed and swept
    values) and its parameters (as the policy takes them) for every lane
    of every kept checkpoint, oldest first. A checkpoint that does not verify is refused
    (``ValueError`` naming it)."""
    from rollax.run import checkpoint
    from rollax.run.training import state_template

    folder, run, algo = opened or open_game_run(path)
    lanes = run.lanes()
    template = state_template(algo, lanes)
    kept = list(reversed(checkpoint.folders(folder.checkpoints)))
    if not kept:
        raise ValueError(f"no checkpoint in {str(path)!r}: nothing to rate")
    players: list[dict[str, Any]] = []
    params: list = []
    lane_params = jax.jit(jax.vmap(algo.params))
    for saved in kept:
        updates, state = checkpoint.load(saved, template, run.identity(), run.spec.length_field)
        every = lane_params(state)
        for lane, label in enumerate(lanes.labels()):
            suffix = f" lane {lane}" if len(lanes) > 1 else ""
            players.append(dict(name=f"{path}@{updates}{suffix}", run=str(path),
                                    update=updates, lane=label))
            params.append(jax.tree_util.tree_map(lambda x, i=lane: x[i], every))
    return players, params


def same_game(algo: Any, other: Any, path: str | Path, who: str = RATED) -> None:
    """``ValueError`` in one line unless the run at ``path`` (``other``: its algorithm) plays
    the first run's game (``algo``'s) with a network of the same parameter shapes; ``who``
    names the players in the refusal."""
    if other.config.env != algo.config.env:
        raise ValueError(f"{who} come from runs of one game: {str(path)!r} "
                         f"trained {other.config.env}, the first run {algo.config.env}")
    shapes = [jax.eval_shape(lambda k, a=a: a.params(a.init(k, a.hyperparams)),
                             jax.random.key(0)) for a in (algo, other)]
    if (jax.tree_util.tree_structure(shapes[0]) != jax.tree_util.tree_structure(shapes[1])
            or jax.tree_util.tree_leaves(shapes[0]) != jax.tree_util.tree_leaves(shapes[1])):
        raise ValueError(f"{who} share one network: the network of {str(path)!r} "
                         f"differs from the first run's (settings such as network or hidden)")


def rate_runs(paths: list[str], games: int = 50, seed: int = 0, greedy: bool = False) -> dict:
    """The ratings of every snapshot of the run folders ``paths`` and the random player
    (module docstring): ``{"env", "games", "policy", "players": [{name, run, update, lane,
    elo, score, games}, ...] (best first; the random player's run and update are None),
    "wins": (S, S) in the order of "order"}``. Keys: the round robin's ``jax.random.key(seed)``.
    ``ValueError`` in one line, before any game is played, for a setting out of range, a run
    that is not of a two-player game, or runs of different games or networks."""
    from rollax.evaluation import rate_players

    check_count("games", games)
    check_seed(seed)
    if not paths:
        raise ValueError("rollax rate needs at least one run folder")
    seen = [Path(p).resolve() for p in paths]
    if len(set(seen)) < len(seen):
        twice = next(p for p, s in zip(paths, seen) if seen.count(s) > 1)
        raise ValueError(f"run folder {str(twice)!r} given twice")
    opened = [open_game_run(p) for p in paths]
    algo = opened[0][2]
    for path, (_, _, other) in zip(paths[1:], opened[1:]):
        same_game(algo, other, path)
    players: list[dict[str, Any]] = [dict(name="random", run=None, update=None, lane=None)]
    params: list = [None]
    for path, run in zip(paths, opened):
        snaps, snap_params = snapshots(path, run)
        players += snaps
        params += snap_params
    wins, elo = rate_players(algo.env, algo.policy, params, jax.random.key(seed), games,
                             greedy)
    played = wins + wins.T
    for i, player in enumerate(players):
        player.update(elo=float(elo[i]), score=float(wins[i].sum() / played[i].sum()),
                      games=int(played[i].sum()))
    order = sorted(range(len(players)), key=lambda i: -players[i]["elo"])
    return {"env": str(algo.config.env), "games": games,
            "policy": "greedy" if greedy else "sampled",
            "players": [players[i] for i in order],
            "order": [players[i]["name"] for i in range(len(players))],
            "wins": wins.tolist()}

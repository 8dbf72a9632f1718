"""Watching a policy: :func:`render_episodes` plays episodes of a run's policy (greedy, or
sampled) or of a uniform random policy on an environment and writes them as one captioned GIF
or MP4 (:mod:`rollax.run.video`); ``rollax render``. :func:`render_versus` films games of a
two-player game between two kept snapshots of runs (``rollax render RUN --versus RUN2``): the
snapshots of :func:`rollax.run.rating.snapshots`, the games of
:func:`rollax.evaluation.game_payoffs` (:func:`rollax.run.video.record_games`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.contracts.probe import RandomPolicy
from rollax.envs.frames import DRAWN, frame_renderer
from rollax.recurrent import is_recurrent
from rollax.run.video import (
    Rendered,
    captioned_frames,
    check_out,
    drawable,
    played,
    record_games,
    write_video,
)
from rollax.validate import check_count, check_seed

__all__ = ["Filmed", "render_episodes", "render_versus"]

FILMED = "the players of render --versus"
"""Who the game refusals of :func:`render_versus` name (:func:`rollax.run.rating.same_game`)."""


def render_episodes(target: str | Path, out: str | Path = "episode.gif", *, episodes: int = 1,
                    lane: int = 0, sample: bool = False, fps: float = 30.0, seed: int = 0,
                    max_steps: int = 1000) -> Rendered:
    """Play ``episodes`` episodes and write them as one video ``out`` (``.gif`` or ``.mp4``).

    ``target``: a run folder (its policy at the latest checkpoint, lane ``lane``: its mode, or
    samples with ``sample``), or an environment name (``CartPole-v1``, ``gymnax:Breakout-
    MinAtar``, ...: a uniform random policy, for a look before training). Episodes start from
    ``jax.random.key(seed)`` and last at most ``max_steps`` steps (or the environment's
    horizon). ``ValueError`` in one line, before anything is compiled or written, for an
    environment rollax cannot draw (naming those it can), a bad setting or ``out``."""
    path = _check_settings(out, episodes, fps, seed, max_steps)
    env, policy, params, name = _target(target, lane)
    sample = sample or isinstance(policy, RandomPolicy)  # an environment: random actions
    if not drawable(env, name):
        raise ValueError(f"rollax cannot draw {name} yet; it draws {', '.join(DRAWN)}")
    recorded, draw = played(env, policy, params, jax.random.key(seed), episodes,
                            int(min(max_steps, env.horizon)), sample)
    frames = captioned_frames(recorded, draw)
    write_video(frames, path, fps)
    returns = tuple(float(np.sum(recorded.rewards[e])) for e in range(episodes))
    return Rendered(path, returns, tuple(int(n) for n in recorded.lengths), len(frames))


def _target(target: str | Path, lane: int) -> tuple[Any, Any, Any, str]:
    """``(env, policy, params, name)`` of a run folder's lane or of an environment name."""
    from rollax.envs.registry import make
    from rollax.run.loaded import load_run

    if Path(target).is_dir():
        loaded = load_run(target)
        return loaded.env, loaded.policy, loaded.lane_params(lane), f"the run {str(target)!r}"
    if not isinstance(target, str):
        raise ValueError(f"{str(target)!r} is not a run folder")
    env = make(target)
    return env, RandomPolicy.for_space(env.action_space), None, repr(target)


def _check_settings(out: str | Path, episodes: int, fps: float, seed: int,
                    max_steps: int) -> Path:
    """The video path, after the settings both renders share are checked (one line each)."""
    check_count("episodes", episodes)
    check_count("max_steps", max_steps)
    check_seed(seed)
    if not (isinstance(fps, (int, float)) and 0 < fps <= 240):
        raise ValueError(f"fps must be a number in (0, 240], got {fps!r}")
    return check_out(out)


@dataclasses.dataclass(frozen=True)
class Filmed:
    """What :func:`render_versus` wrote."""

    path: Path
    env: str
    """The game (the runs' ``env`` setting)."""
    players: tuple[dict, dict]
    """The two snapshots, ``{name, run, update, lane}`` (:func:`rollax.run.rating.snapshots`):
    side 0 (``target``'s) and side 1 (``versus``'s)."""
    games: tuple[dict, ...]
    """Each game: ``first`` (the side that moved first), ``moves`` (``[side, action]`` per
    move), ``payoffs`` and ``results`` (``"win"``, ``"draw"`` or ``"loss"``) per side, and
    ``ended`` (false for a game cut by ``max_steps``, counted a draw)."""
    lengths: tuple[int, ...]
    """Each game's moves."""
    frames: int
    """Frames in the video (each game's ``length + 1``)."""


def render_versus(target: str | Path, versus: str | Path, out: str | Path = "episode.gif", *,
                  episodes: int = 2, lane: int = 0, versus_lane: int = 0,
                  update: int | None = None, versus_update: int | None = None,
                  sample: bool = False, fps: float = 30.0, seed: int = 0,
                  max_steps: int = 1000) -> Filmed:
    """Film ``episodes`` games of a two-player game between two snapshots (a lane at a kept
    checkpoint, :func:`rollax.run.rating.snapshots`) and write them as one video ``out``.

    Side 0 is lane ``lane`` of the run folder ``target`` at update ``update``, side 1 lane
    ``versus_lane`` of the run folder ``versus`` (the same folder or another run of the same
    game and network) at ``versus_update``; an update None is the latest kept. The seats
    alternate: side 0 moves first in games 1, 3, ..., side 1 in games 2, 4, .... Both play
    their policy's mode among the legal moves, or sample with ``sample``. The games are
    :func:`rollax.evaluation.game_payoffs`'s (side 0 the policy, side 1 ``other_params``,
    ``first`` alternating) from ``jax.random.key(seed)``, played by one compiled program for
    at most ``max_steps`` steps (:func:`rollax.run.video.record_games`) and drawn afterwards;
    each caption names the game, the move, who made it (name, seat) and the move's action,
    and the last of a game the result. ``ValueError`` in one line, before anything is
    written: a target or ``versus`` that is not a run folder of a two-player game, runs of
    different games or networks, a recurrent policy, a lane or an update not kept (naming the
    kept ones), a bad setting or ``out``, a game rollax cannot draw."""
    from rollax.run.rating import open_game_run, same_game

    path = _check_settings(out, episodes, fps, seed, max_steps)
    opened = []
    for name, run_dir in (("target", target), ("versus", versus)):
        if not Path(run_dir).is_dir():
            raise ValueError(f"render --versus films two run folders: {name} {str(run_dir)!r} "
                             f"is not one (an environment is filmed without --versus)")
        opened.append(open_game_run(run_dir, FILMED))
    algo = opened[0][2]
    same_game(algo, opened[1][2], versus, FILMED)
    if is_recurrent(algo.policy):
        raise ValueError(f"render --versus films feed-forward policies only: "
                         f"{str(target)!r} trained a recurrent one")
    for (_, run, _), run_dir, setting, value in ((opened[0], target, "lane", lane),
                                                 (opened[1], versus, "versus_lane",
                                                  versus_lane)):
        lanes = len(run.lanes().labels())
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < lanes:
            raise ValueError(f"{setting} must be in [0, {lanes}) for the run in "
                             f"{str(run_dir)!r}, got {value!r}")
    env = algo.env
    name = f"the run {str(target)!r}"
    if not drawable(env, name):
        raise ValueError(f"rollax cannot draw {name} ({algo.config.env}) yet; it draws "
                         f"{', '.join(DRAWN)}")
    sides = [_snapshot(run_dir, got, setting, chosen, which)
             for run_dir, got, setting, chosen, which in (
                 (target, opened[0], "update", update, lane),
                 (versus, opened[1], "versus_update", versus_update, versus_lane))]
    first = np.arange(episodes) % 2 == 0
    games = record_games(env, algo.policy, sides[0][1], sides[1][1], jax.random.key(seed),
                         jnp.asarray(first), int(min(max_steps, env.horizon)), sample)
    players = (sides[0][0], sides[1][0])
    played = _games(games, first)
    texts = versus_captions(games, first, [p["name"] for p in players])
    frames = captioned_frames(games.recorded, frame_renderer(env), texts)
    write_video(frames, path, fps)
    return Filmed(path, str(algo.config.env), players, played,
                  tuple(int(n) for n in games.recorded.lengths), len(frames))


def _snapshot(run_dir: str | Path, opened: tuple, setting: str, update: int | None,
              lane: int) -> tuple[dict, Any]:
    """``(player, params)`` of lane ``lane`` at the kept checkpoint of ``update`` (None: the
    latest), refused in one line naming the kept updates otherwise."""
    from rollax.run.rating import snapshots

    players, params = snapshots(run_dir, opened)
    kept = sorted({p["update"] for p in players})
    chosen = kept[-1] if update is None else update
    if chosen not in kept:
        raise ValueError(f"{setting} {update!r} was not kept in {str(run_dir)!r}: its kept "
                         f"checkpoints are at updates {', '.join(map(str, kept))}")
    at = [i for i, p in enumerate(players) if p["update"] == chosen][lane]
    return players[at], params[at]


RESULTS = {1: "win", 0: "draw", -1: "loss"}


def _games(games, first: np.ndarray) -> tuple[dict, ...]:
    """Each game of ``games`` (:class:`rollax.run.video.RecordedGames`) as :class:`Filmed`
    lists it."""
    out = []
    for g, length in enumerate(games.recorded.lengths):
        moves = [[int(games.movers[g, t]), int(np.ravel(games.recorded.actions[g, t])[0])]
                 for t in range(int(length))]
        payoffs = [float(v) for v in games.payoffs[g]]
        out.append(dict(first=0 if first[g] else 1, moves=moves, payoffs=payoffs,
                        results=[RESULTS[int(np.sign(v))] for v in payoffs],
                        ended=bool(games.ended[g])))
    return tuple(out)


def versus_captions(games, first: np.ndarray, names: list[str]) -> list[str]:
    """The caption of each frame of :func:`render_versus`'s games, in order: ``game g/G
    start: A (first) against B (second)``, then per move ``game g/G  move t  A (first) plays
    a``, the last move followed by the result (``A (first) wins``, ``a draw``, or ``stopped
    after T moves: a draw``)."""
    lines = []
    count = len(first)
    for g, length in enumerate(games.recorded.lengths):
        seats = ("first", "second") if first[g] else ("second", "first")
        who = [f"{names[side]} ({seats[side]})" for side in (0, 1)]
        starter = 0 if first[g] else 1
        lines.append(f"game {g + 1}/{count}  start: {who[starter]} against "
                     f"{who[1 - starter]}")
        for t in range(int(length)):
            side = int(games.movers[g, t])
            action = int(np.ravel(games.recorded.actions[g, t])[0])
            lines.append(f"game {g + 1}/{count}  move {t + 1}  {who[side]} plays {action}")
        payoff = games.payoffs[g, 0]
        result = (f"{who[0]} wins" if payoff > 0 else f"{who[1]} wins" if payoff < 0
                  else "a draw")
        if not games.ended[g]:
            result = f"stopped after {int(length)} moves: a draw"
        lines[-1] += f"  -  {result}"
    return lines

"""Watching a policy: :func:`render_episodes` plays episodes of a run's policy (greedy, or
sampled) or of a uniform random policy on an environment and writes them as one captioned GIF
or MP4 (:mod:`rollax.run.video`); ``rollax render``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np

from rollax.contracts.probe import RandomPolicy
from rollax.envs.frames import DRAWN
from rollax.run.video import Rendered, captioned_frames, check_out, drawable, played, write_video
from rollax.validate import check_count, check_seed

__all__ = ["render_episodes"]


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
    check_count("episodes", episodes)
    check_count("max_steps", max_steps)
    check_seed(seed)
    if not (isinstance(fps, (int, float)) and 0 < fps <= 240):
        raise ValueError(f"fps must be a number in (0, 240], got {fps!r}")
    path = check_out(out)
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

"""Experiment trackers for ``rollax train --log``: TensorBoard event files and Weights & Biases.

:func:`make_loggers` returns one :class:`Logger`, a training listener (see
:class:`rollax.run.progress.ChunkDone`) that hands every metric row to each chosen tracker, and
``close()`` (or ``with``) at the end, also after an error or Ctrl-C. The trackers are optional
packages (``pip install "rollax[tensorboard]"``, ``"rollax[wandb]"``): a missing one is a
one-line ``ValueError`` from :func:`check_loggers`, before anything is compiled or written.

Each lane (one seed of one sweep combination) is its own series: a TensorBoard writer in
``<run folder>/tensorboard/<lane>/`` and a W&B run per lane (grouped by the run folder, with
the lane's seed and swept values in its config), so both tools compare, group and average
lanes with their own controls. The step is the lane's live environment steps so far (the
metric ``env_steps``; 0 at update 0), the same count for every algorithm. Nothing is opened
before the first chunk; then the whole of ``metrics.jsonl`` so far is logged (update 0, and
on ``--resume`` everything before the checkpoint, replacing the events of the interrupted
session), and each later chunk's rows.
Non-finite values (``null`` in ``metrics.jsonl``) are left out.

The GIFs of ``--video-every`` go to lane 0's series as ``videos/greedy_episode`` at their
update's step, each once, after the chunk that wrote it (TensorBoard's ``add_video``, which
needs moviepy; W&B's ``wandb.Video``).

Every greedy evaluation is one series, ``rollax/eval_return``: the initial one (update 0), each
``--eval-every`` one (``greedy_return``) and, from :meth:`Logger.finished`, the evaluation after
training (summary.json's score) at the last step, in place of that step's ``greedy_return``.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rollax.run.config import RunConfig
from rollax.run.folder import RunFolder
from rollax.run.progress import ChunkDone, Listener

PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb"}
"""Each logger and the package it needs (the extra of the same name installs it)."""

TAGS = {
    "episode_return": "charts/episodic_return",
    "episode_length": "charts/episodic_length",
    "learning_rate": "charts/learning_rate",
    "env_steps_per_second": "charts/SPS",
    "policy_loss": "losses/policy_loss",
    "value_loss": "losses/value_loss",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "old_approx_kl": "losses/old_approx_kl",
    "clip_fraction": "losses/clipfrac",
    "explained_variance": "losses/explained_variance",
    "greedy_return": "rollax/eval_return",
}
"""Metric names as CleanRL and Stable-Baselines3 write them; any other metric is
``rollax/<metric>``. ``greedy_return`` (the ``--eval-every`` evaluations) joins the series of
the evaluations before and after training."""


def tag(metric: str) -> str:
    """The TensorBoard and W&B name of a metric of ``metrics.jsonl``."""
    return TAGS.get(metric, f"rollax/{metric}")


def parse_names(values: Iterable[str]) -> list[str]:
    """``--log`` values (each a name or a comma list) as distinct names, in order."""
    return list(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))


def check_loggers(values: Iterable[str], videos: bool = False) -> list[str]:
    """The logger names of ``--log``, each known and with its package importable (TensorBoard
    with ``videos``, the GIFs of ``--video-every``, also moviepy, which its ``add_video``
    encodes with); else a one-line ``ValueError``. Imports nothing and writes nothing."""
    names = parse_names(values)
    for name in names:
        if name not in PACKAGES:
            raise ValueError(f"unknown logger {name!r} in --log; choose from "
                             f"{', '.join(PACKAGES)}")
        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise ValueError(f"log {name} needs {PACKAGES[name]}: "
                             f"pip install \"rollax[{name}]\"")
        if name == "tensorboard" and videos and importlib.util.find_spec("moviepy") is None:
            raise ValueError("log tensorboard with --video-every needs moviepy (TensorBoard's "
                             "videos): pip install \"rollax[render]\"")
    return names


def lane_tag(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    """A lane's folder and run name: ``seed0``, ``seed0-lr0.001``."""
    return "-".join(f"{k}{format(row[k], 'g') if isinstance(row[k], float) else row[k]}"
                    for k in keys)


def scalars(row: Mapping[str, Any], keys: Sequence[str]) -> dict[str, float]:
    """The finite metrics of a row by tag (labels and ``update`` left out)."""
    skip = {*keys, "update"}
    return {tag(k): float(v) for k, v in row.items()
            if k not in skip and isinstance(v, int | float) and math.isfinite(v)}


class TensorBoardSink:
    """One tensorboardX ``SummaryWriter`` per lane under ``<run folder>/tensorboard/``."""

    def __init__(self, folder: RunFolder, run: RunConfig):
        self.root = folder.path / "tensorboard"
        self.writers: dict[str, Any] = {}

    def write(self, lane: str, label: Mapping[str, Any], step: int,
              values: Mapping[str, float]) -> None:
        if lane not in self.writers:
            # an optional extra: absent from the venv pyright checks with (check_loggers)
            from tensorboardX import SummaryWriter  # pyright: ignore[reportMissingImports]

            # purge_step=0: events of an interrupted session are replaced by metrics.jsonl's
            self.writers[lane] = SummaryWriter(str(self.root / lane), purge_step=0)
        for name, value in values.items():
            self.writers[lane].add_scalar(name, value, step)

    def video(self, lane: str, label: Mapping[str, Any], step: int, path: Path) -> None:
        self.write(lane, label, step, {})  # the lane's writer
        frames = gif_frames(path)  # (T, H, W, 3) -> tensorboardX's (N, T, C, H, W)
        self.writers[lane].add_video(VIDEO_TAG, frames.transpose(0, 3, 1, 2)[None], step,
                                     fps=VIDEO_FPS)

    def close(self, failed: bool) -> None:
        for writer in self.writers.values():
            writer.close()


class WandbSink:
    """One W&B run per lane: config ``run.to_json()`` plus the lane label, ``dir`` the run
    folder, grouped by the folder's name. ``WANDB_MODE``, ``WANDB_PROJECT`` (default
    ``rollax``) and the other ``WANDB_*`` settings apply."""

    def __init__(self, folder: RunFolder, run: RunConfig):
        self.folder, self.config = folder, run.to_json()
        self.runs: dict[str, Any] = {}

    def write(self, lane: str, label: Mapping[str, Any], step: int,
              values: Mapping[str, float]) -> None:
        if lane not in self.runs:
            # an optional extra: absent from the venv pyright checks with (check_loggers)
            import wandb  # pyright: ignore[reportMissingImports]

            self.runs[lane] = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "rollax"), dir=str(self.folder.path),
                group=self.folder.path.name, name=f"{self.folder.path.name}/{lane}",
                config={**self.config, "lane": dict(label)}, reinit="create_new")
        self.runs[lane].log(dict(values), step=step)

    def video(self, lane: str, label: Mapping[str, Any], step: int, path: Path) -> None:
        import wandb  # pyright: ignore[reportMissingImports]

        self.write(lane, label, step, {VIDEO_TAG: wandb.Video(str(path), format="gif")})

    def close(self, failed: bool) -> None:
        for run in self.runs.values():
            run.finish(exit_code=1 if failed else 0)


VIDEO_TAG = "videos/greedy_episode"
"""The tag of ``--video-every``'s GIFs in both trackers."""

VIDEO_FPS = 30
"""The rate the GIFs were written at (:func:`rollax.run.video.training_video`'s)."""


def gif_frames(path: Path) -> np.ndarray:
    """A GIF's frames, ``(T, H, W, 3)`` ``uint8``."""
    from PIL import Image, ImageSequence

    with Image.open(path) as gif:
        return np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)])


SINKS: dict[str, Callable[[RunFolder, RunConfig], Any]] = {
    "tensorboard": TensorBoardSink, "wandb": WandbSink}


class Logger:
    """The training listener of ``--log``: every metric row to each tracker; ``close()``."""

    def __init__(self, names: Sequence[str], folder: RunFolder, run: RunConfig):
        self.folder = folder
        self.keys = ("seed", *run.sweep)
        self.sinks = [SINKS[name](folder, run) for name in names]
        self.started = False
        self.total = 0
        self.score = run.spec.report.score
        self.last: dict[str, Mapping[str, Any]] = {}
        """Each lane's last row logged."""
        self.videos: set[str] = set()
        """The GIFs of ``videos/`` logged (by file name)."""
        first = run.lanes().labels()[0]
        self.first_lane = lane_tag(first, self.keys)
        """Lane 0's series (the one ``--video-every`` draws)."""

    def __call__(self, event: ChunkDone) -> None:
        if not self.sinks:
            return
        rows, self.total = event.rows, event.total
        if not self.started:  # first chunk: everything in metrics.jsonl so far
            self.started = True
            rows = self.folder.read_metrics()
        for row in rows:
            self.log_row(row)
        self.log_videos()

    def log_videos(self) -> None:
        """The GIFs of ``videos/`` not logged yet, to lane 0's series at their update's step
        (its ``env_steps`` in ``metrics.jsonl``)."""
        new = [p for p in sorted((self.folder.path / "videos").glob("update-*.gif"))
               if p.name not in self.videos]
        if not new:
            return
        rows = [r for r in self.folder.read_metrics()
                if lane_tag(r, self.keys) == self.first_lane]
        steps = {int(r["update"]): int(r.get("env_steps") or 0) for r in rows}
        label = {k: rows[0][k] for k in self.keys} if rows else {}
        for path in new:
            self.videos.add(path.name)
            step = steps.get(int(path.stem.split("-")[1]), 0)
            for sink in self.sinks:
                sink.video(self.first_lane, label, step, path)

    def log_row(self, row: Mapping[str, Any]) -> None:
        lane, step = lane_tag(row, self.keys), int(row.get("env_steps") or 0)
        label, values = {k: row[k] for k in self.keys}, scalars(row, self.keys)
        if row["update"] == self.total and tag(self.score) == tag("greedy_return"):
            values.pop(tag("greedy_return"), None)  # the final evaluation takes its place
        self.last[lane] = row
        for sink in self.sinks:
            sink.write(lane, label, step, values)

    def finished(self, summary: Mapping[str, Any]) -> None:
        """Log the evaluation after training, each lane's score in ``summary`` (summary.json),
        at the last step, unless the lane's last metric row already holds it (a tabular run's
        ``exact_return``). Nothing when no chunk ran in this session."""
        if not self.sinks or not self.started:
            return
        score = summary["score"]
        for entry in summary["lanes"]:
            label, step = {k: entry[k] for k in self.keys}, int(entry["env_steps"])
            lane, value = lane_tag(label, self.keys), entry[score]
            if score in self.last.get(lane, {}) or value is None or not math.isfinite(value):
                continue
            for sink in self.sinks:
                sink.write(lane, label, step, {tag(score): float(value)})

    def close(self, failed: bool = False) -> None:
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            sink.close(failed)

    def __enter__(self) -> Logger:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(failed=kind is not None)


def make_loggers(names: Sequence[str], folder: RunFolder, run: RunConfig) -> Logger:
    """One listener logging ``run``'s metric rows to each of ``names`` (``--log`` values,
    checked by :func:`check_loggers`); trackers open at the first chunk, in ``folder``."""
    return Logger(check_loggers(names), folder, run)


def combine(*listeners: Listener) -> Listener:
    """One listener calling each of ``listeners`` in turn."""

    def listener(event: ChunkDone) -> None:
        for each in listeners:
            each(event)

    return listener

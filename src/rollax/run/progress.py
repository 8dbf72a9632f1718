"""The loop over chunks as the host keeps its books: what a listener hears after each chunk
(:class:`ChunkDone`), when something done every so many updates falls due (:func:`due`), and
the host clock (:class:`Clock`) that keeps a run's seconds apart: compiling, training and
drawing videos. Throughput counts training alone: never compilation, never drawing
(docs/cli.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np


class ChunkDone(NamedTuple):
    """What a listener hears after every compiled chunk."""

    done: int
    """Updates done so far (of ``total``)."""
    total: int
    env_steps: int
    """Live environment steps per lane so far (the metric ``env_steps``; the mean over lanes
    where whole episodes make them differ)."""
    env_steps_per_second: float
    """All lanes (host clock, compilation and drawing videos excluded): the rate of this
    session's first chunk, then the rate since that chunk ended (the first call of the
    compiled chunk carries one-time costs that would skew a long run's estimate for long)."""
    seconds_left: float
    """Estimated time to the last update at the same rate of updates (0 when done)."""
    progress: float
    """Mean over lanes of the last finite value of the algorithm's progress metric (NaN when
    none is finite)."""
    rows: list[dict]
    """The chunk's metric rows, one per (update, lane), as written to metrics.jsonl."""


Listener = Callable[[ChunkDone], None]
"""Called with each chunk's :class:`ChunkDone` (the command line's progress bar, the
trackers of :mod:`rollax.run.loggers`)."""


def due(every: int | None, first: int, done: int, total: int) -> bool:
    """Whether the chunk from update ``first`` to ``done`` (of ``total``) reaches something
    done every ``every`` updates (``None``: never): it passes a multiple of ``every``, or it
    ends the run."""
    return every is not None and (done // every > first // every or done == total)


class Lap(NamedTuple):
    """One chunk on the clock, read when its metrics reached the host."""

    ended: float
    """When (``time.perf_counter``)."""
    drawn: float
    """Seconds spent drawing videos before then."""
    steps: int
    """Live environment steps of all lanes in the chunk."""
    steps_per_second: float
    """Their rate over the chunk's time (from the end of the host's work on the chunk
    before)."""


class Mark(NamedTuple):
    """The counts when a session's first chunk ended: later rates are measured from there,
    past the first call's one-time costs."""

    at: float
    updates: int
    steps: int
    drawn: float


@dataclasses.dataclass
class Clock:
    """A run's seconds on the host clock, kept apart: ``compile_s`` (the programs compiled
    before the loop over chunks), ``video_s`` (drawing videos, inside the loop) and
    ``run_s``, the loop's time less the drawing: what throughput divides by. ``lane_steps``,
    ``updates`` and ``steps`` count what the loop has done (this session)."""

    began: float = dataclasses.field(default_factory=time.perf_counter)
    """When the run's wall time began."""
    compile_s: float = 0.0
    video_s: float = 0.0
    final_eval_s: float = 0.0
    run_s: float = 0.0
    lane_steps: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    """Each lane's live environment steps so far (the metric ``env_steps``)."""
    updates: int = 0
    steps: int = 0
    loop_began: float = 0.0
    chunk_began: float = 0.0
    steady: Mark | None = None

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """The seconds of the ``with`` block counted as compiling."""
        began = time.perf_counter()
        yield
        self.compile_s += time.perf_counter() - began

    @contextlib.contextmanager
    def drawing(self) -> Iterator[None]:
        """The seconds of the ``with`` block counted as drawing videos, apart from training."""
        began = time.perf_counter()
        yield
        self.video_s += time.perf_counter() - began

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """The seconds of the ``with`` block counted as the final evaluation."""
        began = time.perf_counter()
        yield
        self.final_eval_s += time.perf_counter() - began

    def start(self, lane_steps: np.ndarray) -> None:
        """The loop over chunks begins, each lane having taken ``lane_steps`` live
        environment steps (``(lanes,)``; 0 on a new run)."""
        self.lane_steps = lane_steps
        self.loop_began = self.chunk_began = time.perf_counter()

    def lap(self, lane_steps) -> Lap:
        """A chunk's metrics reached the host, each lane now at ``lane_steps``."""
        now = time.perf_counter()
        lane_steps = np.asarray(lane_steps, np.int64)
        steps = int(np.sum(lane_steps - self.lane_steps))
        self.lane_steps = lane_steps
        return Lap(now, self.video_s, steps, steps / max(now - self.chunk_began, 1e-9))

    def count(self, lap: Lap, updates: int) -> tuple[float, float]:
        """Count a chunk of ``updates`` updates, the host's work on it done: ``(steps per
        second, seconds per update)`` as a listener hears them, the first chunk's own, then
        those since the first chunk ended; the drawing is left out of the rate, not out of
        the seconds per update (the time left counts the videos to come)."""
        self.updates += updates
        self.steps += lap.steps
        if self.steady is None:
            self.steady = Mark(lap.ended, self.updates, self.steps, lap.drawn)
            return lap.steps_per_second, (lap.ended - self.chunk_began) / updates
        took = max(lap.ended - self.steady.at, 1e-9)
        trained = max(took - (lap.drawn - self.steady.drawn), 1e-9)
        return ((self.steps - self.steady.steps) / trained,
                took / (self.updates - self.steady.updates))

    def next_chunk(self) -> None:
        """The host's work on a chunk is done: the next chunk's time begins."""
        self.chunk_began = time.perf_counter()

    def stop(self) -> None:
        """The loop over chunks ended: its time, less the drawing, is the run's."""
        self.run_s = time.perf_counter() - self.loop_began - self.video_s

    def timings(self, videos: bool) -> dict:
        """summary.json's seconds and throughput (``video_time_s`` where ``videos`` were
        drawn)."""
        timings = {"wall_time_s": time.perf_counter() - self.began,
                   "compile_time_s": self.compile_s, "run_time_s": self.run_s,
                   "final_eval_time_s": self.final_eval_s,
                   "env_steps_per_second": self.steps / self.run_s if self.run_s > 0 else None}
        if videos:
            timings["video_time_s"] = self.video_s
        return timings

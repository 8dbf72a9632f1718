"""``rollax train`` without the console: run a :class:`RunConfig` in a run folder as compiled
chunks, with metrics, checkpoints, resume and a summary, reporting each chunk to a listener.

Data flow: :func:`rollax.run.config.from_settings` gives ``(run, algo)``; :func:`new_run`
creates the folder (config.json first) and :func:`execute` drives a
:class:`rollax.run.experiment.Runner` over it, a :class:`Recorder` keeping the books of each
chunk (:mod:`rollax.run.progress`); :func:`open_resume` reads a stopped run back and its
``execute`` continues from the latest checkpoint. A :class:`Session` is either, checked and
held in its folder, with the experiment trackers it logs to (:mod:`rollax.run.loggers`); once
trained it draws its figures when asked. Output to a person (progress bars, tables) belongs to
the caller, which passes ``on_chunk``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax import sharding
from rollax.algos.base import Algorithm
from rollax.envs.host import is_host
from rollax.keys import is_key
from rollax.run import compile_cache
from rollax.run.checkpoint import Found
from rollax.run.config import RunConfig, check_run_devices, from_json
from rollax.run.experiment import (
    Interrupt,
    Lanes,
    Runner,
    jsonable,
    lane_params_sha256,
    metrics_rows,
    params_sha256,
    run_loop,
)
from rollax.run.folder import RunFolder, check_new_run_dir, metric_table
from rollax.run.loggers import check_loggers, combine, make_loggers
from rollax.run.progress import ChunkDone, Clock, Listener, due
from rollax.run.stats import summarize
from rollax.validate import counted
from rollax.version import __version__


class Interrupted(Exception):
    """Training stopped on Ctrl-C after writing a checkpoint: the run's folder ``run_dir`` and
    ``updates``, the number of updates done (the checkpoint's)."""

    def __init__(self, run_dir: Path, updates: int):
        super().__init__(f"interrupted at update {updates}; checkpoint written; continue with "
                         f"`rollax train --resume {run_dir}`")
        self.run_dir, self.updates = run_dir, updates


def versions() -> dict:
    return {"rollax": __version__, "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()], "python": sys.version.split()[0]}


def _latest(metrics, name: str) -> float:
    values = np.asarray(getattr(metrics, name))[:, -1]
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


EVAL_STREAM = 0x6576616C
"""``fold_in`` tag of the evaluation keys during training: lane ``i`` evaluates at update
``u`` with ``fold_in(fold_in(key(seed_i), EVAL_STREAM), u)``, a stream training never draws."""


def greedy_evaluator(algo: Algorithm, lanes: Lanes, episodes: int, state) -> Callable:
    """``(state, updates) -> {name: (lanes,)}``: the mean greedy return of ``episodes`` fresh
    absorbing episodes per lane as ``greedy_return`` (in a game of two players, against a
    random legal player, with the rates of wins, draws and losses from each seat, and against
    the search player with ``eval_search_simulations``: :func:`rollax.evaluation.scores`) on
    the evaluation keys of the state after ``updates`` updates; the training state is only
    read, so training results never change. Compiled here, for states like ``state`` (arrays,
    or their shapes and layouts): the evaluations during the run compile nothing."""
    from rollax.evaluation import scores

    def one(lane_state, key):
        out = scores(algo.env, algo.policy, algo.params(lane_state), key, episodes,
                     num_steps=getattr(algo.config, "eval_steps", None),
                     search_simulations=getattr(algo.config, "eval_search_simulations", 0))
        return {("greedy_return" if k == "eval_return" else k): v for k, v in out.items()}

    def evaluate(state, roots, updates):
        keys = jax.vmap(lambda k: jax.random.fold_in(k, updates))(roots)
        return jax.vmap(one)(state, keys)

    roots = jax.vmap(lambda k: jax.random.fold_in(k, EVAL_STREAM))(lanes.keys())
    compiled = jax.jit(evaluate).lower(state, roots, jnp.uint32(0)).compile()

    def at(state, updates: int) -> dict[str, np.ndarray]:
        outputs = jax.device_get(compiled(state, roots, np.uint32(updates)))
        return {k: np.asarray(v, np.float64) for k, v in outputs.items()}

    return at


VIDEO_STREAM = 0x5649
"""Folded into lane 0's key (then the updates done) for the episodes of ``--video-every``: apart
from training's and the evaluations' keys."""


def _video(run: RunConfig, algo: Algorithm, folder: RunFolder, state, updates: int) -> None:
    """``videos/update-NNNNNNN.gif`` in the run folder: one greedy episode of lane 0 after
    ``updates`` updates (:func:`rollax.run.video.training_video`), on a key of its own."""
    from rollax.run.video import training_video

    lane = jax.tree_util.tree_map(lambda x: x[0], state)
    key = jax.random.fold_in(jax.random.fold_in(run.lanes().keys()[0], VIDEO_STREAM), updates)
    training_video(algo.env, algo.policy, algo.params(lane), key,
                   folder.path / "videos" / f"update-{updates:07d}.gif")


def _first_rows(runner: Runner, state) -> list[dict]:
    """Row 0 of every lane: the outputs of ``evaluate`` before the first update."""
    initial = {k: np.asarray(v)
               for k, v in runner.to_host(runner.evaluate(state, runner.hp)).items()}
    return [{**label, "update": 0, **{k: jsonable(v[lane]) for k, v in initial.items()}}
            for lane, label in enumerate(runner.lanes.labels())]


def _steps_at(folder: RunFolder, labels: list[dict], updates: int) -> np.ndarray:
    """Each lane's live environment steps after ``updates`` updates, from metrics.jsonl
    (``(lanes,)``, 0 before the first)."""
    if updates == 0:
        return np.zeros(len(labels), np.int64)
    return np.nan_to_num(folder.metric_table(labels, "env_steps")[:, updates]).astype(np.int64)


def _start(runner: Runner, folder: RunFolder, resume: Found | None):
    """The state to continue from and the number of updates done (metrics rewritten to
    match)."""
    if resume is None:
        state = runner.initial_state()
        folder.write_metrics(_first_rows(runner, state), append=False)
        return state, 0
    folder.truncate_metrics(resume.updates)
    state = runner.place(resume.state)
    fields = runner.algo.env_batch_fields
    if is_host(runner.algo.env) and fields:
        # a host environment's pools ended with their process: its episodes in flight restart
        # from fresh pools (seeded as the run's start was), everything else is the checkpoint's
        fresh = runner.initial_state()
        state = state._replace(**{name: getattr(fresh, name) for name in fields})
    return state, resume.updates


def _lower_chunk(runner: Runner, state):
    """The chunk program lowered for ``state`` (its arrays, or their shapes and layouts)."""
    return runner.chunk.lower(state, runner.hp, runner.length(runner.chunk_size))


def _compile(lowered, since: float) -> float:
    """Compile ``lowered`` ahead of the run, which then finds it compiled; returns the seconds
    since ``since`` (when its lowering began)."""
    lowered.compile()
    return time.perf_counter() - since


def _ready(runner: Runner, folder: RunFolder, resume: Found | None, clock: Clock):
    """The state to start from and the number of updates done (:func:`_start`), the chunk
    compiled ahead of the run (its seconds counted on ``clock``). A new run of a JAX environment
    compiles the chunk, the longest compilation, beside the initial state and the first
    evaluation (XLA compiles without holding Python's lock: on two cores, both at once). It is
    lowered here: JAX's settings made with a context manager (rank promotion, matmul precision,
    default device) hold for this thread only, and the run calls it here."""
    if resume is not None or is_host(runner.algo.env):
        state, updates = _start(runner, folder, resume)
        lowered = _lower_chunk(runner, state)
        with clock.compiling():
            lowered.compile()
        return state, updates
    lowered = _lower_chunk(runner, runner.state_shapes())
    with ThreadPoolExecutor(1) as beside:
        compiling = beside.submit(_compile, lowered, clock.began)
        state, updates = _start(runner, folder, resume)
        clock.compile_s += compiling.result()
    return state, updates


class Unfinished(OSError):
    """A run that stopped because a file could not be written (a full disk, a lost mount):
    the ``OSError`` with the file named and, as ``hint``, how to finish the run. What was
    written stays valid: metrics are cut back to the last checkpoint on resume, checkpoints
    and the summary are replaced in one step or not at all."""

    hint: str = ""


def unfinished(err: OSError, folder: RunFolder) -> Unfinished:
    """``err`` as :class:`Unfinished`, its hint naming the command that finishes the run."""
    error = Unfinished(err.errno, err.strerror or str(err), err.filename)
    step = "its last checkpoint" if folder.has_checkpoint else "the start"
    error.hint = (f"the run is kept; finish it from {step} with "
                  f"`rollax train --resume {folder.path}`")
    return error


def execute(run: RunConfig, algo: Algorithm, folder: RunFolder, resume: Found | None = None,
            on_chunk: Listener | None = None, between: Callable | None = None
            ) -> tuple[dict, Any]:
    """Run ``run`` in ``folder`` (or continue it from the checkpoint ``resume``); returns
    ``(summary, final params)`` (params with a leading lane axis). A file that cannot be
    written stops the run with :class:`Unfinished` (resumable). The folder is held for this
    process while it runs (:meth:`RunFolder.claim`: ``ValueError`` when another process holds
    it), and released at the end unless it was held before the call. ``between(runner)``,
    where given, makes the hook :func:`rollax.run.experiment.run_loop` calls between chunks."""
    claimed = folder.claim()
    try:
        return _execute(run, algo, folder, resume, on_chunk, between)
    except Unfinished:
        raise
    except OSError as err:
        raise unfinished(err, folder) from err
    finally:
        if claimed:
            folder.release()


def _devices(run: RunConfig, algo: Algorithm) -> int | None:
    """The devices ``run`` takes: its own setting, else, on a CPU, one a core for whole lanes
    (:func:`rollax.sharding.lanes_per_core`; not in checked mode nor for a host
    environment)."""
    if run.devices is None and not run.checked and not is_host(algo.env):
        return sharding.lanes_per_core(len(run.lanes()))
    return run.devices


@dataclasses.dataclass(frozen=True)
class Recorder:
    """What the host does with the results of the loop over chunks: after each chunk
    (``recorder(metrics, first, done, state)``, metrics ``(lanes, n)`` on the host) its
    metric rows, with the chunk's throughput and the greedy evaluations due, are written to
    metrics.jsonl, the videos due are drawn (timed apart on ``clock``) and ``listener`` hears
    a :class:`ChunkDone`; :meth:`save` writes a checkpoint."""

    run: RunConfig
    runner: Runner
    folder: RunFolder
    clock: Clock
    greedy: Callable | None
    """The compiled greedy evaluation of ``--eval-every`` (:func:`greedy_evaluator`)."""
    listener: Listener | None

    def __call__(self, metrics, first: int, done: int, state) -> None:
        lap = self.clock.lap(np.asarray(metrics.env_steps)[:, -1])
        rows = self.rows(metrics, first, done, state, lap.steps_per_second)
        total = self.runner.algo.num_updates
        if due(self.run.video_every, first, done, total):
            with self.clock.drawing():
                _video(self.run, self.runner.algo, self.folder, state, done)
        self.folder.write_metrics(rows)
        rate, seconds_per_update = self.clock.count(lap, done - first)
        if self.listener is not None:
            steps = round(float(np.mean(self.clock.lane_steps)))
            progress = _latest(metrics, self.run.spec.report.progress)
            self.listener(ChunkDone(done, total, steps, rate,
                                    (total - done) * seconds_per_update, progress, rows))
        self.clock.next_chunk()

    def rows(self, metrics, first: int, done: int, state, steps_per_second: float) -> list[dict]:
        """The chunk's rows, one per (update, lane): its throughput (all lanes, this chunk,
        host clock) in each, and where an evaluation falls due, the greedy return (and a
        game's rates against a random player)."""
        labels = self.runner.lanes.labels()
        rows = list(metrics_rows(metrics, labels, first))
        for row in rows:
            row["env_steps_per_second"] = steps_per_second
        if self.greedy is not None and due(self.run.eval_every, first, done,
                                           self.runner.algo.num_updates):
            outputs = self.greedy(state, done)
            for lane, row in enumerate(rows[-len(labels):]):
                row.update({k: float(v[lane]) for k, v in outputs.items()})
        return rows

    def save(self, done: int, state) -> None:
        """Checkpoint ``done`` (its state gathered to the host from a device mesh)."""
        runner = self.runner
        self.folder.save_checkpoint(done, state if runner.mesh is None else runner.to_host(state),
                                    self.run.identity(), self.run.spec.length_field)


def _execute(run: RunConfig, algo: Algorithm, folder: RunFolder, resume: Found | None,
             on_chunk: Listener | None, between: Callable | None = None) -> tuple[dict, Any]:
    runner = Runner(algo, run.lanes(), run.chunk_size, devices=_devices(run, algo),
                    checked=run.checked)
    clock = Clock()
    state, updates = _ready(runner, folder, resume, clock)
    greedy = None
    if run.eval_every is not None:  # compiled before the loop, as compiling
        with clock.compiling():
            greedy = greedy_evaluator(algo, runner.lanes, run.eval_episodes, state)
    recorder = Recorder(run, runner, folder, clock, greedy, on_chunk)
    clock.start(_steps_at(folder, runner.lanes.labels(), updates))
    with Interrupt() as interrupt:
        state, done, interrupted = run_loop(runner, state, updates, recorder,
                                            run.checkpoint_every, recorder.save, interrupt,
                                            None if between is None else between(runner))
    clock.stop()
    if interrupted:
        raise Interrupted(folder.path, done)
    return _conclude(run, runner, folder, state, clock)


def _conclude(run: RunConfig, runner: Runner, folder: RunFolder, state,
              clock: Clock) -> tuple[dict, Any]:
    """The final evaluation and summary.json (:func:`summarize_run`, with the run's devices,
    compile cache, mesh and videos); ``(summary, final params)``."""
    with clock.evaluating():
        final = {k: np.asarray(v, np.float64)
                 for k, v in runner.to_host(runner.evaluate(state, runner.hp)).items()}
        params = runner.to_host(runner.final_params(state))
    timings = clock.timings(videos=run.video_every is not None)
    summary = summarize_run(run, runner.algo, runner.lanes.labels(), final, params,
                            folder.read_metrics(), timings)
    summary["devices"] = runner.devices
    summary["compile_cache"] = compile_cache.current()
    summary["mesh"] = (None if runner.mesh is None else
                       {name: int(size) for name, size in runner.mesh.shape.items()})
    videos = sorted((folder.path / "videos").glob("update-*.gif"))
    if videos:
        summary["videos"] = [str(v.relative_to(folder.path)) for v in videos]
    folder.write_summary(summary)
    return summary, params


def summarize_run(run: RunConfig, algo: Algorithm, labels: list[dict], final: dict, params,
                  rows: list[dict], timings: dict) -> dict:
    """summary.json: each lane's score and facts, the score per hyperparameter combination
    across seeds (:func:`rollax.run.stats.summarize`), hashes and timings. A lane that
    diverged (:func:`diverged_at`) has no score and no final progress (``null``), and
    ``diverged`` says whether any lane did, ``diverged_at`` the first update of any."""
    spec = run.spec
    history = metric_table(rows, labels, spec.report.progress)
    sha = lane_params_sha256(params, len(labels))
    steps = np.nan_to_num(metric_table(rows, labels, "env_steps")[:, -1]).astype(np.int64)
    broken = diverged_at(rows, labels, params)
    lanes = []
    for i, label in enumerate(labels):
        facts = lane_facts(spec, history[i])
        if broken[i] is not None:
            facts = {k: (None if k.startswith("final_") else v) for k, v in facts.items()}
        score = None if broken[i] is not None else float(final[spec.report.score][i])
        extra = {k: None if score is None else float(v[i])
                 for k, v in final.items() if k != spec.report.score}  # a game's rates
        lanes.append({**label, spec.report.score: score, **extra, "params_sha256": sha[i],
                      "env_steps": int(steps[i]), "diverged_at": broken[i], **facts})
    groups: dict[str, list[float]] = {}
    for lane, label in zip(lanes, labels):
        key = json.dumps({k: v for k, v in label.items() if k != "seed"}, sort_keys=True)
        groups.setdefault(key, []).append(np.nan if lane[spec.report.score] is None
                                          else lane[spec.report.score])
    aggregate = [{**json.loads(k), spec.report.score: summarize(v)} for k, v in groups.items()]
    first = min((u for u in broken if u is not None), default=None)
    return {"kind": spec.name, "score": spec.report.score, "lanes": lanes, "aggregate": aggregate,
            "diverged": first is not None, "diverged_at": first,
            "params_sha256": params_sha256(params), **timings,
            "env_steps_per_lane": round(float(np.mean(steps)))}


def is_loss(name: str) -> bool:
    """Whether metric ``name`` is a loss (``loss``, ``<part>_loss``): a number every update
    computes, so a non-finite one means training broke (unlike an episode return, which is
    missing where no episode ended)."""
    return name == "loss" or name.endswith("_loss")


def finite_lanes(params) -> np.ndarray:
    """``(lanes,)`` whether every parameter of each lane (leading axis) is finite."""
    ok: np.ndarray | None = None
    for leaf in jax.tree_util.tree_leaves(params):
        leaf = np.asarray(leaf)
        if not np.issubdtype(leaf.dtype, np.inexact):
            continue
        lane_ok = np.asarray(np.isfinite(leaf.reshape(leaf.shape[0], -1)).all(axis=1))
        ok = lane_ok if ok is None else ok & lane_ok
    return np.ones(0, bool) if ok is None else ok


def diverged_at(rows: list[dict], labels: list[dict], params) -> list[int | None]:
    """Each lane's first update whose loss (:func:`is_loss`) is not finite (``null`` in
    metrics.jsonl), else, where its final parameters are not finite, the last update; ``None``
    for a lane that did not diverge."""
    updates = max(r["update"] for r in rows)
    index = {json.dumps(label, sort_keys=True): i for i, label in enumerate(labels)}
    first: list[int | None] = [None] * len(labels)
    for r in sorted(rows, key=lambda r: r["update"]):
        lane = index[json.dumps({k: r[k] for k in labels[0]}, sort_keys=True)]
        broken = any(is_loss(k) and (v is None or not np.isfinite(v)) for k, v in r.items())
        if r["update"] > 0 and broken and first[lane] is None:
            first[lane] = r["update"]
    finite = finite_lanes(params)
    return [u if u is not None or finite.size == 0 or finite[i] else updates
            for i, u in enumerate(first)]


def lane_facts(spec, history: np.ndarray) -> dict:
    """A lane's facts about its progress metric, from its row ``(updates + 1,)`` of it:
    ``<progress>_initial``, its value before the first update, where it is known then (an
    exact one such as a tabular policy's exact return); and, where the progress metric is not
    the score, ``final_<progress>``, its mean over the last 10 updates that have one (a noisy
    one such as the return of the episodes that finished; ``None`` if none did)."""
    facts: dict = {}
    if np.isfinite(history[0]):
        facts[f"{spec.report.progress}_initial"] = float(history[0])
    if spec.report.progress != spec.report.score:
        finished = np.asarray(history[1:], np.float64)
        last = finished[np.isfinite(finished)][-10:]
        facts[f"final_{spec.report.progress}"] = float(last.mean()) if last.size else None
    return facts


def run_name(run: RunConfig) -> str:
    """The default folder name: ``<env>-<method>-seed<S>``."""
    method = run.spec.method(run.config)
    return f"{run.config.env.replace(':', '-')}-{method}-seed{run.seed}"


def create_run(run: RunConfig, out: str | None) -> RunFolder:
    """Create the folder of a new run (``out``, or a fresh name under ``runs/``) holding its
    config.json, and nothing else yet, held for this process (:meth:`RunFolder.claim`) until
    ``folder.release()`` or the process ends. Another process that made the same folder
    first (``out`` given): ``ValueError``; without ``out``, the next free name is taken."""
    while True:
        folder = RunFolder(check_new_run_dir(out, run_name(run)))
        try:
            folder.path.mkdir(parents=True)
            break
        except FileExistsError:  # made by another process since it was checked
            if out is not None:
                raise ValueError(f"out {out!r} already exists: choose a new folder") from None
    try:
        folder.claim()
        folder.write_config({**run.to_json(), **versions()})
    except BaseException:  # nothing of the run exists yet: leave no half-made folder behind
        folder.release()
        shutil.rmtree(folder.path, ignore_errors=True)
        raise
    return folder


def read_run(folder: RunFolder) -> RunConfig:
    """The :class:`RunConfig` a run folder's config.json stores."""
    return from_json(folder.read_config(), str(folder.path / "config.json"))


@dataclasses.dataclass(frozen=True)
class Session:
    """A run ready to train in its folder, which this process holds
    (:meth:`RunFolder.claim`) until the session closes (``with session:``, or
    :meth:`close`): a new run, its folder holding config.json alone (:func:`begin`), or a
    stopped one read back and checked (:func:`open_resume`). Nothing is compiled yet."""

    folder: RunFolder
    run: RunConfig
    algo: Algorithm
    start: Found | None = None
    """The checkpoint it continues from, loaded (``None``: it starts from update 0, a new run
    or a stopped one without a checkpoint)."""
    longer: dict | None = None
    """Its config.json with the larger length it is trained to, written when it starts;
    ``None`` when the length stays."""
    was: int | None = None
    """The length (the spec's ``length_field`` setting) it had, when it is trained longer."""
    log: tuple[str, ...] = ()
    """The experiment trackers it also logs to (``--log``: :mod:`rollax.run.loggers`),
    checked against the run when the session opened."""

    def execute(self, on_chunk: Listener | None = None, between: Callable | None = None
                ) -> tuple[dict, Any]:
        """Train it from its start (:func:`execute`), its config.json made longer first when
        it is trained longer; each chunk is heard by ``on_chunk`` and by the trackers of
        :attr:`log`, which also log the evaluation after training; ``between`` as
        :func:`execute` takes it. ``(summary, final params)``."""
        if self.longer is not None:
            try:
                self.folder.lengthen(self.longer)
            except OSError as err:
                raise unfinished(err, self.folder) from err
        with make_loggers(self.log, self.folder, self.run) as logs:
            heard = logs if on_chunk is None else combine(on_chunk, logs)
            summary, params = execute(self.run, self.algo, self.folder, resume=self.start,
                                      on_chunk=heard, between=between)
            logs.finished(summary)
        return summary, params

    def draw_figures(self) -> None:
        """Its figures, once it has trained (:func:`rollax.run.plots.plot_runs`, in the
        folder's ``figures/``); an ``OSError`` names the command that draws them (the run
        itself is complete)."""
        from rollax.run.plots import plot_runs

        try:
            plot_runs([self.folder.path], self.folder.figures)
        except OSError as err:  # the run itself is complete: only its figures are missing
            err.hint = (f"the run finished (summary.json); draw its figures with "  # type: ignore[attr-defined]
                        f"`rollax plot {self.folder.path}`")
            raise

    def close(self) -> None:
        """Let other processes write the folder again."""
        self.folder.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def begin(run: RunConfig, algo: Algorithm, out: str | None, log: Iterable[str] = ()
          ) -> Session:
    """The session of a new run: the trackers of ``log`` (``--log`` values) checked against
    it (:func:`rollax.run.loggers.check_loggers`), then its folder created, holding
    config.json alone (:func:`create_run`), and held until the session closes."""
    names = check_loggers(log, run.video_every is not None)
    return Session(create_run(run, out), run, algo, log=tuple(names))


def new_run(run: RunConfig, algo: Algorithm, out: str | None,
            on_chunk: Listener | None = None) -> tuple[RunFolder, tuple[dict, Any]]:
    """Create the run folder (config.json first) and execute; the folder is released when
    this returns."""
    with begin(run, algo, out) as session:
        return session.folder, session.execute(on_chunk)


def open_resume(path: str | Path, devices: int | None = None,
                length: int | None = None, log: Iterable[str] = ()) -> Session:
    """The run in ``path`` (config.json read once), checked before anything compiles or is
    written: it exists, has not finished (unless ``length`` makes it longer), the checkpoint it
    continues from verifies (:func:`rollax.run.checkpoint.resume_point`), its metrics can be
    cut back to that checkpoint, and it fits the device count of its config.json or
    ``devices`` (a layout only: the checkpoint fits any count). ``length``: a new, larger value
    of the run's length setting (its algorithm's ``length_field``: ``updates``, ``total_steps``).
    ``log``: the trackers to log to (``--log`` values), checked first against the run's own
    videos (:func:`rollax.run.loggers.check_loggers`). First of all the folder is held for
    this process (:meth:`RunFolder.claim`; another process training it: ``ValueError``,
    nothing changed), until the :class:`Session` closes (released at once when the run is
    refused)."""
    folder = RunFolder(path)
    folder.check_exists("resume: ")
    folder.read_config()  # a run folder: only then is its lock file made
    claimed = folder.claim("resume: ")
    try:
        return _open_resume(folder, path, devices, length, log)
    except BaseException:
        if claimed:
            folder.release()
        raise


def _open_resume(folder: RunFolder, path: str | Path, devices: int | None,
                 length: int | None, log: Iterable[str]) -> Session:
    stored = folder.read_config()  # again, now that no other process writes it
    run = from_json(stored, str(folder.path / "config.json"))
    names = check_loggers(log, run.video_every is not None)
    name = run.spec.length_field
    flag = f"--{name.replace('_', '-')}" if name else ""
    if folder.finished and length is None:
        longer = f"; to train it longer give {flag} N" if name else ""
        raise ValueError(f"resume: the run in {str(path)!r} already finished "
                         f"(summary.json){longer}")
    algo = run.build()
    # the checkpoint matches config.json as stored (a checkpoint records its own length)
    template, identity = state_template(algo, run.lanes()), run.identity()
    longer, was = None, None
    if length is not None:
        if not name:
            raise ValueError(f"resume: {run.spec.name} runs cannot be trained longer")
        was = getattr(run.config, name)
        run = dataclasses.replace(
            run, config=dataclasses.replace(run.config, **{name: length}))
        shorter, algo = algo, run.build()
        if algo.num_updates <= shorter.num_updates:
            raise ValueError(f"resume: {flag} {length} would not train longer than the run's "
                             f"{flag} {was} ({counted(shorter.num_updates, 'update')})")
        longer = {**stored, "config": {**stored["config"], name: length}}
    if devices is not None:
        run = dataclasses.replace(run, devices=devices)
    check_run_devices(run, algo)
    found = folder.resume_point(template, identity, name)
    if found is not None:
        if found.updates > algo.num_updates:
            raise ValueError(f"resume: checkpoint {str(found.path)!r} is at update "
                             f"{found.updates}, past the run's "
                             f"{counted(algo.num_updates, 'update')}")
        folder.check_metrics()
    return Session(folder, run, algo, found, longer, was, tuple(names))


def load_latest(path: str | Path) -> tuple[RunConfig, Algorithm, Lanes, int, Any]:
    """``(run, algo, lanes, updates, state)`` of a run folder's latest checkpoint (all lanes;
    ``updates``: the number of updates done); ``ValueError`` for a folder that is not a run, a
    checkpoint that does not match, or a lane whose parameters are not finite (a diverged run:
    its actions would mean nothing)."""
    folder = RunFolder(path)
    folder.check_exists()
    run = read_run(folder)
    algo = run.build()
    lanes = run.lanes()
    updates, state = folder.load_checkpoint(state_template(algo, lanes), run.identity(),
                                            run.spec.length_field)
    finite = finite_lanes(algo.params(state))
    if not finite.all():
        bad = [", ".join(f"{k}={v:g}" for k, v in label.items())
               for ok, label in zip(finite, lanes.labels()) if not ok]
        raise ValueError(f"the run in {str(path)!r} diverged: lane {'; lane '.join(bad)} has "
                         f"non-finite parameters at update {updates}; there is no policy to use")
    return run, algo, lanes, updates, state


def state_template(algo: Algorithm, lanes: Lanes):
    """Every lane's state as shapes and dtypes, what a checkpoint is read into, from
    ``jax.eval_shape`` (nothing compiled or run); its typed keys are concrete zeros of the
    run's key implementation, so they read back as typed keys."""
    keys = lanes.keys()
    shapes = jax.eval_shape(jax.vmap(algo.init), keys, lanes.hyperparams(algo.hyperparams))
    impl = jax.random.key_impl(keys)

    def concrete_key(leaf):
        if not is_key(leaf):
            return leaf
        data = jax.eval_shape(jax.random.key_data, leaf)
        return jax.random.wrap_key_data(jax.numpy.zeros(data.shape, data.dtype), impl=impl)

    return jax.tree_util.tree_map(concrete_key, shapes)


def evaluate_run(path: str | Path, episodes: int, greedy: bool, seed: int,
                 search_simulations: int | None = None) -> dict:
    """``rollax eval``: the mean return over ``episodes`` fresh absorbing episodes per lane of
    a run folder's latest checkpoint (greedy or sampled actions; in a game of two players, the
    mean payoff and the rates of ``episodes`` games from each seat against a random player:
    :func:`rollax.evaluation.game_scores`, and against the search player of
    ``search_simulations`` simulations, by default the run's ``eval_search_simulations``:
    :func:`rollax.evaluation.search_scores`), keys
    ``split(jax.random.key(seed), lanes)``, plus the algorithm's ``policy_extras`` (e.g. the
    exact return of a tabular policy)."""
    from rollax.evaluation import scores
    from rollax.games.search import check_search
    from rollax.validate import check_count, check_seed

    check_count("episodes", episodes)
    check_seed(seed)
    run, algo, lanes, updates, state = load_latest(path)
    simulations: int = (getattr(algo.config, "eval_search_simulations", 0)
                        if search_simulations is None else search_simulations)
    check_search(algo.env, simulations, run.config.env, "search_simulations")

    def one(lane_state, key):
        params = algo.params(lane_state)
        out = scores(algo.env, algo.policy, params, key, episodes, greedy,
                     search_simulations=simulations)
        out = {("mean_return" if k == "eval_return" else k): v for k, v in out.items()}
        return out if algo.policy_extras is None else {**out, **algo.policy_extras(params)}

    keys = jax.random.split(jax.random.key(seed), len(lanes))
    result = jax.device_get(jax.jit(jax.vmap(one))(state, keys))
    rows = [{**label, **{k: float(np.asarray(v)[i]) for k, v in result.items()}}
            for i, label in enumerate(lanes.labels())]
    return {"env": run.config.env, "update": updates, "greedy": greedy, "episodes": episodes,
            "lanes": rows, "aggregate": summarize([r["mean_return"] for r in rows])}

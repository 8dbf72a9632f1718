"""``rollax train``: settings to a run, a progress bar while it trains, figures and a report."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollax.cli.parse import TrainRequest, build
from rollax.cli.pipe import outliving_reader
from rollax.run.files import finite_or_none
from rollax.run.folder import metric_label, metric_table
from rollax.validate import counted

STARTED = time.perf_counter()
"""When the command line was imported: where the process's start is not known, the start of
the ``command`` time ``rollax train`` prints."""


def emit(obj: Any) -> None:
    """Print ``obj`` as one JSON line (NaN and infinities as null)."""
    sys.stdout.write(json.dumps(finite_or_none(obj), allow_nan=False) + "\n")
    sys.stdout.flush()


def console(stderr: bool = False):
    """A rich console that never wraps a line when the stream is not a terminal (piped output
    stays one record per line, greppable)."""
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False, markup=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, highlight=False, markup=False, soft_wrap=True, width=200)
    return out


def _value(x: float | None, fmt: str = ".3f") -> str:
    return "—" if x is None or not np.isfinite(x) else format(x, fmt)


def eta(seconds: float) -> str:
    """A time left as a person reads it, rounded to its two largest units: ``8000`` ->
    ``"2 h 13 min"``, ``90`` -> ``"1 min 30 s"``, ``7190`` -> ``"2 h"``, ``200000`` ->
    ``"2 d 8 h"``; ``"—"`` when unknown (not finite)."""
    if not np.isfinite(seconds):
        return "—"
    for unit, size, small, small_size in (("d", 86_400, "h", 3600), ("h", 3600, "min", 60),
                                          ("min", 60, "s", 1)):
        count = round(max(seconds, 0) / small_size)  # in the smaller unit
        if count * small_size >= size:
            big, rest = divmod(count, size // small_size)
            return f"{big} {unit}" + (f" {rest} {small}" if rest else "")
    return f"{round(max(seconds, 0))} s"


class Progress:
    """What a person sees while a run trains: on a terminal, a progress bar on stderr; piped
    or in a batch job, one flushed line per compiled chunk on stdout. Both show the rate and
    the time left (``ChunkDone``). Silent in JSON mode."""

    def __init__(self, enabled: bool, progress_name: str):
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
        from rich.progress import Progress as Bar

        self.name, self.out = progress_name, console()
        err = console(stderr=True)
        self.bar = Bar(
            TextColumn("[bold]updates"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[steps]} env steps"),
            TextColumn("{task.fields[sps]} steps/s"), TextColumn("{task.fields[ret]}"),
            TextColumn("{task.fields[left]} left"), console=err,
            disable=not enabled or not err.is_terminal, transient=False)
        self.lines = enabled and not err.is_terminal
        self.task = None

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def __call__(self, event) -> None:
        progress = f"{self.name} {_value(event.progress)}"
        left = eta(event.seconds_left)
        if self.lines:
            self.out.print(f"update {event.done}/{event.total}  {event.env_steps:,} env steps  "
                           f"{event.env_steps_per_second:,.0f} steps/s  {progress}  "
                           f"{left} left")
            self.out.file.flush()
        fields: dict[str, Any] = dict(completed=event.done, steps=f"{event.env_steps:,}",
                                      sps=f"{event.env_steps_per_second:,.0f}", ret=progress,
                                      left=left)
        if self.task is None:
            self.task = self.bar.add_task("train", total=event.total, **fields)
        else:
            self.bar.update(self.task, **fields)


def header(run, algo, folder, sources: dict[str, str], file=None) -> None:
    """The run's settings and folder, printed (and flushed) before anything compiles: the
    headline, the length (:func:`length_line`), and which settings came from the preset, the
    file and the flags."""
    out = console()
    out.print(headline(run))
    out.print(f"{length_line(algo, len(run.lanes()))}; run folder: {folder.path}")
    for line in (no_preset_line(run, sources), settings_line(run, sources, file)):
        if line:
            out.print(line)
    out.file.flush()


def length_line(algo, lanes: int) -> str:
    """The run's length: ``8 updates x 512 env steps = 4,096 env steps per lane (8,192 over 2
    lanes)`` for fixed-length rollouts; for whole episodes, ``40 updates x 256 episodes of at
    most 8 steps = 10,240 episodes per lane`` (the steps they take are counted as they run)."""
    if algo.episodes_per_update is None:
        each = counted(algo.env_steps_per_update, "env step")
        total, unit = algo.num_updates * algo.env_steps_per_update, "env step"
    else:
        longest = algo.env_steps_per_update // algo.episodes_per_update
        each = (f"{counted(algo.episodes_per_update, 'episode')} of at most "
                f"{counted(longest, 'step')}")
        total, unit = algo.num_updates * algo.episodes_per_update, "episode"
    return (f"{counted(algo.num_updates, 'update')} x {each} = {counted(total, unit)} per lane"
            + (f" ({lanes * total:,} over {counted(lanes, 'lane')})" if lanes > 1 else ""))


def resume_header(stopped) -> None:
    """What a resumed run prints before anything compiles: the headline, the run folder and the
    update it continues from, and the length it is trained to when it is made longer."""
    run, algo, start = stopped.run, stopped.algo, stopped.start
    out = console()
    out.print(headline(run))
    done = 0 if start is None else start.updates
    where = (f"checkpoint {start.path.name}" if start is not None
             else "no checkpoint: starting again")
    each = (counted(algo.env_steps_per_update, "env step") if algo.episodes_per_update is None
            else counted(algo.episodes_per_update, "episode"))
    out.print(f"resuming the run in {stopped.folder.path} at update {done} of "
              f"{algo.num_updates} ({where}); {algo.num_updates - done} x {each} per lane to go")
    if stopped.was is not None:
        name = run.spec.length_field
        out.print(f"trained longer: {name}={getattr(run.config, name)} (was {stopped.was})")
    out.file.flush()


def headline(run) -> str:
    """``ppo on CartPole-v1: num_envs=4, num_steps=128, ..., 1 lane``: the method, the
    environment and the settings the algorithm names as its run's shape
    (``spec.report.headline``)."""
    config, spec = run.config, run.spec
    shape = "".join(f"{name}={_shown(getattr(config, name), run, name)}, "
                    for name in spec.report.headline)
    return f"{spec.method(config)} on {config.env}: {shape}{counted(len(run.lanes()), 'lane')}"


def no_preset_line(run, sources: dict[str, str]) -> str:
    """``no preset for E: PPO's defaults (num_envs=4, ...)``, for an algorithm with presets but
    none for this environment: the defaults it takes among its headline fields (those the file
    and the flags left); empty when the environment has a preset."""
    config, spec = run.config, run.spec
    if not spec.presets or config.env in spec.presets:
        return ""
    defaults = [f"{n}={_shown(getattr(config, n), run, n)}" for n in spec.report.headline
                if n not in sources]
    return (f"no preset for {config.env}: {spec.name.upper()}'s defaults"
            + (f" ({', '.join(defaults)})" if defaults else ""))


def settings_line(run, sources: dict[str, str], file=None) -> str:
    """``settings: preset of Acrobot-v1: num_envs=8, ...; from FILE: lr=0.0003; flags: ...``
    (the resolved values)."""
    from rollax.run.config import RUN_SETTINGS

    config, spec = run.config, run.spec
    order = [n for n in (*spec.fields, *RUN_SETTINGS) if n != "env"]
    parts = []
    for source, title in (("preset", f"preset of {config.env}"),
                          ("file", f"from {file.path}" if file else "file"), ("flag", "flags")):
        names = [n for n in dict.fromkeys(order) if sources.get(n) == source]
        shown = {n: spec.method(config) if n == "algo" else getattr(config, n, None)
                 for n in names}
        values = [f"{n}={_shown(value, run, n)}" for n, value in shown.items()]
        if values:
            parts.append(f"{title}: {', '.join(values)}")
    return "settings: " + "; ".join(parts) if parts else ""


def _shown(value, run, name: str) -> str:
    if value is None and hasattr(run, name):  # a run setting, not the algorithm's
        value = getattr(run, name)
    if isinstance(value, float):
        return format(value, "g")
    if isinstance(value, Mapping):  # the sweep, as it is written: lr=0.5,1
        return " ".join(f"{k}=" + ",".join(format(v, "g") for v in vs) for k, vs in value.items())
    return str(value)


def open_session(request: TrainRequest):
    """The :class:`rollax.run.training.Session` of ``request``, everything checked, its folder
    held, nothing compiled: a new run built (:func:`rollax.cli.parse.build`) and its folder
    created, or the stopped run ``--resume`` names, read back and checked; with the trackers
    of ``--log``, checked against the run."""
    from rollax.run import training

    cmd = request.cmd
    if cmd.resume is None:
        run, algo = build(request)
        return training.begin(run, algo, cmd.out, cmd.log)
    return training.open_resume(cmd.resume, cmd.devices, request.length, cmd.log)


def announce(request: TrainRequest, session) -> None:
    """What a run prints before anything compiles: a new run's :func:`header`, or a resumed
    run's :func:`resume_header` and, on stderr (JSON mode too), the note about the checkpoint
    it continues from."""
    if request.cmd.resume is None:
        if not request.cmd.json:
            header(session.run, session.algo, session.folder, request.sources, request.file)
        return
    if session.start is not None and session.start.note is not None:
        print(f"rollax train: {session.start.note}", file=sys.stderr, flush=True)
    if not request.cmd.json:
        resume_header(session)


def run_train(request: TrainRequest) -> int:
    """``rollax train``'s runner: a run that outlives a reader of its stdout
    (:mod:`rollax.cli.pipe`)."""
    with outliving_reader("rollax train"):  # `rollax train | head` trains on
        return train(request)


def train(request: TrainRequest) -> int:
    """Train the run ``request`` names in three steps: its session opened, everything checked
    before anything is compiled or written (:func:`open_session`: a new run built and
    created, or a stopped one resumed); what it is, printed (:func:`announce`); then trained,
    with a progress bar, its figures drawn and the report printed. The exit status: 0, or
    :data:`DIVERGED_EXIT`. The run folder is held for this process from before anything is
    compiled or written to the end (the session's): a second ``train`` of one folder at once
    is refused."""
    prefetch("rollax.run.plots")  # matplotlib, read while the run compiles and trains
    cmd = request.cmd
    session = open_session(request)
    with session:  # the folder is held until the end
        folder, run = session.folder, session.run
        announce(request, session)
        with Progress(not cmd.json, run.spec.report.progress) as bar:
            summary, params = session.execute(bar)
        session.draw_figures()
        report(cmd.json, folder, run, summary, params)
    labels = [{k: lane[k] for k in ("seed", *run.sweep)} for lane in summary["lanes"]]
    warning = diverged_warning(summary, labels)
    if warning is None:
        return 0
    print(f"rollax train: warning: {warning}", file=sys.stderr, flush=True)
    return DIVERGED_EXIT


def prefetch(module: str) -> None:
    """Import ``module`` in a background thread: the compiled run releases Python's lock, so
    the import costs the command nothing; a later ``import`` waits for it to finish (Python's
    per-module import locks) and any error it raised is raised there again."""
    import importlib
    import threading

    def load():
        try:
            importlib.import_module(module)
        except BaseException:  # raised again by the later import
            pass

    threading.Thread(target=load, name=f"prefetch {module}", daemon=True).start()


DIVERGED_EXIT = 3
"""``rollax train``'s exit status when the run finished but diverged."""


READABLE_PARAMS = 256
"""A lane whose policy has at most this many parameters has them in the report (a table a
person can read, e.g. a tabular policy); larger ones are named by their ``params_sha256``."""


def lane_name(label: Mapping[str, Any]) -> str:
    """``{"seed": 0, "lr": 0.001}`` -> ``"seed=0, lr=0.001"``: how reports name a lane."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in label.items())


def readable_params(params, lanes: int) -> list[list[float]] | None:
    """Each lane's parameters flattened (leaves in tree order), or ``None`` when a lane has
    more than :data:`READABLE_PARAMS` of them."""
    import jax

    leaves = [np.asarray(leaf, np.float64).reshape(lanes, -1)
              for leaf in jax.tree_util.tree_leaves(params)]
    if sum(leaf.shape[1] for leaf in leaves) > READABLE_PARAMS:
        return None
    return np.concatenate(leaves, axis=1).tolist()


def lane_values(run, summary: dict) -> dict[str, list]:
    """Each per-lane number of summary.json (the score and the lane facts), as lists over
    lanes, the score last."""
    labels = {"seed", *run.sweep, "params_sha256", "env_steps", "diverged_at",
              run.spec.report.score}
    keys = [k for k in summary["lanes"][0] if k not in labels] + [run.spec.report.score]
    return {key: [lane[key] for lane in summary["lanes"]] for key in keys}


def report(as_json: bool, folder, run, summary: dict, params) -> None:
    """The closing report, the same for every algorithm: one JSON object, or the per-update
    table of the algorithm's ``shown`` metrics and the summary lines."""
    labels = [{k: lane[k] for k in ("seed", *run.sweep)} for lane in summary["lanes"]]
    values = lane_values(run, summary)
    flat = readable_params(params, len(labels))
    if as_json:
        score = values[run.spec.report.score]
        obj: dict = {**values, f"{run.spec.report.score}_mean": _finite_mean(score),
                     "env_steps": summary["env_steps_per_lane"],
                     "diverged": summary["diverged"], "diverged_at": summary["diverged_at"]}
        if flat is not None:
            obj["params"] = flat
        if len(labels) > 1 or run.sweep:
            obj["seeds"] = [label["seed"] for label in labels]
        if run.sweep:
            obj["lanes"] = labels
        obj["params_sha256"] = summary["params_sha256"]
        if summary["devices"] > 1:
            obj["devices"] = summary["devices"]
        obj["run_dir"] = str(folder.path)
        obj["compile_cache"] = summary["compile_cache"]
        emit(obj)
        return
    rows = folder.read_metrics()
    shown = (*run.spec.report.shown, *[n for n in SOMETIMES_SHOWN if rows and n in rows[-1]])
    tables = {name: metric_table(rows, labels, name) for name in shown}
    out = console()
    out.print(_table(tables, labels, summary["diverged_at"]))
    simulations = getattr(run.config, "eval_search_simulations", 0)
    if simulations:
        out.print(f"eval search: against Monte Carlo tree search of {simulations} simulations "
                  f"per move over random rollouts (docs/games.md)")
    for agg in summary["aggregate"]:
        line = _aggregate_line(summary["score"], agg)
        if line is not None:
            out.print(line)
    broken = [lane["diverged_at"] for lane in summary["lanes"]]
    for key, column in values.items():
        out.print(f"{metric_label(key)}: " + "; ".join(
            f"{lane_name(label)}: "
            + (_value(v, '.6g') if at is None or v is not None else f"diverged at update {at}")
            for label, v, at in zip(labels, column, broken)))
    if flat is not None and len(labels) == 1 and not run.sweep:
        out.print("params: [" + ", ".join(f"{v:.4g}" for v in flat[0]) + "]")
    _print_timings(out, folder, summary)


SOMETIMES_SHOWN = ("agent_return", "agent_return_min", "agent_return_max")
"""Metrics the per-update table shows after the algorithm's own when a run logs them: a team's
agents' returns (docs/metrics.md)."""


DIVERGED = "NaN"
"""The table's mark for a number that is not finite at or after the update where training
diverged (``—`` marks a number that does not exist, such as the return where no episode
ended)."""


def _finite_mean(values) -> float | None:
    """The mean of the finite ``values`` (a diverged lane's score is ``None``), or ``None``."""
    x = np.asarray([np.nan if v is None else v for v in values], np.float64)
    return float(x[np.isfinite(x)].mean()) if np.isfinite(x).any() else None


def _table(tables: dict[str, np.ndarray], labels, diverged_at: int | None = None):
    """The per-update table of the shown metrics (``tables``: each one's ``(lanes, updates +
    1)`` array, :func:`rollax.run.folder.metric_table`), every row up to 20 or so."""
    from rich.table import Table

    updates = next(iter(tables.values())).shape[1] - 1
    table = Table("update", *map(metric_label, tables),
                  title="mean over lanes" if len(labels) > 1 else None)
    every = max(1, updates // 20)
    with warnings.catch_warnings():  # NaN where no episode finished: shown as nan
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(1, updates + 1):
            if i % every and i != updates:
                continue
            table.add_row(str(i), *[_cell(column[:, i], diverged_at is not None
                                          and i >= diverged_at) for column in tables.values()])
    return table


def _cell(column: np.ndarray, diverged: bool) -> str:
    """A table cell: the mean over lanes of finite values; :data:`DIVERGED` where a value is
    not finite on an update of a diverged run."""
    if diverged and not np.isfinite(column).all():
        return DIVERGED
    finite = column[np.isfinite(column)]
    return _value(float(finite.mean()) if finite.size else float("nan"), ".4g")


def diverged_warning(summary: dict, labels) -> str | None:
    """The one warning line of a run that diverged (``None`` otherwise)."""
    if not summary["diverged"]:
        return None
    lanes = [f"{lane_name(label)} at update {lane['diverged_at']}"
             for label, lane in zip(labels, summary["lanes"]) if lane["diverged_at"] is not None]
    return (f"training diverged (a loss or the parameters stopped being finite): "
            f"{'; '.join(lanes)}; those lanes have no score (exit status 3)")


def aggregate_text(stats: dict, unit: str) -> str:
    """One score's :func:`rollax.run.stats.summarize` as printed by ``rollax train`` (per
    hyperparameter combination, over seeds) and ``rollax eval`` (over lanes): ``mean M, 95% CI
    [L, H] (percentile bootstrap), IQM Q over n <unit>s``; below 3 values the interval reads
    ``n/a (fewer than 3 <unit>s)`` (a bootstrap of one or two values means nothing, and one
    value's would be zero-width); ``no finite <unit> value`` when none is finite."""
    n = stats["n"]
    if stats["mean"] is None:
        return f"no finite {unit} value"
    interval = (f"95% CI n/a (fewer than 3 {unit}s)" if n < 3 else
                f"95% CI [{stats['ci95'][0]:.4f}, {stats['ci95'][1]:.4f}] (percentile "
                f"bootstrap)")
    return f"mean {stats['mean']:.4f}, {interval}, IQM {stats['iqm']:.4f} over {counted(n, unit)}"


def _aggregate_line(score: str, agg: dict) -> str | None:
    name = ", ".join(f"{k}={v:g}" for k, v in agg.items() if k != score)
    if agg[score]["mean"] is None:
        return None
    return f"{score}{' (' + name + ')' if name else ''}: {aggregate_text(agg[score], 'seed')}"


def _print_timings(out, folder, summary: dict) -> None:
    if summary["mesh"] is not None:
        mesh, devices = summary["mesh"], summary["devices"]
        if mesh["envs"] == 1:
            each = len(summary["lanes"]) // devices
            out.print(f"{devices} devices, {each} lane{'s' if each > 1 else ''} each")
        else:
            out.print(f"{devices} devices: lanes split {mesh['lanes']} ways, "
                      f"environment batch {mesh['envs']} ways")
    sps = summary["env_steps_per_second"]
    cache = summary.get("compile_cache") or "off"
    out.print(f"compile {summary['compile_time_s']:.1f} s (cache: {cache}), run "
              f"{summary['run_time_s']:.1f} s" + (f" ({sps:,.0f} env steps/s)" if sps else "")
              + f", final evaluation {summary['final_eval_time_s']:.1f} s, command "
              f"{_command_seconds():.1f} s; run folder: {folder.path}")
    if "video_time_s" in summary:
        count = len(summary.get("videos", []))
        out.print(f"videos: {count} drawn in {summary['video_time_s']:.1f} s (apart from the "
                  f"run's time and throughput)")


def _command_seconds() -> float:
    """Seconds since the process started (Linux: ``/proc``), Python's and rollax's imports,
    settings, compiling, training and figures included; elsewhere since the command line's
    module was imported (:data:`STARTED`)."""
    try:  # starttime, field 22 of /proc/self/stat, in clock ticks after boot
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.perf_counter() - STARTED

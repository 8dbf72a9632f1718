"""``rollax train``: settings to a run, a progress bar while it trains, figures and a report."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollax.run.files import finite_or_none


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


def _value(x: float, fmt: str = ".3f") -> str:
    return "—" if not np.isfinite(x) else format(x, fmt)


class Progress:
    """What a person sees while a run trains: on a terminal, a progress bar on stderr; piped
    or in a batch job, one flushed line per compiled chunk on stdout. Silent in JSON mode."""

    def __init__(self, enabled: bool, progress_name: str):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        self.name, self.out = progress_name, console()
        err = console(stderr=True)
        self.bar = Bar(
            TextColumn("[bold]updates"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[steps]} env steps"),
            TextColumn("{task.fields[sps]} steps/s"), TextColumn("{task.fields[ret]}"),
            TimeRemainingColumn(), console=err, disable=not enabled or not err.is_terminal,
            transient=False)
        self.lines = enabled and not err.is_terminal
        self.task = None

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def __call__(self, event) -> None:
        progress = f"{self.name} {_value(event.progress)}"
        if self.lines:
            self.out.print(f"update {event.done}/{event.total}  {event.env_steps:,} env steps  "
                           f"{event.env_steps_per_second:,.0f} steps/s  {progress}")
            self.out.file.flush()
        fields: dict[str, Any] = dict(completed=event.done, steps=f"{event.env_steps:,}",
                                      sps=f"{event.env_steps_per_second:,.0f}", ret=progress)
        if self.task is None:
            self.task = self.bar.add_task("train", total=event.total, **fields)
        else:
            self.bar.update(self.task, **fields)


def header(run, algo, folder, sources: dict[str, str], file=None) -> None:
    """The run's settings and folder, printed (and flushed) before anything compiles: the
    headline, the budget, and which settings came from the preset, the file and the flags."""
    out = console()
    out.print(run.spec.describe(run.algorithm, len(run.lanes())))
    out.print(f"{algo.num_updates} updates x {algo.env_steps_per_update:,} env steps = "
              f"{algo.num_updates * algo.env_steps_per_update:,} env steps per lane; "
              f"run folder: {folder.path}")
    line = settings_line(run, sources, file)
    if line:
        out.print(line)
    out.file.flush()


def settings_line(run, sources: dict[str, str], file=None) -> str:
    """``settings: preset of Acrobot-v1: num_envs=8, ...; from FILE: lr=0.0003; flags: ...``
    (the resolved values), or, for an algorithm with presets but none for this environment,
    that its defaults apply."""
    from rollax.run.config import RUN_SETTINGS

    config, spec = run.algorithm, run.spec
    order = [n for n in (*spec.fields, *RUN_SETTINGS) if n != "env"]
    parts = []
    for source, title in (("preset", f"preset of {config.env}"),
                          ("file", f"from {file.path}" if file else "file"), ("flag", "flags")):
        names = [n for n in dict.fromkeys(order) if sources.get(n) == source]
        values = [f"{n}={_shown(getattr(config, n, None), run, n)}" for n in names]
        if values:
            parts.append(f"{title}: {', '.join(values)}")
    if spec.presets and config.env not in spec.presets:
        parts.insert(0, f"no preset for {config.env}: {type(config).__name__}'s defaults")
    return "settings: " + "; ".join(parts) if parts else ""


def _shown(value, run, name: str) -> str:
    if value is None and hasattr(run, name):  # a run setting, not the algorithm's
        value = getattr(run, name)
    if isinstance(value, float):
        return format(value, "g")
    if isinstance(value, Mapping):  # the sweep, as it is written: lr=0.5,1
        return " ".join(f"{k}=" + ",".join(format(v, "g") for v in vs) for k, vs in value.items())
    return str(value)


def run_train(request) -> None:
    from rollax.run import training
    from rollax.run.config import assemble
    from rollax.run.loggers import check_loggers, combine, make_loggers, resume_loggers
    from rollax.run.plots import plot_runs


    cmd, file = request.cmd, request.file
    names = check_loggers(cmd.log)  # before anything is compiled or written
    if cmd.resume is not None:
        folder = training.RunFolder(cmd.resume)
        folder.check_exists("resume: ")
        name = training.read_run(folder).spec.progress
        with Progress(not cmd.json, name) as bar, resume_loggers(names, cmd.resume) as logs:
            folder, run, (summary, params) = training.resume_run(cmd.resume, cmd.devices,
                                                                 combine(bar, logs))
    else:
        try:
            run, algo = assemble(request.config, request.env, request.settings, request.given)
        except ValueError as error:  # a bad value from a config file names the file
            raise error if file is None else file.name_in(error) from None
        folder = training.create_run(run, cmd.out)
        if not cmd.json:
            header(run, algo, folder, request.sources, file)
        with Progress(not cmd.json, run.spec.progress) as bar, \
                make_loggers(names, folder, run) as logs:
            summary, params = training.execute(run, algo, folder, on_chunk=combine(bar, logs))
    try:
        plot_runs([folder.path], folder.figures)
    except OSError as err:  # the run itself is complete: only its figures are missing
        err.hint = (f"the run finished (summary.json); draw its figures with "  # type: ignore[attr-defined]
                    f"`rollax plot {folder.path}`")
        raise
    report(cmd.json, folder, run, summary, params)


def report(as_json: bool, folder, run, summary: dict, params) -> None:
    """The closing report: one JSON object, or the per-update table and summary lines."""
    spec = run.spec
    labels = [{k: lane[k] for k in ("seed", *run.sweep)} for lane in summary["lanes"]]
    rows = folder.read_metrics()
    from rollax.run.folder import metric_table

    history = metric_table(rows, labels, spec.progress)
    single = len(labels) == 1 and not run.sweep
    if as_json:
        obj: dict = spec.report(summary, history, params, single)
        if not single:
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
    _print_report(folder, run, summary, params, rows, labels, history, single)


def _table(spec, rows, labels, updates: int):
    from rich.table import Table

    from rollax.run.folder import metric_table

    tables = {c.metric: metric_table(rows, labels, c.metric) for c in spec.columns}
    table = Table("update", *[c.title for c in spec.columns],
                  title="mean over lanes" if len(labels) > 1 else None)
    every = max(1, updates // 20)
    with warnings.catch_warnings():  # NaN where no episode finished: shown as nan
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(1, updates + 1):
            if i % every and i != updates:
                continue
            table.add_row(str(i), *[_value(float(np.nanmean(tables[c.metric][:, i])), c.format)
                                    for c in spec.columns])
    return table


def _aggregate_line(score: str, agg: dict) -> str | None:
    name = ", ".join(f"{k}={v:g}" for k, v in agg.items() if k != score)
    stats = agg[score]
    if stats["mean"] is None:
        return None
    n = stats["n"]
    interval = ("95% CI n/a (fewer than 3 seeds)" if n < 3 else
                f"95% CI [{stats['ci95'][0]:.4f}, {stats['ci95'][1]:.4f}] (percentile "
                f"bootstrap)")
    return (f"{score}{' (' + name + ')' if name else ''}: mean {stats['mean']:.4f}, {interval}, "
            f"IQM {stats['iqm']:.4f} over {n} seed" + ("s" if n != 1 else ""))


def _print_report(folder, run, summary, params, rows, labels, history, single) -> None:
    spec, out = run.spec, console()
    out.print(_table(spec, rows, labels, history.shape[1] - 1))
    for agg in summary["aggregate"]:
        line = _aggregate_line(summary["score"], agg)
        if line is not None:
            out.print(line)
    for line in spec.lines(summary, history, params, labels):
        out.print(line)
    if summary["mesh"] is not None:
        mesh = summary["mesh"]
        out.print(f"{summary['devices']} devices: lanes split {mesh['lanes']} ways, "
                  f"environment batch {mesh['envs']} ways")
    sps = summary["env_steps_per_second"]
    cache = summary.get("compile_cache") or "off"
    out.print(f"compile {summary['compile_time_s']:.1f} s (cache: {cache}), run "
              f"{summary['run_time_s']:.1f} s" + (f" ({sps:,.0f} env steps/s)" if sps else "")
              + f", final evaluation {summary['final_eval_time_s']:.1f} s, wall "
              f"{summary['wall_time_s']:.1f} s; run folder: {folder.path}")

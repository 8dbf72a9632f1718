"""``rollax train``: settings to a run, a progress bar while it trains, figures and a report."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import numpy as np

from rollax.files import finite_or_none


def emit(obj: Any) -> None:
    """Print ``obj`` as one JSON line (NaN and infinities as null)."""
    sys.stdout.write(json.dumps(finite_or_none(obj), allow_nan=False) + "\n")
    sys.stdout.flush()


class ProgressBar:
    """A rich progress bar on stderr, fed by the training listener (shown on terminals only)."""

    def __init__(self, enabled: bool):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]updates"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[steps]} env steps"),
            TextColumn("{task.fields[sps]} steps/s"), TextColumn("return {task.fields[ret]}"),
            TimeRemainingColumn(), console=console,
            disable=not enabled or not console.is_terminal, transient=False)
        self.task = None

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def __call__(self, event) -> None:
        fields: dict[str, Any] = dict(
            completed=event.done, steps=f"{event.env_steps:,}",
            sps=f"{event.env_steps_per_second:,.0f}",
            ret="—" if not np.isfinite(event.progress) else f"{event.progress:.3f}")
        if self.task is None:
            self.task = self.progress.add_task("train", total=event.total, **fields)
        else:
            self.progress.update(self.task, **fields)


def run_train(cmd, settings: dict | None) -> None:
    from rollax import training
    from rollax.loggers import check_loggers, combine, make_loggers, resume_loggers
    from rollax.plots import plot_runs
    from rollax.run_config import from_settings
    from rollax.runs import RunFolder, check_new_run_dir

    names = check_loggers(cmd.log)  # before anything is compiled or written
    with ProgressBar(not cmd.json) as bar:
        if settings is None:
            with resume_loggers(names, cmd.resume) as logs:
                folder, run, (summary, params) = training.resume_run(
                    cmd.resume, cmd.devices, combine(bar, logs))
        else:
            run, algo = from_settings(settings)
            path = check_new_run_dir(settings.get("out"), training.run_name(run))
            with make_loggers(names, RunFolder(path), run) as logs:
                folder, (summary, params) = training.new_run(run, algo, str(path),
                                                             combine(bar, logs))
    plot_runs([folder.path], folder.figures)
    report(cmd.json, folder, run, summary, params)


def report(as_json: bool, folder, run, summary: dict, params) -> None:
    """The closing report: one JSON object, or the per-update table and summary lines."""
    spec = run.spec
    labels = [{k: lane[k] for k in ("seed", *run.sweep)} for lane in summary["lanes"]]
    rows = folder.read_metrics()
    from rollax.runs import metric_table

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
        emit(obj)
        return
    _print_report(folder, run, summary, params, rows, labels, history, single)


def _table(spec, rows, labels, updates: int):
    from rich.table import Table

    from rollax.runs import metric_table

    tables = {c.metric: metric_table(rows, labels, c.metric) for c in spec.columns}
    table = Table("update", *[c.title for c in spec.columns],
                  title="mean over lanes" if len(labels) > 1 else None)
    every = max(1, updates // 20)
    with warnings.catch_warnings():  # NaN where no episode finished: shown as nan
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(1, updates + 1):
            if i % every and i != updates:
                continue
            table.add_row(str(i), *[format(float(np.nanmean(tables[c.metric][:, i])), c.format)
                                    for c in spec.columns])
    return table


def _print_report(folder, run, summary, params, rows, labels, history, single) -> None:
    from rich.console import Console

    spec = run.spec
    console = Console(highlight=False, markup=False)
    console.print(spec.describe(run.algorithm, len(labels)))
    console.print(_table(spec, rows, labels, history.shape[1] - 1))
    for agg in summary["aggregate"]:
        name = ", ".join(f"{k}={v:g}" for k, v in agg.items() if k != summary["score"])
        stats = agg[summary["score"]]
        if stats["mean"] is None:
            continue
        console.print(f"{summary['score']}{' (' + name + ')' if name else ''}: mean "
                      f"{stats['mean']:.4f}, 95% CI [{stats['ci95'][0]:.4f}, "
                      f"{stats['ci95'][1]:.4f}], IQM {stats['iqm']:.4f} over {stats['n']} seed"
                      + ("s" if stats["n"] != 1 else ""))
    for line in spec.lines(summary, history, params, single):
        console.print(line)
    if summary["mesh"] is not None:
        mesh = summary["mesh"]
        console.print(f"{summary['devices']} devices: lanes split {mesh['lanes']} ways, "
                      f"environment batch {mesh['envs']} ways")
    sps = summary["env_steps_per_second"]
    console.print(f"compile {summary['compile_time_s']:.1f} s, run {summary['run_time_s']:.1f} s"
                  + (f" ({sps:,.0f} env steps/s)" if sps else "") + f"; run folder: "
                  f"{folder.path}")

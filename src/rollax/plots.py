"""Figures (matplotlib, no pyplot state): the outer ring, imported by nothing mathematical."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from rollax.algos.registry import by_name
from rollax.runs import RunFolder, metric_table
from rollax.stats import curve_band


def plot_active(active_per_step: Sequence[int], batch_size: int, path: Path, title: str):
    """Active (live) environments before each transition; never rises when absorbing."""
    fig = Figure(figsize=(6, 4), dpi=120)
    _draw_active(fig, active_per_step, batch_size, title)
    fig.savefig(path)


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    for p in paths:
        fig.savefig(p)
    return paths


def plot_runs(run_dirs, out_dir: Path) -> list[Path]:
    import warnings

    with warnings.catch_warnings():  # updates where no episode finished are NaN: gaps
        warnings.simplefilter("ignore", RuntimeWarning)
        return _plot_runs(run_dirs, out_dir)


def _lane_labels(rows: list[dict], sweep: dict) -> list[dict]:
    """The lanes of metric rows, sorted by seed and swept values."""
    keys = ["seed", *sweep]
    unique = {json.dumps({k: r[k] for k in keys}, sort_keys=True) for r in rows}
    return sorted((json.loads(s) for s in unique), key=lambda label: [label[k] for k in keys])


def _draw_group(axes, table, rows, labels, idx, start, color, tag) -> bool:
    """One hyperparameter combination of a run: thin seed lines, the mean and its band, and
    the ratio spread and approx_kl when logged. Returns whether diagnostics were drawn."""
    ax, ax_ratio, ax_kl = axes
    x = np.arange(table.shape[1])[start:]
    for i in idx:
        ax.plot(x, table[i, start:], color=color, linewidth=0.6, alpha=0.35)
    mean, low, high = curve_band(table[idx, start:])
    ok = np.isfinite(mean)
    ax.plot(x[ok], mean[ok], color=color, linewidth=2,
            label=f"{tag}: mean of {len(idx)} seed{'s' * (len(idx) > 1)}")
    if len(idx) > 1:
        ax.fill_between(x[ok], low[ok], high[ok], color=color, alpha=0.2,
                        label="95% bootstrap interval of the mean")
    if rows[-1].get("ratio_min") is None:
        return False
    rmin, rmax, kl = (metric_table(rows, labels, name)[idx, 1:]
                      for name in ("ratio_min", "ratio_max", "approx_kl"))
    xu = np.arange(1, table.shape[1])
    with np.errstate(all="ignore"):
        ax_ratio.fill_between(xu, np.nanmean(rmin, 0), np.nanmean(rmax, 0), color=color,
                              alpha=0.3, label=tag)
        ax_kl.plot(xu, np.nanmean(kl, 0), color=color, label=tag)
    return True


def _draw_run(axes, run: Path, colors) -> tuple[str, bool]:
    """Every lane of one training run; returns the y label and whether diagnostics exist."""
    folder = RunFolder(run)
    config, rows = folder.read_config(), folder.read_metrics()
    spec = by_name(config["kind"])
    labels = _lane_labels(rows, config.get("sweep", {}))
    table = metric_table(rows, labels, spec.progress)
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        name = ", ".join(f"{k}={v:g}" for k, v in label.items() if k != "seed")
        groups.setdefault(name, []).append(i)
    has_diag = False
    for name, idx in groups.items():
        tag = run.name + (f" ({name})" if name else "")
        start = 0 if spec.progress_from_start else 1
        has_diag |= _draw_group(axes, table, rows, labels, idx, start, next(colors), tag)
    return spec.progress_label, has_diag


def _training_figures(runs: list[Path], out_dir: Path) -> list[Path]:
    curve_fig = Figure(figsize=(7, 4.5), dpi=120)
    ax = curve_fig.add_subplot()
    diag_fig = Figure(figsize=(7, 6), dpi=120)
    ax_ratio, ax_kl = diag_fig.subplots(2, 1, sharex=True)
    colors = iter(f"C{i}" for i in range(100))
    ylabel, has_diag = "", False
    for run in runs:
        ylabel, drawn = _draw_run((ax, ax_ratio, ax_kl), run, colors)
        has_diag |= drawn
    ax.set(xlabel="update", ylabel=ylabel, title="training curves")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    curve_fig.tight_layout()
    written = _save(curve_fig, out_dir, "training_curve")
    if has_diag:
        ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
        ax_ratio.set(ylabel="ratio pi_new / pi_old\n(min to max over the batch)",
                     title="PPO ratio spread and approximate KL per update")
        ax_ratio.legend(fontsize=8)
        ax_ratio.grid(alpha=0.3)
        ax_kl.set(ylabel="approx_kl (k3, nats)", xlabel="update")
        ax_kl.grid(alpha=0.3)
        diag_fig.tight_layout()
        written += _save(diag_fig, out_dir, "ppo_diagnostics")
    return written


def _plot_runs(run_dirs, out_dir: Path) -> list[Path]:
    """Figures of one or more run folders (training runs or rollouts), PNG and SVG.

    - ``training_curve``: each run's progress metric per update (its algorithm's: the exact
      return for tabular runs, the mean return of finished episodes for neural ones) with one
      thin line per seed and, per run and hyperparameter combination, the mean across seeds
      with its 95 % bootstrap band (:func:`rollax.stats.curve_band`);
    - ``ppo_diagnostics``: the ratio spread (min to max, mean over seeds) and ``approx_kl``;
    - ``active_per_step``: active environments per transition, for rollout folders.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [Path(r) for r in run_dirs]
    rollouts = [run for run in runs if RunFolder(run).is_rollout]
    training = [run for run in runs if run not in rollouts]
    written = _training_figures(training, out_dir) if training else []
    for run in rollouts:
        data = RunFolder(run).read_rollout()
        fig = Figure(figsize=(6, 4), dpi=120)
        _draw_active(fig, data["active_per_step"], data["batch_size"],
                     f"{run.name}: active environments per transition")
        written += _save(fig, out_dir, f"active_per_step-{run.name}" if len(rollouts) > 1
                         else "active_per_step")
    return written


def _draw_active(fig, active_per_step, batch_size, title):
    ax = fig.add_subplot()
    steps = range(len(active_per_step))
    ax.step(steps, active_per_step, where="mid", marker="o", markersize=3)
    ax.set_ylim(0, batch_size * 1.05)
    ax.set_xlabel("time step t (transition index)")
    ax.set_ylabel(f"active environments (of {batch_size})")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()

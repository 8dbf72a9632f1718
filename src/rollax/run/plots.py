"""Figures (matplotlib, no pyplot state): the outer ring, imported by nothing mathematical."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from rollax.algos.registry import by_name
from rollax.run.config import from_json
from rollax.run.files import staged_files, writing
from rollax.run.folder import RunFolder, metric_label, metric_table
from rollax.run.stats import curve_band


def plot_active(active_per_step: Sequence[int], batch_size: int, path: Path, title: str):
    """Active (live) environments before each transition; never rises when absorbing. The
    figure ``path`` is written whole beside it and renamed into place (:func:`save_figures`)."""
    fig = Figure(figsize=(6, 4), dpi=120)
    _draw_active(fig, active_per_step, batch_size, title)
    save_figures({path: (fig, {})})


def figure_files(fig, out_dir: Path, name: str) -> dict[Path, tuple[Figure, dict]]:
    """``fig`` as ``out_dir/<name>.png`` and ``.svg``, to be written by :func:`save_figures`."""
    tight = {"bbox_inches": "tight"}  # the legend sits outside the axes
    return {out_dir / f"{name}.png": (fig, tight), out_dir / f"{name}.svg": (fig, tight)}


def save_figures(figures: dict[Path, tuple[Figure, dict]]) -> list[Path]:
    """Draw each figure into a hidden temporary file beside its path and rename them all into
    place once every one is complete and synced (:func:`rollax.run.files.staged_files`): a
    failure (a full disk) is an ``OSError`` naming the file, and leaves none of the new files
    and older ones as they were."""
    paths = list(figures)
    with staged_files(paths) as staged:
        for path, tmp in zip(paths, staged):
            fig, options = figures[path]
            with writing(path, tmp):
                fig.savefig(tmp, format=path.suffix[1:].lower(), **options)
    return paths


def plot_runs(run_dirs, out_dir: Path, x: str = "env_steps") -> list[Path]:
    """Figures of one or more run folders (training runs or rollouts), PNG and SVG, in
    ``out_dir``; ``x``: ``"env_steps"`` (environment steps per lane) or ``"updates"``."""
    import warnings

    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    with warnings.catch_warnings():  # updates where no episode finished are NaN: gaps
        warnings.simplefilter("ignore", RuntimeWarning)
        return _plot_runs(run_dirs, out_dir, x)


X_AXES = ("env_steps", "updates")
MIN_SEEDS_FOR_INTERVAL = 3
"""Below this many seeds a bootstrap interval says nothing: no band is drawn."""


def carry_forward(curve: np.ndarray) -> np.ndarray:
    """``curve`` with each missing (NaN) value replaced by the last value before it (leading
    NaNs stay): an update where no episode ended shows the last known return, not a gap."""
    curve = np.array(curve, dtype=np.float64)
    for i in range(1, curve.shape[-1]):
        missing = np.isnan(curve[..., i])
        curve[..., i] = np.where(missing, curve[..., i - 1], curve[..., i])
    return curve


def smooth(curve: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` points (fewer at the start), NaN-aware."""
    out = np.full(curve.shape, np.nan)
    for i in range(curve.shape[-1]):
        part = curve[..., max(0, i - window + 1): i + 1]
        if np.isfinite(part).any():
            out[..., i] = np.nanmean(part, axis=-1)
    return out


def _lane_labels(rows: list[dict], sweep: dict) -> list[dict]:
    """The lanes of metric rows in the order they are written, the run's lane order
    (:class:`rollax.run.experiment.Lanes`: each combination's seeds in turn), as everywhere."""
    keys = ["seed", *sweep]
    unique = dict.fromkeys(json.dumps({k: r[k] for k in keys}) for r in rows)
    return [json.loads(s) for s in unique]


class RunCurves:
    """One training run read for plotting: its lanes' progress metric per update."""

    def __init__(self, run: Path):
        folder = RunFolder(run)
        config, self.rows = folder.read_config(), folder.read_metrics()
        self.name, self.spec = run.name, by_name(config["kind"])
        self.env = config["config"]["env"]
        run_config = from_json(config)
        self.method = self.spec.method(run_config.config)
        self.labels = _lane_labels(self.rows, config.get("sweep", {}))
        table = metric_table(self.rows, self.labels, self.spec.report.progress)
        # from update 0 where the progress metric is known before training (row 0)
        self.start = 0 if np.isfinite(table[:, 0]).any() else 1
        self.table = carry_forward(table)
        self.greedy = metric_table(self.rows, self.labels, "greedy_return")  # --eval-every
        self.steps = live_steps(self.rows, self.labels, run_config)

    def groups(self) -> dict[str, list[int]]:
        """Lane indices per hyperparameter combination (named by its swept values)."""
        groups: dict[str, list[int]] = {}
        for i, label in enumerate(self.labels):
            name = ", ".join(f"{k}={v:g}" for k, v in label.items() if k != "seed")
            groups.setdefault(name, []).append(i)
        return groups

    def x(self, axis: str, idx: list[int] | None = None, start: int | None = None
          ) -> np.ndarray:
        """The x values from update ``start`` (default: the first drawn): updates, or the
        live environment steps of the lanes ``idx`` (default all), their mean where whole
        episodes make them differ."""
        start = self.start if start is None else start
        if axis != "env_steps":
            return np.arange(self.table.shape[1])[start:].astype(np.float64)
        return self.steps[slice(None) if idx is None else idx, start:].mean(axis=0)


def live_steps(rows: list[dict], labels: list[dict], run_config) -> np.ndarray:
    """``(lanes, updates + 1)`` live environment steps after each update (the metric
    ``env_steps``; 0 at update 0). A run folder written before rollax recorded it for every
    algorithm gets ``update x env_steps_per_update``."""
    steps = metric_table(rows, labels, "env_steps")
    steps[:, 0] = 0.0
    if np.isnan(steps).any():
        per_update = run_config.build().env_steps_per_update
        updates = np.arange(steps.shape[1], dtype=np.float64)
        steps = np.where(np.isnan(steps), updates * per_update, steps)
    return steps


def _draw_group(ax, curves: RunCurves, idx: list[int], x_axis: str, color, tag) -> None:
    """Thin seed lines (each in the legend, at its own steps), the raw mean (faint), its
    smoothed curve and the seeds' band (at the seeds' mean steps)."""
    table, x = curves.table[idx, curves.start:], curves.x(x_axis, idx)
    for i, row in zip(idx, table):
        ax.plot(curves.x(x_axis, [i]), row, color=color, linewidth=0.5, alpha=0.25,
                label=f"{tag}: seed {curves.labels[i]['seed']}")
    mean, low, high = curve_band(table)
    ok = np.isfinite(mean)
    ax.plot(x[ok], mean[ok], color=color, linewidth=1, alpha=0.45)
    smoothed = smooth(mean, max(1, len(mean) // 25))
    ax.plot(x[ok], smoothed[ok], color=color, linewidth=2,
            label=f"{tag}: mean of {len(idx)} seed{'s' * (len(idx) > 1)} (smoothed)")
    if len(idx) >= MIN_SEEDS_FOR_INTERVAL:
        ax.fill_between(x[ok], low[ok], high[ok], color=color, alpha=0.15,
                        label="95% bootstrap interval of the mean")
    greedy = np.nanmean(curves.greedy[idx, curves.start:], axis=0)
    at = np.isfinite(greedy)
    if at.any():
        ax.plot(x[at], greedy[at], color=color, linestyle="--", marker="o", markersize=3,
                label=f"{tag}: greedy evaluation (--eval-every), mean of seeds")


def _draw_diagnostics(axes, curves: RunCurves, idx, x_axis: str, color, tag) -> bool:
    """The ratio spread and approx_kl of one combination, when the run logs them."""
    if curves.rows[-1].get("ratio_min") is None:
        return False
    ax_ratio, ax_kl = axes
    rmin, rmax, kl = (metric_table(curves.rows, curves.labels, name)[idx, 1:]
                      for name in ("ratio_min", "ratio_max", "approx_kl"))
    xu = curves.x(x_axis, idx, start=1)
    with np.errstate(all="ignore"):
        ax_ratio.fill_between(xu, np.nanmean(rmin, 0), np.nanmean(rmax, 0), color=color,
                              alpha=0.3, label=tag)
        ax_kl.plot(xu, np.nanmean(kl, 0), color=color, label=tag)
    return True


def _finish(fig, axes, xlabel: str) -> None:
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=7, frameon=False)
    axes[-1].set_xlabel(xlabel)
    fig.tight_layout()


def _training_figures(runs: list[Path], out_dir: Path, x_axis: str
                      ) -> dict[Path, tuple[Figure, dict]]:
    curves = [RunCurves(run) for run in runs]
    metrics = list(dict.fromkeys(c.spec.report.progress for c in curves))  # one axis per metric
    curve_fig = Figure(figsize=(9, 3.6 * len(metrics)), dpi=120)
    axes = curve_fig.subplots(len(metrics), 1, squeeze=False)[:, 0]
    diag_fig = Figure(figsize=(9, 6), dpi=120)
    ax_ratio, ax_kl = diag_fig.subplots(2, 1, sharex=True)
    colors = iter(f"C{i % 10}" for i in range(1000))
    has_diag = False
    for c in curves:
        ax = axes[metrics.index(c.spec.report.progress)]
        ax.set(ylabel=metric_label(c.spec.report.progress))
        for name, idx in c.groups().items():
            color, tag = next(colors), c.name + (f" ({name})" if name else "")
            _draw_group(ax, c, idx, x_axis, color, tag)
            has_diag |= _draw_diagnostics((ax_ratio, ax_kl), c, idx, x_axis, color, tag)
    titles = sorted({f"{c.env}, {c.method}" for c in curves})
    axes[0].set_title("training curves: " + "; ".join(titles))
    xlabel = "environment steps per lane" if x_axis == "env_steps" else "update"
    _finish(curve_fig, axes, xlabel)
    figures = figure_files(curve_fig, out_dir, "training_curve")
    if has_diag:
        ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
        ax_ratio.set(ylabel="ratio pi_new / pi_old\n(min to max over the batch)",
                     title="PPO ratio spread and approximate KL per update")
        ax_kl.set(ylabel="approx_kl (k3, nats)")
        _finish(diag_fig, [ax_ratio, ax_kl], xlabel)
        figures |= figure_files(diag_fig, out_dir, "ppo_diagnostics")
    return figures | _exploitability_figure(curves, out_dir, x_axis, xlabel)


def _exploitability_figure(curves: list[RunCurves], out_dir: Path, x_axis: str, xlabel: str
                           ) -> dict[Path, tuple[Figure, dict]]:
    """``exploitability``: the exact exploitability of each lane's policy at every evaluation
    (update 0, each ``--eval-every``, the end) of the runs that log it (Kuhn poker, Leduc
    hold'em), one thin line per seed and the seeds' mean; nothing for the other runs."""
    fig = Figure(figsize=(9, 3.6), dpi=120)
    ax = fig.subplots()
    colors = iter(f"C{i % 10}" for i in range(1000))
    drawn = False
    for c in curves:
        table = metric_table(c.rows, c.labels, "exploitability")
        for name, idx in c.groups().items():
            color, tag = next(colors), c.name + (f" ({name})" if name else "")
            at = np.isfinite(table[idx]).any(axis=0)
            if not at.any():
                continue
            drawn = True
            for i in idx:
                ax.plot(c.x(x_axis, [i], start=0)[at], table[i, at], color=color,
                        linewidth=0.5, alpha=0.35, marker=".", markersize=3,
                        label=f"{tag}: seed {c.labels[i]['seed']}")
            ax.plot(c.x(x_axis, idx, start=0)[at], np.nanmean(table[idx][:, at], axis=0),
                    color=color, linewidth=2, marker="o", markersize=3,
                    label=f"{tag}: mean of {len(idx)} seed{'s' * (len(idx) > 1)}")
    if not drawn:
        return {}
    ax.set(ylabel="exploitability (NashConv / 2)", ylim=(0, None),
           title="exact exploitability of the policy (its probabilities) against best responses")
    _finish(fig, [ax], xlabel)
    return figure_files(fig, out_dir, "exploitability")


def _plot_runs(run_dirs, out_dir: Path, x_axis: str) -> list[Path]:
    """Figures of one or more run folders (training runs or rollouts), PNG and SVG.

    - ``training_curve``: each run's progress metric (its algorithm's: the exact return for
      tabular runs, the mean return of finished episodes for neural ones; one axis per metric,
      never two metrics on one axis) against environment steps or updates: one thin line per
      seed, the mean across seeds faint and smoothed (trailing moving average over 1/25 of the
      points), with its 95 % bootstrap band from 3 seeds on (:func:`rollax.run.stats.curve_band`);
      an update where
      no episode ended carries the last value (:func:`carry_forward`);
    - ``ppo_diagnostics``: the ratio spread (min to max, mean over seeds) and ``approx_kl``;
    - ``exploitability``: runs on Kuhn poker or Leduc hold'em, the exact exploitability of each
      lane's policy at every evaluation (:func:`_exploitability_figure`);
    - ``active_per_step``: active environments per transition, for rollout folders.
    """
    runs = [Path(r) for r in run_dirs]
    rollouts = [run for run in runs if RunFolder(run).is_rollout]
    training = [run for run in runs if run not in rollouts]
    figures = _training_figures(training, out_dir, x_axis) if training else {}
    for run in rollouts:
        data = RunFolder(run).read_rollout()
        fig = Figure(figsize=(6, 4), dpi=120)
        _draw_active(fig, data["active_per_step"], data["batch_size"],
                     f"{run.name}: active environments per transition")
        figures |= figure_files(fig, out_dir, f"active_per_step-{run.name}" if len(rollouts) > 1
                            else "active_per_step")
    made = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        return save_figures(figures)
    except BaseException:
        if made and not any(out_dir.iterdir()):  # a failed plot leaves no empty folder
            out_dir.rmdir()
        raise


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


def plot_gradient_mse(rows: Sequence[dict], zero_mse: float, path: Path, title: str) -> None:
    """``rollax gradients``' figure: each estimator's MSE against episodes per batch N,
    log-log, one line per estimator (solid: unbiased, dashed: biased); the dotted line is
    ``||grad J||^2``, the MSE of always answering zero. An unbiased estimator falls as 1/N."""
    import matplotlib as mpl
    from matplotlib.ticker import NullLocator

    lines: dict[str, list[tuple[int, float]]] = {}
    unbiased: dict[str, bool] = {}
    for row in rows:
        lines.setdefault(row["estimator"], []).append((row["episodes"], row["mse"]))
        unbiased[row["estimator"]] = bool(row["unbiased"])
    fig = Figure(figsize=(7.5, 4.5), dpi=120)
    ax = fig.add_subplot()
    colors = mpl.colormaps["tab10"]
    for i, (name, points) in enumerate(lines.items()):
        n, mse = zip(*sorted(points))
        ax.plot(n, mse, marker="o", markersize=4, color=colors(i % 10),
                linestyle="-" if unbiased[name] else "--", label=name)
    ax.axhline(zero_mse, color="grey", linestyle=":", linewidth=1, label="||grad J||^2")
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({row["episodes"] for row in rows})
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("episodes per batch N")
    ax.set_ylabel("MSE  mean_k ||g_k - grad J||^2")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    save_figures({path: (fig, {"bbox_inches": "tight"})})

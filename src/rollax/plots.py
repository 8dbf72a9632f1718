"""Figures (matplotlib, no pyplot state): the outer ring, imported by nothing mathematical."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure


def plot_exact_return(
    history: Sequence[float], path: Path, title: str, optimum: float | None = None
):
    """Exact expected return after each update (update 0 = initial parameters); ``history``
    is ``(updates + 1,)`` or ``(seeds, updates + 1)`` (one line per seed)."""
    import numpy as np

    fig = Figure(figsize=(6, 4), dpi=120)
    ax = fig.add_subplot()
    history = np.atleast_2d(np.asarray(history, dtype=np.float64))  # (seeds, updates + 1)
    for k, curve in enumerate(history):
        ax.plot(range(curve.shape[0]), curve, marker="o" if len(history) == 1 else None,
                markersize=3, linewidth=1.5 if len(history) == 1 else 0.8,
                label="exact return" if k == 0 else None)
    if optimum is not None:
        ax.axhline(optimum, color="grey", linestyle="--", linewidth=1, label="optimal return")
    ax.set_xlabel("update")
    ax.set_ylabel("exact expected return per episode")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)


def plot_active(active_per_step: Sequence[int], batch_size: int, path: Path, title: str):
    """Active (live) environments before each transition; never rises when absorbing."""
    fig = Figure(figsize=(6, 4), dpi=120)
    ax = fig.add_subplot()
    steps = range(len(active_per_step))
    ax.step(steps, active_per_step, where="mid", marker="o", markersize=3)
    ax.set_ylim(0, batch_size * 1.05)
    ax.set_xlabel("time step t (transition index)")
    ax.set_ylabel(f"active environments (of {batch_size})")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def plot_training_curves(env_steps, returns, path: Path, title: str):
    """Mean episode return per update: one thin line per seed, the mean across seeds bold.

    ``returns`` has shape ``(seeds, updates)``; NaN marks updates with no finished episode.
    """
    import numpy as np

    fig = Figure(figsize=(6, 4), dpi=120)
    ax = fig.add_subplot()
    returns = np.asarray(returns, dtype=np.float64)
    for k, curve in enumerate(returns):
        ok = np.isfinite(curve)
        ax.plot(np.asarray(env_steps)[ok], curve[ok], linewidth=0.8, alpha=0.5,
                label="seeds" if k == 0 else None)
    if len(returns) > 1:
        with np.errstate(all="ignore"):
            mean = np.nanmean(returns, axis=0)
        ok = np.isfinite(mean)
        ax.plot(np.asarray(env_steps)[ok], mean[ok], color="black", linewidth=1.8,
                label="mean over seeds")
    ax.set_xlabel("environment steps (per seed)")
    ax.set_ylabel("episode return (finished episodes)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)

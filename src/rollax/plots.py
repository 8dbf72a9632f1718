"""Figures (matplotlib, no pyplot state): the outer ring, imported by nothing mathematical."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure


def plot_exact_return(
    history: Sequence[float], path: Path, title: str, optimum: float | None = None
):
    """Exact expected return after each update (update 0 = initial parameters)."""
    fig = Figure(figsize=(6, 4), dpi=120)
    ax = fig.add_subplot()
    ax.plot(range(len(history)), history, marker="o", markersize=3, label="exact return")
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

"""Population-based training in one program (``rollax tune --pbt``).

The population is the lanes of one run (a paired sweep of their starting settings). Every
``every`` updates, at a chunk boundary, each lane is scored by the mean over that interval of
the algorithm's progress metric (PPO's and A2C's ``episode_return``; an interval in which a lane
ended no episode scores lowest); the ``fraction`` of lanes that scored lowest each copy the state
of a lane drawn from the same fraction that scored highest (**exploit**: parameters, optimiser,
observation statistics, environments, running returns), keeping their own key stream (a lane's
key is never shared, so the copy goes on with random numbers of its own), and take that lane's
settings perturbed (**explore**: a log-scale range's value times 0.8 or 1.2, a linear range's
moved by a tenth of its width, each kept inside its range; a list's choice moved to a
neighbour). The others go on unchanged. The draws are NumPy's
``default_rng(seed)``, so a population is reproducible from its seed.

What happened is kept in ``pbt.jsonl``, a line per (interval, lane): the update it ended at,
the lane, its score, the lane it copied (itself when it went on) and its settings from then
on. Lanes' settings change during training, so a run folder's ``config.json`` holds where they
started; the settings of the end are the last lines of ``pbt.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

FACTORS = (0.8, 1.2)
"""The factors a log-scale range's value is perturbed by (Jaderberg et al., 2017)."""
STEP = 0.1
"""A linear range's value moves by this share of the range's width, down or up."""


@dataclasses.dataclass(frozen=True)
class Population:
    """What a population-based search does at each interval."""

    space: Mapping[str, Any]
    """The settings it explores: ``{low, high, log}`` ranges or lists of choices."""
    every: int
    """Updates between exploit steps (the run's chunk size)."""
    metric: str
    """The per-update metric a lane is scored by (its mean over the interval)."""
    fraction: float = 0.25
    """The share of lanes replaced at each step (at least one)."""
    seed: int = 0


def starting_values(space: Mapping[str, Any], lanes: int, seed: int) -> list[dict[str, float]]:
    """``lanes`` starting settings drawn from ``space``: uniform over a range (over its
    logarithm when ``log``), uniform over a list's choices."""
    rng = np.random.default_rng([seed, 0])
    values = []
    for _ in range(lanes):
        row = {}
        for name, entry in space.items():
            if isinstance(entry, list):
                row[name] = float(entry[rng.integers(len(entry))])
            elif entry.get("log"):
                row[name] = float(np.exp(rng.uniform(np.log(entry["low"]),
                                                     np.log(entry["high"]))))
            else:
                row[name] = float(rng.uniform(entry["low"], entry["high"]))
        values.append(row)
    return values


def perturbed(values: Mapping[str, float], space: Mapping[str, Any],
              rng: np.random.Generator) -> dict[str, float]:
    """``values`` explored: a log-scale range's value times 0.8 or 1.2, a linear range's moved by
    a tenth of its width down or up (``gamma`` in [0.97, 0.9999] by 0.003: a factor would
    throw it to an end), each clipped into its range; a list's choice moved one place up or
    down the list (kept inside it)."""
    out = {}
    for name, entry in space.items():
        value = values[name]
        if isinstance(entry, list):
            choices = sorted(float(c) for c in entry)
            i = choices.index(value) + (1 if rng.random() < 0.5 else -1)
            out[name] = choices[min(max(i, 0), len(choices) - 1)]
        else:
            up = int(rng.integers(2))
            moved = (value * FACTORS[up] if entry.get("log") else
                     value + (1 if up else -1) * STEP * (entry["high"] - entry["low"]))
            out[name] = float(np.clip(moved, entry["low"], entry["high"]))
    return out


def exploit_explore(scores: np.ndarray, values: list[dict[str, float]],
                    space: Mapping[str, Any], fraction: float, rng: np.random.Generator
                    ) -> tuple[np.ndarray, list[dict[str, float]]]:
    """``(source, new values)``: the lane each lane's state comes from (itself, or for the
    ``max(1, floor(fraction * lanes))`` lowest scores a lane drawn from as many highest) and the
    settings each goes on with. Ties keep the lower lane first; a NaN score is the lowest."""
    lanes = len(values)
    n = max(1, int(fraction * lanes))
    scores = np.where(np.isnan(scores), -np.inf, scores)
    order = np.argsort(scores, kind="stable")
    worst, best = order[:n], order[lanes - n:]
    source = np.arange(lanes)
    new = [dict(v) for v in values]
    for lane in worst:
        donor = int(best[rng.integers(n)])
        source[lane] = donor
        new[lane] = perturbed(values[donor], space, rng)
    return source, new


def interval_scores(metrics, metric: str) -> np.ndarray:
    """Each lane's mean of ``metric`` over the chunk's updates (metrics ``(lanes, n)``), NaN
    where it has none."""
    values = np.asarray(getattr(metrics, metric), np.float64)
    with np.errstate(all="ignore"):
        counts = np.sum(~np.isnan(values), axis=1)
        sums = np.nansum(values, axis=1)
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def copy_lanes(state, source: np.ndarray):
    """``state`` (leaves ``(lanes, ...)``) with lane ``i`` holding lane ``source[i]``'s values,
    except its ``key``, which stays its own."""
    index = jnp.asarray(source)
    copied = jax.tree_util.tree_map(lambda x: x[index], state)
    if hasattr(copied, "_replace") and "key" in getattr(copied, "_fields", ()):
        copied = copied._replace(key=state.key)
    return copied


def exploit_hook(population: Population, values: list[dict[str, float]], log: Path
                 ) -> Callable:
    """The ``between`` of :func:`rollax.run.training.execute`: given the runner, the function
    the run loop calls after each interval; it writes ``log`` (``pbt.jsonl``) as it goes and
    keeps the lanes' current settings in ``values`` (updated in place)."""
    rng = np.random.default_rng([population.seed, 1])

    def make(runner) -> Callable:
        def between(metrics, done: int, state):
            scores = interval_scores(metrics, population.metric)
            source, new = exploit_explore(scores, values, population.space,
                                          population.fraction, rng)
            with log.open("a") as f:
                for lane, (score, src, row) in enumerate(zip(scores, source, new)):
                    f.write(json.dumps({"update": done, "lane": lane,
                                        "score": None if np.isnan(score) else float(score),
                                        "from": int(src), **row}) + "\n")
            values[:] = new
            hp = runner.hp._replace(**{name: jnp.asarray([v[name] for v in new], jnp.float32)
                                       for name in population.space})
            runner.hp = runner.layout.place(hp)
            copied = copy_lanes(state, source)
            if runner.mesh is not None:  # laid out again as the chunks take it
                copied = runner.layout.place(copied, runner.state_shardings)
            return copied

        return between

    return make


def read_lineage(path: Path) -> list[dict]:
    """The lines of a ``pbt.jsonl``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def draw_lineage(lineage: list[dict], start: list[dict[str, float]], population: Population,
                 folder: Path) -> list[Path]:
    """``folder/pbt.png`` and ``.svg``: each lane's interval score by update (a cross where it
    copied another lane), and a panel per explored setting: each lane's value over the run,
    from its starting value. Nothing without a line of lineage."""
    from matplotlib.figure import Figure

    from rollax.run.plots import figure_files, save_figures

    if not lineage:
        return []
    lanes = len(start)
    names = list(population.space)
    cols = min(3, 1 + len(names))
    rows = -(-(1 + len(names)) // cols)
    fig = Figure(figsize=(4.5 * cols, 3.2 * rows), dpi=120)
    ax = fig.add_subplot(rows, cols, 1)
    for lane in range(lanes):
        mine = [r for r in lineage if r["lane"] == lane]
        ax.plot([r["update"] for r in mine], [r["score"] for r in mine], lw=1,
                color=f"C{lane % 10}")
        copied = [r for r in mine if r["from"] != lane]
        ax.plot([r["update"] for r in copied], [r["score"] for r in copied], "x",
                color=f"C{lane % 10}")
    ax.set_xlabel("update")
    ax.set_ylabel(f"{population.metric} (interval mean)")
    ax.set_title(f"{lanes} lanes; x: replaced by a copy")
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 2)
        for lane in range(lanes):
            mine = [r for r in lineage if r["lane"] == lane]
            ax.step([0] + [r["update"] for r in mine],
                     [start[lane][name]] + [r[name] for r in mine], where="post", lw=1,
                     color=f"C{lane % 10}")
        entry = population.space[name]
        if isinstance(entry, dict) and entry.get("log"):
            ax.set_yscale("log")
        ax.set_xlabel("update")
        ax.set_ylabel(name)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    return save_figures(figure_files(fig, folder, "pbt"))

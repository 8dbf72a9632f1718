"""MinAtar, rollax against rejax's own PPO: a markdown table and learning curves per game.

    python benchmarks/minatar_compare.py REJAX.json ROLLAX_MLP.json ROLLAX_CNN.json
        [--out minatar.png] [--md minatar.md]

The full comparison (issue 21 item 3: 2 games x 3 seeds x 1e6 env steps each; run one at a
time on a quiet machine, from the repository root)::

    .bench/rejax/bin/python benchmarks/minatar_rejax.py --json minatar_rejax.json
    python benchmarks/minatar_rollax.py --network mlp --json minatar_rollax_mlp.json
    python benchmarks/minatar_rollax.py --network cnn --json minatar_rollax_cnn.json
    python benchmarks/minatar_compare.py minatar_rejax.json minatar_rollax_mlp.json \
        minatar_rollax_cnn.json --out minatar.png --md minatar.md

Reads the JSON records of benchmarks/minatar_rejax.py and benchmarks/minatar_rollax.py and
prints one row per (game, library/network): env steps per seed, the final greedy return's mean
over seeds with a 95 % Student-t interval, the per-seed returns, compile seconds, the run's wall
and process CPU seconds (all its threads; on a busy machine CPU s < wall s x threads) and env
steps per wall second (all seeds, evaluations included), then the settings' differences the
records list. ``--out`` plots each game's greedy return against env steps, the mean over
seeds with the seeds' min-max band, all records on one figure (one panel per game).
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
from scipy import stats


def label(record: dict) -> str:
    return f"{record['lib']} {record['network']}"


def t_interval(values) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval over seeds (the mean twice for one seed)."""
    x = np.asarray(values, np.float64)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def table(records: list[dict]) -> str:
    lines = ["| game | library / network | version (gymnax) | env steps/seed | seeds | final "
             "greedy return, mean [95% t-CI] | per seed | compile s | run wall s | run CPU s | env "
             "steps/s (all seeds) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    games = list(dict.fromkeys(row["game"] for r in records for row in r["games"]))
    for game in games:
        for record in records:
            for row in record["games"]:
                if row["game"] != game:
                    continue
                mean, low, high = t_interval(row["final_returns"])
                seeds = ", ".join(f"{v:.1f}" for v in row["final_returns"])
                lines.append(
                    f"| {game} | {label(record)} | {record['version']} ({record['gymnax']}) | "
                    f"{row['env_steps']:,} | {row['seeds']} | {mean:.1f} [{low:.1f}, "
                    f"{high:.1f}] | {seeds} | {row['compile_s']:.1f} | {row['run_s']:.1f} | "
                    f"{row['run_cpu_s']:.1f} | "
                    f"{row['sps']:,.0f} |")
    return "\n".join(lines)


def notes(records: list[dict]) -> str:
    out = ["", "Machines and evaluation:"]
    for record in records:
        loads = ", ".join(f"{row['game']} {row['loadavg_end'][0]:.1f}"
                          for row in record["games"])
        out.append(f"- {label(record)}: {record['device']}; load average at the end: {loads}; "
                   f"{record['evaluation']}")
    out.append("- gymnax's MinAtar has no sticky actions and SpaceInvaders no randomness at "
               "all (Breakout only the ball's side at reset), so a greedy policy plays the same "
               "episode over and over: 32 greedy episodes are 1 distinct episode on "
               "SpaceInvaders and at most 2 on Breakout; the spread is across seeds")
    differences = [d for r in records for d in r.get("differences", [])]
    if differences:
        out += ["", "DIFFERENCES (settings the two libraries cannot share):"]
        out += [f"- {d}" for d in dict.fromkeys(differences)]
    return "\n".join(out)


def plot(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = list(dict.fromkeys(row["game"] for r in records for row in r["games"]))
    fig, axes = plt.subplots(1, len(games), figsize=(5.5 * len(games), 4), squeeze=False)
    for ax, game in zip(axes[0], games):
        for record in records:
            for row in record["games"]:
                if row["game"] != game:
                    continue
                steps = np.asarray(row["curve_steps"]) / 1e6
                curves = np.asarray(row["curves"], np.float64)
                line, = ax.plot(steps, curves.mean(0), marker="o", markersize=3,
                                label=f"{label(record)} ({row['seeds']} seeds)")
                ax.fill_between(steps, curves.min(0), curves.max(0), alpha=0.2,
                                color=line.get_color())
        ax.set(title=f"{game}-MinAtar", xlabel="env steps per seed (millions)",
               ylabel="greedy return (32 episodes)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("PPO, gymnax-blines settings: mean over seeds, band min-max")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="records of minatar_rejax.py/minatar_rollax.py")
    parser.add_argument("--out", default=None, help="learning-curve figure (PNG)")
    parser.add_argument("--md", default=None, help="also write the table and notes here")
    args = parser.parse_args()
    records = []
    for path in args.json:
        with open(path) as f:
            records.append(json.load(f))
    text = table(records) + "\n" + notes(records)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    if args.out:
        plot(records, args.out)


if __name__ == "__main__":
    main()

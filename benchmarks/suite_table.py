"""The markdown tables of QUALITY.md's structured-spaces section, from the rows that
``benchmarks/jumanji_a2c.py`` (Jumanji's own A2C) and ``benchmarks/suite_rollax.py`` (rollax,
and the uniform legal policy) appended:

    python benchmarks/suite_table.py [--jumanji benchmarks/results/jumanji_a2c.jsonl]
        [--rollax benchmarks/results/suite_rollax.jsonl]

One row per library, network and environment: the greedy return of each seed after training
(Jumanji: its greedy evaluator's mean over the evaluation episodes; rollax: ``rollax train``'s
greedy evaluation, the action mask applied), their mean with a 95 % Student-t interval, and the
wall seconds of all seeds (Jumanji: the training loops of its seeds one after another, without
start-up and evaluation; rollax: the whole command, every seed in one program, compilation and
evaluation included). The uniform legal policy is a row of its own (sampled, not greedy).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from minatar_compare import t_interval

RESULTS = Path(__file__).parent / "results"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _cell(values: list[float]) -> tuple[str, str]:
    mean, low, high = t_interval(np.asarray(values))
    seeds = ", ".join(_number(v) for v in values)
    if len(values) < 2:
        return _number(mean), seeds
    return f"{_number(mean)} [{_number(low)}, {_number(high)}]", seeds


def table(jumanji: list[dict], rollax: list[dict]) -> str:
    lines = []  # (environment, rank, markdown row): each environment's rows together
    groups: dict[tuple, list[dict]] = {}
    for row in jumanji:
        key = ("jumanji:" + row["env"], row.get("network", "jumanji"), row["env_steps"])
        groups.setdefault(key, []).append(row)
    for (env, network, steps), rows in groups.items():
        rows = sorted(rows, key=lambda r: r["seed"])
        mean, seeds = _cell([r["greedy_episode_return"] for r in rows])
        own = network == "jumanji"
        name = "Jumanji's own for the task" if own else "flat MLP 64-64 (rollax's default)"
        lines.append((env, 0 if own else 1,
                      f"| {env} | jumanji.training A2C | {name} | {steps:,} | {len(rows)} | "
                      f"{mean} | {seeds} | {sum(r['train_s'] for r in rows):,.0f} |"))
    for row in rollax:
        if row["peer"] == "uniform legal":
            mean, seeds = _cell(row["return"])
            lines.append((row["env"], 4, f"| {row['env']} | uniform legal policy (sampled) | "
                          f"none | - | {len(row['seeds'])} | {mean} | {seeds} | "
                          f"{row['wall_s']:,.0f} |"))
            continue
        mean, seeds = _cell(row["greedy_return"])
        settings = row["settings"]
        network = f"{settings.get('network', 'mlp')} {'-'.join(map(str, settings['hidden']))}"
        if settings.get("critic") == "centralised":  # a team's MAPPO (docs/contract.md §9)
            network += ", centralised critic"
        lines.append((row["env"], 2 if row["algo"] == "ppo" else 3,
                      f"| {row['env']} | rollax {row['algo']} | {network} | "
                      f"{row['env_steps']:,} | {len(row['seeds'])} | {mean} | {seeds} | "
                      f"{row['wall_s']:,.0f} |"))
    header = ["| environment | library | network | env steps/seed | seeds | return, mean "
              "[95% t-CI] | per seed | wall s (all seeds) |", "|---" * 8 + "|"]
    return "\n".join(header + [line for _, _, line in sorted(lines)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jumanji", type=Path, default=RESULTS / "jumanji_a2c.jsonl")
    parser.add_argument("--rollax", type=Path, default=RESULTS / "suite_rollax.jsonl")
    args = parser.parse_args()
    rows = _rows(args.rollax)
    print(table(_rows(args.jumanji), rows))
    machines = {r["machine"] for r in [*_rows(args.jumanji), *rows]}
    versions = {json.dumps(r["versions"], sort_keys=True) for r in [*_rows(args.jumanji), *rows]}
    print("\nMachines:", "; ".join(sorted(machines)))
    print("Versions:", "; ".join(sorted(versions)))


if __name__ == "__main__":
    main()

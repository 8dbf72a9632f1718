"""Seeds on every core: K seeds in one ``rollax train`` against K single-seed processes.

    python benchmarks/seeds_cores.py [--runs CartPole-v1 gymnax:Breakout-MinAtar:mlp ...]
        [--seeds 2 8] [--repeats 1] [--json OUT]

Each run is ``ENV`` or ``ENV:NETWORK`` (``--network`` of ``rollax train``) with its total steps
per seed (``--steps``, one number per run; default 500,000, CartPole's preset budget: 976
updates of 4 x 128 steps; a run of a few updates measures the chunks' fixed costs instead).
For every run and K, with a warm compile cache of its own (one untimed round first), in fresh
processes of this Python:

- ``rollax train --seeds K --devices C`` (C: this machine's cores, when it divides K): the
  lanes on every core, each lane its single-seed run;
- ``rollax train --seeds K``: the lanes ``vmap``-ed on one device (the default);
- K processes ``rollax train --seed s`` started together (the cores shared by the system).

``--repeats 0`` measures the first round itself: run times exclude compilation, and the K
processes compile the same program side by side, so they start training together.

Env steps per second of all K seeds: ``K x env_steps_per_lane / run_time_s`` from each
``summary.json`` (training only: start-up, compile-cache loads and the final evaluation
apart); for the processes, the sum of their rates. Prints a table with the ratios to the
processes (issue target: at least 0.9).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import append_row, device

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from _rollax_entry import main; sys.exit(main())"  # `rollax`


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


NETWORKS = ("mlp", "cnn", "nature", "gru", "lstm")


def train_args(run: str, steps: int) -> list[str]:
    """``rollax train`` arguments of ``ENV`` or ``ENV:NETWORK``."""
    env, _, network = run.rpartition(":")
    if network not in NETWORKS:
        env, network = run, ""
    return ["train", "--env", env, "--total-steps", str(steps), "--json",
            *(["--network", network] if network else [])]


def start(args: list[str], cache: Path, work: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ROLLAX_COMPILE_CACHE": str(cache)}
    return subprocess.Popen([sys.executable, "-c", ENTRY, *args], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen], what: str) -> None:
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"{what} failed:\n{err}")


def rate(folder: Path) -> float:
    """Env steps per second of every lane of a finished run, training only."""
    summary = json.loads((folder / "summary.json").read_text())
    return len(summary["lanes"]) * summary["env_steps_per_lane"] / summary["run_time_s"]


def measure(run: str, steps: int, k: int, repeats: int, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    cache, base, c = work / "cache", train_args(run, steps), cores()
    ways = {"devices": ["--seeds", str(k), "--devices", str(c)] if k % c == 0 else None,
            "vmap": ["--seeds", str(k)]}
    rates: dict[str, list[float]] = {"devices": [], "vmap": [], "processes": []}
    for i in range(repeats + 1):  # round 0 fills the compile cache (measured if alone)
        measured = bool(i) or not repeats
        for name, extra in ways.items():
            if extra is None:
                continue
            folder = work / f"{name}-{k}-{i}"
            finish([start([*base, *extra, "--out", str(folder)], cache, work)], name)
            if measured:
                rates[name].append(rate(folder))
        folders = [work / f"process-{k}-{i}-{s}" for s in range(k)]
        finish([start([*base, "--seed", str(s), "--out", str(f)], cache, work)
                for s, f in enumerate(folders)], "a single-seed process")
        if measured:
            rates["processes"].append(sum(rate(f) for f in folders))
    out = {name: statistics.median(v) if v else None for name, v in rates.items()}
    return {"run": run, "steps_per_seed": steps, "seeds": k, "cores": c, **out,
            "devices_over_processes": None if out["devices"] is None
            else out["devices"] / out["processes"],
            "vmap_over_processes": out["vmap"] / out["processes"]}


def table(rows: list[dict]) -> list[str]:
    lines = ["| run | seeds | --devices C, env steps/s | vmap on one device | K processes | "
             "devices / processes | vmap / processes |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        dev = "—" if r["devices"] is None else f"{r['devices']:,.0f}"
        ratio = "—" if r["devices_over_processes"] is None else f"{r['devices_over_processes']:.2f}"
        lines.append(f"| {r['run']} | {r['seeds']} | {dev} | {r['vmap']:,.0f} | "
                     f"{r['processes']:,.0f} | {ratio} | {r['vmap_over_processes']:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=["CartPole-v1", "gymnax:Breakout-MinAtar:mlp",
                                                       "gymnax:Breakout-MinAtar:cnn"])
    parser.add_argument("--steps", nargs="+", type=int, default=None)
    parser.add_argument("--seeds", nargs="+", type=int, default=[2, 8])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", default=None, help="append the rows to this JSONL file")
    args = parser.parse_args()
    steps = args.steps or [500_000] * len(args.runs)
    if len(steps) != len(args.runs):
        parser.error("--steps takes one number per run")
    rows = []
    with tempfile.TemporaryDirectory(prefix="seeds-cores-") as tmp:
        for run, n in zip(args.runs, steps, strict=True):
            for k in args.seeds:
                row = measure(run, n, k, args.repeats, Path(tmp) / f"{run.replace(':', '-')}")
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(f"machine: {device()}, {cores()} cores")
    print("\n".join(table(rows)))
    append_row({"bench": "seeds_cores", "device": device(), "rows": rows},
               None if args.json is None else Path(args.json))


if __name__ == "__main__":
    main()

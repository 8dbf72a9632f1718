"""PPO on MuJoCo beside CleanRL's own ``ppo_continuous_action.py``: the same settings, the same
environment steps, each seed's two runs side by side, one core each.

    python benchmarks/mujoco_cleanrl.py --cleanrl PATH/ppo_continuous_action.py \\
        --cleanrl-python PATH/bin/python [--tasks HalfCheetah-v4 Hopper-v4] [--seeds 0 1 2] \\
        [--steps 1000000] [--out benchmarks/results/mujoco_cleanrl.jsonl]

CleanRL's script is run as its repository has it (``git clone
https://github.com/vwxyzjn/cleanrl``), in a Python environment of its own pins (gymnasium
0.29.1, mujoco 2.3.3, torch on the CPU, one thread); rollax trains ``envpool:<task>`` with its
MuJoCo preset, which is CleanRL's settings (docs/environments.md). The environments differ in
implementation: CleanRL steps Gymnasium's MuJoCo (mujoco 2.3.3's Python bindings), rollax
EnvPool's C++ port of the same task. Compared per run: the mean return of the last 10 training
episodes (what CleanRL reports: the raw return of each finished episode), the wall time and
environment steps per second of the whole command. Rows are appended as each run finishes and
a run already in ``--out`` is not run again, so the benchmark resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import append_row, device

LAST = 10
"""Episodes at the end of training whose returns are averaged."""


def cleanrl_command(args, task: str, seed: int) -> list[str]:
    return ["taskset", "-c", "0", args.cleanrl_python, args.cleanrl, "--env-id", task,
            "--seed", str(seed), "--total-timesteps", str(args.steps), "--no-cuda"]


def rollax_command(args, task: str, seed: int, out: Path) -> list[str]:
    entry = "import sys; from _rollax_entry import main; sys.exit(main())"  # `rollax`
    return ["taskset", "-c", "1", sys.executable, "-c", entry, "train", "--json", "--env",
            f"envpool:{task}", "--seed", str(seed), "--total-steps", str(args.steps),
            "--eval-episodes", "10", "--out", str(out)]


def cleanrl_result(stdout: str) -> dict:
    returns = [float(r) for r in re.findall(r"episodic_return=\[?([-0-9.e+]+)", stdout)]
    return {"episodes": len(returns), "last_return": sum(returns[-LAST:]) / len(returns[-LAST:])}


def rollax_result(out: Path, stdout: str) -> dict:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("episodes")]
    total = count = 0.0
    for row in reversed(rows):  # the last updates' episodes, at least LAST of them
        total += row["episode_return"] * row["episodes"]
        count += row["episodes"]
        if count >= LAST:
            break
    summary = json.loads(stdout.strip().splitlines()[-1])
    return {"episodes": int(sum(r["episodes"] for r in rows)), "last_return": total / count,
            "greedy_return": summary["eval_return_mean"]}


def done_runs(path: Path | None) -> set:
    if path is None or not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["lib"], r["task"], r["seed"], r["env_steps"]) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleanrl", required=True, help="CleanRL's ppo_continuous_action.py")
    parser.add_argument("--cleanrl-python", required=True, help="the Python that runs it")
    parser.add_argument("--tasks", nargs="+", default=["HalfCheetah-v4"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out_path = None if args.out is None else Path(args.out)
    machine = f"{device()}; {os.cpu_count()} CPU(s), one core per run"
    done = done_runs(out_path)
    for task in args.tasks:
        for seed in args.seeds:
            todo = [lib for lib in ("cleanrl", "rollax")
                    if (lib, task, seed, args.steps) not in done]
            if not todo:
                continue
            with tempfile.TemporaryDirectory() as folder:
                run_folder = Path(folder) / "run"
                commands = {"cleanrl": cleanrl_command(args, task, seed),
                            "rollax": rollax_command(args, task, seed, run_folder)}
                env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
                logs = {lib: Path(folder) / f"{lib}.out" for lib in todo}
                start = time.perf_counter()
                running = {lib: subprocess.Popen(commands[lib], cwd=folder, env=env,
                                                 stdout=logs[lib].open("w"),
                                                 stderr=subprocess.DEVNULL) for lib in todo}
                while running:  # each run's wall ends when it does
                    time.sleep(1.0)
                    for lib, proc in list(running.items()):
                        if proc.poll() is None:
                            continue
                        wall = time.perf_counter() - start
                        del running[lib]
                        if proc.returncode != 0:
                            raise SystemExit(f"{lib} on {task} seed {seed} failed "
                                             f"({proc.returncode})")
                        stdout = logs[lib].read_text()
                        result = (cleanrl_result(stdout) if lib == "cleanrl"
                                  else rollax_result(run_folder, stdout))
                        row = {"lib": lib, "task": task, "seed": seed, "env_steps": args.steps,
                               "wall_s": wall, "env_steps_per_s": args.steps / wall, **result,
                               "machine": machine}
                        append_row(row, out_path)
    table(out_path, args)


def table(path: Path | None, args) -> None:
    if path is None:
        return
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print("| task | library | seeds | last-10-episode return (mean, per seed) | "
          "env steps/s |")
    print("|---|---|---|---|---|")
    for task in args.tasks:
        for lib in ("cleanrl", "rollax"):
            mine = [r for r in rows if r["task"] == task and r["lib"] == lib
                    and r["env_steps"] == args.steps]
            if mine:
                per_seed = ", ".join(f"{r['last_return']:.0f}" for r in mine)
                mean = sum(r["last_return"] for r in mine) / len(mine)
                rates = [r["env_steps_per_s"] for r in mine if r["env_steps_per_s"]]
                rate = f"{sum(rates) / len(rates):,.0f}" if rates else "-"
                print(f"| {task} | {lib} | {len(mine)} | {mean:.0f} ({per_seed}) | {rate} |")


if __name__ == "__main__":
    main()

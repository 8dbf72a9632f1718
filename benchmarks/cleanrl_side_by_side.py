"""PPO beside CleanRL's own scripts: the same settings, the same environment steps, each seed's
two runs side by side, one core each.

    python benchmarks/cleanrl_side_by_side.py --kind mujoco \\
        --cleanrl PATH/ppo_continuous_action.py --cleanrl-python PATH/bin/python \\
        [--tasks HalfCheetah-v4 Hopper-v4] [--seeds 0 1 2] [--steps 1000000] \\
        [--out benchmarks/results/mujoco_cleanrl.jsonl]
    python benchmarks/cleanrl_side_by_side.py --kind atari \\
        --cleanrl PATH/ppo_atari_envpool_xla_jax.py --cleanrl-python PATH/bin/python \\
        --tasks Breakout-v5 --seeds 0 1 --steps 250000 \\
        [--out benchmarks/results/atari_cleanrl.jsonl]

CleanRL's scripts are run as its repository has them (``git clone
https://github.com/vwxyzjn/cleanrl``), each in a Python environment of its own pins (the
versions are in each row); rollax trains ``envpool:<task>`` with its preset for the kind, which
is CleanRL's settings (``rollax.ppo.preset``; docs/environments.md).

- **mujoco** (``ppo_continuous_action.py``; torch on the CPU, one thread): CleanRL steps
  Gymnasium's MuJoCo (mujoco's Python bindings), rollax EnvPool's C++ port of the same task.
  Return: the mean raw return of the last 10 training episodes (what CleanRL reports); rollax's
  greedy evaluation (10 episodes) beside it.
- **atari** (``ppo_atari_envpool_xla_jax.py``; JAX and EnvPool, as rollax): both train on
  EnvPool's frames an episode per life with clipped rewards. CleanRL reports, at each update,
  the mean over its 8 environments of each one's last finished *game*'s unclipped return;
  its score here is the mean of the last 10 such reports. rollax's score is its trained
  policy's sampled (not greedy) return over 16 whole, unclipped games (``rollax eval
  --stochastic``, EnvPool seeded apart); its greedy evaluation (8 games) beside it.

Wall time and environment steps per second are the whole command's (compilation and
rollax's greedy evaluations included; rollax's sampled evaluation after training is not).
Rows are appended as each run finishes and a run already in ``--out`` is not run again, so the
benchmark resumes where it stopped.
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
"""Episodes (MuJoCo) or updates' reports (CleanRL's Atari) at the end of training whose
returns are averaged."""
GREEDY_EPISODES = {"mujoco": 10, "atari": 8}
"""rollax's greedy evaluation episodes (its initial and final evaluations)."""
SAMPLED_EPISODES = 16
"""Atari: rollax's sampled evaluation after training, whole games."""


def cleanrl_command(args, task: str, seed: int) -> list[str]:
    return ["taskset", "-c", "0", args.cleanrl_python, args.cleanrl, "--env-id", task,
            "--seed", str(seed), "--total-timesteps", str(args.steps), "--no-cuda"]


def rollax_command(args, task: str, seed: int, out: Path) -> list[str]:
    return ["taskset", "-c", "1", *rollax_entry(), "train", "--json", "--env",
            f"envpool:{task}", "--seed", str(seed), "--total-steps", str(args.steps),
            "--eval-episodes", str(GREEDY_EPISODES[args.kind]), "--out", str(out)]


def rollax_entry() -> list[str]:
    entry = "import sys; from _rollax_entry import main; sys.exit(main())"  # `rollax`
    return [sys.executable, "-c", entry]


def sampled_return(out: Path) -> float:
    """The trained policy's sampled return on ``SAMPLED_EPISODES`` whole games (Atari)."""
    done = subprocess.run(["taskset", "-c", "1", *rollax_entry(), "eval", str(out),
                           "--stochastic", "--episodes", str(SAMPLED_EPISODES), "--json"],
                          text=True, capture_output=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["aggregate"]["mean"]


PACKAGES = {"mujoco": ("torch", "gymnasium", "mujoco"),
            "atari": ("jax", "flax", "optax", "envpool", "gym")}
"""The packages whose versions each CleanRL row records."""


def versions(python: str, packages: tuple[str, ...]) -> dict:
    """``{package: version}`` as ``python`` imports them."""
    code = ("import importlib.metadata as m, json, sys; "
            "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))")
    return json.loads(subprocess.run([python, "-c", code, *packages], text=True,
                                     capture_output=True, check=True).stdout)


def cleanrl_result(stdout: str) -> dict:
    """CleanRL's returns as it prints them: one per episode (``episodic_return=``, MuJoCo) or
    one average per update (``avg_episodic_return=``, Atari); the mean of the last ``LAST``."""
    returns = [float(r) for r in re.findall(r"episodic_return=\[?([-0-9.e+]+)", stdout)]
    return {"episodes": len(returns), "last_return": sum(returns[-LAST:]) / len(returns[-LAST:])}


def rollax_result(out: Path, stdout: str, kind: str) -> dict:
    summary = json.loads(stdout.strip().splitlines()[-1])
    if kind == "atari":  # training's episodes are lives with clipped rewards: not the score
        return {"greedy_return": summary["eval_return_mean"],
                "last_return": sampled_return(out)}
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("episodes")]
    total = count = 0.0
    for row in reversed(rows):  # the last updates' episodes, at least LAST of them
        total += row["episode_return"] * row["episodes"]
        count += row["episodes"]
        if count >= LAST:
            break
    return {"episodes": int(sum(r["episodes"] for r in rows)), "last_return": total / count,
            "greedy_return": summary["eval_return_mean"]}


def done_runs(path: Path | None) -> set:
    if path is None or not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["lib"], r["task"], r["seed"], r["env_steps"]) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("mujoco", "atari"), default="mujoco")
    parser.add_argument("--cleanrl", required=True,
                        help="CleanRL's ppo_continuous_action.py or ppo_atari_envpool_xla_jax.py")
    parser.add_argument("--cleanrl-python", required=True, help="the Python that runs it")
    parser.add_argument("--tasks", nargs="+", default=["HalfCheetah-v4"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out_path = None if args.out is None else Path(args.out)
    machine = f"{device()}; {os.cpu_count()} CPU(s), one core per run"
    done = done_runs(out_path)
    peers = {"cleanrl": versions(args.cleanrl_python, PACKAGES[args.kind]),
             "rollax": {**versions(sys.executable, ("rollax", "jax", "envpool")),
                        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                                 text=True, capture_output=True,
                                                 cwd=Path(__file__).parent).stdout.strip()}}
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
                walls = {}
                while running:  # each run's wall ends when it does
                    time.sleep(1.0)
                    for lib, proc in list(running.items()):
                        if proc.poll() is None:
                            continue
                        walls[lib] = time.perf_counter() - start
                        del running[lib]
                        if proc.returncode != 0:
                            raise SystemExit(f"{lib} on {task} seed {seed} failed "
                                             f"({proc.returncode})")
                for lib, wall in walls.items():  # rollax's Atari score is measured after
                    stdout = logs[lib].read_text()
                    result = (cleanrl_result(stdout) if lib == "cleanrl"
                              else rollax_result(run_folder, stdout, args.kind))
                    append_row({"lib": lib, "kind": args.kind, "task": task, "seed": seed,
                                "env_steps": args.steps, "wall_s": wall,
                                "env_steps_per_s": args.steps / wall, **result,
                                "versions": peers[lib], "machine": machine}, out_path)
    table(out_path, args)


def table(path: Path | None, args) -> None:
    if path is None:
        return
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    score = ("last-10-episode return" if args.kind == "mujoco"
             else "CleanRL: last 10 reports; rollax: 16 sampled games")
    print(f"| task | library | seeds | {score} (mean, per seed) | env steps/s |")
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

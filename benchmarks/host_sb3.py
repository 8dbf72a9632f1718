"""Training throughput on a Gymnasium environment stepped on the host: Stable-Baselines3's own PPO
and rollax's ``--env gymnasium:<id>``, the same PPO settings, one after the other in one run.

    .bench/sb3/bin/python benchmarks/host_sb3.py [--env CartPole-v1] [--steps 65536]
        [--num-envs 8] [--out benchmarks/results/host_sb3.jsonl]

Runs in the SB3 environment (benchmarks/requirements-sb3.txt). Both train PPO on the same
Gymnasium environment with 8 environments x 128 steps per update, 4 epochs of 4 minibatches,
an MLP 64-64 (tanh), the same budget: SB3 on ``DummyVecEnv`` (torch on one thread, its
fastest here), rollax as ``rollax train`` runs it (its pool of Gymnasium environments stepped
from the compiled collector). Both take one core (``taskset`` the whole script for that). The
rate compared is environment steps per second of training (SB3: ``learn``'s wall; rollax: the
run's ``run_time_s``, compilation reported apart); the greedy return of each is printed as a
check that both trained, not as a comparison of quality.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import append_row, device

SETTINGS = dict(n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4, gamma=0.99,
                gae_lambda=0.95, clip_range=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)
"""SB3's PPO settings (8 environments); rollax's flags below are the same numbers."""


def rollax_flags(num_envs: int) -> list[str]:
    minibatches = num_envs * SETTINGS["n_steps"] // SETTINGS["batch_size"]
    return ["--num-envs", str(num_envs), "--num-steps", str(SETTINGS["n_steps"]),
            "--minibatches", str(minibatches), "--epochs", str(SETTINGS["n_epochs"]),
            "--lr", str(SETTINGS["learning_rate"]), "--gamma", str(SETTINGS["gamma"]),
            "--gae-lambda", str(SETTINGS["gae_lambda"]), "--clip-eps", str(SETTINGS["clip_range"]),
            "--ent-coef", str(SETTINGS["ent_coef"]), "--vf-coef", str(SETTINGS["vf_coef"]),
            "--max-grad-norm", str(SETTINGS["max_grad_norm"])]


def run_sb3(env_id: str, steps: int, num_envs: int) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(1)
    model = PPO("MlpPolicy", make_vec_env(env_id, n_envs=num_envs, seed=0), seed=0,
                policy_kwargs=dict(net_arch=[64, 64]), device="cpu", **SETTINGS)
    start = time.perf_counter()
    model.set_logger(Logger(None, []))  # SB3's default logs into a new /tmp/SB3-* folder
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - start
    mean, _ = evaluate_policy(model, make_vec_env(env_id, n_envs=1, seed=10_000),
                              n_eval_episodes=32, deterministic=True)
    return {"lib": "sb3", "version": importlib.metadata.version("stable-baselines3"),
            "env_steps": int(model.num_timesteps), "run_s": wall, "compile_s": 0.0,
            "env_steps_per_s": model.num_timesteps / wall, "greedy_return": float(mean)}


def run_rollax(env_id: str, steps: int, num_envs: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        argv = ["train", "--json", "--env", f"gymnasium:{env_id}", "--total-steps", str(steps),
                *rollax_flags(num_envs), "--no-compile-cache", "--eval-episodes", "32",
                "--out", str(Path(folder) / "run")]
        entry = "import sys; from _rollax_entry import main; sys.exit(main())"  # `rollax`
        out = subprocess.run([sys.executable, "-c", entry, *argv], check=True,
                             capture_output=True, text=True).stdout
        summary = json.loads((Path(folder) / "run" / "summary.json").read_text())
    result = json.loads(out.strip().splitlines()[-1])
    return {"lib": "rollax", "version": importlib.metadata.version("rollax"),
            "env_steps": int(summary["env_steps_per_lane"]), "run_s": summary["run_time_s"],
            "compile_s": summary["compile_time_s"],
            "env_steps_per_s": summary["env_steps_per_lane"] / summary["run_time_s"],
            "greedy_return": float(result["eval_return_mean"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=65_536)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    machine = (f"{device()}; {os.cpu_count()} CPU(s), this process on "
               f"{len(os.sched_getaffinity(0))}")
    rows = [run(args.env, args.steps, args.num_envs) for run in (run_sb3, run_rollax)]
    print(f"machine: {machine}")
    print("| library | env steps | train s | compile s | env steps/s | greedy return |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['lib']} {row['version']} | {row['env_steps']} | {row['run_s']:.1f} | "
              f"{row['compile_s']:.1f} | {row['env_steps_per_s']:,.0f} | "
              f"{row['greedy_return']:.1f} |")
    print(f"rollax / SB3 env steps per second: "
          f"{rows[1]['env_steps_per_s'] / rows[0]['env_steps_per_s']:.2f}")
    for row in rows:
        append_row({**row, "env": args.env, "num_envs": args.num_envs, "machine": machine},
                   None if args.out is None else Path(args.out))


if __name__ == "__main__":
    main()

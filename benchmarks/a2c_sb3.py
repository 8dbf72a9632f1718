"""A2C side by side: Stable-Baselines3's own ``A2C`` and rollax's ``--algo a2c``, the same
rl-baselines3-zoo settings, in one process.

    .bench/sb3/bin/python benchmarks/a2c_sb3.py [--envs CartPole-v1 Acrobot-v1] [--seeds 3]
        [--total-steps N] [--json OUT] [--md OUT]

Runs in the SB3 environment (benchmarks/requirements-sb3.txt: torch 2.13.0's CPU wheel,
stable-baselines3 and rollax itself, ``pip install -e .``). For each task, SB3 trains one seed
after another (``A2C("MlpPolicy", make_vec_env(task, n_envs, seed=s), seed=s, ...)``, zoo's
settings, ``VecNormalize`` where zoo says ``normalize: true``) and is evaluated with
``evaluate_policy(..., n_eval_episodes=32, deterministic=True)`` on an environment of its own
(observations normalised with the training statistics, rewards not), with torch on
``--torch-threads`` threads (default 1, its fastest here); rollax trains the same
number of seeds in one ``vmap`` of ``rollax.make_train(a2c.preset(task))`` (its score, the
greedy return of 32 episodes after training). ``--total-steps`` shortens both alike. Prints a
markdown table (final greedy return: mean and 95 % Student-t interval over seeds, per seed,
wall seconds of each library: SB3's per seed summed, rollax's compile and run apart) and the
machine, and the settings that differ (docs/algorithms.md lists them with reasons).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import time

import jax
import numpy as np
from minatar_compare import t_interval

ZOO = {  # rl-baselines3-zoo hyperparams/a2c.yml (commit c6c209e7d487635f0b835fb916ec4468142b28ff)
    "CartPole-v1": dict(n_envs=8, n_timesteps=500_000, ent_coef=0.0, normalize=False),
    "Acrobot-v1": dict(n_envs=16, n_timesteps=500_000, ent_coef=0.0, normalize=True),
}
"""Each task's zoo settings (every other one SB3's A2C default: n_steps 5, lr 7e-4, gamma 0.99,
gae_lambda 1, vf_coef 0.5, max_grad_norm 0.5, RMSprop alpha 0.99 eps 1e-5, no advantage
normalisation, MlpPolicy 64-64 tanh)."""

EVAL_EPISODES = 32

DIFFERENCES = [
    "gradient clipping: SB3 clips the joint gradient norm to 0.5; rollax the actor's and the "
    "critic's apart (clip_per_network)",
    "initialisation: SB3's policy output has orthogonal gain 0.01, rollax's logits gain 1",
    "normalize (Acrobot): SB3's VecNormalize normalises observations (statistics updated every "
    "step) and rewards (by a running std of the discounted return); rollax normalises "
    "observations only (statistics merged after each update) and its preset multiplies rewards "
    "by reward_scale 0.1 instead",
    "evaluation: SB3 deterministic on 32 episodes of a separate environment (seed 10_000 + s); "
    "rollax greedy on 32 episodes from the run's own key",
]


def run_sb3(task: str, zoo: dict, steps: int, seeds: int) -> dict:
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize

    returns, walls = [], []
    for seed in range(seeds):
        env = make_vec_env(task, n_envs=zoo["n_envs"], seed=seed)
        if zoo["normalize"]:
            env = VecNormalize(env, gamma=0.99)
        model = A2C("MlpPolicy", env, ent_coef=zoo["ent_coef"], seed=seed, device="cpu",
                    verbose=0)
        start = time.perf_counter()
        model.set_logger(Logger(None, []))  # SB3's default logs into a new /tmp/SB3-* folder
        model.learn(total_timesteps=steps)
        walls.append(time.perf_counter() - start)
        eval_env = make_vec_env(task, n_envs=1, seed=10_000 + seed)
        if zoo["normalize"]:
            assert isinstance(env, VecNormalize)
            eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
            eval_env.obs_rms = env.obs_rms
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES,
                                  deterministic=True)
        returns.append(float(mean))
        print(f"  sb3 {task} seed {seed}: {mean:.1f} in {walls[-1]:.0f} s", flush=True)
    return {"lib": "stable-baselines3", "version": importlib.metadata.version(
        "stable-baselines3"), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
        "returns": returns, "wall_s": sum(walls), "wall_per_seed_s": walls}


def run_rollax(task: str, steps: int, seeds: int) -> dict:
    import rollax
    from rollax.algos import a2c

    config = a2c.preset(task, total_steps=steps)
    train = jax.jit(jax.vmap(rollax.make_train(config)))
    keys = jax.vmap(jax.random.key)(np.arange(seeds))
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - start
    returns = [float(r) for r in np.asarray(result.eval_return)]
    print(f"  rollax {task}: {returns} in {compile_s:.0f} + {run_s:.0f} s", flush=True)
    return {"lib": "rollax", "version": importlib.metadata.version("rollax"),
            "jax": jax.__version__, "config": {k: v for k, v in vars(config).items()},
            "returns": returns, "compile_s": compile_s, "run_s": run_s,
            "wall_s": compile_s + run_s}


def table(rows: list[dict]) -> str:
    lines = ["| task | library | env steps/seed | seeds | final greedy return, mean [95% t-CI] |"
             " per seed | wall s (all seeds) |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        mean, low, high = t_interval(row["returns"])
        per_seed = ", ".join(f"{v:.1f}" for v in row["returns"])
        wall = (f"{row['wall_s']:.0f} ({row['compile_s']:.0f} compile + {row['run_s']:.0f} run)"
                if "compile_s" in row else f"{row['wall_s']:.0f}")
        lines.append(f"| {row['task']} | {row['lib']} {row['version']} | {row['steps']:,} | "
                     f"{len(row['returns'])} | {mean:.1f} [{low:.1f}, {high:.1f}] | {per_seed} "
                     f"| {wall} |")
    return "\n".join(lines)


def machine() -> str:
    import torch

    return (f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"jax {jax.__version__} ({jax.devices()[0].platform}), torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), stable-baselines3 "
            f"{importlib.metadata.version('stable-baselines3')}, rollax "
            f"{importlib.metadata.version('rollax')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1"], choices=list(ZOO))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--total-steps", type=int, default=None,
                        help="steps per seed for both libraries (default: zoo's n_timesteps)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch.set_num_threads (default 1: SB3's 64-64 networks step 25x "
                        "faster on one thread than on two of a busy 2-CPU machine)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--md", default=None)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.torch_threads)
    rows = []
    for task in args.envs:
        zoo = ZOO[task]
        steps = args.total_steps or zoo["n_timesteps"]
        rows.append({"task": task, "steps": steps, **run_rollax(task, steps, args.seeds)})
        rows.append({"task": task, "steps": steps, **run_sb3(task, zoo, steps, args.seeds)})
    text = "\n".join([table(rows), "", f"Machine: {machine()}.", "", "Differences:",
                      *[f"- {d}" for d in DIFFERENCES]])
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()

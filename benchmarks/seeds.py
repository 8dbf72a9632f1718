"""Seeds scaling: K PPO seeds (CartPole-v1 preset) in one vmapped program, env steps/s.

    python benchmarks/seeds.py [--seeds 1 8 64] [--total-steps 100000] [--json OUT]

Each K compiles ``jax.jit(jax.vmap(rollax.make_train(config)))`` once (compile time apart), then
runs it ``--repeats`` times after that first call; the row gives the median run time and the
env steps per second of all K seeds together.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.algos import ppo


def measure(config: ppo.PPOConfig, k: int, repeats: int) -> dict:
    train = jax.jit(jax.vmap(rollax.make_train(config)))
    keys = jnp.stack([jax.random.key(s) for s in range(k)])
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(repeats + 1):  # the first call is the warm-up
        start = time.perf_counter()
        result = jax.block_until_ready(compiled(keys))
        times.append(time.perf_counter() - start)
    run_s = statistics.median(times[1:]) if repeats else times[0]
    steps = ppo.num_updates(config) * config.num_envs * config.num_steps
    return {"seeds": k, "steps_per_seed": steps, "compile_s": compile_s, "run_s": run_s,
            "run_times": times[1:], "sps": k * steps / run_s,
            "eval_mean": float(np.mean(result.eval_return))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--total-steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = jax.devices()[0]
    machine = (f"jax {jax.__version__} on {jax.device_count()} {device.platform} device(s) "
               f"({getattr(device, 'device_kind', '')})")
    print(machine)
    print("| env | seeds | steps/seed | compile s | run s | env steps/s (all seeds) | "
          "greedy eval mean |")
    print("|---|---|---|---|---|---|---|")
    config = ppo.preset(args.env, total_steps=args.total_steps, eval_episodes=8)
    rows = []
    for k in args.seeds:
        row = measure(config, k, args.repeats)
        rows.append(row)
        print(f"| {args.env} | {k} | {row['steps_per_seed']:,} | {row['compile_s']:.1f} | "
              f"{row['run_s']:.2f} | {row['sps']:.3e} | {row['eval_mean']:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "env": args.env, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

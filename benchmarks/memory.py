"""A task that needs memory: PPO with the GRU against PPO with the MLP, K seeds each.

    python benchmarks/memory.py [--seeds 4] [--total-steps 200000]

gymnax's ``MemoryChain-bsuite`` (bsuite's memory_chain, default parameters: memory length 5,
one context bit): the first observations show a random bit, later ones hide it, and after five
steps the agent must repeat the bit, earning +1 if right and -1 if wrong (0 elsewhere). An agent
without memory cannot do better than chance at the last step (expected return 0); one that
remembers earns 1. Each network trains all its seeds in one vmapped program with the same
settings, and is scored by greedy evaluation (32 episodes per seed). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.algos import ppo
from rollax.stats import summarize

TASK = "gymnax:MemoryChain-bsuite"


def config(network: str, total_steps: int) -> ppo.PPOConfig:
    return ppo.PPOConfig(env=TASK, network=network, total_steps=total_steps, num_envs=16,
                         num_steps=32, epochs=4, minibatches=4, lr=1e-3, gamma=0.99,
                         ent_coef=0.01, hidden=(64, 64), memory_size=64)


def run(network: str, seeds: int, total_steps: int) -> dict:
    train = jax.jit(jax.vmap(rollax.make_train(config(network, total_steps))))
    keys = jnp.stack([jax.random.key(s) for s in range(seeds)])
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(compiled(keys))
    run_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    returns = np.asarray(out.eval_return, np.float64)
    return dict(network=network, returns=returns, stats=summarize(returns.tolist()),
                compile_s=compile_s, run_s=run_s, cpu_s=cpu_s,
                sps=seeds * total_steps / run_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--total-steps", type=int, default=200_000)
    args = parser.parse_args()
    print(f"{TASK}, {args.total_steps:,} steps per seed, {args.seeds} seeds, jax "
          f"{jax.__version__} on {jax.devices()[0].platform}\n")
    print("| network | greedy eval mean [95% CI] | per seed | compile s | run s | CPU s | "
          "env steps/s |")
    print("|---|---|---|---|---|---|---|")
    for network in ("mlp", "gru"):
        r = run(network, args.seeds, args.total_steps)
        s = r["stats"]
        print(f"| {network} | {s['mean']:.2f} [{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}] | "
              f"{', '.join(f'{x:.2f}' for x in r['returns'])} | {r['compile_s']:.1f} | "
              f"{r['run_s']:.1f} | {r['cpu_s']:.1f} | {r['sps']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()

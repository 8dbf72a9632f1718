"""Seeds scaling: K PPO seeds (CartPole-v1 preset) in one vmapped program, env steps/s.

    python benchmarks/seeds.py [--seeds 1 8 64] [--total-steps 100000]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from rollax.algos import ppo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--total-steps", type=int, default=100_000)
    parser.add_argument("--env", default="CartPole-v1")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} "
          f"({getattr(jax.devices()[0], 'device_kind', '')})")
    print("| env | seeds | steps/seed | compile s | run s | env steps/s (all seeds) | "
          "greedy eval mean |")
    print("|---|---|---|---|---|---|---|")
    config = ppo.preset(args.env, total_steps=args.total_steps, eval_episodes=8)
    train = jax.jit(jax.vmap(ppo.make_train(config)))
    for k in args.seeds:
        keys = jnp.stack([jax.random.key(s) for s in range(k)])
        start = time.perf_counter()
        compiled = train.lower(keys).compile()
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        result = jax.block_until_ready(compiled(keys))
        run_s = time.perf_counter() - start
        sps = k * ppo.num_updates(config) * config.num_envs * config.num_steps / run_s
        print(f"| {args.env} | {k} | {args.total_steps:,} | {compile_s:.1f} | {run_s:.2f} | "
              f"{sps:.3e} | {float(np.mean(result.eval_return)):.1f} |", flush=True)


if __name__ == "__main__":
    main()

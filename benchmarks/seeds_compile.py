"""Compile time of K PPO seeds in one program, part by part (seeds.py's program: the CartPole-v1
preset at 100,000 steps, 8 evaluation episodes), to find which part grows with K.

    python benchmarks/seeds_compile.py --seeds 1024 [--parts init evaluate update train]
                                       [--prng threefry2x32|rbg|unsafe_rbg]

Each part is ``jax.jit(jax.vmap(part))`` lowered and compiled from fresh functions, in the order
given, each printed as it finishes (so a run stopped by a time limit still reports the parts
before): ``init`` (parameters, optimiser, started environments), ``update`` (one PPO update),
``evaluate`` (the greedy evaluation) and ``train`` (the whole program: init, the scan of
updates, evaluate). ``lower`` (tracing) and ``compile`` (XLA) are timed apart.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1024)
    parser.add_argument("--parts", nargs="+", default=["init", "evaluate", "update", "train"])
    parser.add_argument("--total-steps", type=int, default=100_000)
    parser.add_argument("--prng", default=None, help="jax_default_prng_impl")
    args = parser.parse_args()
    if args.prng:
        jax.config.update("jax_default_prng_impl", args.prng)
    from rollax.algos import ppo, registry

    config = ppo.preset("CartPole-v1", total_steps=args.total_steps, eval_episodes=8)
    algo = registry.build(config)
    hp = algo.hyperparams
    keys = jax.vmap(jax.random.key)(jnp.arange(args.seeds))
    states = jax.eval_shape(jax.vmap(lambda key: algo.init(key, hp)), keys)
    programs = {
        "init": (jax.vmap(lambda key: algo.init(key, hp)), keys),
        "update": (jax.vmap(lambda s: algo.update(s, hp)), states),
        "evaluate": (jax.vmap(lambda s: algo.evaluate(s, hp)), states),
        "train": (jax.vmap(registry.make_train(config)), keys),
    }
    dev = jax.devices()[0]
    print(f"jax {jax.__version__} on {dev.platform}; {args.seeds} seeds; prng "
          f"{jax.config.jax_default_prng_impl}", flush=True)
    for part in args.parts:
        fn, arg = programs[part]
        start = time.perf_counter()
        lowered = jax.jit(fn).lower(arg)
        traced = time.perf_counter() - start
        start = time.perf_counter()
        compiled = lowered.compile()
        compile_s = time.perf_counter() - start
        text = compiled.as_text() or ""
        print(f"| {args.seeds} | {part} | lower {traced:.2f} s | compile {compile_s:.2f} s | "
              f"{text.count(' fusion')} fusion refs | {text.count(' while(')} while |", flush=True)


if __name__ == "__main__":
    main()

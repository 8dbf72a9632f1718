"""Compile time of the PPO program and of its parts, with rollax's orthogonal initialisation
(one Gaussian draw and one batched Householder QR in ``jnp`` per network) and with JAX's
LAPACK-based one swapped in (one key, draw and QR per layer), interleaved in one process.

    python benchmarks/compile_parts.py [--seeds 1 8] [--repeats 3] [--env CartPole-v1]

For each variant and number of seeds K, each row compiles (``jit(vmap(f)).lower(...).compile()``,
fresh functions each repeat, median of ``--repeats``) the whole ``train`` program and then its
parts on their own: ``init``, one ``update`` and ``evaluate``. It also counts what the whole
program's optimised HLO holds: fusions, while loops and custom calls (LAPACK among them).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import jax
import jax.numpy as jnp

import rollax
from rollax.algos import ppo, registry
from rollax.nets import heads
from rollax.nets.initializers import orthogonal_many


def lapack_per_layer(key, shapes, gains, dtype=jnp.float32):
    keys = jax.random.split(key, len(shapes))
    return [jax.nn.initializers.orthogonal(g)(k, tuple(s), dtype)
            for k, s, g in zip(keys, shapes, gains)]


VARIANTS = {"householder, batched (rollax)": orthogonal_many,
            "lapack per layer (jax.nn)": lapack_per_layer}


def use(init) -> None:
    heads.orthogonal_many = init  # every network draws through heads.orthogonal_plans


def compile_seconds(fn, *args) -> float:
    start = time.perf_counter()
    jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - start


def parts(env: str, k: int) -> dict:
    """One compile of each program, from freshly built functions."""
    config = ppo.PPOConfig(env=env)
    algo = registry.build(config)
    hp = algo.hyperparams
    keys = jax.vmap(jax.random.key)(jnp.arange(k))
    init = jax.vmap(lambda key: algo.init(key, hp))
    states = jax.eval_shape(init, keys)
    train = jax.vmap(registry.make_train(config))
    return {
        "train": compile_seconds(train, keys),
        "init": compile_seconds(init, keys),
        "update": compile_seconds(jax.vmap(lambda s: algo.update(s, hp)), states),
        "evaluate": compile_seconds(jax.vmap(lambda s: algo.evaluate(s, hp)), states),
    }


def hlo_counts(env: str, k: int) -> dict:
    keys = jax.vmap(jax.random.key)(jnp.arange(k))
    text = jax.jit(jax.vmap(registry.make_train(ppo.PPOConfig(env=env)))).lower(keys)
    text = text.compile().as_text()
    targets = re.findall(r'custom_call_target="([^"]+)"', text)
    return {"fusions": len(re.findall(r"^\s*(?:ROOT )?%?\S*fusion\S* = ", text, re.M)),
            "while loops": len(re.findall(r" while\(", text)),
            "custom calls": len(targets),
            "lapack calls": sum("lapack" in t for t in targets)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env", default="CartPole-v1")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, rollax {rollax.__version__}; "
          f"PPO preset of {args.env}; compile seconds, median of {args.repeats}")
    print("| init | seeds | train | init part | update part | evaluate part | fusions | "
          "while loops | custom calls | LAPACK calls |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in args.seeds:
        times = {name: [] for name in VARIANTS}
        for _ in range(args.repeats):        # interleaved, so load drifts hit both alike
            for name, init in VARIANTS.items():
                use(init)
                times[name].append(parts(args.env, k))
        for name, init in VARIANTS.items():
            use(init)
            med = {p: statistics.median(r[p] for r in times[name]) for p in times[name][0]}
            c = hlo_counts(args.env, k)
            print(f"| {name} | {k} | {med['train']:.2f} | {med['init']:.2f} | "
                  f"{med['update']:.2f} | {med['evaluate']:.2f} | {c['fusions']} | "
                  f"{c['while loops']} | {c['custom calls']} | {c['lapack calls']} |")
    use(orthogonal_many)


if __name__ == "__main__":
    main()

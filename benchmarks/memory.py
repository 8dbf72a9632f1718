"""A task that needs memory: PPO with the GRU against PPO with the MLP, K seeds each.

    python benchmarks/memory.py [--seeds 4] [--total-steps 200000]

gymnax's ``MemoryChain-bsuite`` (bsuite's memory_chain, default parameters: memory length 5,
one context bit): the first observations show a random bit, later ones hide it, and after five
steps the agent must repeat the bit, earning +1 if right and -1 if wrong (0 elsewhere). An agent
without memory cannot do better than chance at the last step (expected return 0); one that
remembers earns 1. Each network trains all its seeds in one vmapped program with the same
settings, and is scored by greedy evaluation (32 episodes per seed). Prints a Markdown table,
stores it in benchmarks/quality_memory.md and rewrites benchmarks/QUALITY.md (which includes
it) with ``ppo_quality.py``'s renderer.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.algos import ppo
from rollax.run.stats import summarize

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ppo_quality  # noqa: E402  (the QUALITY.md renderer beside this script)

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


def table(rows: list[dict], seeds: int, total_steps: int) -> str:
    """The section of QUALITY.md: settings, machine and one row per network."""
    c = config("gru", total_steps)
    lines = [
        "## Memory: GRU against MLP on MemoryChain-bsuite", "",
        f"`python benchmarks/memory.py --seeds {seeds} --total-steps {total_steps}` on "
        f"{ppo_quality.machine()}. Task: `{TASK}` with gymnax's default parameters (memory "
        "length 5, one context bit): the bit is visible only on the first observations, and "
        "after five steps the agent must repeat it (+1 right, -1 wrong). Without memory the "
        "best expected return is 0 (chance); with memory it is 1. Same PPO settings for both: "
        f"{c.num_envs} envs x {c.num_steps} steps, {c.epochs} epochs x {c.minibatches} "
        f"minibatches (the GRU's split environments), lr {c.lr} annealed, gamma {c.gamma}, "
        f"entropy {c.ent_coef}, hidden {list(c.hidden)} (GRU: embedding {c.hidden[0]}, memory "
        f"{c.memory_size}, heads {list(c.hidden[1:])}); greedy evaluation, 32 episodes per "
        "seed. Run seconds exclude compilation.", "",
        "| network | steps/seed | seeds | greedy eval mean [95% CI] | per-seed returns | "
        "target | met | compile s | run s | CPU s | env steps/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["stats"]
        target = "1.0 (memory needed)" if r["network"] == "gru" else "chance: 0"
        met = ("yes" if s["mean"] >= 0.95 else "no") if r["network"] == "gru" else (
            "stays at chance" if s["ci95"][0] <= 0 <= s["ci95"][1] else "off chance")
        lines.append(
            f"| {r['network']} | {total_steps:,} | {seeds} | {s['mean']:.2f} "
            f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}] | "
            f"{', '.join(f'{x:.2f}' for x in r['returns'])} | {target} | {met} | "
            f"{r['compile_s']:.1f} | {r['run_s']:.1f} | {r['cpu_s']:.1f} | {r['sps']:,.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--total-steps", type=int, default=100_000)
    args = parser.parse_args()
    rows = [run(network, args.seeds, args.total_steps) for network in ("mlp", "gru")]
    section = table(rows, args.seeds, args.total_steps)
    print(section)
    ppo_quality.MEMORY.write_text(section)
    ppo_quality.render(ppo_quality.load_rows(HERE / "quality_results.json"),
                       HERE / "QUALITY.md")


if __name__ == "__main__":
    main()

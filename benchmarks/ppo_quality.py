"""PPO quality on classic control: K seeds in one program per task, greedy evaluation.

    python benchmarks/ppo_quality.py [--tasks CartPole-v1 Acrobot-v1 Pendulum-v1] [--seeds 8]

Prints one row per task (mean greedy evaluation return over seeds, a 95 % bootstrap interval,
the interquartile mean, compile and run time, env steps per second) and writes the table to
benchmarks/QUALITY.md together with a description of the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import rollax
from rollax.algos import ppo

TARGETS = {"CartPole-v1": 475.0, "Acrobot-v1": -100.0, "Pendulum-v1": -400.0}


def iqm(x: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50 % of the values."""
    x = np.sort(x)
    n = len(x)
    return float(x[n // 4: n - n // 4].mean()) if n >= 4 else float(x.mean())


def run(task: str, seeds: int) -> dict:
    config = ppo.preset(task)
    train = jax.jit(jax.vmap(rollax.make_train(config)))
    keys = jnp.stack([jax.random.key(s) for s in range(seeds)])
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - start
    returns = np.asarray(result.eval_return, dtype=np.float64)
    if seeds > 1 and np.ptp(returns) > 0:
        ci = stats.bootstrap((returns,), np.mean, confidence_level=0.95,
                             random_state=0).confidence_interval
        low, high = float(ci.low), float(ci.high)
    else:
        low = high = float(returns.mean())
    return dict(task=task, seeds=seeds, steps=config.total_steps, returns=returns,
                mean=float(returns.mean()), low=low, high=high, iqm=iqm(returns),
                compile_s=compile_s, run_s=run_s,
                sps=seeds * config.total_steps / run_s, target=TARGETS.get(task))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, jax {jax.__version__} on "
            f"{jax.devices()[0].platform}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TARGETS))
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--out", default=str(Path(__file__).with_name("QUALITY.md")))
    args = parser.parse_args()
    rows = []
    header = ("| task | steps/seed | seeds | greedy eval mean [95% CI] | IQM | target | met | "
              "compile s | run s | env steps/s |\n|---|---|---|---|---|---|---|---|---|---|")
    print(header)
    for task in args.tasks:
        r = run(task, args.seeds)
        met = "—" if r["target"] is None else ("yes" if r["mean"] >= r["target"] else "no")
        target = "" if r["target"] is None else f">= {r['target']:g}"
        row = (f"| {task} | {r['steps']:,} | {r['seeds']} | {r['mean']:.1f} "
               f"[{r['low']:.1f}, {r['high']:.1f}] | {r['iqm']:.1f} | {target} | "
               f"{met} | {r['compile_s']:.1f} | {r['run_s']:.1f} | {r['sps']:,.0f} |")
        print(row, flush=True)
        print("    per seed:", np.round(r["returns"], 1).tolist(), flush=True)
        rows.append((row, r))
    text = ["# PPO quality (greedy evaluation, 32 episodes per seed)", "",
            f"Machine: {machine()}.", "",
            f"Command: `python benchmarks/ppo_quality.py --seeds {args.seeds}` "
            f"(presets from `rollax.ppo.PRESETS`; all seeds of a task in one vmapped program; "
            f"run time excludes compilation).", "", header]
    text += [row for row, _ in rows]
    text += ["", "Per-seed greedy evaluation returns:", ""]
    text += [f"- {r['task']}: {np.round(r['returns'], 1).tolist()}" for _, r in rows]
    Path(args.out).write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()

"""Seeds scaling: K PPO seeds (CartPole-v1 preset) in one vmapped program, env steps/s.

    python benchmarks/seeds.py [--seeds 1 8 64] [--total-steps 100000] [--json OUT]
                               [--key-impl rbg] [--profile DIR]

Each K compiles ``jax.jit(jax.vmap(rollax.make_train(config)))`` once (compile time apart), then
runs it ``--repeats`` times after that first call; the row gives the median run time and the
env steps per second of all K seeds together. ``--key-impl`` names the root keys' implementation
(``rollax.keys.KEY_IMPLS``). ``--profile DIR`` traces one more run with ``jax.profiler`` into DIR
and prints the device's busiest operations from the trace (their total time per run, and the
share of the run they fill).
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import rollax
from rollax.algos import ppo
from rollax.keys import root_key


def busiest(trace_dir: str, run_s: float, top: int = 25) -> dict:
    """The device operations of a Perfetto trace (``jax.profiler.trace(...,
    create_perfetto_trace=True)``) by total time, each with its calls, total ms and share of
    ``run_s``: by operation name, and by the name stack JAX gave it (``tf_op`` in the event's
    arguments, its last part dropped). Device events are those of the processes not named
    "/host...", on their "XLA Ops" threads where the trace has them."""
    path = sorted(glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True))[-1]
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
               if e.get("name") == "thread_name"}
    device = {pid for pid, name in procs.items() if not name.startswith("/host")}
    ops = {k for k, name in threads.items() if k[0] in device and "XLA Ops" in name}
    print("device threads:", sorted({threads[k] for k in threads if k[0] in device}))
    chosen = [e for e in events if e.get("ph") == "X" and e["pid"] in device
              and (not ops or (e["pid"], e["tid"]) in ops)]
    for e in chosen[:3]:
        print("  sample event:", e["name"], json.dumps(e.get("args", {}))[:300])
    tables = {}
    for key, label in ((lambda e: e["name"], "op"),
                       (lambda e: str(e.get("args", {}).get("tf_op", "?")).rsplit("/", 1)[0],
                        "scope")):
        total: collections.Counter = collections.Counter()
        calls: collections.Counter = collections.Counter()
        for e in chosen:
            total[key(e)] += e.get("dur", 0) / 1e3
            calls[key(e)] += 1
        tables[label] = [{"name": n, "calls": calls[n], "ms": ms, "share": ms / (run_s * 1e3)}
                         for n, ms in total.most_common(top)]
    return tables


def measure(config: ppo.PPOConfig, k: int, repeats: int, key_impl: str = "threefry2x32",
            profile: str | None = None) -> dict:
    train = jax.jit(jax.vmap(rollax.make_train(config)))
    keys = jnp.stack([root_key(s, key_impl) for s in range(k)])
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
    row = {"seeds": k, "key_impl": key_impl, "steps_per_seed": steps, "compile_s": compile_s,
           "run_s": run_s, "run_times": times[1:], "sps": k * steps / run_s,
           "eval_mean": float(np.mean(result.eval_return))}
    if profile:
        with jax.profiler.trace(f"{profile}/seeds-{k}", create_perfetto_trace=True):
            jax.block_until_ready(compiled(keys))
        row["busiest"] = busiest(f"{profile}/seeds-{k}", run_s)
        for label, ops in row["busiest"].items():
            print(f"  busiest by {label}:")
            for op in ops:
                print(f"  {op['ms']:9.1f} ms {op['share']:6.1%} {op['calls']:7d}x  "
                      f"{op['name'][-110:]}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--total-steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--json", default=None)
    parser.add_argument("--key-impl", default="threefry2x32")
    parser.add_argument("--profile", default=None, metavar="DIR")
    args = parser.parse_args()
    device = jax.devices()[0]
    machine = (f"jax {jax.__version__} on {jax.device_count()} {device.platform} device(s) "
               f"({getattr(device, 'device_kind', '')})")
    print(machine, "; keys:", args.key_impl)
    print("| env | seeds | steps/seed | compile s | run s | env steps/s (all seeds) | "
          "greedy eval mean |")
    print("|---|---|---|---|---|---|---|")
    config = ppo.preset(args.env, total_steps=args.total_steps, eval_episodes=8)
    rows = []
    for k in args.seeds:
        row = measure(config, k, args.repeats, args.key_impl, args.profile)
        rows.append(row)
        print(f"| {args.env} | {k} | {row['steps_per_seed']:,} | {row['compile_s']:.1f} | "
              f"{row['run_s']:.2f} | {row['sps']:.3e} | {row['eval_mean']:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "env": args.env, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

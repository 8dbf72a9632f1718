"""Shared timing and output helpers of the benchmark scripts (standard library and jax only, so
that every benchmark environment can import it)."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import jax


def time_compiled(fn, keys, result=lambda out: out):
    """Compile ``fn`` (a jitted function of one key) apart, then run it once per key, the first
    run a warm-up: ``(compile_s, [run_s...], [result(out)...])`` for the keys after the first."""
    start = time.perf_counter()
    compiled = fn.lower(keys[0]).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(keys[0]))  # warm-up
    times, results = [], []
    for key in keys[1:]:
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(key))
        times.append(time.perf_counter() - start)
        results.append(result(out))
    return compile_s, times, results


def device() -> str:
    dev = jax.devices()[0]
    return (f"{jax.device_count()} {dev.platform} device(s) ({getattr(dev, 'device_kind', '')}), "
            f"jax {jax.__version__}, Python {platform.python_version()}")


def ppo_record(lib: str, version: str, config: dict, env_steps: int, compile_s: float,
               times: list[float], returns: list[float], **extra) -> dict:
    """The JSON record both PPO scripts write."""
    run_s = statistics.median(times)
    return {
        "lib": lib, "version": version, "device": device(), "config": config,
        "env_steps": env_steps, "compile_s": compile_s, "run_s": run_s, "run_times": times,
        "sps": env_steps / run_s, "eval_return": statistics.median(returns),
        "eval_returns": returns, **extra,
    }


def emit(record: dict, path: str | None) -> None:
    print(json.dumps(record, indent=1))
    if path:
        with open(path, "w") as f:
            json.dump(record, f, indent=1)


def ppo_args(doc: str) -> argparse.Namespace:
    """The command line both PPO scripts share (same defaults, so the rows compare equal
    budgets): ``--total-steps``, ``--num-envs``, ``--repeats``, ``--json``, ``--key-impl``.
    Only the number of environments varies: 128 steps, 4 epochs and 4 minibatches stay, so each
    update collects ``num_envs * 128`` steps and the minibatch size (``num_envs * 32``) grows
    with it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--total-steps", type=int, default=500_000)
    parser.add_argument("--num-envs", type=int, default=4,
                        help="parallel environments (minibatch size num_envs * 128 / 4)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--key-impl", default="threefry2x32",
                        help="the root keys' implementation (rollax's row only; rejax's keys "
                        "are threefry)")
    return parser.parse_args()



# --- MinAtar against rejax (minatar_rejax.py, minatar_rollax.py, minatar_compare.py) ---------

MINATAR_GAMES = ("Breakout", "SpaceInvaders")
MINATAR_BATCH = 64 * 128
"""Env steps per PPO update of gymnax-blines' MinAtar settings (64 envs x 128 steps)."""


def minatar_args(doc: str, network: bool = False) -> argparse.Namespace:
    """The command line both MinAtar scripts share: ``--games``, ``--total-steps`` (per seed),
    ``--seeds``, ``--evals`` (greedy evaluations after the initial one), ``--json``; with
    ``network``, rollax's ``--network`` (mlp or cnn)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(MINATAR_GAMES),
                        help="MinAtar games (Breakout SpaceInvaders Asterix Freeway)")
    parser.add_argument("--total-steps", type=int, default=1_000_000,
                        help="env steps per seed (rounded down to whole evaluation intervals)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--evals", type=int, default=10,
                        help="greedy evaluations during training (one more before it)")
    if network:
        parser.add_argument("--network", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--json", default=None)
    return parser.parse_args()


def minatar_schedule(total_steps: int, evals: int) -> tuple[int, int, int]:
    """``(updates, updates between evaluations, evaluations)`` of a run of at most
    ``total_steps`` env steps per seed: the updates are a whole number of evaluation
    intervals (rejax trains ``ceil(total / eval_freq)`` intervals of whole updates), so
    ``total_steps // 8192`` is rounded down to one (1e6: 122 -> 120 updates, 12 between the
    10 evaluations)."""
    updates = total_steps // MINATAR_BATCH
    if updates < 1 or evals < 1:
        raise ValueError(f"total_steps must be at least {MINATAR_BATCH} and evals at least 1, "
                         f"got {total_steps} and {evals}")
    evals = min(evals, updates)
    every = updates // evals
    return every * evals, every, evals


def minatar_timed(train, keys) -> tuple[float, float, float, object]:
    """Compile ``train`` (jitted, of the stacked seed keys) apart, then run it once: ``(compile
    s, run wall s, run process CPU s, output)``. No warm-up run: a full run is long and
    already compiled."""
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(compiled(keys))
    return compile_s, time.perf_counter() - start, time.process_time() - cpu, out


def minatar_row(game: str, updates: int, every: int, returns, compile_s: float, run_s: float,
                cpu_s: float) -> dict:
    """One game's record: ``returns`` is ``(seeds, evaluations + 1)``, the greedy return of
    each seed at 0, ``every``, 2 ``every``, ... updates."""
    import os

    seeds = len(returns)
    steps = updates * MINATAR_BATCH
    curve_steps = [i * every * MINATAR_BATCH for i in range(len(returns[0]))]
    return {
        "game": game, "env_steps": steps, "seeds": seeds, "updates": updates,
        "eval_every_updates": every, "curve_steps": curve_steps,
        "curves": [[float(r) for r in seed] for seed in returns],
        "final_returns": [float(seed[-1]) for seed in returns], "compile_s": compile_s,
        "run_s": run_s, "run_cpu_s": cpu_s, "sps": seeds * steps / run_s,
        "loadavg_end": os.getloadavg(),
    }


def append_row(row: dict, out) -> None:
    """Print ``row`` as one JSON line and, when ``out`` (a ``Path``) is given, append it there
    (the resumable rows of ``benchmarks/results/``)."""
    line = json.dumps(row)
    print(line, flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(line + "\n")

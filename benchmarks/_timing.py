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
    budgets): ``--total-steps``, ``--num-envs``, ``--repeats``, ``--json``. Only the number of
    environments varies: 128 steps, 4 epochs and 4 minibatches stay, so each update collects
    ``num_envs * 128`` steps and the minibatch size (``num_envs * 32``) grows with it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--total-steps", type=int, default=500_000)
    parser.add_argument("--num-envs", type=int, default=4,
                        help="parallel environments (minibatch size num_envs * 128 / 4)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    return parser.parse_args()


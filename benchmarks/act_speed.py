"""Acting with a trained policy one observation at a time, as a user's Python loop does:
``rollax.load_run(run).act(obs)`` (compiled once per kind of call), the same policy called op
by op (what ``act`` ran before it was compiled: the lane's parameters taken leaf by leaf, then
``policy.greedy(params, obs)``, without ``jit``), and, when Stable-Baselines3 is installed,
SB3's ``PPO.predict(obs, deterministic=True)`` on a 64-64 MLP of its own, side by side in one
run; and ``act`` again in a child process with ``jax_cpu_enable_async_dispatch`` off (JAX then
runs each CPU program on the calling thread instead of handing it to a worker and waiting).

    python benchmarks/act_speed.py [--calls 2000] [--out benchmarks/results/act_speed.jsonl]

The rollax policy is a 64-64 tanh MLP trained for 2,048 CartPole steps (its preset); each
rate is calls per second over ``--calls`` single observations after a warm-up (the op-by-op
path over a tenth of them: it is slow). Printed with the machine and the ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _timing import append_row, device


def rate(fn, observations) -> float:
    fn(observations[0])  # warm-up (compiles where it compiles)
    start = time.perf_counter()
    for obs in observations:
        fn(obs)
    return len(observations) / (time.perf_counter() - start)


SYNCHRONOUS = """
import json, sys, time, jax, numpy as np
jax.config.update("jax_cpu_enable_async_dispatch", False)  # before JAX's first computation
import rollax
loaded = rollax.load_run(sys.argv[1])
observations = list(np.asarray(jax.random.normal(jax.random.key(0), (int(sys.argv[2]), 4)),
                               np.float32))
np.asarray(loaded.act(observations[0]))
start = time.perf_counter()
for obs in observations:
    np.asarray(loaded.act(obs))
print(json.dumps(len(observations) / (time.perf_counter() - start)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", default=None, help="append the row to this JSONL file")
    args = parser.parse_args()

    import rollax
    from rollax.cli import main as rollax_main

    folder = str(Path(tempfile.mkdtemp(prefix="act-speed-")) / "run")
    assert rollax_main(["train", "--env", "CartPole-v1", "--total-steps", "2048", "--json",
                        "--out", folder]) == 0
    loaded = rollax.load_run(folder)
    observations = list(np.asarray(jax.random.normal(jax.random.key(0), (args.calls, 4)),
                                   np.float32))
    def before(obs):  # act before it was compiled: the lane's leaves, then greedy, op by op
        params = jax.tree_util.tree_map(lambda x: x[0], loaded.params)
        return np.asarray(loaded.policy.greedy(params, jnp.asarray(obs)))

    rates = {
        "rollax act": rate(lambda o: np.asarray(loaded.act(o)), observations),
        "op by op (act before)": rate(before, observations[: max(2, args.calls // 10)]),
    }
    # the same calls in a process whose CPU client runs every program inline (no hand-over to
    # XLA's worker thread; the setting is the process's, made before its first computation)
    child = subprocess.run([sys.executable, "-c", SYNCHRONOUS, folder, str(args.calls)],
                           capture_output=True, text=True, check=True)
    rates["rollax act, synchronous dispatch"] = json.loads(child.stdout.splitlines()[-1])
    if importlib.util.find_spec("stable_baselines3") is not None:
        from stable_baselines3 import PPO

        model = PPO("MlpPolicy", "CartPole-v1", device="cpu")
        rates["sb3 predict"] = rate(lambda o: model.predict(o, deterministic=True),
                                    observations)
    print(f"machine: {platform.processor() or platform.machine()}, {device()}")
    base = rates["rollax act"]
    for name, value in rates.items():
        print(f"{name:>24}: {value:10,.0f} calls/s   (rollax act / this: {base / value:5.2f})")
    append_row({"bench": "act_speed", "device": device(), "calls": args.calls,
                "rates": rates}, None if args.out is None else Path(args.out))


if __name__ == "__main__":
    main()

"""Suite throughput: rollax's auto-reset collector on an adapted environment beside the suite's
own auto-reset loop, in one process.

    python benchmarks/suites/run.py <suite> [--ids ID ...] [--sizes 64 1024] [--steps 200]
                                    [--repeats 3] [--json OUT]

Each suite has a module ``benchmarks/suites/<suite>_loop.py`` with

- ``IDS``: the default environment ids (without the ``<suite>:`` prefix);
- ``native(env_id, batch, steps) -> jitted fn(key) -> float``: the suite's own vmapped step with
  its own auto-reset, ``scan`` over ``steps`` steps of ``batch`` environments, uniform random
  actions drawn inside the loop, rewards folded into a sum (nothing stored).

The rollax side is ``rollax.collect_autoreset`` with a uniform random policy over the adapted
action space (the trajectory is stored, as training stores it; its reward sum is returned).
Rows give env steps per second (``batch x steps / median run time``) and compile time apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pathlib
import statistics
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from _timing import device

import rollax
from rollax.envs.base import Discrete


@dataclasses.dataclass(frozen=True, eq=False)
class UniformPolicy:
    """Uniform random actions over a rollax action space (log-probability not needed: 0).
    Hashed by identity: a ``Box`` space's array bounds are not hashable."""

    space: object

    def sample(self, params, observation, key):
        space = self.space
        if isinstance(space, Discrete):
            action = jax.random.randint(key, space.shape, 0, space.n, space.dtype)
        else:
            action = jax.random.uniform(key, space.shape, jnp.float32,  # type: ignore[attr-defined]
                                        jnp.asarray(space.low), jnp.asarray(space.high))  # type: ignore[attr-defined]
        return action, jnp.float32(0)

    def log_prob(self, params, observation, action):
        return jnp.float32(0)

    def greedy(self, params, observation):
        return self.sample(params, observation, jax.random.key(0))[0]


def rollax_loop(name: str, batch: int, steps: int):
    env = rollax.make(name)
    policy = UniformPolicy(env.action_space)

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        state = rollax.reset_batch(env, init_key, batch)
        _, traj = rollax.collect_autoreset(env, policy, None, state, key, steps)
        return traj.reward.sum()

    return run


def timed(fn, repeats: int) -> tuple[float, float]:
    """``(compile_s, median run_s)`` of a jitted function of one key."""
    keys = [jax.random.key(i) for i in range(repeats + 1)]
    start = time.perf_counter()
    compiled = fn.lower(keys[0]).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(keys[0]))  # warm-up
    times = []
    for key in keys[1:]:
        start = time.perf_counter()
        jax.block_until_ready(compiled(key))
        times.append(time.perf_counter() - start)
    return compile_s, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--ids", nargs="*")
    parser.add_argument("--sizes", nargs="*", type=int, default=[64, 1024])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    module = importlib.import_module(f"{args.suite}_loop")
    print(f"# {args.suite}: {device()}")
    print(f"{'env':<40} {'B':>6} {'rollax steps/s':>15} {'suite steps/s':>14} {'ratio':>6} "
          f"{'compile rollax / suite s':>23}")
    rows = []
    for env_id in args.ids or module.IDS:
        for batch in args.sizes:
            ours = timed(rollax_loop(f"{args.suite}:{env_id}", batch, args.steps), args.repeats)
            theirs = timed(module.native(env_id, batch, args.steps), args.repeats)
            rate = [batch * args.steps / run_s for _, run_s in (ours, theirs)]
            rows.append({"suite": args.suite, "env": env_id, "batch": batch, "steps": args.steps,
                         "rollax_steps_per_s": rate[0], "suite_steps_per_s": rate[1],
                         "rollax_compile_s": ours[0], "suite_compile_s": theirs[0]})
            print(f"{env_id:<40} {batch:>6} {rate[0]:>15,.0f} {rate[1]:>14,.0f} "
                  f"{rate[0] / rate[1]:>6.2f} {ours[0]:>11.1f} / {theirs[0]:<9.1f}", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"device": device(), "rows": rows},
                                                      indent=1))


if __name__ == "__main__":
    main()

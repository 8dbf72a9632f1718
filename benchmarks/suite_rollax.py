"""rollax's side of the suite tables in QUALITY.md: ``rollax train`` on a suite id, every seed
in one program, at the budget ``benchmarks/jumanji_a2c.py`` gives Jumanji's own A2C; or, with
``--uniform``, the uniformly random legal policy's return (the baseline of ``pgx:2048``).

    python benchmarks/suite_rollax.py --env jumanji:Minesweeper-v0 --algo ppo --steps 1024000 \
        --seeds 3 --out benchmarks/results/suite_rollax.jsonl
    python benchmarks/suite_rollax.py --env pgx:2048 --uniform --out ...

It runs the command a user would type, ``rollax train --env <id> --algo <algo> --seeds <K>
--total-steps <steps> --eval-episodes <n> --json --no-compile-cache`` (every other setting the
algorithm's default, as rollax ships it), in this process, and appends one JSON row to
``--out`` (a configuration already there is skipped, so an interrupted measurement continues):
the greedy return of each seed (the mean of ``--eval-episodes`` episodes, with the action mask),
the mean and 95 % Student-t interval over seeds, the wall time of the whole command (every seed,
compilation and the evaluation included) and the versions. Run it in the same environment as
jumanji_a2c.py (benchmarks/requirements-jumanji.txt plus ``pip install -e .``). The uniform
baseline samples each action uniformly among the legal ones of its state (zero logits under the
environment's ``action_mask``), ``--eval-episodes`` episodes per seed, through
``rollax.evaluate_policy`` with ``greedy=False``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _timing import append_row
from minatar_compare import t_interval

import rollax
import rollax.cli
from rollax.distributions import Categorical, masked
from rollax.envs.agents import is_team
from rollax.envs.masks import mask_shape


class UniformLegal:
    """The uniform policy over the legal actions of a ``Discrete(n)`` action, or of each agent
    of a team's ``MultiDiscrete((n,) * N)`` (zero logits of the mask's shape, ``(n,)`` or
    ``(N, n)``, under the state's mask), with the rollax policy interface (``params``
    ignored)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape

    def _dist(self, mask):
        return masked(Categorical(jnp.zeros(self.shape, jnp.float32)), mask)

    def sample(self, params, observation, key, mask=None):
        action = self._dist(mask).sample(key)
        return action, self._dist(mask).log_prob(action)

    def log_prob(self, params, observation, action, mask=None):
        return self._dist(mask).log_prob(action)

    def greedy(self, params, observation, mask=None):
        return self._dist(mask).mode()


def uniform(env_id: str, seeds: int, eval_episodes: int) -> dict:
    env = rollax.make(env_id)
    shape = mask_shape(env.action_space) if is_team(env) else (int(env.action_space.n),)
    policy = UniformLegal(shape)
    start = time.perf_counter()
    returns = [float(rollax.evaluate_policy(env, policy, None, jax.random.key(seed),
                                            eval_episodes, greedy=False))
               for seed in range(seeds)]
    mean, low, high = t_interval(np.asarray(returns))
    return {"peer": "uniform legal", "env": env_id, "seeds": list(range(seeds)),
            "return": returns, "mean": mean, "interval95": [low, high],
            "eval_episodes": eval_episodes, "wall_s": round(time.perf_counter() - start, 2)}


def run(env: str, algo: str, steps: int, seeds: int, eval_episodes: int,
        extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        argv = ["train", "--env", env, "--algo", algo, "--seeds", str(seeds),
                "--total-steps", str(steps), "--eval-episodes", str(eval_episodes), "--json",
                "--no-compile-cache",
                *extra, "--out", str(Path(folder) / "run")]
        stdout = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(stdout):
            code = rollax.cli.main(argv)
        wall = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"rollax train exited {code}: {' '.join(argv)}")
        result = json.loads(stdout.getvalue())
        config = json.loads((Path(folder) / "run" / "config.json").read_text())["config"]
    returns = [float(r) for r in result["eval_return"]]
    mean, low, high = t_interval(np.asarray(returns))
    return {
        "peer": "rollax", "algo": algo, "env": env, "argv": argv[:-2],
        "env_steps": result["env_steps"], "seeds": result.get("seeds", [0]),
        "greedy_return": returns, "mean": mean, "interval95": [low, high],
        "eval_episodes": eval_episodes, "wall_s": round(wall, 2),
        "settings": {k: config[k] for k in ("num_envs", "num_steps", "epochs", "minibatches",
                                            "lr", "hidden", "network", "critic") if k in config},
        **environment(),
    }


def environment() -> dict:
    suite = {}
    for name in ("jumanji", "pgx"):
        with contextlib.suppress(ImportError):
            suite[name] = __import__(name).__version__
    return {
        "versions": {"jax": jax.__version__, "python": platform.python_version(),
                     "rollax": rollax.__version__, **suite},
        "machine": f"{platform.processor() or platform.machine()}, {jax.device_count()} "
                   f"{jax.devices()[0].platform} device(s), {len(os.sched_getaffinity(0))} "
                   "core(s) allowed",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="a suite id, e.g. jumanji:Minesweeper-v0")
    parser.add_argument("--algo", default="ppo", help="ppo, a2c, reinforce or grpo")
    parser.add_argument("--steps", type=int, default=0, help="environment step budget")
    parser.add_argument("--uniform", action="store_true",
                        help="the uniform legal policy's return instead of training")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None, help="JSON lines, appended")
    parser.add_argument("extra", nargs="*", help="further rollax train flags (after --)")
    args = parser.parse_args()
    tag = [args.env, "uniform" if args.uniform else args.algo, args.steps, args.seeds,
           args.extra]
    if args.out is not None and args.out.exists():  # resumable: finished rows are kept
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            if row.get("tag") == tag:
                print(f"{tag}: already in {args.out}", flush=True)
                return
    if args.uniform:
        row = {"tag": tag, **uniform(args.env, args.seeds, args.eval_episodes), **environment()}
    else:
        row = {"tag": tag, **run(args.env, args.algo, args.steps, args.seeds,
                                  args.eval_episodes, args.extra)}
    append_row(row, args.out)


if __name__ == "__main__":
    main()

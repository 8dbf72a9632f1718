"""Time to solve CartPole-v1: mean greedy evaluation return >= 475 over 8 seeds, compile included.

    .bench/anchors/bin/python benchmarks/solve.py --lib rollax|sb3 [--seeds 8] [--steps N]
                                                  [--threads N] [--compile-cache DIR]
                                                  [--json OUT]

rollax: the 8 seeds train in one program, ``jax.jit(jax.vmap(rollax.make_train(config)))`` with
``config = PPOConfig(**SOLVE)``; the time runs from before ``lower()`` to the evaluation returns
on the host (compile + training + greedy evaluation over ``eval_episodes`` = 32 per seed).
``--compile-cache DIR`` (rollax only) turns JAX's persistent compilation cache on in DIR
(``rollax.run.compile_cache.enable``) before anything compiles: the first process with a fresh DIR
compiles and writes the program there, a second one loads it from disk, so its "compile"
(tracing, lowering and the cache read) is the warm-cache time. The record counts the cache
hits and writes of that timed compilation (``cache_hits``, ``cache_writes``).

sb3: Stable-Baselines3 PPO with rl-baselines3-zoo's tuned CartPole-v1 settings (DLR-RM/
rl-baselines3-zoo, hyperparams/ppo.yml, entry "CartPole-v1", marked "# Tuned"; read at commit
00128b5d46d497b772f3bd891ae9f520919e8971): n_envs 8, n_timesteps 1e5, policy MlpPolicy,
n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0.0,
learning_rate lin_0.001, clip_range lin_0.2 (everything else SB3's defaults). Seeds run one
after the other in this process with ``torch.set_num_threads(--threads, default
os.cpu_count())``; each seed's time covers building its environments and model, training and
a deterministic evaluation over 32 episodes on gymnasium's CartPole-v1. Imports are excluded.
The time to solve is the sum over seeds.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import time

import numpy as np

SOLVE = {"total_steps": 250_000, "num_envs": 8, "num_steps": 128, "epochs": 4, "minibatches": 4,
         "lr": 1e-3}
"""rollax's settings for this row (overrides of PPOConfig's defaults: CleanRL's CartPole
settings with 8 environments and a 4x learning rate). Re-chosen after the initialisation
changed (benchmarks/NOTES.md) as the fastest candidate that brings every seed to 500 both on
the timed seeds 0-7 and on held-out seeds 8-15; faster ones solved seeds 0-7 only on average
or missed on 8-15."""

ZOO = {"n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20,
       "ent_coef": 0.0}
ZOO_ENVS, ZOO_STEPS, ZOO_LR, ZOO_CLIP = 8, 100_000, 1e-3, 0.2
EVAL_EPISODES = 32
THRESHOLD = 475.0


def solve_rollax(seeds: int, steps: int | None, cache: str | None = None) -> dict:
    import jax
    import jax.numpy as jnp

    import rollax
    from rollax.algos import ppo
    from rollax.run import compile_cache

    folder = compile_cache.enable(cache) if cache else None  # before the first compilation
    events = {"hits": 0, "writes": 0}
    names = {"/jax/compilation_cache/cache_hits": "hits",
             "/jax/compilation_cache/cache_misses": "writes"}  # recorded when writing an entry

    def count(event: str, **_) -> None:
        if event in names:
            events[names[event]] += 1

    jax.monitoring.register_event_listener(count)
    config = ppo.PPOConfig(**{**SOLVE, **({"total_steps": steps} if steps else {})})
    train = jax.jit(jax.vmap(rollax.make_train(config)))
    keys = jnp.stack([jax.random.key(config.seed + k) for k in range(seeds)])
    before = dict(events)
    start = time.perf_counter()
    compiled = train.lower(keys).compile()
    compiled_at = time.perf_counter()
    hits, writes = (events[k] - before[k] for k in ("hits", "writes"))
    if folder is not None:
        print(f"compile {compiled_at - start:.2f} s with the compile cache in {folder}: "
              f"{hits} hit(s), {writes} write(s)", flush=True)
    returns = np.asarray(compiled(keys).eval_return, dtype=float)
    end = time.perf_counter()
    return {
        "lib": "rollax", "version": importlib.metadata.version("rollax"),
        "device": f"{jax.devices()[0].device_kind}, jax {jax.__version__}",
        "config": SOLVE if not steps else {**SOLVE, "total_steps": steps},
        "steps_per_seed": ppo.num_updates(config) * config.num_envs * config.num_steps,
        "time_s": end - start, "compile_s": compiled_at - start, "run_s": end - compiled_at,
        "eval_returns": returns.tolist(),
        "compile_cache": None if folder is None else str(folder),
        "cache_hits": hits, "cache_writes": writes,
    }


def solve_sb3(seeds: int, steps: int | None, threads: int) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import Logger

    torch.set_num_threads(threads)
    budget = steps or ZOO_STEPS
    times, returns, env_steps = [], [], []
    for seed in range(seeds):
        start = time.perf_counter()
        env = make_vec_env("CartPole-v1", n_envs=ZOO_ENVS, seed=seed)
        model = PPO("MlpPolicy", env, **ZOO, learning_rate=lambda p: p * ZOO_LR,
                    clip_range=lambda p: p * ZOO_CLIP, seed=seed, device="cpu", verbose=0)
        model.set_logger(Logger(None, []))  # SB3's default logs into a new /tmp/SB3-* folder
        model.learn(total_timesteps=budget)
        eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=10_000 + seed)
        episode_returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES,
                                             deterministic=True, return_episode_rewards=True)
        times.append(time.perf_counter() - start)
        returns.append(float(np.mean(episode_returns)))
        env_steps.append(int(model.num_timesteps))
        print(f"seed {seed}: {times[-1]:.1f} s, greedy return {returns[-1]:.1f}", flush=True)
    return {
        "lib": "sb3", "version": importlib.metadata.version("stable-baselines3"),
        "device": f"cpu, torch {torch.__version__}, {torch.get_num_threads()} threads",
        "torch_threads": torch.get_num_threads(),
        "config": {**ZOO, "n_envs": ZOO_ENVS, "n_timesteps": budget,
                   "learning_rate": f"lin_{ZOO_LR}", "clip_range": f"lin_{ZOO_CLIP}"},
        "steps_per_seed": env_steps[0], "time_s": sum(times), "compile_s": None,
        "run_s": sum(times), "seed_times": times, "eval_returns": returns,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", choices=["rollax", "sb3"], required=True)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=None,
                        help="override the training budget per seed (smoke runs)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="torch threads (sb3)")
    parser.add_argument("--compile-cache", default=None, metavar="DIR",
                        help="rollax: JAX's persistent compilation cache in DIR (a second "
                        "process with the same DIR loads the program instead of compiling it)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.compile_cache and args.lib != "rollax":
        parser.error("--compile-cache is for --lib rollax")
    if args.lib == "rollax":
        record = solve_rollax(args.seeds, args.steps, args.compile_cache)
    else:
        record = solve_sb3(args.seeds, args.steps, args.threads)
    mean = float(np.mean(record["eval_returns"]))
    record.update(seeds=args.seeds, eval_episodes=EVAL_EPISODES, eval_mean=mean,
                  threshold=THRESHOLD, solved=mean >= THRESHOLD)
    print(json.dumps(record, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()

"""rl-baselines3-zoo's own ``--optimize`` (Optuna + Stable-Baselines3's PPO) searching rollax
tune's default space, for the side-by-side row of QUALITY.md. Runs in its own environment:

    python3 -m venv .bench/zoo && .bench/zoo/bin/pip install torch==2.13.0 rl_zoo3==2.9.2 pandas
    .bench/zoo/bin/python benchmarks/zoo_optimize.py --env CartPole-v1 --trials 16 \\
        --steps 20000 [--seed 0] [--log-folder /tmp/zoo-logs]

The zoo's PPO sampler (``rl_zoo3.hyperparams_opt.sample_ppo_params``) also draws the batch
size, rollout length, epochs, network and activation, which one rollax program cannot vary
between lanes; it is replaced, for this process only, by a sampler of rollax tune's default
space (``rollax.run.tune.DEFAULT_SPACE``, written out below so this environment needs no
rollax): the same six settings and ranges. Everything else is the zoo's own: its
``hyperparams/ppo.yml`` entry for the environment (CartPole-v1: 8 envs, 32 steps, batch 256, 20
epochs; the entry rollax's CartPole-v1 preset translates), its TPE sampler with 10 random
startup trials, no pruner, one deterministic evaluation of ``--eval-episodes`` episodes at the
end of each trial (``--n-evaluations 1``), trials one after another (``--n-jobs 1``).
Prints the wall time and the best trial as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

SPACE = {  # rollax.run.tune.DEFAULT_SPACE, under the zoo's names
    "learning_rate": ("float", 1e-5, 2e-3, True),
    "ent_coef": ("float", 1e-8, 0.1, True),
    "clip_range": ("choice", [0.1, 0.2, 0.3, 0.4]),
    "gamma": ("float", 0.97, 0.9999, False),
    "gae_lambda": ("float", 0.9, 0.9999, False),
    "max_grad_norm": ("float", 0.3, 2.0, False),
}


def rollax_space(trial, n_actions, n_envs, additional_args) -> dict:
    params = {}
    for name, spec in SPACE.items():
        if spec[0] == "choice":
            params[name] = trial.suggest_categorical(name, spec[1])
        else:
            params[name] = trial.suggest_float(name, spec[1], spec[2], log=spec[3])
    return params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-folder", default="/tmp/zoo-logs")
    args = parser.parse_args()

    import optuna
    from rl_zoo3 import hyperparams_opt
    from rl_zoo3.train import train

    hyperparams_opt.HYPERPARAMS_SAMPLER["ppo"] = rollax_space
    storage = f"sqlite:///{args.log_folder}/study.db"
    import os
    os.makedirs(args.log_folder, exist_ok=True)
    sys.argv = ["train", "--algo", "ppo", "--env", args.env, "-n", str(args.steps),
                "-optimize", "--n-trials", str(args.trials), "--n-jobs", "1", "--sampler", "tpe",
                "--pruner", "none", "--n-evaluations", "1", "--eval-episodes",
                str(args.eval_episodes), "--seed", str(args.seed), "-f", args.log_folder,
                "--device", "cpu", "--storage", storage, "--study-name", "zoo",
                "--no-optim-plots"]
    start = time.perf_counter()
    train()
    wall = time.perf_counter() - start
    study = optuna.load_study(study_name="zoo", storage=storage)
    done = [t for t in study.trials if t.value is not None]
    best = max(done, key=lambda t: t.value)
    print(json.dumps({"lib": "rl_zoo3 + stable-baselines3", "env": args.env,
                      "trials": len(study.trials), "scored": len(done), "steps": args.steps,
                      "wall_s": wall, "trials_per_hour": 3600 * len(study.trials) / wall,
                      "best": best.value, "best_params": best.params,
                      "values": [t.value for t in study.trials]}))


if __name__ == "__main__":
    main()

"""Brax's own PPO against rollax's PPO on Brax's inverted_double_pendulum, in one process.

    .bench/brax/bin/python benchmarks/brax_ppo.py [--total-steps 819200] [--seeds 3]
        [--json OUT] [--plot OUT.png] [--num-envs 2048] [--backend positional]
        [--libs brax rollax]

Runs in the brax environment (benchmarks/requirements-brax.txt: brax 0.14.2 on jax 0.9.2;
``pip install -e ".[brax]" jax==0.9.2 jaxlib==0.9.2``). Trains, one library after the other:

(a) ``brax.training.agents.ppo.train`` with Brax's published settings for
    ``inverted_double_pendulum``: the training colab, notebooks/training.ipynb of google/brax
    (unchanged from commit f489566 "Update Brax version to 0.14.2" to the newest stored one,
    0b96d05), its "Training" cell: ``num_timesteps=20_000_000, num_evals=20,
    reward_scaling=10, episode_length=1000, normalize_observations=True, action_repeat=1,
    unroll_length=5, num_minibatches=32, num_updates_per_batch=4, discounting=0.97,
    learning_rate=3e-4, entropy_cost=1e-2, num_envs=2048, batch_size=1024, seed=1``, on the
    environment of its "Load Env" cell, ``envs.get_environment(env_name, backend='positional')``.
    Every other argument keeps train()'s default (brax/training/agents/ppo/train.py of 0.14.2:
    ``clipping_epsilon=0.3, gae_lambda=0.95, vf_loss_coefficient=0.5, max_grad_norm=None``,
    constant learning rate, ``num_eval_envs=128``, networks ``make_ppo_networks``: policy
    4 x 32, value 5 x 256, swish, LeCun-uniform kernels, tanh-squashed Gaussian), except
    ``num_timesteps`` (``--total-steps``), ``num_evals`` (see below), ``seed`` (0, 1, ...) and
    ``deterministic_eval=True`` (the colab evaluates sampled actions).
(b) rollax's PPO (``rollax.run``, the API behind ``rollax train --seeds N --eval-every K``) on
    ``rollax.make("brax:inverted_double_pendulum", backend=...)``, the same raw Brax
    environment through rollax's adapter, with the settings mapped onto ``PPOConfig``
    (:func:`settings_rows`); its seeds are lanes of one compiled program.

One Brax update collects ``batch_size * num_minibatches / num_envs = 16`` successive unrolls of
``unroll_length = 5`` steps per environment (80 steps x 2048 envs = 163,840 steps); rollax's
collects ``num_steps = 80`` steps of 2048 environments: the same 163,840 steps, in 32
minibatches, 4 epochs. ``--total-steps`` is cut to whole updates. Both evaluate the greedy
policy (128 episodes of at most 1000 steps) before training and after every ``K`` updates,
``K = updates / E`` with ``E`` the largest divisor of the number of updates up to 19 (the
colab's 20 evaluations: one before training, 19 after): Brax through ``num_evals = E + 1`` and
its ``progress_fn`` (``eval/episode_reward``), rollax through ``eval_every = K``. The final
return of a seed is its last evaluation. Compile time is the union of the spans of JAX's
trace, lowering and compile events (``jax.monitoring``) during a library's runs. Env steps/s:
all seeds' training steps over wall time less compile time, and "steady": the steps from the
first evaluation after training started to the last over the time between them (updates and
evaluations only, less any compile time between them; needs two evaluations after the
initial one).
The default budget, 819,200 steps per seed (5 updates, 4 % of the colab's 20M, which makes
122 updates), is sized to take about 20-25 minutes for both libraries and 3 seeds on a quiet
2-core CPU, compilation included (about 2 minutes per compile there: Brax compiles once per
seed); so few updates of 163,840 steps move the returns little.
``--num-envs N`` (default 2048, the colab's) scales both libraries' batch (Brax's
``batch_size = N / 2``: still 16 unrolls of 5 per environment and 32 minibatches per update),
a deviation from the published settings for machines where 163,840-step updates are too few.
Output: a markdown table, the settings (:func:`settings_rows`) and :data:`DIFFERENCES`, the
JSON (``--json``) and a figure of both libraries' evaluation curves, the mean over seeds
(``--plot``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time

import jax
import numpy as np
from _timing import device
from scipy import stats

import rollax
from rollax.algos.ppo import PPOConfig
from rollax.run.config import assemble
from rollax.run.training import new_run

ENV = "inverted_double_pendulum"
UNROLL, MINIBATCHES, EPOCHS = 5, 32, 4
UNROLLS_PER_UPDATE = 16  # batch_size * num_minibatches / num_envs = 1024 * 32 / 2048
NUM_STEPS = UNROLL * UNROLLS_PER_UPDATE  # rollax's steps per environment per update: 80
EPISODE_LENGTH, EVAL_EPISODES, MAX_EVALS_AFTER_INIT = 1000, 128, 19
# The colab's settings for inverted_double_pendulum, less num_timesteps, num_evals and seed.
BRAX_SETTINGS = dict(
    reward_scaling=10, episode_length=EPISODE_LENGTH, normalize_observations=True,
    action_repeat=1, unroll_length=UNROLL, num_minibatches=MINIBATCHES,
    num_updates_per_batch=EPOCHS, discounting=0.97, learning_rate=3e-4, entropy_cost=1e-2,
    num_envs=2048, batch_size=1024, deterministic_eval=True, num_eval_envs=EVAL_EPISODES)
ROLLAX_SETTINGS = dict(
    horizon=EPISODE_LENGTH, num_envs=2048, num_steps=NUM_STEPS, epochs=EPOCHS,
    minibatches=MINIBATCHES, lr=3e-4, anneal_lr=False, gamma=0.97, gae_lambda=0.95,
    clip_eps=0.3, clip_value=False, vf_coef=0.5, ent_coef=1e-2, max_grad_norm=1e9,
    normalize_advantages=True, normalize_observations=True, reward_scale=10.0,
    hidden=(256,) * 5, activation="relu", network="mlp", eval_episodes=EVAL_EPISODES)

def settings_rows(num_envs: int) -> list[tuple[str, str, str]]:
    """(setting, Brax ppo.train, rollax PPOConfig) for ``num_envs`` environments (2048: the
    colab's settings)."""
    batch, steps = num_envs // 2, num_envs * NUM_STEPS
    return [
        ("environment", "envs.get_environment('inverted_double_pendulum', backend=B) wrapped "
         "by ppo.train (EpisodeWrapper(1000), AutoResetWrapper)",
         "rollax.make('brax:inverted_double_pendulum', backend=B) (raw env, horizon=1000)"),
        ("parallel envs", f"num_envs={num_envs}", f"num_envs={num_envs}"),
        ("steps per update", f"batch_size * num_minibatches * unroll_length = {batch} * 32 * 5 "
         f"= {steps:,} (16 unrolls of 5 per env)",
         f"num_envs * num_steps = {num_envs} * 80 = {steps:,}"),
        ("epochs x minibatches", "num_updates_per_batch=4, num_minibatches=32",
         "epochs=4, minibatches=32"),
        ("learning rate", "learning_rate=3e-4, constant", "lr=3e-4, anneal_lr=False"),
        ("discount, GAE lambda", "discounting=0.97, gae_lambda=0.95 (default)",
         "gamma=0.97, gae_lambda=0.95"),
        ("PPO clip", "clipping_epsilon=0.3 (default)", "clip_eps=0.3"),
        ("value loss", "0.5 * vf_loss_coefficient(0.5) * MSE, unclipped",
         "vf_coef=0.5 (0.5 * vf_coef * MSE), clip_value=False"),
        ("entropy", "entropy_cost=1e-2", "ent_coef=1e-2"),
        ("reward scaling", "reward_scaling=10", "reward_scale=10"),
        ("observation normalisation", "normalize_observations=True",
         "normalize_observations=True"),
        ("advantage normalisation", "normalize_advantage=True (per minibatch)",
         "normalize_advantages=True (per minibatch)"),
        ("gradient clipping", "max_grad_norm=None (none)", "max_grad_norm=1e9 (no effect)"),
        ("networks", "policy 4 x 32, value 5 x 256, swish",
         "actor and critic 5 x 256 each, relu (hidden=(256,)*5, activation='relu')"),
        ("evaluation", "num_eval_envs=128, deterministic_eval=True",
         "eval_episodes=128, greedy"),
    ]


DIFFERENCES = [
    ("advantages: Brax computes GAE inside the loss of every minibatch, with the current value "
     "network, over each 5-step unroll bootstrapped from the value of the unroll's last next "
     "observation; rollax computes GAE once per update, over 80 steps, with the values at "
     "collection, frozen through the epochs"),
    ("minibatches: Brax shuffles whole 5-step unrolls (32 minibatches of 1024 unrolls); "
     "rollax shuffles single steps (32 minibatches of 5120 steps)"),
    ("time limit: Brax's EpisodeWrapper marks step 1000 as truncation and zeroes that step's "
     "TD error and advantage (no bootstrap); rollax bootstraps a truncated episode from the "
     "value of its true next observation"),
    ("resets: Brax's AutoResetWrapper puts back each environment's cached first state (every "
     "episode of an environment starts alike); rollax resets with a fresh key"),
    ("policy: Brax's is a tanh-squashed Gaussian whose scale (softplus + 0.001) is an output "
     "of the policy network, its entropy estimated from one sample; rollax's is a Gaussian with "
     "a state-independent log std (initially 0) and exact entropy, its actions unbounded and "
     "clipped to [-1, 1] by Brax's actuator (greedy: Brax tanh(mean), rollax the mean)"),
    ("networks: Brax's policy is 4 x 32 and its value 5 x 256, swish, LeCun-uniform kernels, "
     "zero biases; rollax's actor and critic have the same hidden sizes and its activations "
     "are tanh or relu only, so both are 5 x 256 relu (the actor is ~80 times bigger than "
     "Brax's, more compute per update), orthogonal kernels (gain sqrt 2, actor output 0.01, "
     "critic output 1), zero biases"),
    ("observation normalisation: Brax's running mean and std (Welford, std clipped to "
     "[1e-6, 1e6]) take in each batch before its SGD, unclipped; rollax's (prior count 1e-4, "
     "var + 1e-8) take it in after the SGD, normalised observations clipped to +-10"),
    ("optimiser: Adam eps 1e-8 in Brax (optax default), 1e-5 in rollax; rollax always clips "
     "the actor's and the critic's gradient norms (here at 1e9, never reached), Brax does not "
     "clip"),
    ("evaluation: Brax's Evaluator runs 128 environments for 1000 steps through its wrappers "
     "and sums each one's first episode; rollax runs 128 absorbing episodes per seed; both "
     "greedy, on different keys"),
    ("seeds: Brax trains its seeds one after the other (seed 0, 1, ...), each a new compile; "
     "rollax trains them as lanes of one vmapped program (keys 0, 1, ...)"),
]


def eval_schedule(updates: int) -> int:
    """Evaluations after the initial one: the largest divisor of ``updates`` up to 19, so that
    both libraries evaluate at the same multiples of ``updates / E`` updates."""
    return max(d for d in range(1, min(updates, MAX_EVALS_AFTER_INIT) + 1) if updates % d == 0)


class CompileClock:
    """The wall seconds spent tracing, lowering and compiling (the union of the spans of
    JAX's ``/jax/core/compile/*`` events) within a window of ``time.time()``."""

    def __init__(self):
        self.spans: list[tuple[float, float]] = []
        jax.monitoring.register_event_time_span_listener(self._record)

    def _record(self, event, start, end, **_):
        if event.startswith("/jax/core/compile/"):
            self.spans.append((start, end))

    def seconds(self, since: float, until: float) -> float:
        total, reach = 0.0, since
        for start, end in sorted(self.spans):
            start, end = max(start, reach), min(end, until)
            if end > start:
                total += end - start
                reach = end
        return total


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval of the mean (the mean twice for one value)."""
    x = np.asarray(values, np.float64)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def run_brax(updates: int, evals: int, seeds: int, num_envs: int, backend: str,
             clock: CompileClock) -> dict:
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    settings = dict(BRAX_SETTINGS, num_envs=num_envs, batch_size=num_envs // 2)
    steps = updates * num_envs * NUM_STEPS
    curves, walls, cpus, compiles, times = [], [], [], [], []
    for seed in range(seeds):
        env = envs.get_environment(ENV, backend=backend)
        curve: list[list[float]] = []
        stamps: list[float] = []
        start, cpu, start_clock = time.perf_counter(), time.process_time(), time.time()

        def progress(step, metrics, curve=curve, stamps=stamps, start=start, seed=seed):
            stamps.append(time.time())
            curve.append([int(step), float(metrics["eval/episode_reward"])])
            print(f"  brax seed {seed}: {int(step):>10,} steps  greedy return "
                  f"{curve[-1][1]:9.1f}  [{time.perf_counter() - start:7.1f} s]", flush=True)

        ppo.train(environment=env, num_timesteps=steps, num_evals=evals + 1, seed=seed,
                  progress_fn=progress, **settings)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        compiles.append(clock.seconds(start_clock, time.time()))
        curves.append(curve)
        times.append(stamps)
    shown = {"num_timesteps": steps, "num_evals": evals + 1, "seed": list(range(seeds)),
             "backend": backend, **settings}
    return record("brax", importlib.metadata.version("brax"), shown, steps, curves, walls,
                  cpus, compiles, steady_sps(curves, times, 1, clock),
                  seeds_wall="one train() call per seed, in turn")


def run_rollax(updates: int, evals: int, seeds: int, num_envs: int, backend: str,
               clock: CompileClock) -> dict:
    every = updates // evals
    config = PPOConfig(env=f"brax:{ENV}", total_steps=updates * num_envs * NUM_STEPS,
                       **dict(ROLLAX_SETTINGS, num_envs=num_envs))
    env = rollax.make(config.env, horizon=EPISODE_LENGTH, backend=backend)
    settings = {"seeds": seeds, "eval_every": every, "chunk_size": 1,
                "checkpoint_every": updates}
    run, algo = assemble(config, env, settings, given=set(settings))
    start, cpu, start_clock = time.perf_counter(), time.process_time(), time.time()
    stamps: list[float] = []

    def on_chunk(chunk):
        values = [r["greedy_return"] for r in chunk.rows if "greedy_return" in r]
        if values:
            stamps.append(time.time())
            print(f"  rollax ({seeds} seeds): {chunk.env_steps:>10,} steps  greedy return "
                  f"{statistics.mean(values):9.1f} (mean)  [{time.perf_counter() - start:7.1f}"
                  " s]", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        folder, (summary, _) = new_run(run, algo, os.path.join(tmp, "run"), on_chunk=on_chunk)
        rows = folder.read_metrics()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    compile_s = clock.seconds(start_clock, time.time())
    per_update = num_envs * NUM_STEPS
    curves = []
    for seed in range(seeds):
        mine = [r for r in rows if r["seed"] == seed]
        curve = [[0, float(r["eval_return"])] for r in mine if r["update"] == 0]
        curve += [[r["update"] * per_update, float(r["greedy_return"])]
                  for r in mine if "greedy_return" in r]
        curves.append(curve)
    shown = {**{k: (list(v) if isinstance(v, tuple) else v)
                for k, v in vars(algo.config).items()}, "backend": backend,
             "seeds": seeds, "eval_every": every}
    steady = steady_sps(curves[:1], [[start_clock, *stamps]], seeds, clock)
    return record("rollax", rollax.__version__, shown, config.total_steps, curves, [wall],
                  [cpu], [compile_s], steady, seeds_wall="all seeds as lanes of one program",
                  rollax_compile_chunk_s=summary["compile_time_s"],
                  rollax_final_eval_returns=[lane["eval_return"] for lane in summary["lanes"]])


def steady_sps(curves: list, stamps: list, lanes: int, clock: CompileClock) -> float | None:
    """Env steps per second from the first evaluation after training started to the last
    (each interval: ``K`` updates and one evaluation), less any compile time between them,
    over the runs given (``stamps[i][j]``: ``time.time()`` when run ``i`` reported point ``j``
    of its curve; ``lanes`` seeds per run); ``None`` with fewer than two evaluations after the
    initial one."""
    steps = seconds = 0.0
    for curve, times in zip(curves, stamps):
        if len(curve) >= 3 and len(times) == len(curve):
            steps += lanes * (curve[-1][0] - curve[1][0])
            seconds += times[-1] - times[1] - clock.seconds(times[1], times[-1])
    return steps / seconds if seconds > 0 else None


def record(lib: str, version: str, config: dict, steps: int, curves: list, walls: list,
           cpus: list, compiles: list, steady: float | None, **extra) -> dict:
    finals = [curve[-1][1] for curve in curves]
    mean, low, high = t_interval(finals)
    wall, compile_s = sum(walls), sum(compiles)
    return {
        "lib": lib, "version": version, "config": config, "env_steps": steps,
        "seeds": len(curves), "final_returns": finals, "final_mean": mean,
        "final_ci95": [low, high], "curves": curves, "wall_s": wall, "wall_s_parts": walls,
        "cpu_s": sum(cpus), "compile_s": compile_s, "compile_s_parts": compiles,
        "sps": len(curves) * steps / max(wall - compile_s, 1e-9), "sps_steady": steady,
        **extra,
    }


def table(records: list[dict]) -> str:
    lines = ["| library | version | settings | env steps/seed | final greedy return, mean "
             "[95% t-interval] | per-seed returns | compile s | wall s | CPU s | "
             "env steps/s (wall less compile) | env steps/s (steady) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        c = r["config"]
        if r["lib"] == "brax":
            shown = (f"num_envs={c['num_envs']}, batch_size={c['batch_size']}, unroll 5, "
                     f"32 minibatches, 4 epochs, {c['backend']}")
        else:
            shown = (f"num_envs={c['num_envs']}, num_steps={c['num_steps']}, 32 minibatches, "
                     f"4 epochs, hidden 5x256 relu, {c['backend']}")
        lo, hi = r["final_ci95"]
        seeds = ", ".join(f"{x:.1f}" for x in r["final_returns"])
        steady = "—" if r["sps_steady"] is None else f"{r['sps_steady']:,.0f}"
        lines.append(f"| {r['lib']} | {r['version']} | {shown} | {r['env_steps']:,} | "
                     f"{r['final_mean']:.1f} [{lo:.1f}, {hi:.1f}] | {seeds} | "
                     f"{r['compile_s']:.1f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                     f"{r['sps']:,.0f} | {steady} |")
    return "\n".join(lines)


def plot(records: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in records:
        steps = np.array([s for s, _ in r["curves"][0]], np.float64)
        values = np.array([[v for _, v in curve] for curve in r["curves"]], np.float64)
        mean = values.mean(axis=0)
        ax.plot(steps, mean, marker="o", label=f"{r['lib']} {r['version']} "
                f"(mean of {len(values)} seeds)")
        if len(values) > 1:
            ax.fill_between(steps, values.min(axis=0), values.max(axis=0), alpha=0.2)
    ax.set_xlabel("environment steps per seed")
    ax.set_ylabel("greedy return, 128 episodes\n(line: mean; band: min-max of seeds)")
    ax.set_title(f"PPO on Brax's {ENV}")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-steps", type=int, default=819_200,
                        help="env steps per seed, cut to whole updates of num_envs * 80")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", default=None, help="PNG of both libraries' curves")
    parser.add_argument("--num-envs", type=int, default=2048,
                        help="parallel envs (Brax's batch_size = num_envs / 2); 2048 published")
    parser.add_argument("--backend", default="positional",
                        help="Brax physics backend of the environment (the colab's: positional)")
    parser.add_argument("--libs", nargs="+", choices=("brax", "rollax"),
                        default=["brax", "rollax"],
                        help="train only these (benchmarks/accel.sh runs each in its own call)")
    args = parser.parse_args()
    if args.num_envs < 2 or args.num_envs % 2:
        parser.error("--num-envs must be even (Brax's batch_size is num_envs / 2)")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    updates = args.total_steps // (args.num_envs * NUM_STEPS)
    if updates < 1:
        parser.error(f"--total-steps must be at least num_envs * {NUM_STEPS} = "
                     f"{args.num_envs * NUM_STEPS}")
    evals = eval_schedule(updates)
    print(f"{updates} updates of {args.num_envs * NUM_STEPS:,} steps per seed, greedy "
          f"evaluation every {updates // evals} update(s), {args.seeds} seeds; "
          f"{device()}", flush=True)
    clock = CompileClock()
    runs = {"brax": run_brax, "rollax": run_rollax}
    records = [runs[lib](updates, evals, args.seeds, args.num_envs, args.backend, clock)
               for lib in args.libs]
    print()
    print(table(records))
    print("\nSettings (Brax ppo.train | rollax PPOConfig):")
    rows = settings_rows(args.num_envs)
    for name, brax_side, rollax_side in rows:
        print(f"- {name}: {brax_side} | {rollax_side}")
    print("\nDIFFERENCES:")
    for line in DIFFERENCES:
        print(f"- {line}")
    out = {
        "env": ENV, "updates": updates, "evals_after_init": evals, "records": records,
        "settings": [list(row) for row in rows], "differences": DIFFERENCES,
        "device": device(), "machine": f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average at the end {os.getloadavg()}",
        "versions": {name: importlib.metadata.version(name)
                     for name in ("brax", "jax", "jaxlib", "flax", "optax", "mujoco")},
        "command": " ".join(shlex.quote(a) for a in ["python", *sys.argv]),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.plot:
        plot(records, args.plot)
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()

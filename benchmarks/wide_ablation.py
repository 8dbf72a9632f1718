"""Why PPO at 1,024 CartPole environments learned less than rejax: one factor at a time.

    python benchmarks/wide_ablation.py [--seeds 8] [--num-envs 1024] [--total-steps 2097152]
        [--only NAME ...] [--json OUT]

CleanRL's CartPole settings (128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed, 64 x 64
tanh) with ``--num-envs`` environments; 1,024 x 128 x 16 updates = 2,097,152 steps by default.
Each row trains ``--seeds`` seeds (keys 0..seeds-1) in one ``vmap``; the greedy return after
training (32 episodes per seed, rollax's own evaluation) is summarised by its mean, a 95 %
t-interval of the mean, the median and the minimum.

``cleanrl`` is rollax's PPO as it was before 2026-12-02, CleanRL's choices: the actor's output
layer drawn with orthogonal gain 0.01, one global-norm clip (0.5) of the joint actor-critic
gradient, Adam eps 1e-5, the learning rate lowered at every gradient step, value loss x 0.5.
Every other row changes one or two of these, in the settings where rollax and rejax 0.1.3
differ (benchmarks/ppo_rejax.py lists them):

- ``actor-gain-1``: the actor's output layer drawn with orthogonal gain 1;
- ``lecun-init``: every layer drawn as rejax's flax ``Dense`` default (LeCun normal, truncated
  normal of variance 1 / fan_in), zero biases;
- ``adam-eps-1e-8``: Adam's epsilon 1e-8 (optax's default, rejax's);
- ``clip-per-network``: the global-norm clip applied to the actor's and the critic's gradients
  apart (``rollax.algos.optim.clip_per_network``);
- ``clip-elementwise``: rejax's ``optax.clip(0.5)``, each gradient entry clipped to [-0.5, 0.5];
- ``no-clip``: no gradient clipping;
- ``anneal-per-update``: the learning rate held within an update and lowered at each update;
- ``vf-coef-0.25`` / ``vf-coef-1``: the value loss weighted 0.25 / 1;
- pairs (``A+B``), ``rejax-choices`` (LeCun init, Adam eps 1e-8 and the element-wise clip
  together: rejax's, apart from its two optimisers, which change nothing else here since the
  networks share no parameters), and ``rollax``: rollax's defaults as they are now, no patch
  (since 2026-12-02: gain 1 for logits and the per-network clip, i.e. ``actor-gain-1+clip-per-
  network``).

The rows are made by replacing rollax's own parts in this process while the program is traced
(``ActorCriticHead.head_plans``, the MLP's initial matrices, ``PPOParts.optimiser``,
``PPOParts.schedule``) or one config field; nothing else changes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from unittest import mock

import jax
import jax.numpy as jnp
import optax
from _timing import device
from scipy import stats as scipy_stats

import rollax
from rollax.algos import optim, ppo
from rollax.nets import heads, mlp

Patch = Callable[[], contextlib.AbstractContextManager]


def _optimiser(clip: Callable[[float], optax.GradientTransformation] | None, eps: float):
    def optimiser(self, hp):
        adam = optax.adam(lambda count: self.schedule(hp, count), eps=eps)
        return adam if clip is None else optax.chain(clip(hp.max_grad_norm), adam)
    return optimiser


def _anneal_per_update(self, hp, count):
    step = count // self.steps_per_update * self.steps_per_update  # the update's first step
    return optax.linear_schedule(hp.lr, 0.0, self.num_updates * self.steps_per_update)(step)


def _actor_gain(gain: float):
    original = heads.ActorCriticHead.head_plans

    def head_plans(self, num_features):
        (actor_shapes, actor_gains), critic = original(self, num_features)
        return (actor_shapes, [*actor_gains[:-1], gain]), critic
    return head_plans


def _lecun_plans(key, plans):
    """Each matrix ``(n_out, n_in)`` drawn as flax's Dense default: a normal truncated at +-2
    standard deviations, scaled to variance 1 / n_in (``variance_scaling(1, fan_in,
    truncated_normal)``), gains ignored."""
    shapes = [shape for plan_shapes, _ in plans for shape in plan_shapes]
    keys = jax.random.split(key, len(shapes))
    init = jax.nn.initializers.lecun_normal(in_axis=1, out_axis=0)
    weights = [init(k, shape, jnp.float32) for k, shape in zip(keys, shapes, strict=True)]
    out, start = [], 0
    for plan_shapes, _ in plans:
        out.append(weights[start:start + len(plan_shapes)])
        start += len(plan_shapes)
    return out


CLIPS = {"joint": optax.clip_by_global_norm, "per-network": optim.clip_per_network,
         "elementwise": optax.clip, "none": None}


def variant(gain: float | str = 0.01, clip: str = "joint", eps: float = 1e-5,
            anneal: str = "step", **fields) -> tuple[list[Patch], dict]:
    """The patches and config fields of one row; the defaults are the ``cleanrl`` row."""
    patches: list[Patch] = [
        lambda: mock.patch.object(ppo.PPOParts, "optimiser", _optimiser(CLIPS[clip], eps))]
    if gain == "lecun":
        patches.append(lambda: mock.patch.object(mlp, "orthogonal_plans", _lecun_plans))
    else:
        patches.append(lambda: mock.patch.object(heads.ActorCriticHead, "head_plans",
                                                 _actor_gain(float(gain))))
    if anneal == "update":
        patches.append(lambda: mock.patch.object(ppo.PPOParts, "schedule", _anneal_per_update))
    return patches, fields


VARIANTS: dict[str, tuple[list[Patch], dict]] = {
    "cleanrl": variant(),
    "actor-gain-1": variant(gain=1.0),
    "lecun-init": variant(gain="lecun"),
    "adam-eps-1e-8": variant(eps=1e-8),
    "clip-per-network": variant(clip="per-network"),
    "clip-elementwise": variant(clip="elementwise"),
    "no-clip": variant(clip="none"),
    "anneal-per-update": variant(anneal="update"),
    "vf-coef-0.25": variant(vf_coef=0.25),
    "vf-coef-1": variant(vf_coef=1.0),
    "actor-gain-1+clip-per-network": variant(gain=1.0, clip="per-network"),
    "actor-gain-1+adam-eps-1e-8": variant(gain=1.0, eps=1e-8),
    "lecun-init+clip-per-network": variant(gain="lecun", clip="per-network"),
    "rejax-choices": variant(gain="lecun", clip="elementwise", eps=1e-8),
    "rollax": ([], {}),
}


@contextlib.contextmanager
def applied(patches: list[Patch]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch())
        yield


def summary(returns: list[float]) -> dict:
    n = len(returns)
    mean = statistics.fmean(returns)
    half = (scipy_stats.t.ppf(0.975, n - 1) * statistics.stdev(returns) / math.sqrt(n)
            if n > 1 else float("nan"))
    return {"mean": mean, "ci95": [mean - half, mean + half],
            "median": statistics.median(returns), "min": min(returns), "returns": returns}


def run(name: str, seeds: int, num_envs: int, total_steps: int) -> dict:
    patches, fields = VARIANTS[name]
    config = dataclasses.replace(ppo.PPOConfig(total_steps=total_steps, num_envs=num_envs),
                                 **fields)
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds))
    with applied(patches):  # the patches act while the program is traced
        start = time.perf_counter()
        compiled = jax.jit(jax.vmap(rollax.make_train(config))).lower(keys).compile()
        compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = compiled(keys)
    returns = [float(r) for r in jax.block_until_ready(out.eval_return)]
    return {"variant": name, "num_envs": num_envs, "total_steps": total_steps,
            "compile_s": compile_s, "run_s": time.perf_counter() - start, **summary(returns)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--total-steps", type=int, default=2_097_152)
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    print(f"# {device()}; {args.num_envs} envs, {args.total_steps:,} steps, {args.seeds} seeds")
    print("| variant | mean | 95% CI | median | min | run s |")
    print("|---|---|---|---|---|---|")
    for name in args.only:
        row = run(name, args.seeds, args.num_envs, args.total_steps)
        rows.append(row)
        low, high = row["ci95"]
        print(f"| {name} | {row['mean']:.1f} | [{low:.1f}, {high:.1f}] | {row['median']:.1f} "
              f"| {row['min']:.1f} | {row['run_s']:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

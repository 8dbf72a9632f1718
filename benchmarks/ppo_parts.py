"""Where one PPO update's time goes, rollax or rejax (one library per process): the whole update,
the rollout alone and (rollax) the epochs of minibatch steps alone, each its own compiled
program, timed per call.

    python benchmarks/ppo_parts.py --lib rollax [--num-envs 1024] [--calls 30] [--json OUT]
    python benchmarks/ppo_parts.py --lib rejax  [--num-envs 1024] [--calls 30] [--json OUT]
    python benchmarks/ppo_parts.py --lib rollax --variants [--seeds K]

Settings are ppo_rollax.py's and ppo_rejax.py's (CartPole-v1, 128 steps, 4 epochs x 4
minibatches, a 64-64 tanh MLP). Each program is compiled apart and called once to warm up, then
``--calls`` times from the same input (median per call, ms). rollax's parts: ``update``
(PPOParts.update), ``collect`` (the rollout of 128 steps, the critic's pass over truncated
episodes' final observations included), ``advantages`` (GAE and the batch) and ``epochs``
(the 16 minibatch steps on a fixed batch). rejax's: ``update`` (train_iteration) and
``collect`` (collect_trajectories). The difference of ``update`` and ``collect`` is the rest.
``--seeds K``: seeds.py's program instead (the CartPole-v1 preset: 8 envs x 32 steps, 20 epochs
of one minibatch), every part vmapped over K seeds, and a ``shuffle`` part (one epoch's
permutation and gather). ``--variants``: the epochs' time under each change of
:func:`variants` (undone after its row).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax


def timed(fn, *args, calls: int) -> float:
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def rollax_parts(num_envs: int, calls: int, only=("update", "collect", "advantages", "epochs"),
                 seeds: int = 0) -> dict:
    """``seeds`` > 0: the CartPole-v1 preset (seeds.py's program) with every part vmapped over
    that many seeds; else PPOConfig's defaults with ``num_envs``."""
    import jax.numpy as jnp

    from rollax.algos import ppo, registry

    config = (ppo.preset("CartPole-v1", total_steps=100_000, eval_episodes=8) if seeds
              else ppo.PPOConfig(num_envs=num_envs))
    env = ppo.validate(config)
    parts = ppo.make_parts(ppo.resolved(config, env), env)
    hp = registry.build(config).hyperparams
    exp = parts.experience
    v = (lambda f: jax.vmap(f)) if seeds else (lambda f: f)
    keys = jax.vmap(jax.random.key)(jnp.arange(max(seeds, 1)))
    key = keys if seeds else keys[0]
    state = jax.jit(v(lambda k: parts.init(k, hp)))(key)
    collected = jax.jit(v(exp.collect))(state, key)
    advantages = jax.jit(v(lambda s, c: exp.advantages(s, c, hp)))(state, collected)
    batch = jax.jit(v(exp.batch))(state, collected, advantages)
    programs = {
        "update": (lambda s: parts.update(s, hp), state),
        "collect": (exp.collect, state, key),
        "advantages": (lambda s, c: exp.batch(s, c, exp.advantages(s, c, hp)), state, collected),
        "epochs": (lambda s, b, k: parts.sgd_epochs(s, b, k, hp), state, batch, key),
        "shuffle": (lambda b, k: exp.minibatches(b, k, config.minibatches), batch, key),
    }
    return {name: timed(v(programs[name][0]), *programs[name][1:], calls=calls)
            for name in only}


def variants(seeds: int = 0) -> dict:
    """Changes to rollax's minibatch step, each undone after its row: what each costs."""
    import optax

    import rollax.algos.experience as experience
    import rollax.algos.optim as optim
    import rollax.losses as losses

    def ratio_stats_off(ratio, log_ratio, clip_eps, live=None):
        zero = ratio.sum() * 0.0
        return losses.RatioStats(zero, zero, zero, zero, zero)

    def unshuffled(flat, key, count):  # the cells in their order: what the shuffle costs
        n = flat.log_prob.shape[0]
        return jax.tree_util.tree_map(lambda x: x.reshape((count, n // count) + x.shape[1:]),
                                      flat)

    def per_field(tree, index):  # the shuffle before take_rows: one gather per field
        return jax.tree_util.tree_map(lambda x: x[index], tree)

    if seeds:
        return {"rollax as is": [], "a gather per field": [(experience, "take_rows", per_field)],
                "no shuffle": [(experience, "shuffled_cells", unshuffled)]}
    return {
        "rollax as is": [],
        "a gather per field": [(experience, "take_rows", per_field)],
        "one global-norm clip": [(optim, "clip_per_network", optax.clip_by_global_norm)],
        "element-wise clip (rejax)": [(optim, "clip_per_network", optax.clip)],
        "no ratio statistics": [(losses, "ratio_stats", ratio_stats_off)],
        "no sharding constraint": [(experience, "constrain_envs", lambda x, axis: x)],
    }


def rollax_variants(num_envs: int, calls: int, seeds: int = 0) -> dict:
    out = {}
    for name, patches in variants(seeds).items():
        saved = [(m, a, getattr(m, a)) for m, a, _ in patches]
        for module, attr, value in patches:
            setattr(module, attr, value)
        try:
            out[name] = rollax_parts(num_envs, calls, only=("epochs",), seeds=seeds)["epochs"]
        finally:
            for module, attr, value in saved:
                setattr(module, attr, value)
    return out


def rejax_parts(num_envs: int, calls: int) -> dict:
    import sys
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from ppo_rejax import make_algo

    algo, _, _ = make_algo(num_envs * 128 * 16, num_envs)
    ts = jax.jit(algo.init_state)(jax.random.PRNGKey(0))
    return {"update": timed(algo.train_iteration, ts, calls=calls),
            "collect": timed(lambda t: algo.collect_trajectories(t), ts, calls=calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", choices=["rollax", "rejax"], required=True)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4, 1024])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--variants", action="store_true",
                        help="rollax: the epochs' time under each change of variants()")
    parser.add_argument("--seeds", type=int, default=0,
                        help="rollax: the CartPole-v1 preset, vmapped over this many seeds")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    dev = jax.devices()[0]
    print(f"{args.lib}: jax {jax.__version__} on {dev.platform} ({getattr(dev, 'device_kind', '')})"
          "; ms per call, median")
    rows = []
    for n in args.num_envs:
        if args.variants:
            row = rollax_variants(n, args.calls, args.seeds)
        elif args.lib == "rollax":
            row = rollax_parts(n, args.calls, seeds=args.seeds,
                               only=("update", "collect", "advantages", "epochs", "shuffle"))
        else:
            row = rejax_parts(n, args.calls)
        rows.append({"lib": args.lib, "num_envs": n, **row})
        print(f"| {args.lib} | {n} | " + " | ".join(f"{k} {v:.3f}" for k, v in row.items())
              + " |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""Environment and collector throughput, rollax beside gymnax in one process.

    python benchmarks/throughput.py [--sizes 1 64 1024 16384] [--steps 1000] [--repeats 5]
                                    [--corridor 1024 65536] [--prng IMPL] [--json OUT]
                                    [--resets finished] [--actions batched] [--profile DIR]

Rows (medians of ``--repeats`` timed runs after one warm-up; compile time apart):

- CartPole-v1, uniform random policy, auto-reset, ``jit(vmap)`` x ``scan`` of ``--steps``
  steps, no trajectory stored (each side folds rewards into a sum): rollax vs gymnax 1.x;
- the corridor's absorbing collector (``rollax.collect``, trajectory stored), T = 8 and 64.

Both CartPole loops draw one action key per (step, environment) the same way (``--actions
batched``: all of a step's actions from one key, ``randint(key, (B,))``, so that the harness's
own key splits leave the comparison); gymnax's
``step`` also resets every environment at every step (and selects); rollax's
``rollax.collect.autoreset`` (the reset of ``collect_autoreset``) resets only the environments
that finished, each with its own fresh key per (step, environment).

``--resets all|finished`` replaces the platform's choice inside ``autoreset`` for rollax's row:
``reset_all`` (every reset computed and the finished selected, the accelerators' default) or
``reset_finished`` (only the finished ones reset through a compacted gather and a switch, the
CPU's default); ``all-split`` is ``all`` with the reset keys from ``split`` whatever the key
implementation (:func:`reset_all_split`: rollax's path under ``rbg`` before
``rollax.keys.children``). ``--profile DIR`` traces one more run of each row with
``jax.profiler`` and prints its busiest device operations (``seeds.busiest``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import jax
import jax.numpy as jnp

import rollax
from rollax.collect import autoreset, reset_all, reset_finished
from rollax.recurrent import reset_where


def reset_all_split(env, done, state, key):
    """``reset_all`` with the ``B`` reset keys split by the implementation's own ``split``
    (rollax's path before ``rollax.keys.children``: under ``rbg``, ``B`` threefry hashes)."""
    return reset_where(done, jax.vmap(env.reset)(jax.random.split(key, done.shape[0])), state)


RESETS = {"platform": autoreset, "all": reset_all, "finished": reset_finished,
          "all-split": reset_all_split}


def draw_actions(key, batch: int, batched: bool):
    """A step's uniformly random CartPole actions: one key per environment (split), or one
    draw of ``B`` from the step's key (``batched``)."""
    if batched:
        return jax.random.randint(key, (batch,), 0, 2)
    return jax.vmap(lambda k: jax.random.randint(k, (), 0, 2))(jax.random.split(key, batch))


def rollax_cartpole(batch: int, steps: int, resets: str = "platform", batched: bool = False):
    env = rollax.make("CartPole-v1")
    reset = RESETS[resets]

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        state = rollax.reset_batch(env, init_key, batch)

        def body(carry, step_key):
            state, total = carry
            action_key, reset_key = jax.random.split(step_key)
            actions = draw_actions(action_key, batch, batched)
            state, reward, terminated, truncated = jax.vmap(env.step)(state, actions)
            state = reset(env, terminated | truncated, state, reset_key)
            return (state, total + reward.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)),
                                     jax.random.split(key, steps))
        return total

    return run


def gymnax_cartpole(batch: int, steps: int, batched: bool = False):
    import gymnax

    env, params = gymnax.make("CartPole-v1")

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        _, state = jax.vmap(env.reset, (0, None))(jax.random.split(init_key, batch), params)

        def body(carry, step_key):
            state, total = carry
            action_key, env_key = jax.random.split(step_key)
            actions = draw_actions(action_key, batch, batched)
            out = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(env_key, batch), state,
                                                       actions, params)
            return (out[1], total + out[2].sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)),
                                     jax.random.split(key, steps))
        return total

    return run


def corridor_collect(batch: int, steps: int, unroll: int | bool = 1):
    env = rollax.make("corridor", horizon=steps)
    policy = rollax.BernoulliPolicy(3)

    @jax.jit
    def run(key):
        _, traj = rollax.collect(env, policy, policy.init(), key, batch, steps, unroll=unroll)
        return traj.reward.sum()

    return run


def compile_timed(fn):
    key = jax.random.key(0)
    start = time.perf_counter()
    compiled = fn.lower(key).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(key))  # warm-up
    return compiled, compile_s


def measure(fns: dict, repeats: int, profile: str | None = None) -> dict:
    """Compile each function apart, warm it up, then time ``repeats`` rounds in which every
    function runs once (interleaved, so a slow moment of the machine hits all of them):
    ``{name: {"compile_s", "run_s" (median)}}``."""
    compiled = {name: compile_timed(fn) for name, fn in fns.items()}
    times = {name: [] for name in fns}
    for i in range(repeats):
        k = jax.random.key(i + 1)
        for name, (fn, _) in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(k))
            times[name].append(time.perf_counter() - start)
    out = {name: {"compile_s": compiled[name][1], "run_s": statistics.median(times[name])}
           for name in fns}
    for name, (fn, _) in compiled.items() if profile else ():
        from seeds import busiest  # benchmarks/ is the script's folder

        with jax.profiler.trace(f"{profile}/{name}", create_perfetto_trace=True):
            jax.block_until_ready(fn(jax.random.key(0)))
        out[name]["busiest"] = busiest(f"{profile}/{name}", out[name]["run_s"], top=12)
        for label, ops in out[name]["busiest"].items():
            print(f"  {name}, busiest by {label}:")
            for op in ops:
                print(f"  {op['ms']:9.1f} ms {op['share']:6.1%} {op['calls']:7d}x  "
                      f"{op['name'][-110:]}")
    return out


def machine() -> str:
    device = jax.devices()[0]
    return (f"{platform.processor() or platform.machine()}, {jax.device_count()} "
            f"{device.platform} device(s) ({getattr(device, 'device_kind', '')}); "
            f"jax {jax.__version__}, Python {platform.python_version()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1, 64, 1024, 16384])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corridor", type=int, nargs="*", default=[1024, 65536])
    parser.add_argument("--unroll", default="1",
                        help="corridor collector: lax.scan unroll (an integer or 'all')")
    parser.add_argument("--no-gymnax", action="store_true")
    parser.add_argument("--no-rollax", action="store_true",
                        help="CartPole rows: gymnax only (for its peak memory alone)")
    parser.add_argument("--prng", default=None,
                        help="jax_default_prng_impl for every key (threefry2x32, rbg, unsafe_rbg)")
    parser.add_argument("--resets", choices=tuple(RESETS), default="platform",
                        help="rollax's auto-reset path (default: the platform's own choice)")
    parser.add_argument("--actions", choices=("per-env", "batched"), default="per-env",
                        help="the harness's action draw: a key per environment, or one draw")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="trace one more run of each CartPole row into DIR/<B>/")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.prng:
        jax.config.update("jax_default_prng_impl", args.prng)
    print(f"machine: {machine()}; keys: {jax.config.jax_default_prng_impl}")
    rows = []
    print("| row | B | T | rollax steps/s | gymnax steps/s | rollax / gymnax | "
          "compile s (rollax, gymnax) |")
    print("|---|---|---|---|---|---|---|")
    batched = args.actions == "batched"
    for batch in args.sizes:
        fns = {} if args.no_rollax else {
            "rollax": rollax_cartpole(batch, args.steps, args.resets, batched)}
        if not args.no_gymnax:
            fns["gymnax"] = gymnax_cartpole(batch, args.steps, batched)
        timed = measure(fns, args.repeats,
                        args.profile and f"{args.profile}/{batch}")
        ours = timed.get("rollax", {"compile_s": float("nan"), "run_s": float("nan")})
        sps = batch * args.steps / ours["run_s"]
        row = {"row": "CartPole-v1 random, auto-reset", "resets": args.resets,
               "actions": args.actions, "B": batch, "T": args.steps,
               "rollax_sps": sps, "rollax_compile_s": ours["compile_s"]}
        if not args.no_gymnax:
            theirs = timed["gymnax"]
            row["gymnax_sps"] = batch * args.steps / theirs["run_s"]
            row["gymnax_compile_s"] = theirs["compile_s"]
            row["ratio"] = sps / row["gymnax_sps"]
        row.update({f"{name}_busiest": t["busiest"] for name, t in timed.items() if "busiest" in t})
        rows.append(row)
        print(f"| {row['row']} | {batch:,} | {args.steps} | {sps:.3e} | "
              f"{row.get('gymnax_sps', float('nan')):.3e} | {row.get('ratio', float('nan')):.2f} |"
              f" {ours['compile_s']:.1f}, {row.get('gymnax_compile_s', float('nan')):.1f} |",
              flush=True)
    unroll = True if args.unroll == "all" else int(args.unroll)
    for batch in args.corridor:
        for steps in (8, 64):
            ours = measure({"rollax": corridor_collect(batch, steps, unroll)},
                           args.repeats)["rollax"]
            sps = batch * steps / ours["run_s"]
            rows.append({"row": "corridor absorbing collect", "B": batch, "T": steps,
                         "unroll": args.unroll,
                         "rollax_sps": sps, "rollax_compile_s": ours["compile_s"]})
            print(f"| corridor absorbing collect | {batch:,} | {steps} | {sps:.3e} | — | — | "
                  f"{ours['compile_s']:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "prng": jax.config.jax_default_prng_impl,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

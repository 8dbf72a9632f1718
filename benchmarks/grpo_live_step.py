"""What a live environment step costs GRPO and REINFORCE beside PPO: each with its preset on one
task (CartPole-v1), side by side in one process, the runs interleaved.

    python benchmarks/grpo_live_step.py [--task CartPole-v1] [--algos ppo reinforce grpo]
        [--seeds 1] [--vmap] [--repeats 3] [--calls 20] [--whole-batch] [--out FILE.jsonl]

The whole-episode methods collect complete episodes and count only the live steps (the padding
of finished episodes is not a step), so their cost is compared per live env step:

- **training run**: ``init`` and the preset's updates (a ``lax.scan``), ``--seeds`` seeds one
  after another (``lax.map``: each lane unbatched, as ``rollax train`` runs a CPU core's lanes)
  or, with ``--vmap``, batched (``vmap``: the family table's way, where the episodic loops run
  until every lane's episodes have ended), compiled apart, then run ``--repeats`` times, each
  algorithm in turn; the fastest run's seconds over the live env steps it took (its
  ``env_steps`` metric), and that over PPO's. The greedy evaluation is left out.
- **one update**: ``update`` (compiled apart) called ``--calls`` times on one state, the
  algorithms in turn; the fastest call over the live steps it collects, for an untrained
  policy's state (short episodes: most of the whole-episode batch is padding) and for the
  first seed's trained state the run ends with (long episodes).

The fastest of the repeats is printed (the machine's other work only adds time); the JSON rows
keep every run's time and the medians too.

``--whole-batch`` adds REINFORCE and GRPO reading every cell of their ``T x B`` batch
(``episodic.SKIP_PADDING = False``: the collection runs all ``T`` steps and the network reads
the padding too), what they cost before the live-chunk path. The machine is printed first;
``--out`` appends each row as a JSON line.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from _timing import append_row
from ppo_quality import machine

from rollax.algos import episodic, registry


def live_steps(algo, state, next_state) -> int:
    """Live env steps one update took: PPO's fixed rollout, or the episodes' live cells."""
    if algo.episodes_per_update is None:
        return algo.env_steps_per_update
    return int(next_state.env_steps) - int(state.env_steps)


class Entry:
    """One algorithm's preset on the task and its compiled programs: the training run and one
    update (``whole_batch``: the episodic methods traced reading their whole batch)."""

    def __init__(self, name: str, task: str, seeds: int, whole_batch: bool, vmap: bool):
        self.name = name + (" (whole batch)" if whole_batch else "")
        spec = registry.by_name(name)
        self.algo = algo = spec.build(spec.config(task))
        self.hp = hp = algo.hyperparams

        def train(key):
            state = algo.init(key, hp)
            state, metrics = jax.lax.scan(lambda s, _: algo.update(s, hp), state, None,
                                          algo.num_updates)
            return state, metrics.env_steps[-1]

        self.keys = jnp.stack([jax.random.key(s) for s in range(seeds)])
        episodic.SKIP_PADDING = not whole_batch  # read when the update is traced
        try:
            start = time.perf_counter()
            lanes = jax.vmap(train) if vmap else lambda keys: jax.lax.map(train, keys)
            self.train = jax.jit(lanes).lower(self.keys).compile()
            self.update = jax.jit(algo.update).lower(algo.init(self.keys[0], hp), hp).compile()
            self.compile_s = time.perf_counter() - start
        finally:
            episodic.SKIP_PADDING = True
        self.run_s: list[float] = []
        self.final = None
        self.steps = 0

    def run(self) -> None:
        start = time.perf_counter()
        final, steps = jax.block_until_ready(self.train(self.keys))
        self.run_s.append(time.perf_counter() - start)
        self.final, self.steps = final, int(jnp.sum(steps))

    def states(self) -> dict:
        """The states one update is timed on: an untrained policy's and the first seed's
        trained one (after :meth:`run`)."""
        return dict(untrained=self.algo.init(jax.random.key(0), self.hp),
                    trained=jax.tree.map(lambda x: x[0], self.final))

    def time_update(self, state) -> float:
        start = time.perf_counter()
        jax.block_until_ready(self.update(state, self.hp))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="CartPole-v1")
    parser.add_argument("--algos", nargs="+", default=["ppo", "reinforce", "grpo"])
    parser.add_argument("--seeds", type=int, default=1, help="seeds in one run")
    parser.add_argument("--vmap", action="store_true",
                        help="the seeds batched (vmap), not one after another (lax.map)")
    parser.add_argument("--repeats", type=int, default=3, help="training runs per algorithm")
    parser.add_argument("--calls", type=int, default=20, help="timed calls of one update")
    parser.add_argument("--whole-batch", action="store_true",
                        help="also REINFORCE and GRPO reading every cell of their batch")
    parser.add_argument("--out", default=None, help="append the rows to this JSONL file")
    args = parser.parse_args()
    print(f"machine: {machine()}", flush=True)
    entries = [Entry(a, args.task, args.seeds, False, args.vmap) for a in args.algos]
    if args.whole_batch:
        entries += [Entry(a, args.task, args.seeds, True, args.vmap)
                    for a in args.algos if a != "ppo"]
    for _ in range(args.repeats):  # interleaved, so drift in the machine's load hits all
        for entry in entries:
            entry.run()
    states = [entry.states() for entry in entries]
    calls: list[dict] = [{what: [] for what in s} for s in states]
    for entry, state in zip(entries, states):  # warm-up
        jax.block_until_ready([entry.update(x, entry.hp) for x in state.values()])
    for _ in range(args.calls):  # interleaved too
        for entry, state, times in zip(entries, states, calls):
            for what, x in state.items():
                times[what].append(entry.time_update(x))
    rows = []
    for entry, state, times in zip(entries, states, calls):
        run_s = min(entry.run_s)
        row = dict(bench="grpo_live_step", algo=entry.name, task=args.task, seeds=args.seeds,
                   vmap=args.vmap, updates=entry.algo.num_updates, compile_s=entry.compile_s,
                   run_s=run_s, run_median_s=statistics.median(entry.run_s),
                   run_times=entry.run_s, live_steps=entry.steps,
                   run_us_per_step=1e6 * run_s / entry.steps)
        for what, x in state.items():
            steps = live_steps(entry.algo, x, entry.update(x, entry.hp)[0])
            fastest = min(times[what])
            row |= {f"{what}_update_s": fastest,
                    f"{what}_update_median_s": statistics.median(times[what]),
                    f"{what}_live_steps": steps, f"{what}_us_per_step": 1e6 * fastest / steps}
        rows.append(row | dict(machine=machine()))
    ppo = next((r for r in rows if r["algo"] == "ppo"), None)
    print(f"{args.task}, presets, {args.seeds} seed(s) per run "
          f"({'vmapped' if args.vmap else 'one after another'}), fastest of {args.repeats} runs "
          f"and {args.calls} calls; microseconds per live env step (x PPO's) [live steps of the "
          f"update]")
    print(f"{'algo':>24} {'live steps':>11} {'run s':>7} {'run':>15} "
          f"{'update, untrained':>24} {'update, trained':>24}")
    for row in rows:
        cells = []
        for what in ("run", "untrained", "trained"):
            us = row[f"{what}_us_per_step"]
            ratio = us / ppo[f"{what}_us_per_step"] if ppo else float("nan")
            row[f"{what}_per_step_over_ppo"] = ratio
            cells.append(f"{us:7.2f} ({ratio:5.2f}x)")
        updates = (f"{cells[1]} [{row['untrained_live_steps']:>6,}] ",
                   f"{cells[2]} [{row['trained_live_steps']:>6,}]")
        print(f"{row['algo']:>24} {row['live_steps']:>11,} {row['run_s']:7.2f} {cells[0]:>15} "
              f"{updates[0]:>24}{updates[1]:>24}")
    for row in rows:
        append_row(row, None if args.out is None else Path(args.out))


if __name__ == "__main__":
    main()

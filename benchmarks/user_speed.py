"""What a user waits for, before and after: the command line's fixed costs, ``to_gymnasium``'s
steps and ``load_run(...).act`` on one observation, for the code at an earlier commit and for
this checkout, side by side in one run.

    python benchmarks/user_speed.py [--before c5a8c74] [--repeats 3] \\
        [--out benchmarks/results/user_speed.jsonl] [--json PATH]

(``bash benchmarks/run.sh --only user`` runs it as the row "user" of RESULTS.md.)

The earlier code is checked out in a temporary git worktree and both versions run in fresh
processes of this Python (``PYTHONPATH`` pointing at each version's ``src``), one after the
other, each with a compile cache of its own warmed by a first run. Rows:

- ``rollax --version``, ``rollax --help``, ``rollax envs``: the command's wall time (median);
- ``rollax train --env CartPole-v1`` (its defaults, 5e5 steps) with a warm compile cache: the
  command's wall time, the training run's own time (``run_time_s`` of its ``summary.json``) and
  what the command costs beyond it (median);
- the same training as a bare program, ``jax.jit(make_train(algo))`` of the command's own
  settings (``from_settings``), compiled, then the median of 3 runs: what the command's run
  costs beyond the program it runs (chunks, host reads, rows, checkpoints);
- seeds on the cores: ``rollax train --env CartPole-v1 --seeds 2 --devices 2`` on two CPU
  devices (forced through ``XLA_FLAGS`` for both versions), and the same two seeds as two
  single-seed processes side by side (env steps/s of both seeds, medians);
- ``to_gymnasium("CartPole-v1", num_envs=8)``: env steps per second of a loop of 2,000 steps
  with random actions, beside Gymnasium's own ``SyncVectorEnv`` of CartPole-v1 in the same
  process;
- ``load_run(run).act(obs)``: calls per second on single observations (2,000), the run being
  the CartPole training above.

Printed as a table with the machine and the ratios (after / before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import append_row, device

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from _rollax_entry import main; sys.exit(main())"  # `rollax`

GYMNASIUM = """
import json, time, numpy as np, gymnasium as gym, rollax
def rate(env):
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, (2050, 8))
    for a in actions[:50]:
        env.step(a)
    start = time.perf_counter()
    for a in actions[50:]:
        env.step(a)
    return 8 * 2000 / (time.perf_counter() - start)
print(json.dumps({"rollax": rate(rollax.to_gymnasium("CartPole-v1", num_envs=8)),
                  "gymnasium": rate(gym.make_vec("CartPole-v1", num_envs=8,
                                                 vectorization_mode="sync"))}))
"""

BARE = """
import json, time, jax
from rollax.algos.base import make_train
from rollax.run.config import from_settings
run, algo = from_settings({"env": "CartPole-v1"})  # what `rollax train --env CartPole-v1` runs
key = jax.random.key(0)
compiled = jax.jit(make_train(algo)).lower(key).compile()
jax.block_until_ready(compiled(key))
times = []
for _ in range(3):
    start = time.perf_counter()
    jax.block_until_ready(compiled(key))
    times.append(time.perf_counter() - start)
print(json.dumps({"run_s": sorted(times)[1]}))
"""

ACT = """
import json, sys, time, numpy as np, jax, rollax
loaded = rollax.load_run(sys.argv[1])
obs = list(np.asarray(jax.random.normal(jax.random.key(0), (2000, 4)), np.float32))
np.asarray(loaded.act(obs[0]))
start = time.perf_counter()
for o in obs:
    np.asarray(loaded.act(o))
print(json.dumps({"calls_per_s": len(obs) / (time.perf_counter() - start)}))
"""


def run(src: Path, args: list[str], cache: Path, cwd: Path,
        extra: dict | None = None) -> tuple[float, str]:
    """``python args`` with ``src`` first on the path (and the ``extra`` environment
    variables); (wall seconds, stdout)."""
    env = {**os.environ, "PYTHONPATH": str(src), "ROLLAX_COMPILE_CACHE": str(cache),
           **(extra or {})}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, text=True,
                          capture_output=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{args[:3]} failed for {src}:\n{done.stderr[-2000:]}")
    return wall, done.stdout


def measure(src: Path, repeats: int, work: Path) -> dict:
    cache = work / "cache"
    rollax = ["-c", ENTRY]
    out: dict = {}
    for name, argv in (("version", ["--version"]), ("help", ["--help"]), ("envs", ["envs"])):
        run(src, [*rollax, *argv], cache, work)  # the files in the page cache
        out[name] = statistics.median(run(src, [*rollax, *argv], cache, work)[0]
                                      for _ in range(repeats))
    walls, runs = [], []
    for i in range(repeats + 1):  # the first fills the compile cache
        folder = work / f"train-{i}"
        wall, _ = run(src, [*rollax, "train", "--env", "CartPole-v1", "--json", "--out",
                            str(folder)], cache, work)
        summary = json.loads((folder / "summary.json").read_text())
        if i:
            walls.append(wall)
            runs.append(summary["run_time_s"])
    out["train_wall"] = statistics.median(walls)
    out["train_run"] = statistics.median(runs)
    out["train_beyond"] = statistics.median(w - r for w, r in zip(walls, runs))
    out["bare_run"] = json.loads(run(src, ["-c", BARE], cache, work)[1].splitlines()[-1])["run_s"]
    out["seeds_devices"], out["seeds_processes"] = seeds_on_cores(src, repeats, work)
    out["gymnasium"] = json.loads(run(src, ["-c", GYMNASIUM], cache, work)[1].splitlines()[-1])
    act = json.loads(run(src, ["-c", ACT, str(work / "train-1")], cache, work)[1]
                     .splitlines()[-1])
    out["act"] = act["calls_per_s"]
    return out


def rate(folder: Path) -> float:
    return json.loads((folder / "summary.json").read_text())["env_steps_per_second"]


def seeds_on_cores(src: Path, repeats: int, work: Path) -> tuple[float, float]:
    """Two CartPole seeds on this 2-core machine (env steps/s of both, medians): ``rollax train
    --seeds 2 --devices 2`` (two CPU devices forced through XLA_FLAGS, as the code before
    needed), and two single-seed processes side by side."""
    cache = work / "cache"
    rollax = ["-c", ENTRY, "train", "--env", "CartPole-v1", "--json"]
    forced = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    together, apart = [], []
    for i in range(repeats + 1):  # the first fills the compile cache
        folder = work / f"seeds-{i}"
        run(src, [*rollax, "--seeds", "2", "--devices", "2", "--out", str(folder)], cache, work,
            forced)
        env = {**os.environ, "PYTHONPATH": str(src), "ROLLAX_COMPILE_CACHE": str(cache)}
        folders = [work / f"process-{i}-{seed}" for seed in (0, 1)]
        procs = [subprocess.Popen([sys.executable, *rollax, "--seed", str(seed), "--out",
                                   str(f)], cwd=work, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for seed, f in enumerate(folders)]
        if any(proc.wait() for proc in procs):
            raise SystemExit(f"a single-seed process failed for {src}")
        if i:
            together.append(rate(folder))
            apart.append(sum(rate(f) for f in folders))
    return statistics.median(together), statistics.median(apart)


def table(b: dict, a: dict) -> list[str]:
    """The Markdown table of the measurements ``b`` (before) and ``a`` (after), with ratios
    (printed here, and RESULTS.md's row "user")."""
    rows = [("rollax --version (s)", b["version"], a["version"]),
            ("rollax --help (s)", b["help"], a["help"]),
            ("rollax envs (s)", b["envs"], a["envs"]),
            ("rollax train --env CartPole-v1: wall (s)", b["train_wall"], a["train_wall"]),
            ("  its training run (s)", b["train_run"], a["train_run"]),
            ("  the command beyond it (s)", b["train_beyond"], a["train_beyond"]),
            ("  the same settings as a bare jit(make_train) (s)", b["bare_run"], a["bare_run"]),
            ("--seeds 2 --devices 2 on 2 cores (env steps/s)", b["seeds_devices"],
             a["seeds_devices"]),
            ("  2 single-seed processes side by side (env steps/s)", b["seeds_processes"],
             a["seeds_processes"]),
            ("to_gymnasium, 8 envs (env steps/s)", b["gymnasium"]["rollax"],
             a["gymnasium"]["rollax"]),
            ("  Gymnasium's SyncVectorEnv, same process (env steps/s)",
             b["gymnasium"]["gymnasium"], a["gymnasium"]["gymnasium"]),
            ("act on one observation (calls/s)", b["act"], a["act"])]
    out = ["| measurement | before | after | after / before |", "|---|---|---|---|"]
    for name, x, y in rows:
        spec = ",.2f" if x < 100 else ",.0f"
        out.append(f"| {name} | {x:{spec}} | {y:{spec}} | {y / x:.2f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="c5a8c74",
                        help="the earlier commit (default: the code before this round)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="append the row to this JSONL file")
    parser.add_argument("--json", default=None, help="write the results as JSON (run_all.py)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="user-speed-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                        args.before], check=True, capture_output=True)
        try:
            results = {}
            for label, src in (("before", tree / "src"), ("after", ROOT / "src")):
                work = Path(tmp) / label
                work.mkdir()
                results[label] = measure(src, args.repeats, work)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"machine: {device()}; before {args.before}, after {commit}; medians of "
          f"{args.repeats}")
    print("\n".join(table(results["before"], results["after"])))
    row = {"bench": "user_speed", "device": device(), "before": args.before, "after": commit,
           "repeats": args.repeats, "results": results}
    append_row(row, None if args.out is None else Path(args.out))
    if args.json is not None:
        Path(args.json).write_text(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

"""What ``rollax train`` costs beyond its training, cold and warm, on this machine's device:
the runtime's start, the import, the training as the run folder's ``summary.json`` times it,
and the rest (building the runner, tracing, figures, files).

    python benchmarks/command_time.py [--env CartPole-v1] [--repeats 3] [--json PATH]
        [--profile PATH]

Each run is a fresh process running what the ``rollax`` script runs (``rollax train --env ENV
--json``, :data:`SCRIPT`) with a compile cache of its own (``ROLLAX_COMPILE_CACHE``): the first
run finds it empty (cold), the others warm. Rows (seconds; warm: the median of ``--repeats``):

- ``runtime``: ``python -c "import jax; jax.devices()"`` (the interpreter, JAX and the device's
  runtime starting; on a TPU most of the command's fixed cost);
- ``import``: ``python -c "import rollax.cli"``;
- ``command``: the train command's wall time;
- ``training``: the summary's ``wall_time_s`` (compile, run and final evaluation), and within it
  ``compile_time_s`` and ``run_time_s``;
- ``rest``: command - training - import (the runner, tracing, checks, figures, files);
- ``start_then_import``, ``start_beside_import``: the runtime's start and the import in
  sequence, then the start in a thread during the import;
- ``warm_late_start``: the warm command with the runtime started by its first array, as before
  the entry point started it in a thread (``_rollax_entry.start_device`` turned off), run
  alternately with the warm rows.

``--profile PATH`` also runs the command once more (warm) under ``cProfile``, writes the
profile to PATH and prints its 30 costliest calls by cumulative time. The runs and their cache
live in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import device


def wall(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], env=env, text=True, capture_output=True,
                          check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed:\n{done.stderr[-2000:]}")
    return seconds


SEQUENTIAL = "import jax; jax.devices(); import rollax.cli"
OVERLAPPED = ("import threading, jax; t = threading.Thread(target=jax.devices); t.start(); "
              "import rollax.cli; t.join()")
"""The runtime's start and rollax's import one after the other, then the start in a thread
while the import goes on: the two differ if starting the device's client releases Python's
lock (what a command could overlap with its start)."""


SCRIPT = "import sys, _rollax_entry; sys.exit(_rollax_entry.main())"
"""What the installed ``rollax`` script runs (``python -m rollax.cli`` would import all of
``rollax.cli`` before the entry point, and so before it could start the runtime)."""

LATE_START = ("import sys, _rollax_entry as entry; entry.start_device = lambda argv: None; "
              "sys.exit(entry.main())")
"""The same without the runtime's early start."""


def train(work: Path, i: int, env_id: str, env: dict, late: bool = False) -> dict:
    folder = work / f"run-{i}{'-late' * late}"
    seconds = wall(["-c", LATE_START if late else SCRIPT, "train", "--env", env_id, "--json",
                    "--out", str(folder)], env)
    summary = json.loads((folder / "summary.json").read_text())
    return {"command": seconds, "training": summary["wall_time_s"],
            "compile": summary["compile_time_s"], "run": summary["run_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the rows as JSON")
    parser.add_argument("--profile", default=None, help="cProfile a warm run into this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rollax-command-"))
    env = {**os.environ, "ROLLAX_COMPILE_CACHE": str(work / "cache")}
    runtime = statistics.median(wall(["-c", "import jax; jax.devices()"], env)
                                for _ in range(2))
    imported = statistics.median(wall(["-c", "import rollax.cli"], env) for _ in range(2))
    # could the runtime start while rollax imports? only if starting it lets Python run
    sequential = statistics.median(wall(["-c", SEQUENTIAL], env) for _ in range(2))
    overlapped = statistics.median(wall(["-c", OVERLAPPED], env) for _ in range(2))
    runs, late = [train(work, 0, args.env, env)], []
    for i in range(1, args.repeats + 1):  # alternately, so that a drift falls on both
        runs.append(train(work, i, args.env, env))
        late.append(train(work, i, args.env, env, late=True))
    rows = {"cold": runs[0],
            "warm": {k: statistics.median(r[k] for r in runs[1:]) for k in runs[0]},
            "warm_late_start": {k: statistics.median(r[k] for r in late) for k in late[0]}}
    for row in rows.values():
        row["rest"] = row["command"] - row["training"] - imported
    if args.profile:  # before this process opens the device (a TPU admits one process)
        script = work / "rollax_script.py"
        script.write_text(SCRIPT + "\n")
        done = subprocess.run([sys.executable, "-m", "cProfile", "-o", args.profile,
                               str(script), "train", "--env", args.env, "--json", "--out",
                               str(work / "profiled")], env=env, capture_output=True, text=True)
        if done.returncode != 0:  # the profile so far is still written: print it after the error
            print(f"the profiled run exited {done.returncode}:\n{done.stderr[-3000:]}")
    record = {"device": device(), "env": args.env, "runtime": runtime, "import": imported,
              "start_then_import": sequential, "start_beside_import": overlapped, **rows}
    print(f"rollax train --env {args.env} on {record['device']}")
    print(f"runtime start {runtime:.2f} s, import rollax.cli {imported:.2f} s")
    print(f"runtime start then import {sequential:.2f} s, started in a thread beside the "
          f"import {overlapped:.2f} s")
    print("| cache | command s | training s (compile, run) | rest s |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['command']:.2f} | {r['training']:.2f} ({r['compile']:.2f}, "
              f"{r['run']:.2f}) | {r['rest']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))
    if args.profile:
        import pstats
        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(30)
    shutil.rmtree(work)  # the runs and their cache


if __name__ == "__main__":
    main()

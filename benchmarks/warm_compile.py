"""Where a warm ``rollax train``'s compile path goes, program by program: tracing, lowering to
MLIR, the persistent cache's key, and reading the compiled program back (the cache's retrieval:
the file, its decompression, deserialising the executable and loading it onto the device).

    python benchmarks/warm_compile.py [--env CartPole-v1] [--total-steps 16384] [--json PATH]

Three fresh processes share one fresh compile cache (``ROLLAX_COMPILE_CACHE``): the first trains
into the empty cache (cold), the next two find every program there (warm). Each runs what the
``rollax`` script runs (``_rollax_entry.main``: ``rollax train --env ENV --total-steps N
--json``) with listeners on JAX's compile events and a clock around the cache key's
computation (``jax._src.compiler._resolve_compilation_strategy``, private: this benchmark's
only hook), and reports, in seconds: ``trace``, ``lower`` and ``get`` (JAX's
``backend_compile_duration``, which times its whole ``compile_or_get_cached``), their ``sum``;
within ``get`` the ``key``, the ``retrieve`` of cache hits and the ``compile`` of misses (the
rest); the same three by program name (``by_name``, the costliest four printed); the programs
counted, the command's wall time and the summary's ``compile_time_s``.
rollax compiles some programs side by side in threads, so a cold run's sums can exceed its wall
time. The runs and their cache live in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/compilation_cache/cache_retrieval_time_sec": "retrieve",
          "/jax/core/compile/backend_compile_duration": "get"}


def child(out: Path, argv: list[str]) -> None:
    """One command, in this process, timed phase by phase; the rows to ``out``."""
    import jax
    from jax._src import compiler

    seconds: Counter = Counter()
    counts: Counter = Counter()
    programs: Counter = Counter()
    by_name: dict[str, Counter] = {}  # seconds of trace, lower and get by program name

    def listen(event, duration, fun_name=None, **_):
        if event in EVENTS:
            seconds[EVENTS[event]] += duration
            counts[EVENTS[event]] += 1
            if fun_name is not None:
                by_name.setdefault(str(fun_name), Counter())[EVENTS[event]] += duration
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            programs[str(fun_name)] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    resolve = compiler._resolve_compilation_strategy

    def timed_resolve(*args, **kwargs):
        start = time.perf_counter()
        try:
            return resolve(*args, **kwargs)
        finally:
            seconds["key"] += time.perf_counter() - start
            counts["key"] += 1

    compiler._resolve_compilation_strategy = timed_resolve
    import _rollax_entry

    sys.argv = ["rollax", *argv]
    start = time.perf_counter()
    code = _rollax_entry.main()
    wall = time.perf_counter() - start
    if code:
        raise SystemExit(f"rollax {' '.join(argv)} exited {code}")
    seconds["compile"] = seconds["get"] - seconds["key"] - seconds["retrieve"]
    phases = {k: round(seconds[k], 3) for k in ("trace", "lower", "get", "key", "retrieve",
                                                "compile")}
    out.write_text(json.dumps({
        "wall_s": round(wall, 2), **phases,
        "sum": round(seconds["trace"] + seconds["lower"] + seconds["get"], 3),
        "counts": dict(counts), "programs": dict(programs),
        "by_name": {name: {k: round(v, 3) for k, v in c.items()} for name, c in by_name.items()},
        "device": f"{jax.devices()[0].platform} ({jax.devices()[0].device_kind})"}))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:  # one timed command: --child REPORT ROLLAX_ARGV...
        child(Path(sys.argv[2]), sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--total-steps", type=int, default=16384)
    parser.add_argument("--json", default=None, help="write the rows as JSON")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="warm-compile-"))
    env = {**os.environ, "ROLLAX_COMPILE_CACHE": str(folder / "cache")}
    rows = []
    try:
        for i, kind in enumerate(("cold", "warm", "warm")):
            report = folder / f"row{i}.json"
            argv = ["train", "--env", args.env, "--total-steps", str(args.total_steps),
                    "--json", "--out", str(folder / f"run{i}")]
            done = subprocess.run([sys.executable, __file__, "--child", str(report), *argv],
                                  env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"run {i} failed:\n{done.stderr[-3000:]}")
            row = {"run": kind, **json.loads(report.read_text())}
            summary = json.loads((folder / f"run{i}" / "summary.json").read_text())
            row["summary_compile_time_s"] = summary.get("compile_time_s")
            rows.append(row)
            print(f"{kind:4s} wall {row['wall_s']:6.2f} s | trace {row['trace']:.2f} + lower "
                  f"{row['lower']:.2f} + get {row['get']:.2f} (key {row['key']:.2f}, retrieve "
                  f"{row['retrieve']:.2f}, compile {row['compile']:.2f}) = {row['sum']:.2f} s | "
                  f"programs {sum(row['programs'].values())} | summary compile_time_s "
                  f"{row['summary_compile_time_s']}", flush=True)
            costliest = sorted(row["by_name"].items(), key=lambda kv: -sum(kv[1].values()))
            print("     by program (trace, lower, get): " + "; ".join(
                f"{name} x{row['programs'].get(name, 0)} " + "/".join(
                    f"{times.get(k, 0.0):.2f}" for k in ("trace", "lower", "get"))
                for name, times in costliest[:4]), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": rows[0]["device"], "rows": rows},
                                              indent=1))


if __name__ == "__main__":
    main()

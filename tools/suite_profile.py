"""Where the test suite's time goes: a pytest plugin.

    python -m pytest -n 2 -q -p tools.suite_profile

For each test it records the wall time, this process's CPU time, the CPU time of the
subprocesses it ran (``RUSAGE_CHILDREN``), and what JAX spent on its programs, from JAX's
monitoring events: tracing, lowering to MLIR, compiling (a miss of the compile cache) and
reading a compiled program from the cache (a hit), as JAX times them (the seconds those calls
took), and how many of each. Each pytest process (the xdist workers, or the only process)
writes its tests' rows to ``suite-profile/<worker>.json`` (``SUITE_PROFILE_DIR`` chooses the
folder); the process that started the session prints the totals and the files that took
longest once every worker has finished. CPU seconds are summed over both cores, so they are
about twice the suite's wall time on this 2-core machine.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import threading
import time
from pathlib import Path

import jax.monitoring
import pytest

FOLDER = Path(os.environ.get("SUITE_PROFILE_DIR", "suite-profile"))
FIELDS = ("wall_s", "cpu_s", "children_s", "trace_s", "traces", "lower_s", "lowerings",
          "compile_s", "compiles", "read_s", "reads")
"""A row's numbers: seconds, and counts of traced, lowered, compiled and read programs."""

Row = dict[str, float]
_rows: dict[str, Row] = collections.defaultdict(lambda: dict.fromkeys(FIELDS, 0.0))
_current = ["(between tests)"]
_state = threading.local()  # per thread: whether the program about to compile was a cache hit


def _duration(event: str, duration_secs: float, **_: str | int) -> None:
    row = _rows[_current[0]]
    if event.endswith("/jaxpr_trace_duration"):
        row["trace_s"] += duration_secs
        row["traces"] += 1
    elif event.endswith("/jaxpr_to_mlir_module_duration"):
        row["lower_s"] += duration_secs
        row["lowerings"] += 1
    elif event.endswith("/backend_compile_duration"):  # a compile, or a read from the cache
        hit = getattr(_state, "hit", False)
        row["read_s" if hit else "compile_s"] += duration_secs
        row["reads" if hit else "compiles"] += 1
        _state.hit = False


def _event(event: str, **_: str | int) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _state.hit = True


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the process that starts the session
        for old in FOLDER.glob("*.json"):  # an earlier session's rows
            old.unlink()
    jax.monitoring.register_event_duration_secs_listener(_duration)
    jax.monitoring.register_event_listener(_event)


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[0] = item.nodeid
    wall, cpu, children = time.perf_counter(), time.process_time(), _children()
    yield
    row = _rows[item.nodeid]
    row["wall_s"] += time.perf_counter() - wall
    row["cpu_s"] += time.process_time() - cpu
    row["children_s"] += _children() - children
    _current[0] = "(between tests)"


def pytest_sessionfinish(session):
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if _rows:
        FOLDER.mkdir(exist_ok=True)
        (FOLDER / f"{name}.json").write_text(json.dumps(_rows, indent=0, sort_keys=True))


def pytest_terminal_summary(terminalreporter):
    """The totals and the slowest files, from every process's rows (the workers have written
    theirs when the controller reports)."""
    files: dict[str, Row] = collections.defaultdict(lambda: dict.fromkeys(FIELDS, 0.0))
    for path in sorted(FOLDER.glob("*.json")):
        for test, numbers in json.loads(path.read_text()).items():
            row = files[test.split("::")[0]]
            for field in FIELDS:
                row[field] += numbers[field]
    if not files:
        return
    total = {field: sum(row[field] for row in files.values()) for field in FIELDS}
    write = terminalreporter.write_line
    write(f"suite profile ({FOLDER}/): {total['cpu_s'] + total['children_s']:.0f} CPU s in all")
    write(", ".join(f"{field} {total[field]:.0f}" for field in FIELDS))
    write(f"{'CPU s':>7} {'child':>6} {'trace':>6} {'lower':>6} {'compile':>8} {'n':>5}  file")
    slowest = sorted(files.items(), key=lambda kv: -(kv[1]["cpu_s"] + kv[1]["children_s"]))
    for file, n in slowest[:25]:
        write(f"{n['cpu_s']:7.1f} {n['children_s']:6.1f} {n['trace_s']:6.1f} {n['lower_s']:6.1f} "
              f"{n['compile_s']:8.1f} {n['compiles']:5.0f}  {file}")

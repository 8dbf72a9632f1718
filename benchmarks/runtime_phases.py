"""Where the device runtime's start goes, and how much of it lets other Python threads run.

    python benchmarks/runtime_phases.py [--beside] [--json PATH]

Times the three calls JAX makes to start a PJRT plugin's client (loading the plugin's library,
initialising it, creating the client; a platform without a plugin, such as the CPU, shows only
the total), while a second thread counts the milliseconds in which it got to run Python
(``ticks``). A phase whose ticks are close to its milliseconds released Python's lock: work a
command does beside the start (:func:`_rollax_entry.start_device`) overlaps it; one with few
ticks held the lock, and nothing overlaps it.

``--beside`` starts the runtime as the ``rollax`` command does (``start_device``, a thread) and
imports ``rollax.cli`` meanwhile, then waits for the device: a timeline (seconds since the
script began) of when each phase began and ended, the import ended and the device was ready.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

PHASES = ("load_pjrt_plugin_dynamically", "initialize_pjrt_plugin", "get_c_api_client")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--beside", action="store_true",
                        help="start the runtime in a thread and import rollax.cli meanwhile")
    parser.add_argument("--json", default=None, help="write the rows as JSON")
    args = parser.parse_args()
    began = time.perf_counter()
    import jax
    from jax._src import xla_bridge

    imported = time.perf_counter() - began
    ticks = [0]
    running = [True]

    def tick() -> None:
        while running[0]:
            time.sleep(0.001)
            ticks[0] += 1

    rows: dict[str, dict] = {}

    def timed(owner, name: str) -> None:
        original = getattr(owner, name)

        def call(*a, **k):
            start, before = time.perf_counter(), ticks[0]
            try:
                return original(*a, **k)
            finally:
                end = time.perf_counter()
                rows[name] = {"s": end - start, "ticks": ticks[0] - before,
                              "began": start - began, "ended": end - began}
        setattr(owner, name, call)

    for owner in (xla_bridge.xla_client, xla_bridge._jax):
        for name in PHASES:
            if hasattr(owner, name):
                timed(owner, name)
    if args.beside:  # the command's way: the start in a thread, rollax's import meanwhile
        import _rollax_entry

        devices_of = jax.devices

        def devices_timed(*a, **k):  # the thread's call, named by its thread
            start = time.perf_counter()
            try:
                return devices_of(*a, **k)
            finally:
                rows[f"jax.devices in {threading.current_thread().name}"] = {
                    "began": start - began, "ended": time.perf_counter() - began}
        jax.devices = devices_timed
        start = time.perf_counter()
        starting = _rollax_entry.start_device(["train"])
        import rollax.cli  # noqa: F401

        rows["import rollax.cli"] = {"began": start - began,
                                     "ended": time.perf_counter() - began}
        devices = devices_of()
        rows["device ready"] = {"ended": time.perf_counter() - began}
        if starting is not None:
            starting.join()
        for name, row in rows.items():
            print(f"  {name:<36} {row.get('began', float('nan')):7.3f} s -> {row['ended']:7.3f} s")
        record = {"devices": str(devices), "import_jax_s": imported, "beside": rows}
        if args.json:
            Path(args.json).write_text(json.dumps(record, indent=1))
        return
    ticker = threading.Thread(target=tick)
    ticker.start()
    start, before = time.perf_counter(), ticks[0]
    devices = jax.devices()
    rows["total"] = {"s": time.perf_counter() - start, "ticks": ticks[0] - before}
    running[0] = False
    ticker.join()
    record = {"devices": str(devices), "import_jax_s": imported, "phases": rows}
    print(f"{devices}: import jax {imported:.2f} s")
    for name, row in rows.items():
        print(f"  {name:<30} {row['s']:7.3f} s  {row['ticks']:6d} ticks of 1 ms")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()

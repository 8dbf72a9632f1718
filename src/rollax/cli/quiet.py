"""Keep JAX's compile-cache chatter out of the terminal.

jaxlib 0.9 logs two C++ lines for every program it loads from the persistent compilation cache
on the CPU: a warning that it "assumes version compatibility" and an error that the "machine
type used for XLA:CPU compilation doesn't match" (about 3 KB each, listing every CPU feature),
even on the very machine that compiled it, because the compiled program records a tuning
feature (``+prefer-no-gather``) that the host check does not list. The program loads and runs
correctly. A warm ``rollax train`` would print ~30 KB of these on stderr.

C++ logging is configured once, when jaxlib loads, so ``TF_CPP_MIN_LOG_LEVEL`` cannot be
changed by the time the command line runs (and would hide every other message too). Instead,
while the cache is on, :func:`drop_cache_chatter` routes file descriptor 2 through a pipe
whose reader drops exactly those log lines and passes everything else through unchanged
(partial lines, such as a progress bar's carriage-return updates, at once).
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading

CHATTER = (b"cpu_aot_loader.cc:", b"] Assume version compatibility. PjRt-IFRT")
"""Substrings of the log lines dropped."""

LOG_LINE = re.compile(rb"[IWEF]\d{4} \d\d:\d\d:\d\d")
"""The start of an absl/glog line (``E1201 11:20:43.936858 ...``)."""

_installed: list[bool] = []


def _keep(data: bytes) -> bytes:
    """``data`` without the chatter: each line holding a chatter mark loses its log line (from
    the log prefix on; what a progress bar wrote before it on the same line stays)."""
    kept = []
    for line in re.split(rb"(?<=\n)", data):
        if any(mark in line for mark in CHATTER):
            starts = [m.start() for m in LOG_LINE.finditer(line)]
            line = line[:starts[-1]] if starts else b""
        kept.append(line)
    return b"".join(kept)


def _pump(read_fd: int, out_fd: int) -> None:
    """Copy ``read_fd`` to ``out_fd`` without the chatter; a partial line is passed on at once
    up to where a log line may begin (that part waits for its newline)."""
    pending = b""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            pending += chunk
            cut = pending.rfind(b"\n") + 1
            log = LOG_LINE.search(pending, cut)  # an unfinished log line waits for its end
            split = log.start() if log else len(pending)
            done, pending = pending[:split], pending[split:]
            if kept := _keep(done):
                os.write(out_fd, kept)
    if kept := _keep(pending):
        os.write(out_fd, kept)


def drop_cache_chatter() -> None:
    """Filter the compile cache's log lines out of stderr for the rest of the process (once;
    restored at exit, after everything written has passed through)."""
    if _installed:
        return
    _installed.append(True)
    sys.stderr.flush()
    terminal = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    thread = threading.Thread(target=_pump, args=(read_fd, terminal), daemon=True)
    thread.start()

    def restore() -> None:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # closes the pipe's last write end: the reader sees its end
        thread.join(timeout=10)

    atexit.register(restore)


def use_compile_cache(on: bool) -> None:
    """The compile cache for this command (:func:`rollax.run.compile_cache.from_environment`)
    and, when it is on, its chatter dropped."""
    from rollax.run import compile_cache

    if compile_cache.from_environment(on) is not None:
        drop_cache_chatter()

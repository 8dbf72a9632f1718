"""``rollax train ... | head``: a reader that goes away does not stop a run.

Python ignores SIGPIPE, so a write to a pipe whose reader has exited fails with
``BrokenPipeError``. For a command that only prints (``rollax envs | head``) that ends the
command (``rollax.cli.main``); a run trains on: :func:`outliving_reader` gives ``sys.stdout``
a file underneath that, at the first such failure, points file descriptor 1 at
``os.devnull``, says so once on stderr and reports the write as done, so that training, its
checkpoints, ``summary.json`` and figures go on and only the printing stops.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator


class _ReaderGone(io.FileIO):
    """File descriptor 1 that swallows a broken pipe (after :meth:`reader_gone`, writes go to
    os.devnull)."""

    def __init__(self, fd: int, note: str):
        super().__init__(fd, "w", closefd=False)
        self.note, self.noted = note, False

    def write(self, b) -> int:
        try:
            return super().write(b) or 0
        except BrokenPipeError:
            self.reader_gone()
            return memoryview(b).nbytes

    def reader_gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.fileno())
        os.close(devnull)
        if not self.noted:
            self.noted = True
            print(self.note, file=sys.stderr, flush=True)


@contextlib.contextmanager
def outliving_reader(prefix: str) -> Iterator[None]:
    """Inside the block, a stdout whose reader has gone stops being written, with one line on
    stderr, and raises nothing. Only for the process's own stdout on a file descriptor
    (``sys.__stdout__``); a replaced one (a test capturing output) is left as it is."""
    stdout = sys.stdout
    try:
        fd = stdout.fileno() if stdout is sys.__stdout__ and stdout is not None else None
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None or not isinstance(stdout, io.TextIOWrapper):
        yield
        return
    note = (f"{prefix}: stdout was closed by its reader; training goes on without printing "
            f"(checkpoints, summary.json and figures are written)")
    raw = _ReaderGone(fd, note)
    try:
        stdout.flush()
    except BrokenPipeError:  # what it holds goes to os.devnull
        raw.reader_gone()
        stdout.flush()
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=stdout.encoding,
                                  errors=stdout.errors, line_buffering=stdout.line_buffering)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        finally:
            sys.stdout = stdout

"""The ``rollax`` console script: Ctrl-C is handled from the command's first moment.

This module stands outside the ``rollax`` package on purpose. Importing ``rollax.cli`` imports
``rollax`` and so JAX, a second or more, and Python's own SIGINT handler raises
``KeyboardInterrupt`` wherever the interpreter happens to be: in the middle of an import (a
30-line traceback) or inside a callback whose exceptions Python ignores (JAX's
``_xla_gc_callback``: "Exception ignored in ...", and the command then trains to the end).

So the first thing :func:`main` does, with the standard library only, is install a handler that
ends the process at once with the documented line, ``rollax <command>: interrupted`` on
stderr, and exit status 130: ``os._exit`` cannot be caught or ignored. Until training's loop
over chunks starts there is nothing to save (a run folder holds ``config.json`` at most); inside
that loop :class:`rollax.run.experiment.Interrupt` replaces this handler with one that only sets
a flag, the loop writes a checkpoint at the end of its chunk and the command exits 130 with
``interrupted at update N; checkpoint written; ...``; after the loop this handler is back. Like
a SIGKILL, an exit here may leave a hidden staging file beside a file being replaced; nothing
that was written is damaged (every write is staged and renamed, see :mod:`rollax.run.files`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import MutableMapping

COMMANDS = ("train", "eval", "plot", "rollout", "exact", "gradients", "check-env", "envs",
            "render", "export", "exploitability", "play", "rate", "tune")
"""The commands (``rollax.cli.flags.COMMANDS``; a test keeps the two equal), here without
importing anything, to name the command in the interrupt line."""

SHOW_CURSOR = b"\x1b[?25h"
"""A progress bar on a terminal hides the cursor until it stops; an exit here does not stop
it, so the handler shows the cursor again."""


def interrupt_line(argv: list[str]) -> str:
    """``rollax train: interrupted`` (``rollax: interrupted`` without a known command)."""
    name = argv[0] if argv and argv[0] in COMMANDS else None
    return f"rollax {name}: interrupted" if name else "rollax: interrupted"


def exit_on_interrupt(argv: list[str]) -> None:
    """Make SIGINT end the process at once: the interrupt line on stderr, exit status 130.
    Main thread only (Python runs signal handlers there). A SIGINT ignored when the command
    starts (``rollax train ... &`` in a script) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    line = (interrupt_line(argv) + "\n").encode()
    # fd 2 as it is now: rollax.cli.quiet later routes fd 2 through a pipe and a thread that an
    # exit here would not wait for
    try:
        stderr: int | None = os.dup(2)
        terminal = os.isatty(stderr) and os.environ.get("TERM") != "dumb"
    except OSError:  # no stderr (2>&-): exit without a word
        stderr, terminal = None, False
    exiting: list[bool] = []

    def interrupted(signum, frame) -> None:
        if not exiting:  # a second Ctrl-C while this one flushes (a stalled reader) exits now
            exiting.append(True)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # a closed pipe, a flush this signal interrupted: exit anyway
                    pass
        if stderr is not None:
            try:
                os.write(stderr, (SHOW_CURSOR if terminal else b"") + line)
            except OSError:
                pass
        os._exit(130)

    signal.signal(signal.SIGINT, interrupted)


FORCE_COUNT = "--xla_force_host_platform_device_count"


def host_devices(argv: list[str], environ: MutableMapping[str, str]) -> None:
    """``rollax train``: give JAX's CPU platform a device per core, or ``N`` devices with
    ``--devices N`` (N > 1), by adding ``--xla_force_host_platform_device_count`` to
    ``XLA_FLAGS``, which XLA reads once, before JAX starts (so here). A run of several lanes
    then spreads whole lanes over the cores (:func:`rollax.sharding.lanes_per_core`); one lane
    runs on one device as before. Nothing when ``XLA_FLAGS`` already sets a count, or when
    ``--devices`` is 1 or not a whole number (the command then says what is wrong). The flag
    only concerns the CPU: on a GPU, ``--devices`` counts the GPUs."""
    if not argv or argv[0] != "train":
        return
    value = None
    for i, word in enumerate(argv):
        if word == "--devices" and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith("--devices="):
            value = word.split("=", 1)[1]
    if value is None:
        try:
            value = str(len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            value = str(os.cpu_count() or 1)
    flags = environ.get("XLA_FLAGS", "")
    if not value.isdigit() or int(value) < 2 or FORCE_COUNT in flags:
        return
    environ["XLA_FLAGS"] = f"{flags} {FORCE_COUNT}={int(value)}".strip()


COMPILING = ("train", "eval", "rollout", "exact", "gradients", "check-env", "render", "export",
             "exploitability", "play", "rate", "tune")
"""The commands that compile programs (``train`` and ``rollax.cli.commands.COMPILES``; a test
keeps the two equal): they use the device, which :func:`start_device` starts early."""


def start_device(argv: list[str]) -> threading.Thread | None:
    """For a command that will use the device (:data:`COMPILING`, not asking for ``--help``):
    import JAX and start its device runtime (``jax.devices()``) in a thread, returned to be
    joined; ``None`` otherwise.

    On a TPU the runtime's start takes seconds (the client's creation, during which jaxlib
    releases Python's lock), and the command's first array would otherwise wait for all of it
    after rollax's import and the parsing of the command line; in a thread, those go on beside
    it. The command's own first use of the device waits for the start (JAX starts it once,
    under a lock) and reports its failure if it failed; the thread swallows it. Bad input still
    exits 2 before anything is compiled or written: starting the runtime is neither. The
    thread is joined before the process exits, never left inside the runtime's start. XLA's
    flags are read when it starts, so :func:`host_devices` runs first."""
    if not argv or argv[0] not in COMPILING or "-h" in argv or "--help" in argv:
        return None
    import jax

    def start() -> None:
        try:
            jax.devices()
        except Exception:  # the command's own first use of the device says what failed
            pass

    thread = threading.Thread(target=start, name="rollax-device-start")
    thread.start()
    return thread


def quick_version() -> str | None:
    """``rollax --version``'s line (``rollax <version> (jax <version>)``) without importing
    rollax or JAX (about a second): rollax's version read from the ``rollax/version.py`` that
    ``import rollax`` would run, JAX's from its installed metadata. ``None`` when either cannot
    be read so (then :func:`rollax.cli.version` answers)."""
    import importlib.metadata
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec("rollax")
        if spec is None or spec.origin is None:
            return None
        version_file = os.path.join(os.path.dirname(spec.origin), "version.py")
        with open(version_file, encoding="utf-8") as source:
            found = re.search(r'^__version__ = "([^"]+)"$', source.read(), re.M)
        jax_version = importlib.metadata.version("jax")
    except (OSError, ValueError, importlib.metadata.PackageNotFoundError):
        return None
    return None if found is None else f"rollax {found.group(1)} (jax {jax_version})"


def main() -> int:
    """``rollax``: :func:`rollax.cli.main` after :func:`exit_on_interrupt`,
    :func:`host_devices` and :func:`start_device`; ``rollax --version`` answered by
    :func:`quick_version`."""
    exit_on_interrupt(sys.argv[1:])
    if sys.argv[1:] == ["--version"]:
        line = quick_version()
        if line is not None:
            print(line)
            return 0
    host_devices(sys.argv[1:], os.environ)
    starting = start_device(sys.argv[1:])
    from rollax.cli import main as command

    try:
        return command()
    finally:
        if starting is not None:
            starting.join()
        leave_objects_to_exit()


def leave_objects_to_exit() -> None:
    """Move every object alive now out of the garbage collector's reach (``gc.freeze``). The
    command is over: what remains is the interpreter's exit, whose last collection walks every
    object JAX and the libraries made, about a quarter of a second after a training run, to
    free memory the process is about to return anyway. Nothing is left unwritten: the
    command's files are closed, ``atexit`` handlers still run, and an object is still released
    when its last reference goes."""
    import gc

    gc.freeze()


if __name__ == "__main__":
    sys.exit(main())

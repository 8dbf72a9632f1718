"""The ``rollax`` command line: ``train``, ``eval``, ``plot``, ``rollout``, ``exact``,
``gradients``, ``check-env``, ``envs``, ``render``, ``export``, ``exploitability``, ``play`` and
``tune``; ``rollax --version``.

Every command takes ``--json`` and then prints exactly one JSON object on stdout. Bad input
prints one line ``rollax <command>: error: ...`` on stderr and exits with status 2, before
anything is compiled or written. The commands that compile use JAX's persistent compilation
cache (:mod:`rollax.run.compile_cache`; ``rollax train --no-compile-cache`` or
``ROLLAX_COMPILE_CACHE=off`` turn it off). The ``rollax`` script is :func:`_rollax_entry.main`,
which handles Ctrl-C (exit status 130) before it imports this package; ``rollax train``'s run
outlives a reader of its stdout that goes away (:mod:`rollax.cli.pipe`).
"""

from __future__ import annotations

import os
import sys

from rollax.cli.commands import COMPILES, RUNNERS
from rollax.cli.flags import COMMANDS
from rollax.cli.parse import TrainRequest, UsageError, parse
from rollax.cli.quiet import use_compile_cache

__all__ = ["main"]


def version() -> str:
    """``rollax <version> (jax <version>)``."""
    import jax

    from rollax.version import __version__

    return f"rollax {__version__} (jax {jax.__version__})"


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "--version":
        if len(argv) > 1:
            raise UsageError("--version takes no other arguments")
        print(version())
        return 0
    cmd = parse(argv)
    if isinstance(cmd, TrainRequest):  # on unless --no-compile-cache
        use_compile_cache(cmd.cmd.compile_cache)
    elif isinstance(cmd, COMPILES):
        use_compile_cache(True)
    return RUNNERS[type(cmd)](cmd) or 0


def _stdout_to_devnull() -> None:
    """Point stdout at os.devnull, so that the interpreter's last flush of what is still
    buffered cannot fail again (Python's documented way to handle SIGPIPE)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stdout that is no file: nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv and argv[0] in COMMANDS else None
    prefix = f"rollax {name}" if name else "rollax"
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:  # the reader went away (rollax envs | head): stop quietly
        _stdout_to_devnull()
        return 1
    except (UsageError, ValueError) as err:
        print(f"{prefix}: error: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        hint = getattr(err, "hint", "")
        hint = f"; {hint}" if hint else ""
        print(f"{prefix}: error: {where}{err.strerror or err}{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        from rollax.envs.host import host_failure
        from rollax.run.training import Interrupted

        if isinstance(err, Interrupted):
            print(f"{prefix}: {err}", file=sys.stderr)
            return 130
        failure = host_failure(err)  # a host environment's output, inside JAX's error
        if failure is not None:
            print(f"{prefix}: error: {failure}", file=sys.stderr)
            return 2
        raise



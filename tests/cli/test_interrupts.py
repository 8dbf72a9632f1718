"""The ``rollax`` command under signals and pipes, run as its console script runs it (the entry
point that pyproject.toml names, in a new process): Ctrl-C at any moment ends it with the
documented line and exit status 130; a reader of stdout that goes away does not stop a run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from rollax.cli.flags import COMMANDS
from rollax.run.experiment import Interrupt

ROOT = Path(__file__).resolve().parents[2]

INTERRUPTED = re.compile(r"rollax train: interrupted( at update \d+; checkpoint written; "
                         r"continue with `rollax train --resume \S+`)?\n")
"""The two documented lines (docs/cli.md, Interrupting and resuming)."""

LONG_RUN = ["train", "--env", "CartPole-v1", "--total-steps", "1e7", "--chunk-size", "10"]
"""A run that cannot end within the delays below (19,531 updates: minutes of training even
when its programs load from the session's compile cache), in chunks short enough that an
interrupt inside the loop waits for a fraction of a second."""


def console_script(*argv: str) -> list[str]:
    """The command line that runs ``rollax *argv`` as the installed ``rollax`` script does:
    import the entry point pyproject.toml names, then call it."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["rollax"]
    module, function = spec.split(":")
    return [sys.executable, "-c",
            f"import sys; from {module} import {function}; sys.exit({function}())", *argv]


@contextlib.contextmanager
def terminal_sigint():
    """Start children as a terminal starts a command: with SIGINT at its default. A test run
    started as a background job (``pytest ... &``, ``nohup``) has SIGINT ignored, a child
    inherits that through ``exec``, and rollax keeps an ignored SIGINT ignored by design, so
    without this every Ctrl-C below would be lost. A Python handler in this process becomes
    the default in the child (``exec`` resets handlers, never an ignore)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def start(argv: list[str]) -> subprocess.Popen:
    """``rollax *argv`` started as from a terminal, its output captured. Python's fault
    handler is on in the child: a crash (once, a SIGSEGV at exit after the interrupt line)
    leaves every thread's stack in the captured stderr that the failing assertion shows.
    The child compiles into the session's compile cache, and is stopped at chosen moments:
    rollax writes each entry whole (tests/run/test_compile_cache.py), so no later reader of
    that cache meets a truncated entry and a warning on its stderr."""
    with terminal_sigint():
        return subprocess.Popen(console_script(*argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONFAULTHANDLER": "1"})


def test_the_entry_point_knows_the_commands():
    """The entry point names the command in its line without importing rollax."""
    import _rollax_entry

    assert _rollax_entry.COMMANDS == tuple(COMMANDS)
    assert _rollax_entry.interrupt_line(["train", "--env", "x"]) == "rollax train: interrupted"
    assert _rollax_entry.interrupt_line(["--version"]) == "rollax: interrupted"
    assert _rollax_entry.interrupt_line([]) == "rollax: interrupted"


def test_an_ignored_sigint_stays_ignored():
    """A command started with SIGINT ignored (a background job of a script) keeps it so, in
    the entry point and in training's loop."""
    import _rollax_entry

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _rollax_entry.exit_on_interrupt(["train"])
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        with Interrupt():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.integration
@pytest.mark.parametrize("delay", [0.2, 0.5, 1, 2, 3])
def test_ctrl_c_at_any_moment_exits_130_with_the_documented_line(tmp_path, delay):
    """While Python starts, JAX is imported, the run is built and compiled, or it trains: one
    line, status 130, never a traceback, and never a Ctrl-C lost (the command then trained to
    the end)."""
    proc = start([*LONG_RUN, "--out", str(tmp_path / "run")])
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"still running 60 s after Ctrl-C at {delay} s:\n{err}")
    assert proc.returncode == 130, err
    assert INTERRUPTED.fullmatch(err), err


@pytest.mark.integration
def test_a_second_ctrl_c_while_the_chunk_finishes_still_ends_with_one_line(tmp_path):
    out = tmp_path / "run"
    proc = start([*LONG_RUN, "--checkpoint-every", "10", "--out", str(out)])
    deadline = time.time() + 300
    while not (out / "checkpoints" / "latest").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert INTERRUPTED.fullmatch(err), err
    assert not (out / "summary.json").exists()


@pytest.mark.integration
def test_a_reader_that_stops_early_does_not_stop_the_run(tmp_path):
    """``rollax train ... | head -1``: the run trains to the end and writes its checkpoints,
    summary.json and figures; stderr says once that stdout went; exit status 0."""
    out = tmp_path / "run"
    proc = subprocess.Popen(console_script("train", "--updates", "6", "--batch-size", "16",
                                           "--chunk-size", "2", "--checkpoint-every", "2",
                                           "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert " on corridor: " in proc.stdout.readline()  # the headline
    proc.stdout.close()  # the reader goes: every later write to the pipe fails
    err = proc.stderr.read()
    proc.wait(timeout=300)
    assert proc.returncode == 0, err
    assert err == ("rollax train: stdout was closed by its reader; training goes on without "
                   "printing (checkpoints, summary.json and figures are written)\n")
    assert (out / "checkpoints" / "latest").read_text().strip() == "update-0000006"
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "figures").is_dir()
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == list(range(7))
    assert summary["env_steps_per_lane"] == rows[-1]["env_steps"]  # all 6 updates ran


@pytest.mark.parametrize("cores", [1, 2, 6])
def test_devices_on_the_command_line_give_the_cpu_that_many_devices(monkeypatch, cores):
    """``rollax train --devices N`` sets XLA's host device count before JAX starts, unless
    XLA_FLAGS has one; ``rollax train`` without ``--devices`` a device per core; other
    commands and counts below 2 are left alone."""
    import _rollax_entry

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))

    def flags(argv, before=None):
        environ = {} if before is None else {"XLA_FLAGS": before}
        _rollax_entry.host_devices(argv, environ)
        return environ.get("XLA_FLAGS")

    count = "--xla_force_host_platform_device_count"
    assert flags(["train", "--seeds", "2", "--devices", "2"]) == f"{count}=2"
    assert flags(["train", "--devices=4"], "--xla_cpu_multi_thread_eigen=false") == (
        f"--xla_cpu_multi_thread_eigen=false {count}=4")
    assert flags(["train", "--devices", "8"], f"{count}=2") == f"{count}=2"
    assert flags(["train", "--devices", "1"]) is None
    assert flags(["train", "--devices", "two"]) is None  # the command refuses it
    assert flags(["eval", "run", "--devices", "2"]) is None
    per_core = None if cores == 1 else f"{count}={cores}"
    assert flags(["train", "--seeds", "2"]) == per_core
    assert flags(["train", "--resume", "run"]) == per_core
    assert flags(["train"], f"{count}=3") == f"{count}=3"


@pytest.mark.parametrize(("argv", "status"), [(["envs", "--json"], 0), (["envs", "--bad"], 2)])
def test_a_finished_command_leaves_its_objects_to_the_exit(monkeypatch, capsys, argv, status):
    """After the command, whatever its status, the entry point freezes the objects alive
    (``gc.freeze``) so that the interpreter's exit does not walk them; the command's status
    and output are unchanged."""
    import gc

    import _rollax_entry

    monkeypatch.setattr(sys, "argv", ["rollax", *argv])
    previous = signal.getsignal(signal.SIGINT)
    gc.unfreeze()
    try:
        assert _rollax_entry.main() == status
        assert gc.get_freeze_count() > 0
    finally:
        gc.freeze()  # as tests/conftest.py leaves the session
        signal.signal(signal.SIGINT, previous)
    out, err = capsys.readouterr()
    if status == 0:
        assert "CartPole-v1" in json.dumps(json.loads(out))
    else:
        assert "--bad" in err


def test_the_commands_that_compile_start_the_device_early(monkeypatch):
    """The entry point's list of compiling commands is ``train`` and ``COMPILES``; for those
    (not with ``--help``) :func:`_rollax_entry.start_device` calls ``jax.devices()`` in a
    thread other than the command's, swallowing its failure (the command's own first use of
    the device reports it); other commands start nothing."""
    import threading

    import jax

    import _rollax_entry
    from rollax.cli.commands import COMPILES
    from rollax.cli.flags import COMMANDS

    names = {name for name, kind in COMMANDS.items() if kind in COMPILES} | {"train"}
    assert set(_rollax_entry.COMPILING) == names
    calls = []

    def failing_start():
        calls.append(threading.current_thread())
        raise RuntimeError("no device")

    monkeypatch.setattr(jax, "devices", failing_start)
    for argv in (["envs"], ["plot", "run"], ["train", "--help"], ["eval", "-h"], []):
        assert _rollax_entry.start_device(argv) is None
    assert calls == []
    thread = _rollax_entry.start_device(["train", "--env", "CartPole-v1"])
    assert thread is not None
    thread.join()
    assert calls == [thread] and thread is not threading.main_thread()


def test_bad_input_after_an_early_start_still_exits_2(monkeypatch, capsys):
    """``rollax train`` with a bad value, the device started beside it (a start slower than
    the error, as on a TPU): the one error line and status 2, the start's thread joined
    before :func:`_rollax_entry.main` returns."""
    import threading
    import time

    import jax

    import _rollax_entry

    devices, ended = jax.devices, []

    def slow_start():
        time.sleep(0.5)
        ended.append(True)
        return devices()

    monkeypatch.setattr(jax, "devices", slow_start)
    monkeypatch.setattr(sys, "argv", ["rollax", "train", "--lr", "-1"])
    # the entry point gives `train` a CPU device per core in XLA_FLAGS: this process's
    # later subprocesses must not inherit it
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
    previous = signal.getsignal(signal.SIGINT)
    try:
        assert _rollax_entry.main() == 2
        assert ended == [True]  # main returned only after the start ended
    finally:  # the entry point froze this process's objects, as tests/conftest.py does
        signal.signal(signal.SIGINT, previous)
    assert not any(t.name == "rollax-device-start" for t in threading.enumerate())
    err = capsys.readouterr().err
    assert err.startswith("rollax train: error:") and "lr" in err and err.count("\n") == 1


def test_quick_version_is_the_version_line():
    """``rollax --version`` answered before rollax and JAX are imported prints what
    :func:`rollax.cli.version` prints."""
    import _rollax_entry
    from rollax.cli import version

    assert _rollax_entry.quick_version() == version()

"""A run folder is written by one process at a time (issue 47): a second ``train --resume``
of a folder another process holds is refused in one line (exit 2) touching nothing; a holder
killed with SIGKILL never blocks; two resumes started together leave one line per update in
``metrics.jsonl``; and a ``metrics.jsonl`` whose updates go back or repeat is refused by its
readers (``rollax plot``) naming the line."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import run
from rollax.cli import main
from rollax.run import folder as run_folder
from rollax.run import training
from rollax.run.config import from_settings
from rollax.run.folder import RunFolder

BASE = ["--updates", "3", "--batch-size", "16", "--chunk-size", "1", "--checkpoint-every",
        "50"]
"""A finished tabular run of 3 updates (its checkpoint: the final one, update 3)."""

HOLDER = """
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
os.write(fd, b"%d\\n" % os.getpid())
print("held", flush=True)
sys.stdin.read()
"""
"""Another process holding a folder as the lock is documented (``flock`` on ``DIR/.lock``,
its process id inside), written without rollax: it holds until its stdin closes."""

CLAIMER = """
import sys
from rollax.run.folder import RunFolder
RunFolder(sys.argv[1]).claim()
print("held", flush=True)
sys.stdin.read()
"""
"""A process holding a folder with rollax's own lock."""


def digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def updates(folder: Path) -> list[int]:
    return [json.loads(line)["update"]
            for line in (folder / "metrics.jsonl").read_text().splitlines()]


def rollax_cmd(*argv: str) -> list[str]:
    return [sys.executable, "-m", "rollax.cli", *argv]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one-writer") / "finished"
    assert main(["train", "--json", *BASE, "--out", str(out)]) == 0
    assert not (out / ".lock").exists()  # released when the command ended
    return out


@pytest.fixture()
def stopped(finished, tmp_path) -> Path:
    """The run stopped at its checkpoint, before its summary (``--resume`` continues it)."""
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    (out / "summary.json").unlink()
    return out


@pytest.fixture()
def holder(request):
    """``holder(script, folder)``: a process started with ``script`` holding ``folder``."""
    procs = []

    def start(script: str, folder: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", script, str(folder)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def in_use(folder: Path, pid: int) -> str:
    return (f"rollax train: error: resume: the run in '{folder}' is in use by another process "
            f"(pid {pid}): a run folder is written by one process at a time\n")


@pytest.mark.integration
@pytest.mark.parametrize("longer", [[], ["--updates", "5"]])
def test_a_folder_another_process_holds_is_refused_in_one_line_touching_nothing(
        capsys, stopped, holder, longer):
    proc = holder(HOLDER, stopped)
    before, holding = digest(stopped), run_folder.held()
    assert ".lock" in before
    code, out, err = run(capsys, "train", "--resume", stopped, *longer)
    assert (code, out, err) == (2, "", in_use(stopped, proc.pid))
    assert digest(stopped) == before  # the holder's .lock included
    assert run_folder.held() == holding
    proc.stdin.close()  # the holder ends: the folder is free
    proc.wait(timeout=30)
    assert run(capsys, "train", "--resume", stopped, "--json", *longer)[0] == 0
    assert updates(stopped) == list(range(4 if not longer else 6))
    assert not (stopped / ".lock").exists()


@pytest.mark.integration
def test_a_holder_killed_with_sigkill_never_blocks(capsys, stopped, holder):
    proc = holder(CLAIMER, stopped)
    assert (stopped / ".lock").read_text() == f"{proc.pid}\n"
    assert run(capsys, "train", "--resume", stopped)[:2] == (2, "")  # held while it lives
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (stopped / ".lock").read_text() == f"{proc.pid}\n"  # left behind, unlocked
    code, _, err = run(capsys, "train", "--resume", stopped, "--json")
    assert (code, err) == (0, ""), err
    assert updates(stopped) == [0, 1, 2, 3]
    assert not (stopped / ".lock").exists()


@pytest.mark.integration
@pytest.mark.slow
def test_two_resumes_at_once_one_trains_one_line_per_update(finished, tmp_path):
    """The story of the issue, as two command lines: the second ``--resume`` arrives while
    the first trains (it printed where it resumes, before compiling) and is refused; the
    first trains on until Ctrl-C, and metrics.jsonl has each update once, in order."""
    folder = tmp_path / "run"
    shutil.copytree(finished, folder)
    config = json.loads((folder / "config.json").read_text())
    config["config"]["updates"] = 1_000_000  # stopped at update 3 of a million
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "summary.json").unlink()
    argv = ["train", "--resume", str(folder)]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal
    try:
        with (tmp_path / "first.out").open("w") as first_out:
            first = subprocess.Popen(rollax_cmd(*argv), stdout=first_out,
                                     stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        deadline = time.time() + 120
        while "resuming the run" not in (tmp_path / "first.out").read_text():
            assert first.poll() is None, first.communicate()
            assert time.time() < deadline
            time.sleep(0.05)
        try:
            second = subprocess.run(rollax_cmd(*argv), capture_output=True, text=True,
                                    timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the second --resume trains too")
        while len((folder / "metrics.jsonl").read_text().splitlines()) < 20:
            assert first.poll() is None, first.communicate()
            assert time.time() < deadline
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        _, first_err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert (second.returncode, second.stdout) == (2, ""), second.stderr
    assert second.stderr == in_use(folder, first.pid)
    assert first.returncode == 130, first_err
    last = int(first_err.split("interrupted at update ")[1].split(";")[0])
    assert updates(folder) == list(range(last + 1))
    assert (folder / "checkpoints" / "latest").read_text() == f"update-{last:07d}\n"
    assert not (folder / ".lock").exists()


def test_a_file_system_without_locks_stops_train_in_one_line_leaving_nothing(
        capsys, monkeypatch, stopped):
    """``flock`` failing as on a network file system without lock support (``ENOLCK``): one
    line naming the lock file, exit status 1, the folder as it was."""
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    before = digest(stopped)
    code, out, err = run(capsys, "train", "--resume", stopped)
    assert (code, out) == (1, "")
    assert err == (f"rollax train: error: {stopped}/.lock: cannot lock the run folder: "
                   f"{os.strerror(errno.ENOLCK)}\n")
    assert digest(stopped) == before


def test_a_new_run_folder_made_by_another_process_first_is_refused(tmp_path, monkeypatch):
    """Two ``train --out X`` at once: both find X free, one makes it; the other is refused
    like an existing folder, and X is left as the first made it."""
    run_config, _ = from_settings({"env": "corridor", "updates": 1, "batch_size": 16})
    out = tmp_path / "x"

    def checked_before_the_other_made_it(path, name, *args, **kwargs):
        out.mkdir()
        (out / "config.json").write_text("the other run's\n")
        return Path(path)

    monkeypatch.setattr(training, "check_new_run_dir", checked_before_the_other_made_it)
    holding = run_folder.held()
    with pytest.raises(ValueError, match=r"^out '.*/x' already exists: choose a new folder$"):
        training.create_run(run_config, str(out))
    assert [p.name for p in out.iterdir()] == ["config.json"]
    assert (out / "config.json").read_text() == "the other run's\n"
    assert run_folder.held() == holding


def test_create_run_holds_the_folder_until_released(tmp_path, holder):
    run_config, algo = from_settings({"env": "corridor", "updates": 1, "batch_size": 16})
    folder = training.create_run(run_config, str(tmp_path / "x"))
    config = (folder.path / "config.json").read_text()
    try:
        assert os.path.realpath(folder.path) in run_folder.held()
        assert (folder.path / ".lock").read_text() == f"{os.getpid()}\n"
        assert not folder.claim()  # this process holds it already
    finally:
        folder.release()
    assert sorted(p.name for p in folder.path.iterdir()) == ["config.json"]
    proc = holder(CLAIMER, folder.path)  # free for another process now
    with pytest.raises(ValueError, match=rf"is in use by another process \(pid {proc.pid}\)"):
        RunFolder(folder.path).claim()
    with pytest.raises(ValueError, match=r"is in use by another process"):  # nor executed
        training.execute(run_config, algo, RunFolder(folder.path))
    assert (folder.path / "config.json").read_text() == config


def test_new_run_releases_its_folder_when_it_returns(tmp_path):
    run_config, algo = from_settings({"env": "corridor", "updates": 1, "batch_size": 16})
    holding = run_folder.held()
    folder, _ = training.new_run(run_config, algo, str(tmp_path / "x"))
    assert run_folder.held() == holding
    assert (folder.path / "summary.json").exists() and not (folder.path / ".lock").exists()


def test_a_session_holds_its_folder_until_it_closes(tmp_path):
    """A new run and a resumed one alike: the folder is held from the session's start
    (:func:`training.begin`, :func:`training.open_resume`) to its close, and free after."""
    run_config, algo = from_settings({"env": "corridor", "updates": 2, "batch_size": 16})
    holding = run_folder.held()
    with training.begin(run_config, algo, str(tmp_path / "x")) as session:
        assert os.path.realpath(session.folder.path) in run_folder.held()
        assert session.start is None
        session.execute()
    assert run_folder.held() == holding
    with training.open_resume(session.folder.path, length=3) as longer:
        assert os.path.realpath(longer.folder.path) in run_folder.held()
        assert (longer.start.updates, longer.was) == (2, 2)
        summary, _ = longer.execute()
    assert run_folder.held() == holding and not (session.folder.path / ".lock").exists()
    assert [lane["env_steps"] > 0 for lane in summary["lanes"]] == [True]
    assert updates(session.folder.path) == [0, 1, 2, 3]


def _shuffled(finished: Path, tmp_path: Path, edit) -> Path:
    out = tmp_path / "shuffled"
    shutil.copytree(finished, out)
    lines = (out / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("".join(line + "\n" for line in edit(lines)))
    return out


@pytest.mark.parametrize(("edit", "message"), [
    (lambda lines: [*lines, lines[2]], "line 5 goes back to update 2 after update 3"),
    (lambda lines: [*lines[:3], lines[2], lines[3]], "line 4 repeats update 2 of lane seed=0"),
])
def test_plot_refuses_metrics_two_processes_interleaved(capsys, finished, tmp_path, edit,
                                                        message):
    """Updates that go back or repeat (what two processes training at once leave) are named
    in one line, exit 2, and no figure is drawn from them."""
    out = _shuffled(finished, tmp_path, edit)
    figures = digest(out / "figures")
    code, stdout, err = run(capsys, "plot", out)
    assert (code, stdout) == (2, "")
    assert err == (f"rollax plot: error: '{out}/metrics.jsonl' {message} (was the run trained "
                   f"by two processes at once?)\n")
    assert digest(out / "figures") == figures


def test_metrics_in_the_order_one_process_writes_are_read(tmp_path):
    """Several lanes per update, the last update cut short by a full disk: accepted."""
    rows = [{"seed": s, "lr": lr, "update": u, "loss": 0.5}
            for u in range(3) for s in (0, 1) for lr in (0.1, 1.0)][:-1]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert RunFolder(tmp_path).read_metrics() == rows
    rows.append({"seed": 0, "lr": 1.0, "update": 2, "loss": 0.5})  # lane (0, 1.0) again
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"line 12 repeats update 2 of lane seed=0, lr=1.0 "):
        RunFolder(tmp_path).read_metrics()

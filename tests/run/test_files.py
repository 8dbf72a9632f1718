"""Run files respect the umask: colleagues who may read a run folder can eval and plot it."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path

import pytest

from rollax.cli import main
from rollax.run import files
from rollax.run.config import from_settings
from rollax.run.folder import RunFolder, check_path_fits


def test_run_files_and_folders_follow_the_umask(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert main(["train", "--updates", "2", "--batch-size", "16", "--json", "--out",
                     str(tmp_path / "run")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    for path in (tmp_path / "run").rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))


# -- a file that cannot be written (a full disk) -------------------------------------------------

RUN = ["train", "--updates", "6", "--batch-size", "16", "--chunk-size", "2", "--json"]


def _sha(out: str) -> str:
    return json.loads(out)["params_sha256"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "run"
    code = main([*RUN, "--out", str(out)])
    assert code == 0
    return json.loads((out / "summary.json").read_text())["params_sha256"]


def full_disk_on(monkeypatch, method: str):
    """Make ``RunFolder.<method>`` fail as a full disk does: ``os.fsync`` of the staged file
    raises ENOSPC (no file name: the helper must add it)."""
    original = getattr(RunFolder, method)

    def failing(self, *args, **kwargs):
        def no_space(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        with monkeypatch.context() as m:
            m.setattr(files.os, "fsync", no_space)
            return original(self, *args, **kwargs)

    monkeypatch.setattr(RunFolder, method, failing)


@pytest.mark.slow
def test_full_disk_while_writing_the_summary_names_it_and_resume_finishes(
        tmp_path, capsys, monkeypatch, uninterrupted):
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        full_disk_on(m, "write_summary")
        assert main([*RUN, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == (f"rollax train: error: {out / 'summary.json'}: No space left on device; the "
                   f"run is kept; finish it from its last checkpoint with `rollax train --resume "
                   f"{out}`\n")
    assert not (out / "summary.json").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no staged leftovers
    assert main(["train", "--resume", str(out), "--json"]) == 0
    assert _sha(capsys.readouterr().out) == uninterrupted


@pytest.mark.optimized
@pytest.mark.slow
def test_full_disk_while_appending_metrics_resumes_bit_identically(tmp_path, capsys,
                                                                   uninterrupted):
    # A real ENOSPC: after the first chunk, metrics.jsonl becomes a link to /dev/full.
    from rollax.run import training

    run, algo = from_settings({"updates": 6, "batch_size": 16, "chunk_size": 2,
                               "checkpoint_every": 2})
    folder = training.create_run(run, str(tmp_path / "run"))
    metrics = folder.path / "metrics.jsonl"

    def fill_disk(event):
        if event.done == 4:  # checkpoints at 2 and 4 (chunks of 2): the third chunk fails
            metrics.rename(folder.path / "kept.jsonl")
            metrics.symlink_to("/dev/full")

    with pytest.raises(training.Unfinished) as caught:
        training.execute(run, algo, folder, on_chunk=fill_disk)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(metrics)
    metrics.unlink()
    # the half line a full disk leaves behind is dropped on resume
    (folder.path / "kept.jsonl").rename(metrics)
    with metrics.open("a") as f:
        f.write('{"update": 5, "exact_ret')
    assert main(["train", "--resume", str(folder.path), "--json"]) == 0
    assert _sha(capsys.readouterr().out) == uninterrupted
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [row["update"] for row in rows] == list(range(7))


def test_full_disk_while_writing_config_leaves_no_folder(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    full_disk_on(monkeypatch, "write_config")
    assert main([*RUN, "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"rollax train: error: {out / 'config.json'}: No space left on device\n")
    assert not out.exists()


def test_full_disk_while_drawing_figures_says_the_run_finished(tmp_path, capsys, monkeypatch):
    from rollax.run import plots

    out = tmp_path / "run"

    def no_space(paths, folder):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "returns.png"))

    monkeypatch.setattr(plots, "plot_runs", no_space)
    assert main([*RUN, "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"rollax train: error: {out / 'figures' / 'returns.png'}: No space left on device; the "
        f"run finished (summary.json); draw its figures with `rollax plot {out}`\n")
    assert (out / "summary.json").exists()


def test_out_names_that_cannot_exist_are_refused_before_anything_is_written(tmp_path,
                                                                             monkeypatch):
    """255 bytes per name (NAME_MAX), 10 fewer for the last name of a folder staged under a
    temporary name (``.NAME.`` and 8 random characters), 4096 for the absolute path: each
    limit checked at its boundary by making the folder for real."""
    monkeypatch.chdir(tmp_path)
    assert os.pathconf(".", "PC_NAME_MAX") == 255  # the limits of Linux file systems
    check_path_fits(Path("a" * 255))
    Path("a" * 255).mkdir()
    staged = Path("b" * 255) / ("c" * 245)
    check_path_fits(staged, staged=True)
    with files.staged_folder(staged):  # made under ".ccc....XXXXXXXX" (255 bytes), renamed
        pass
    assert staged.is_dir()
    with pytest.raises(OSError) as err:  # what the operating system says one byte later
        Path("d" * 256).mkdir()
    assert err.value.errno == errno.ENAMETOOLONG
    refused = [(Path("d" * 256), False, "at most 255 bytes, and 'dddddddddddddddddddd...' has 256"),
               (Path("e") / ("f" * 256), False, "at most 255 bytes"),
               (Path("g" * 246), True, "at most 245 bytes (255, the file system's limit, less "
                                       "10 for the temporary name it is first written under)"),
               (Path("h/" * 2100), False, "a path may have at most 4096 bytes")]
    for path, staged, message in refused:
        with pytest.raises(ValueError, match=re.escape(message)):
            check_path_fits(path, staged)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a" * 255, "b" * 255]


def test_staged_files_are_renamed_all_together_or_not_at_all(tmp_path):
    # a write that fails in the second file (a full disk: an OSError without a file name)
    # names that file and leaves both paths as they were, with no staged file beside them
    first, second = tmp_path / "a.png", tmp_path / "b.svg"
    first.write_text("old a")
    with pytest.raises(OSError) as caught:
        with files.staged_files([first, second]) as (a, b):
            assert (a.parent, a.suffix, b.parent, b.suffix) == (tmp_path, ".png", tmp_path, ".svg")
            a.write_text("new a")
            with files.writing(second, b):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(second))
    assert sorted(tmp_path.iterdir()) == [first] and first.read_text() == "old a"
    old = os.umask(0o027)
    try:
        with files.staged_files([first, second]) as (a, b):
            a.write_text("new a")
            b.write_text("new b")
            assert first.read_text() == "old a" and not second.exists()  # not before the end
    finally:
        os.umask(old)
    assert sorted(tmp_path.iterdir()) == [first, second]
    assert (first.read_text(), second.read_text()) == ("new a", "new b")
    assert {stat.S_IMODE(p.stat().st_mode) for p in (first, second)} == {0o640}

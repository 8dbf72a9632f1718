"""Run files respect the umask: colleagues who may read a run folder can eval and plot it."""

from __future__ import annotations

import os
import stat

from rollax.cli import main


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

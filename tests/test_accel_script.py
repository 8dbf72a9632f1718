"""benchmarks/accel.sh, the accelerator rows, checked without one: its syntax (``bash -n``)
and its dry run (``DRY=1``: each row's command printed, nothing run), which fails when a row names a
benchmark script that is not there."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROWS = {"timing": 5, "seeds": 3, "command": 2, "phases": 3, "warm-compile": 1, "tests": 1,
        "minatar-cnn": 4, "minatar-mlp": 4, "minatar-rejax": 4, "brax-rollax": 1, "brax-brax": 1}
"""Each section's rows."""


@pytest.mark.integration
def test_every_section_lists_its_rows(tmp_path):
    subprocess.run(["bash", "-n", "benchmarks/accel.sh"], cwd=ROOT, check=True)
    for section, rows in ROWS.items():
        done = subprocess.run(["bash", "benchmarks/accel.sh", section], cwd=ROOT, text=True,
                              capture_output=True, env={"DRY": "1", "OUT": str(tmp_path),
                                                        "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stdout + done.stderr
        commands = [line for line in done.stdout.splitlines()
                    if line.startswith("PYTHONPATH=")]
        assert len(commands) == rows, done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing ran

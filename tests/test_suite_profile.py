"""tools/suite_profile.py, the pytest plugin that says where the suite's time goes: run on two
tests in a fresh pytest process, it gives the one that compiles a program a compile and no
subprocess time, and the one that runs a subprocess that subprocess's CPU time and no compile;
an earlier session's rows are gone."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = textwrap.dedent("""
    import subprocess, sys
    import jax, jax.numpy as jnp

    def test_compiles():
        jax.jit(lambda x: x * 3 + 1)(jnp.arange(5.0)).block_until_ready()

    def test_runs_a_subprocess():
        subprocess.run([sys.executable, "-c", "sum(range(3 * 10**7))"], check=True)
""")


@pytest.mark.integration
def test_rows_of_a_compile_and_a_subprocess(tmp_path):
    (tmp_path / "test_two.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the inner session's root: tmp_path
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "gw7.json").write_text("{}")  # an earlier session's
    # a fresh session, not this one's xdist worker (PYTEST_XDIST_WORKER names the rows' file)
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(SUITE_PROFILE_DIR=str(folder), JAX_PLATFORMS="cpu", ROLLAX_COMPILE_CACHE="off")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tools.suite_profile",
                           "-p", "no:cacheprovider", str(tmp_path / "test_two.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in folder.iterdir()] == ["main.json"]
    rows = json.loads((folder / "main.json").read_text())
    compiles = rows["test_two.py::test_compiles"]
    child = rows["test_two.py::test_runs_a_subprocess"]
    assert compiles["compiles"] >= 1 and compiles["compile_s"] > 0, compiles
    assert compiles["lower_s"] > 0 and compiles["children_s"] < 0.05, compiles
    # each program compiled was traced and lowered first (no compile cache here)
    assert compiles["traces"] >= 1 and compiles["lowerings"] >= compiles["compiles"], compiles
    assert child["children_s"] > 0.2 and child["compiles"] == child["traces"] == 0, child
    assert child["wall_s"] >= child["children_s"] * 0.5, child
    assert "suite profile (" in done.stdout and "test_two.py" in done.stdout, done.stdout

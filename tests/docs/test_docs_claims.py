"""Claims the docs make in prose, checked against the code that makes them true: what
``--json`` prints for a non-finite score, where the docs say which runs draw
``ppo_diagnostics``, which methods the command line's help names, and that api.md's PPO example
prints the same whatever kernels XLA emits for the CPU."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rollax.cli import main
from rollax.cli.reference import listed, methods_by_task, spelled
from rollax.cli.train import emit

pytestmark = pytest.mark.optimized
"""Claims about the program rollax compiles (tests/conftest.py)."""

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _prose(name: str) -> str:
    """A page with its line breaks and indentation folded into single spaces."""
    return " ".join((DOCS / name).read_text().split())


def _reject(constant: str):
    raise ValueError(f"{constant} is not JSON")


def test_the_diverged_score_shown_is_what_json_prints(capsys):
    """cli.md shows the JSON of a diverged run's non-finite score; ``--json`` prints it through
    :func:`emit`, strict JSON with ``null``."""
    found = re.search(r"--lr 1e30 --json` \(a diverged run\) prints `([^`]+)`", _prose("cli.md"))
    assert found, "cli.md no longer shows the diverged run's JSON"
    fragment = found.group(1)
    json.loads("{" + fragment + "}", parse_constant=_reject)  # strict JSON: no NaN
    emit({"eval_return": [float("nan")], "eval_return_mean": float("inf")})
    assert fragment in capsys.readouterr().out


@pytest.mark.parametrize("page", ["cli.md", "metrics.md"])
def test_the_docs_send_ppo_diagnostics_to_the_table_of_algorithms(page):
    """Which runs draw ``ppo_diagnostics`` is one column of algorithms.md's generated table of
    algorithms (traced from each method's metrics, so it stays true as algorithms are added:
    tests/docs/test_docs_generated.py); the pages that describe the figure point there instead
    of naming methods."""
    claim = r"[Dd]rawn for the runs that log the ratios[^;]{0,120}\(algorithms\.md#the-algorithms\)"
    assert re.search(claim, _prose(page)), page
    table = (DOCS / "algorithms.md").read_text()
    assert "\n## The algorithms\n" in table and "<!-- generated: algorithms -->" in table


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code in (0, None)
    boxed = capsys.readouterr().out
    return " ".join(re.sub(r"[│╭╮╰╯─•]", " ", boxed).split())


def test_the_help_names_every_method_each_task_trains_with(capsys):
    """``rollax --help`` and the top of ``rollax train --help`` list the registry's methods
    per task, each once, as prose spells them (``ppo`` is PPO)."""
    methods = {task: listed(map(spelled, ms)) for task, ms in methods_by_task().items()}
    claims = [f"train a tabular policy with {methods['tabular']} and",
              f"train a neural policy with {methods['neural']}, from"]
    for text in (_help(capsys), _help(capsys, "train")):
        for claim in claims:
            assert claim in text, (claim, text[:600])


def _example_near(page: str, marker: str) -> tuple[str, str]:
    """The ```python block of ``page`` holding ``marker`` and the ```text block after it."""
    text = (DOCS / page).read_text()
    at = text.index(marker)
    start = text.rindex("```python\n", 0, at) + len("```python\n")
    end = text.index("```\n", at)
    shown = text.index("```text\n", end) + len("```text\n")
    return text[start:end], text[shown:text.index("```\n", shown)]


@pytest.mark.optimized
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 kernels only")
@pytest.mark.parametrize("isa", ["AVX2", "SSE4_2"])
def test_the_ppo_example_prints_the_same_with_other_cpu_kernels(isa, tmp_path):
    """api.md's PPO example trains for real, and its returns depend on the kernels XLA emits
    for the CPU; what it prints must not: run again with XLA's AVX2 and SSE4.2 kernels (the
    docs test runs it with this machine's own), compiled as a user's machine compiles it
    (``optimized``: the session's cheap compilation would otherwise reach the subprocess)."""
    code, shown = _example_near("api.md", 'ppo.preset("CartPole-v1", total_steps=65536)')
    env = {**os.environ, "XLA_FLAGS": f"--xla_cpu_max_isa={isa}", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == shown.split(), proc.stdout

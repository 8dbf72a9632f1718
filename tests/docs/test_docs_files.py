"""The run files shown in docs/metrics.md are what rollax writes: each ```json block is compared
with the file it shows, made afresh by the command the page names.

Tabular runs are compared exactly, apart from their float metrics, within 1e-5 (a sum over the
batch ends in other last float32 bits on another CPU's kernels: 0.4113273 here, 0.4113282 on an
AMD EPYC; their parameter hashes are equal); a neural run's numbers within 5 % and without its
parameter hashes (their last float32 bits depend on the CPU's instruction set, see
tests/docs/test_docs.py).
Times, throughputs, the compile cache's folder and the jax version are measurements of the
machine, not results: their keys must be there, their values are not compared.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

# executed documentation: the page's own commands train its runs
pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
FENCE = re.compile(r"^```json\n(.*?)^```\n", re.S | re.M)
RUNS = {
    "cli-a": ["train", "--json", "--updates", "3"],
    "cli-b": ["train", "--env", "CartPole-v1", "--total-steps", "2048", "--seeds", "2", "--json"],
    "m-corridor": ["train"],
}
"""The commands of the page's runs (its ```bash block), by /tmp folder name."""
BLOCKS = [("cli-a", "config.json"), ("cli-b", "config.json"), ("m-corridor", "metrics.jsonl"),
          ("cli-b", "metrics.jsonl"), ("cli-a", "meta.json"), ("cli-b", "summary.json")]
"""What each ```json block of the page shows, in page order."""
VOLATILE = re.compile(r"time_s$|per_second$|^compile_cache$|^jax$")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs-runs")
    for name, command in RUNS.items():
        # as the `rollax` command runs it, which gives a CPU a device per core
        proc = subprocess.run([sys.executable, "-m", "rollax.cli", *command, "--out",
                               str(folder / name)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
    return folder


def _blocks() -> list[str]:
    return [m.group(1) for m in FENCE.finditer(DOC.read_text())]


def _same(doc, real, neural: bool, where: str) -> None:
    if isinstance(doc, dict):
        assert isinstance(real, dict) and list(doc) == list(real), (where, list(doc), list(real))
        for key, value in doc.items():
            if VOLATILE.search(key) or (neural and key == "params_sha256"):
                continue
            _same(value, real[key], neural, f"{where}.{key}")
    elif isinstance(doc, list):
        assert isinstance(real, list) and len(doc) == len(real), where
        for i, (a, b) in enumerate(zip(doc, real)):
            _same(a, b, neural, f"{where}[{i}]")
    elif isinstance(doc, float) and neural:
        assert math.isclose(doc, real, rel_tol=0.05, abs_tol=1e-6), (where, doc, real)
    elif isinstance(doc, float):
        assert math.isclose(doc, real, rel_tol=1e-5, abs_tol=1e-7), (where, doc, real)
    else:
        assert doc == real, (where, doc, real)


def _real(folder: Path, file: str):
    if file == "meta.json":
        latest = (folder / "checkpoints" / "latest").read_text().strip()
        return json.loads((folder / "checkpoints" / latest / file).read_text())
    return json.loads((folder / file).read_text())


def test_the_page_shows_the_blocks_this_test_knows():
    assert len(_blocks()) == len(BLOCKS)


@pytest.mark.parametrize(("index", "run", "file"), [(i, *b) for i, b in enumerate(BLOCKS)],
                         ids=[f"{run}/{file}" for run, file in BLOCKS])
def test_block(index, run, file, runs):
    text = _blocks()[index]
    folder = runs / run
    neural = json.loads((folder / "config.json").read_text())["kind"] == "ppo"
    if file == "metrics.jsonl":
        shown = [json.loads(line) for line in text.splitlines()]
        lines = (folder / file).read_text().splitlines()[:len(shown)]
        for i, (doc, line) in enumerate(zip(shown, lines)):
            _same(doc, json.loads(line), neural, f"{run}/{file}:{i + 1}")
        return
    _same(json.loads(text), _real(folder, file), neural, f"{run}/{file}")

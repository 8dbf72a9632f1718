"""Every Python example in the docs runs, and prints exactly the output shown below it.

A ```python block directly followed by a ```text block is executed (its own fresh namespace,
stdout captured) and its output compared with the text, line by line with surrounding spaces
stripped; a ```python block without output only has to run. So the docs cannot drift from the
code.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from rollax.envs import registry

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
SLOW = ("rollax.make_train(config)", "jax.vmap(run)")
"""Examples that train for real (marked slow)."""


def _examples():
    for doc in DOCS:
        text = doc.read_text()
        blocks = list(FENCE.finditer(text))
        for i, block in enumerate(blocks):
            if block.group(1) != "python":
                continue
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            expected = None
            if nxt is not None and nxt.group(1) == "text" and not text[
                    block.end():nxt.start()].strip():
                expected = nxt.group(2)
            line = text[:block.start()].count("\n") + 1
            marks = [pytest.mark.slow] if any(s in block.group(2) for s in SLOW) else []
            yield pytest.param(block.group(2), expected, id=f"{doc.name}:{line}", marks=marks)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines()]


def _run_apart(code: str, cwd: Path) -> str:
    """An example that sets XLA_FLAGS before importing JAX runs in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("code", "expected"), list(_examples()))
def test_example(code, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    # an example that registers an environment must not leak it into later tests
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    if "XLA_FLAGS" in code:
        output = _run_apart(code, tmp_path)
        if expected is not None:
            assert _lines(output) == _lines(expected)
        return
    module = types.ModuleType("doc_example")  # a real module: dataclasses look theirs up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<doc example>", "exec"), module.__dict__)
    if expected is not None:
        assert _lines(out.getvalue()) == _lines(expected)

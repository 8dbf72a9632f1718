"""Every Python example in the docs runs, and prints exactly the output shown below it.

A ```python block directly followed by a ```text block is executed (its own fresh namespace,
stdout captured) and its output compared with the text, line by line with surrounding spaces
stripped; a ```python block without output only has to run. So the docs cannot drift from the
code.

A ```text approx block shows the output of neural training, whose last float32 bits depend on
the CPU's instruction set (XLA emits different kernels for AVX2 and AVX-512, and training
amplifies the difference): its numbers are compared within 5 % (relative), everything else
exactly. An example that builds a suite's environment (``rollax.make("<suite>:...")``) is
skipped when the suite is not installed; tests/suites runs them in CI's suites venv.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from rollax.envs import registry, suites

# every example is executed documentation (some in a fresh interpreter)
pytestmark = [pytest.mark.integration, pytest.mark.optimized]

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)( approx)?\n(.*?)^```\n", re.S | re.M)
NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?")
SUITE = re.compile(r"""["'](\w+):""")
SLOW = ("rollax.make_train(config)", "jax.vmap(run)")
"""Examples that train for real (marked slow)."""


OPTIONAL = {"onnxruntime": "onnx"}
"""Modules of optional extras an example may import (skipped without them), and the extra."""


def _examples():
    for doc in DOCS:
        text = doc.read_text()
        blocks = list(FENCE.finditer(text))
        for i, block in enumerate(blocks):
            if block.group(1) != "python":
                continue
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            expected, approx = None, False
            if nxt is not None and nxt.group(1) == "text" and not text[
                    block.end():nxt.start()].strip():
                expected, approx = nxt.group(3), bool(nxt.group(2))
            line = text[:block.start()].count("\n") + 1
            code = block.group(3)
            marks = [pytest.mark.slow] if any(s in code for s in SLOW) else []
            missing = [s.extra for s in (suites.SUITES.get(p) for p in SUITE.findall(code))
                       if s is not None and not s.installed]
            missing += [extra for module, extra in OPTIONAL.items()
                        if re.search(rf"^(import|from) .*\b{module}\b", code, re.M)
                        and importlib.util.find_spec(module) is None]
            if missing:
                marks.append(pytest.mark.skip(reason=f"needs rollax[{missing[0]}]"))
            yield pytest.param(code, expected, approx, id=f"{doc.name}:{line}", marks=marks)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines()]


def _same(printed: str, expected: str, approx: bool) -> bool:
    """Exact line by line, or (``approx``) the same text around numbers within 5 %."""
    if not approx:
        return _lines(printed) == _lines(expected)
    a, b = _lines(printed), _lines(expected)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if NUMBER.sub("#", x) != NUMBER.sub("#", y):
            return False
        for u, v in zip(NUMBER.findall(x), NUMBER.findall(y)):
            if abs(float(u) - float(v)) > 0.05 * max(abs(float(u)), abs(float(v))) + 1e-12:
                return False
    return True


def _run_apart(code: str, cwd: Path) -> str:
    """An example that sets XLA_FLAGS before importing JAX runs in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("code", "expected", "approx"), list(_examples()))
def test_example(code, expected, approx, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    # an example that registers an environment must not leak it into later tests
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    if "XLA_FLAGS" in code:
        output = _run_apart(code, tmp_path)
        if expected is not None:
            assert _same(output, expected, approx), output
        return
    module = types.ModuleType("doc_example")  # a real module: dataclasses look theirs up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<doc example>", "exec"), module.__dict__)
    if expected is not None:
        assert _same(out.getvalue(), expected, approx), out.getvalue()

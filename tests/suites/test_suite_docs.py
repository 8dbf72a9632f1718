"""The examples of docs/environments.md, run where the suites are installed (in the main venv
tests/docs/test_docs.py skips the ones whose suite is missing): none may be skipped here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "docs_examples", Path(__file__).resolve().parents[1] / "docs" / "test_docs.py")
assert _spec is not None and _spec.loader is not None
docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs)

EXAMPLES = [p for p in docs._examples() if p.id.startswith("environments.md:")]


def test_every_suite_example_runs_here():
    skipped = [p.id for p in EXAMPLES if any(m.name == "skip" for m in p.marks)]
    assert EXAMPLES and not skipped, f"suites missing in this venv for {skipped}"


@pytest.mark.parametrize(("code", "expected", "approx"),
                         [pytest.param(*p.values, id=p.id) for p in EXAMPLES])
def test_example(code, expected, approx, tmp_path, monkeypatch):
    docs.test_example(code, expected, approx, tmp_path, monkeypatch)


# Bit-identity with the suite's own step and documentation output are claims about the program
# rollax compiles (tests/conftest.py): compiled with the defaults, not the session's cheap ones.
pytestmark = pytest.mark.optimized

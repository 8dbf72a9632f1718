"""The docs' generated blocks are current, and every registered algorithm's settings are in the
docs: a block ``<!-- generated: KEY -->`` ... ``<!-- end generated -->`` of a page holds what
:mod:`rollax.cli.reference` makes of the registry and the config dataclasses today
(``python tools/docs_tables.py`` rewrites the stale ones), and each algorithm's config is
described field by field, in its own generated block or in a hand-written table under a
heading that names the config (api.md's ``PPOConfig``), whose fields and defaults are the
config's."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from rollax.algos.registry import algorithms
from rollax.cli import reference

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = {p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}


def test_every_generated_block_is_current():
    stale = reference.stale(PAGES)
    assert not stale, ("stale generated blocks (python tools/docs_tables.py rewrites them): "
                       + ", ".join(f"docs/{page}: {key}" for page, key in stale))


def test_the_table_of_algorithms_has_every_method():
    table = reference.algorithms_table(PAGES, "algorithms.md")
    rows = table.splitlines()[2:]
    assert len(rows) == sum(len(spec.methods) for spec in algorithms())
    assert "<!-- generated: algorithms -->" in PAGES["algorithms.md"]


def test_an_unknown_block_is_refused():
    with pytest.raises(ValueError, match="unknown generated block 'fields'"):
        reference.regenerate({"x.md": "<!-- generated: fields -->\n<!-- end generated -->\n"})
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        reference.regenerate({"x.md": "<!-- generated: fields nope -->\n<!-- end generated -->"})


def _table_under(text: str, heading: str) -> dict[str, str]:
    """``field -> default`` of the first ``| field | default | ...`` table after ``heading``,
    within its section."""
    marks = reference.headings(text)
    at = next(i for i, h in enumerate(marks) if h.title == heading)
    section = text[marks[at].end:marks[at + 1].start if at + 1 < len(marks) else len(text)]
    rows: dict[str, str] = {}
    lines = iter(section.splitlines())
    for line in lines:
        if line.startswith("| field | default |"):
            next(lines)  # the delimiter row
            for row in lines:
                if not row.startswith("|"):
                    break
                cells = [c.strip().strip("`") for c in row.strip("|").split("|")]
                rows[cells[0]] = cells[1]
            break
    return rows


@pytest.mark.parametrize("spec", algorithms(), ids=lambda s: s.name)
def test_every_algorithm_has_its_settings_described(spec):
    """A new algorithm fails here until its section holds ``<!-- generated: fields NAME -->``
    (docs/architecture.md, "Adding an algorithm"); a hand-written table of a config lists each
    of its fields once, with its default."""
    where = reference.described_at(spec, PAGES)
    assert where is not None, (f"no page describes {spec.name}'s settings: add "
                               f"<!-- generated: fields {spec.name} --> to its section")
    page, heading = where
    if f"<!-- generated: fields {spec.name} -->" in PAGES[page]:
        return
    table = _table_under(PAGES[page], heading)
    fields = {f.name: reference.default_of(f) for f in dataclasses.fields(spec.config_type)}
    assert set(table) == set(fields), (page, heading)
    for name, default in fields.items():
        written = re.sub(r"^[\"'](.*)[\"']$", r"'\1'", table[name])
        assert ast.literal_eval(written) == default, (page, name, table[name])

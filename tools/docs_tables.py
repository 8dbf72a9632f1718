"""Rewrite the generated blocks of docs/*.md from the registry and the config dataclasses.

A block is the text between ``<!-- generated: KEY -->`` and ``<!-- end generated -->``
(:mod:`rollax.cli.reference` makes each one: ``algorithms``, ``fields NAME``). Run it after
adding an algorithm or changing a config's fields or their docstrings::

    python tools/docs_tables.py            # rewrite the stale blocks, naming each
    python tools/docs_tables.py --check    # exit 1, naming them, if any is stale

tests/docs/test_docs_generated.py fails on a stale block as ``--check`` does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rollax.cli.reference import regenerate, stale

DOCS = Path(__file__).resolve().parents[1] / "docs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}
    old = stale(pages)
    for page, key in old:
        print(f"docs/{page}: {key} is stale" if args.check else f"docs/{page}: {key} rewritten")
    if args.check:
        return 1 if old else 0
    for page, text in regenerate(pages).items():
        if text != pages[page]:
            (DOCS / page).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

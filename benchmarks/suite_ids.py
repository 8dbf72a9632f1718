"""How many of the environment ids the suites register ``rollax.make`` builds, and why the rest
are refused.

    python benchmarks/suite_ids.py            # a table per suite, then the totals
    python benchmarks/suite_ids.py --json     # one JSON object: suite -> id -> "ok" or reason

Run it in a venv with every suite's extra installed (``.[brax,playground,jumanji,pgx,craftax,
xminigrid,gymnax]``); a suite that is not installed is listed as such and counted as nothing.
Each id is the suite's own registry (not rollax's list of what it accepts): gymnax's
``registered_envs``, Jumanji's ``registered_environments()``, Pgx's ``available_envs()``,
xminigrid's ``registered_environments()``, Playground's ``ALL_ENVS``, Brax's environment table
and Craftax's four ids. Building an environment compiles nothing; the whole count takes seconds
(Brax and Playground load their models).
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable

import rollax
from rollax.envs.suites import SUITES, adapter


def _registered() -> dict[str, Callable[[], list[str]]]:
    """Suite prefix -> the suite's own list of ids (imported when called)."""
    return {
        "gymnax": lambda: list(importlib.import_module("gymnax").registered_envs),
        "brax": lambda: list(adapter(SUITES["brax"]).ids()),
        "playground": lambda: list(adapter(SUITES["playground"]).ids()),
        "jumanji": lambda: list(importlib.import_module("jumanji").registered_environments()),
        "pgx": lambda: list(importlib.import_module("pgx").available_envs()),
        "xminigrid": lambda: list(
            importlib.import_module("xminigrid").registered_environments()),
        "craftax": lambda: list(adapter(SUITES["craftax"]).ids()),
    }


def count() -> dict[str, dict[str, str] | None]:
    """suite -> {id: "ok" or the one-line reason it is refused}; ``None``: not installed."""
    found: dict[str, dict[str, str] | None] = {}
    for prefix, listing in _registered().items():
        if not SUITES[prefix].installed:
            found[prefix] = None
            continue
        rows = {}
        for env_id in listing():
            try:
                rollax.make(f"{prefix}:{env_id}")
                rows[env_id] = "ok"
            except (ValueError, TypeError, NotImplementedError, OSError) as error:
                # OSError: a suite that downloads data when built (gymnax's MNIST) offline
                rows[env_id] = str(error).splitlines()[0] if str(error) else type(error).__name__
        found[prefix] = rows
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args()
    found = count()
    if args.json:
        print(json.dumps(found, indent=1))
        return
    total = built = 0
    for prefix, rows in found.items():
        if rows is None:
            print(f"{prefix}: not installed (pip install rollax[{SUITES[prefix].extra}])")
            continue
        ok = sum(v == "ok" for v in rows.values())
        total, built = total + len(rows), built + ok
        print(f"{prefix}: {ok} of {len(rows)} build")
        for env_id, reason in rows.items():
            if reason != "ok":
                print(f"    {env_id}: {reason}")
    print(f"all installed suites: {built} of {total} ids build")


if __name__ == "__main__":
    main()

"""Environment suites behind ``rollax.make("<suite>:<id>")``: one row per suite.

Each suite is an optional extra named after it (``pip install rollax[<suite>]``) and has one
adapter module in this package, named after it (``rollax.envs.suites.gymnax``, ...), its
environments on the base class and helpers of :mod:`rollax.envs.suites.base`. The adapter module
is imported only when one of its environments is built, so a missing suite costs nothing until
it is asked for, and then gives a one-line ``ValueError`` with the install command
(:func:`~rollax.envs.suites.base.import_suite`). An adapter module provides

- ``make(env_id, horizon=None, **options) -> Environment``: what ``make("<suite>:<env_id>")``
  returns;
- ``ids() -> tuple[str, ...]``: the ids it accepts (``rollax envs`` lists them), empty when the
  suite is not installed.

Listing ids imports the suite (gymnax's import alone takes about a second), so
:func:`suite_ids` keeps each suite's list in a small file, ``$XDG_CACHE_HOME/rollax/
suite_ids.json`` (``~/.cache/rollax/suite_ids.json``), under the suite's installed version and
its adapter's source: a new version of either lists again. Gymnasium's ids are never kept
(other packages add to its registry when they are imported).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import NamedTuple


class Suite(NamedTuple):
    """One suite's row: its prefix (``"gymnax"``), the rollax module holding its adapter, the
    extra that installs it and the suite's own package (``None``: the prefix)."""

    prefix: str
    adapter: str
    extra: str
    package: str | None = None

    @property
    def installed(self) -> bool:
        """Whether the suite's package can be found (without importing it)."""
        return importlib.util.find_spec(self.package or self.prefix) is not None


SUITES: dict[str, Suite] = {
    suite.prefix: suite
    for suite in (
        Suite("gymnax", "rollax.envs.suites.gymnax", "gymnax"),
        Suite("brax", "rollax.envs.suites.brax", "brax"),
        Suite("playground", "rollax.envs.suites.playground", "playground", "mujoco_playground"),
        Suite("jumanji", "rollax.envs.suites.jumanji", "jumanji"),
        Suite("pgx", "rollax.envs.suites.pgx", "pgx"),
        Suite("xminigrid", "rollax.envs.suites.xminigrid", "xminigrid"),
        Suite("craftax", "rollax.envs.suites.craftax", "craftax"),
        Suite("gymnasium", "rollax.envs.suites.gymnasium", "gymnasium"),
        Suite("envpool", "rollax.envs.suites.envpool", "envpool"),
    )
}
"""Every suite by prefix; ``make`` reads ``<prefix>:<id>`` as the suite's environment ``<id>``."""


def split_suite(name) -> tuple[Suite, str] | None:
    """``(suite, id)`` when ``name`` is ``"<prefix>:<id>"`` for a known suite, else ``None``."""
    if not isinstance(name, str):
        return None
    prefix, colon, env_id = name.partition(":")
    if not colon or prefix not in SUITES:
        return None
    return SUITES[prefix], env_id


def adapter(suite: Suite) -> ModuleType:
    """The suite's adapter module (rollax's own; importing it does not import the suite)."""
    return importlib.import_module(suite.adapter)


def suite_ids(cache: Path | None = None) -> list[str]:
    """``<prefix>:<id>`` for every environment of every installed suite, suite by suite; the
    lists kept in ``cache`` (default: the module docstring's file) are read from it."""
    path = ids_file() if cache is None else cache
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    kept = kept if isinstance(kept, dict) else {}
    found, changed = [], False
    for suite in SUITES.values():
        if not suite.installed:
            continue
        stamp = _stamp(suite)
        ids = kept.get(stamp) if stamp is not None else None
        if not isinstance(ids, list):
            ids = list(adapter(suite).ids())
            if stamp is not None:
                kept = {k: v for k, v in kept.items() if not k.startswith(f"{suite.prefix} ")}
                kept[stamp], changed = ids, True
        found += [f"{suite.prefix}:{env_id}" for env_id in ids]
    if changed:
        _write(path, kept)
    return found


def ids_file() -> Path:
    """Where :func:`suite_ids` keeps the suites' lists (module docstring)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "rollax" / "suite_ids.json"


def _stamp(suite: Suite) -> str | None:
    """``"<prefix> <version> <adapter digest>"``, or None for a suite whose list is not kept
    (Gymnasium's, or one whose version cannot be read)."""
    if suite.prefix == "gymnasium":
        return None
    try:
        version = importlib.metadata.version(suite.extra)
        spec = importlib.util.find_spec(suite.adapter)
        source = Path(spec.origin).read_bytes() if spec and spec.origin else b""
    except (importlib.metadata.PackageNotFoundError, OSError, ValueError):
        return None
    return f"{suite.prefix} {version} {hashlib.sha256(source).hexdigest()[:16]}"


def _write(path: Path, kept: dict) -> None:
    """``kept`` to ``path`` through a temporary file and a rename; a folder that cannot be
    written is left alone (the lists are listed again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False,
                                         suffix=".tmp") as f:
            json.dump(kept, f)
        os.replace(f.name, path)
    except OSError:
        pass


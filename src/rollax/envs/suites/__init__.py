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
"""

from __future__ import annotations

import importlib
import importlib.util
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


def suite_ids() -> list[str]:
    """``<prefix>:<id>`` for every environment of every installed suite, suite by suite."""
    return [f"{suite.prefix}:{env_id}" for suite in SUITES.values()
            for env_id in adapter(suite).ids()]


"""Environment suites behind ``rollax.make("<suite>:<id>")``: one row per suite.

Each suite is an optional extra named after it (``pip install rollax[<suite>]``). Its adapter
module is imported only when one of its environments is built, so a missing suite costs nothing
until it is asked for, and then gives a one-line ``ValueError`` with the install command
(:func:`import_suite`). An adapter module provides

- ``make(env_id, horizon=None, **options) -> Environment``: what ``make("<suite>:<env_id>")``
  returns;
- ``ids() -> tuple[str, ...]``: the ids it accepts (``rollax envs`` lists them), empty when the
  suite is not installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any, NamedTuple

from rollax.envs.base import Box, Discrete, Environment


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
        Suite("gymnax", "rollax.envs.gymnax_adapter", "gymnax"),
        Suite("brax", "rollax.envs.brax_adapter", "brax"),
        Suite("playground", "rollax.envs.playground_adapter", "playground", "mujoco_playground"),
        Suite("jumanji", "rollax.envs.jumanji_adapter", "jumanji"),
        Suite("pgx", "rollax.envs.pgx_adapter", "pgx"),
        Suite("xminigrid", "rollax.envs.xminigrid_adapter", "xminigrid"),
        Suite("craftax", "rollax.envs.craftax_adapter", "craftax"),
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


def import_suite(module: str, extra: str) -> ModuleType:
    """Import a suite's package ``module``; a ``ValueError`` with the install command when it is
    missing or fails to import (one line: the CLI prints it as the error)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:  # not installed, or installed without one of its dependencies
        raise ValueError(
            f"{extra} environments need the optional dependency: `pip install rollax[{extra}]` "
            f"(importing {module} failed: {error})"
        ) from error


def suite_ids() -> list[str]:
    """``<prefix>:<id>`` for every environment of every installed suite, suite by suite."""
    return [f"{suite.prefix}:{env_id}" for suite in SUITES.values()
            for env_id in adapter(suite).ids()]


class SuiteEnvironment(Environment):
    """The base of the adapters: their spaces are converted once, at construction, into
    ``self._spaces = (observation_space, action_space, raw_observation_shape)``."""

    _spaces: Any

    @property
    def observation_space(self) -> Discrete | Box:
        return self._spaces[0]

    @property
    def action_space(self) -> Discrete | Box:
        return self._spaces[1]

    @property
    def raw_observation_shape(self) -> tuple[int, ...]:
        """The suite's own observation shape, before rollax flattens it to a vector."""
        return self._spaces[2]

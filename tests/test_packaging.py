"""pyproject.toml's extras install into one environment without clashing: ``pygame`` and
``pygame-ce`` both install the same ``pygame`` package, so no set of rollax's extras may ask
for both, directly or through an extra of a dependency (``gymnasium[box2d]``)."""

from __future__ import annotations

import importlib.metadata as metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYGAMES = {"pygame", "pygame-ce"}


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]


def _names(requirement: str) -> set[str]:
    """The distribution ``requirement`` names and those its extras add, as the installed
    distribution's metadata declares them (one level down)."""
    req = Requirement(requirement)
    names = {canonicalize_name(req.name)}
    if req.extras:
        for line in metadata.requires(req.name) or []:
            sub = Requirement(line)
            if sub.marker is not None and any(sub.marker.evaluate({"extra": extra})
                                              for extra in req.extras):
                names.add(canonicalize_name(sub.name))
    return names


def test_the_extras_ask_for_one_pygame_the_one_gymnasium_draws_with():
    asked = {extra: set().union(*map(_names, reqs)) & PYGAMES
             for extra, reqs in _extras().items()}
    assert set().union(*asked.values()) == {"pygame-ce"}, asked
    # the distribution Gymnasium's own renderer extra declares (Gymnasium draws classic control)
    assert _names("gymnasium[classic-control]") & PYGAMES == {"pygame-ce"}
    assert asked["render"] == asked["box2d"] == {"pygame-ce"}

"""The ordered registries of named checks: each check is one function, registered once with
:func:`env_check`, :func:`collector_check` or :func:`recurrent_check`; the reports,
``ENV_CHECKS`` / ``COLLECTOR_CHECKS`` / ``RECURRENT_CHECKS``, the package docstring and the
tables in ``docs/api.md`` all come from here."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

from rollax.contracts.report import SKIPPED, CheckResult


class NotRun(Exception):
    """Raised by a check whose inputs are missing: it is reported as skipped."""


@dataclasses.dataclass(frozen=True)
class Check:
    """One named check: ``fn(context) -> CheckResult`` (unnamed; the check names it)."""

    name: str
    description: str
    fn: Callable[[Any], CheckResult]
    gate: bool = False
    """When it fails, the checks after it are skipped (their inputs do not exist)."""
    gated: bool = True
    """Skipped after a failed gate; False: still run (it may raise :class:`NotRun`)."""

    def run(self, context: Any) -> CheckResult:
        """The check's result, named."""
        return dataclasses.replace(self.fn(context), name=self.name)


class Registry:
    """Checks in registration order."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._checks: dict[str, Check] = {}

    def register(self, name: str, description: str, *, gate: bool = False,
                 gated: bool = True) -> Callable:
        """Decorator adding ``fn`` as the check ``name`` (a name is registered once)."""

        def add(fn: Callable[[Any], CheckResult]) -> Callable[[Any], CheckResult]:
            if name in self._checks:
                raise ValueError(f"check {name!r} is already registered")
            self._checks[name] = Check(name, description, fn, gate, gated)
            return fn

        return add

    @property
    def names(self) -> tuple[str, ...]:
        """The check names, in order."""
        return tuple(self._checks)

    def __iter__(self) -> Iterator[Check]:
        return iter(self._checks.values())

    def __len__(self) -> int:
        return len(self._checks)

    def run(self, context: Any) -> list[CheckResult]:
        """Every check's result, in order; after a failed gate the gated checks are skipped
        (``not run (see 'gate')``), and so is a check raising :class:`NotRun`."""
        results: list[CheckResult] = []
        blocked = ""
        for check in self:
            skip = CheckResult(check.name, SKIPPED, f"not run (see '{blocked}')")
            if blocked and check.gated:
                results.append(skip)
                continue
            try:
                result = check.run(context)
            except NotRun:
                result = skip
            results.append(result)
            if check.gate and result.failed and not blocked:
                blocked = check.name
        return results

    def docstring(self) -> str:
        """The checks as a reST definition list (for a module docstring)."""
        lines = [f"{self.title}:", ""]
        for check in self:
            text = re.sub(r"`([^`]+)`", r"``\1``", check.description)
            lines += [f"``{check.name}``", f"    {text}"]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The checks as a Markdown table (the one in ``docs/api.md``)."""
        lines = ["| check | what it checks |", "| --- | --- |"]
        lines += [f"| `{c.name}` | {c.description} |" for c in self]
        return "\n".join(lines)


ENV_REGISTRY = Registry("Checks of ``check_env``")
COLLECTOR_REGISTRY = Registry("Checks of ``check_collector`` (also run by ``check_env(..., "
                              "collect_fn=...)``)")
RECURRENT_REGISTRY = Registry("Checks of ``check_recurrent``")
HOST_REGISTRY = Registry("Checks of ``check_host_env`` (environments stepped on the host)")


def env_check(name: str, description: str, *, gate: bool = False,
              gated: bool = True) -> Callable:
    """Register an environment check (``fn(EnvRun) -> CheckResult``) in check order."""
    return ENV_REGISTRY.register(name, description, gate=gate, gated=gated)


def collector_check(name: str, description: str, *, gate: bool = False) -> Callable:
    """Register a collector check (``fn(CollectorRun) -> CheckResult``) in check order."""
    return COLLECTOR_REGISTRY.register(name, description, gate=gate)


def recurrent_check(name: str, description: str, *, gate: bool = False) -> Callable:
    """Register a recurrent check (``fn(RecurrentRun) -> CheckResult``) in check order."""
    return RECURRENT_REGISTRY.register(name, description, gate=gate)


def host_check(name: str, description: str, *, gate: bool = False) -> Callable:
    """Register a host-environment check (``fn(HostRun) -> CheckResult``) in check order."""
    return HOST_REGISTRY.register(name, description, gate=gate)

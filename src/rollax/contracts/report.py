"""Reports of the contract checks: :class:`CheckResult`, :class:`CheckReport`,
:class:`EnvContractError`, and the :class:`Finding` a check turns into a result."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

PASSED, FAILED, WARNING, SKIPPED = "passed", "failed", "warning", "skipped"
STATUSES = (PASSED, FAILED, WARNING, SKIPPED)


class EnvContractError(ValueError):
    """An environment or collector broke a contract; the message is the report's summary."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One named check: its status and, for a failure, where it first failed."""

    name: str
    status: str
    """``"passed"``, ``"failed"``, ``"warning"`` or ``"skipped"``."""
    message: str = ""
    step: int | None = None
    """First offending step (transition index), None when not tied to a step (or at reset)."""
    env: int | None = None
    """First offending environment index in the batch, None when not tied to one."""
    values: dict = dataclasses.field(default_factory=dict)
    """The values involved, by name."""

    @property
    def passed(self) -> bool:
        """The check passed."""
        return self.status == PASSED

    @property
    def failed(self) -> bool:
        """The check failed."""
        return self.status == FAILED

    def line(self) -> str:
        """``name: status: message``."""
        return f"{self.name}: {self.status}" + (f": {self.message}" if self.message else "")


@dataclasses.dataclass
class CheckReport:
    """The results of ``check_env`` or ``check_collector``, in check order."""

    subject: str
    results: list[CheckResult]
    settings: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skips do not count)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks."""
        return [r for r in self.results if r.status == FAILED]

    @property
    def warnings(self) -> list[CheckResult]:
        """The checks that ended in a warning."""
        return [r for r in self.results if r.status == WARNING]

    @property
    def names(self) -> tuple[str, ...]:
        """The check names, in report order."""
        return tuple(r.name for r in self.results)

    def __getitem__(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no check named {name!r} (checks: {', '.join(self.names)})")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def _head(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"{self.subject} [{settings}]"

    def summary(self) -> str:
        """One line per failure (and warning)."""
        counts = {s: sum(r.status == s for r in self.results) for s in STATUSES}
        head = f"{self._head()}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        lines = [head] + [f"  {r.line()}" for r in self.failures + self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        width = max([len("check")] + [len(r.name) for r in self.results])
        lines = [f"{self._head()}: {'OK' if self.ok else 'FAILED'}",
                 f"  {'check'.ljust(width)}  {'status'.ljust(7)}  details",
                 f"  {'-' * width}  {'-' * 7}  {'-' * 7}"]
        for r in self.results:
            status = r.status.upper() if r.status == FAILED else r.status
            lines.append(f"  {r.name.ljust(width)}  {status.ljust(7)}  {r.message}".rstrip())
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """``EnvContractError`` (a ``ValueError``) with the summary when a check failed."""
        if not self.ok:
            raise EnvContractError(self.summary())


class Finding(NamedTuple):
    """One broken contract at one place: ``step`` / ``env`` None when not tied to one."""

    step: int | None
    env: int | None
    what: str
    values: dict
    priority: int = 0
    """Orders findings at the same cell (smaller first)."""

    def order(self) -> tuple[int, int, int]:
        """Sort key: smallest step (reset first), then env, then priority."""
        return (-1 if self.step is None else self.step, -1 if self.env is None else self.env,
                self.priority)


def fmt(x: Any) -> str:
    """A value for a message: scalars short, small arrays whole, large ones abbreviated."""
    x = np.asarray(x)
    if x.ndim == 0:
        value = x.item()
        return repr(value) if not isinstance(value, float) else f"{value:.6g}"
    if x.size <= 8:
        return np.array2string(x, precision=6, separator=", ")
    flat = np.array2string(x.ravel()[:6], precision=6, separator=", ")[:-1]
    return f"{flat}, ...] (shape {x.shape})"


def where(step: int | None, env: int | None) -> str:
    """``"step 5, env 3"``, ``"reset, env 3"``, ``"step 5"`` or ``""``."""
    if step is None and env is None:
        return ""
    at = "reset" if step is None else f"step {step}"
    return at if env is None else f"{at}, env {env}"


def judge(findings: Iterable[Finding | None], passed: str = "") -> CheckResult:
    """Failed at the first finding (smallest step, then env), else passed; ``None`` findings
    are ignored. The result is unnamed: the registry names it."""
    findings = [f for f in findings if f is not None]
    if not findings:
        return CheckResult("", PASSED, passed)
    first = min(findings, key=Finding.order)
    details = [where(first.step, first.env)]
    details += [f"{k} {fmt(v)}" for k, v in first.values.items()]
    text = ", ".join(d for d in details if d)
    message = first.what + (f": {text}" if text else "")
    return CheckResult("", FAILED, message, first.step, first.env,
                       {k: np.asarray(v) for k, v in first.values.items()})


def outcome(status: str, message: str, step: int | None = None,
            env: int | None = None) -> CheckResult:
    """An unnamed result with a given status (a warning, a skip, a plain pass or failure)."""
    return CheckResult("", status, message, step, env)


def error_text(error: BaseException) -> str:
    """``"TypeError: message"``."""
    return f"{type(error).__name__}: {error}"


def attempt(action: Callable[[], Any], passed: str) -> CheckResult:
    """An unnamed result: passed (``passed``) when ``action()`` returns, failed naming the
    exception when it raises (any exception: raising is the finding)."""
    try:
        action()
    except Exception as error:
        return outcome(FAILED, error_text(error))
    return outcome(PASSED, passed)

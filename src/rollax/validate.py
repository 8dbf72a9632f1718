"""Checks of user-given settings, shared by every layer: each raises a ``ValueError`` that names
the setting, its allowed range and the value given, before anything is compiled. Also the
helpers messages share: :func:`closest` (did you mean) and :func:`counted` (``1 lane``,
``320,000 env steps``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SEED_LIMIT = 2**63
"""Seeds are integers in ``[0, 2**63)`` (``jax.random.key`` takes a signed 64-bit integer)."""


def is_int(x: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return not isinstance(x, bool) and isinstance(x, (int, np.integer))


def is_real(x: Any) -> bool:
    """A Python or NumPy integer or float, not a bool."""
    return not isinstance(x, bool) and isinstance(x, (int, float, np.integer, np.floating))


def check_count(name: str, value: Any) -> None:
    """``value`` is an integer >= 1."""
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive integer (>= 1), got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """``value`` is a bool (``1``, ``"true"`` and NumPy's ``bool_`` are refused: a setting that
    switches something is ``True`` or ``False``)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


def check_horizon(horizon: Any) -> None:
    """``horizon`` is an integer >= 1 (the message tells a non-integer from a small one)."""
    if not is_int(horizon):
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    if horizon < 1:
        raise ValueError(f"horizon must be a positive integer (>= 1), got {horizon}")


def check_seed(seed: Any, seeds: int | None = None) -> None:
    """``seed`` is an integer in ``[0, 2**63)``; with ``seeds`` (a run of consecutive seeds
    ``seed, seed + 1, ...``) in ``[0, 2**63 - seeds)``."""
    if seeds is None:
        if not is_int(seed) or not 0 <= seed < SEED_LIMIT:
            raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    elif not is_int(seed) or not 0 <= seed < SEED_LIMIT - seeds:
        raise ValueError(f"seed must be an integer in [0, 2**63 - seeds), got {seed!r}")


def check_real(name: str, value: Any, low: float, high: float, low_open: bool = False,
               high_open: bool = False) -> None:
    """``value`` is a finite number in the interval from ``low`` to ``high`` (each end closed
    unless ``*_open``)."""
    ok = is_real(value) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must be a number in {lo}{low}, {high}{hi}, got {value!r}")


def closest(name: str, valid, aliases=None) -> str | None:
    """The valid name a mistyped ``name`` most likely meant: its entry in ``aliases`` (other
    libraries' names for the same setting), else the closest of ``valid``, else ``None``."""
    import difflib

    if aliases and name in aliases:
        return aliases[name]
    close = difflib.get_close_matches(name, list(valid), n=1)
    return close[0] if close else None


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` things as a person writes them, in every message and report: thousands separated,
    the noun singular for exactly one. ``counted(1, "lane")`` -> ``"1 lane"``,
    ``counted(320_000, "env step")`` -> ``"320,000 env steps"``, ``counted(2, "batch",
    "batches")`` -> ``"2 batches"``."""
    return f"{int(n):,} {noun if n == 1 else plural or noun + 's'}"

"""``rollax.make(name, **kwargs)``: one registry of environment constructors."""

from __future__ import annotations

import difflib
from typing import Callable

from rollax.envs.base import Environment

_REGISTRY: dict[str, Callable[..., Environment]] = {}


def register(name: str, constructor: Callable[..., Environment]) -> None:
    """Register ``constructor(**kwargs) -> Environment`` under ``name``."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = constructor


def registered() -> tuple[str, ...]:
    """The names ``make`` accepts, sorted."""
    return tuple(sorted(_REGISTRY))


def make(name: str, **kwargs) -> Environment:
    """Build a registered environment, e.g. ``make("corridor", horizon=8)``."""
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown environment {name!r}{hint} (registered: {', '.join(registered())})"
        )
    return _REGISTRY[name](**kwargs)


def _corridor(horizon: int = 8) -> Environment:
    from rollax.envs.corridor import Corridor

    return Corridor(horizon=horizon)


def _toy_text(env_id: str) -> Callable[..., Environment]:
    def constructor(horizon: int | None = None, **kwargs) -> Environment:
        from rollax.envs.tabular import TabularEnv, mdp_from_gymnasium

        return TabularEnv(mdp_from_gymnasium(env_id, horizon, **kwargs), name=env_id)

    return constructor


register("corridor", _corridor)
for _env_id in ("FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4", "CliffWalking-v1"):  # TOY_TEXT
    register(_env_id, _toy_text(_env_id))

"""``rollax.make(name, **kwargs)``: one registry of environment constructors."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable

from rollax.envs.base import Environment
from rollax.envs.gymnax_adapter import GYMNAX_PREFIX
from rollax.envs.tabular import TOY_TEXT

_REGISTRY: dict[str, Callable[..., Environment]] = {}


def register(name: str, constructor: Callable[..., Environment]) -> None:
    """Register ``constructor(**kwargs) -> Environment`` under ``name``."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    if isinstance(name, str) and name.startswith(GYMNAX_PREFIX):
        raise ValueError(f"names starting with {GYMNAX_PREFIX!r} are reserved for gymnax")
    _REGISTRY[name] = constructor


def registered() -> tuple[str, ...]:
    """The names ``make`` accepts, sorted."""
    return tuple(sorted(_REGISTRY))


def make(name: str, **kwargs) -> Environment:
    """Build a registered environment, e.g. ``make("corridor", horizon=8)``, or a gymnax one,
    e.g. ``make("gymnax:Catch-bsuite")`` (needs ``pip install rollax[gymnax]``)."""
    if isinstance(name, str) and name.startswith(GYMNAX_PREFIX):
        from rollax.envs.gymnax_adapter import make_gymnax

        return make_gymnax(name[len(GYMNAX_PREFIX):], **kwargs)
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown environment {name!r}{hint} (registered: {', '.join(registered())}; "
            f"gymnax environments: {GYMNAX_PREFIX}<id>)"
        )
    return _REGISTRY[name](**kwargs)


def _corridor(horizon: int = 8) -> Environment:
    from rollax.envs.corridor import Corridor

    return Corridor(horizon=horizon)


def _classic_control(module: str, cls: str, default_horizon: int) -> Callable[..., Environment]:
    def constructor(horizon: int | None = default_horizon, **kwargs) -> Environment:
        import importlib

        env_cls = getattr(importlib.import_module(f"rollax.envs.{module}"), cls)
        return env_cls(horizon=default_horizon if horizon is None else horizon, **kwargs)

    return constructor


def _toy_text(env_id: str) -> Callable[..., Environment]:
    # cached: the same settings give the same environment object, so compiled functions that
    # take it as a static argument are reused instead of rebuilt
    @functools.lru_cache(maxsize=16)
    def build(horizon, items) -> Environment:
        from rollax.envs.tabular import TabularEnv, mdp_from_gymnasium

        return TabularEnv(mdp_from_gymnasium(env_id, horizon, **dict(items)), name=env_id)

    def constructor(horizon: int | None = None, **kwargs) -> Environment:
        items = tuple(sorted(kwargs.items()))
        try:
            hash(items)
        except TypeError:  # e.g. a custom map given as a list: build it afresh
            return build.__wrapped__(horizon, items)
        return build(horizon, items)

    return constructor


register("corridor", _corridor)
register("CartPole-v1", _classic_control("cartpole", "CartPole", 500))
register("Acrobot-v1", _classic_control("acrobot", "Acrobot", 500))
register("MountainCar-v0", _classic_control("mountain_car", "MountainCar", 200))
register("Pendulum-v1", _classic_control("pendulum", "Pendulum", 200))
for _env_id in TOY_TEXT:
    register(_env_id, _toy_text(_env_id))

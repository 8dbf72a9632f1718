"""``rollax.make(name, **kwargs)``: one registry of environment constructors, the suites'
environments (``<suite>:<id>``, :mod:`rollax.envs.suites`) and factories named by import path
(``package.module:factory``).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path

from rollax.envs.base import Environment
from rollax.envs.suites import SUITES, adapter, split_suite
from rollax.envs.tabular import TOY_TEXT

_REGISTRY: dict[str, Callable[..., Environment]] = {}


def register(name: str, constructor: Callable[..., Environment]) -> None:
    """Register ``constructor(**kwargs) -> Environment`` under ``name``."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    found = split_suite(name)
    if found is not None:
        raise ValueError(f"names starting with {found[0].prefix + ':'!r} are reserved for "
                         f"{found[0].prefix}")
    _REGISTRY[name] = constructor


def registered() -> tuple[str, ...]:
    """The names ``make`` accepts, sorted."""
    return tuple(sorted(_REGISTRY))


_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""``package.module:factory`` (the factory may be a dotted attribute path)."""


def is_import_path(name) -> bool:
    """Whether ``make`` reads ``name`` as an import path: a string with a ``:`` and a dot
    before it (``<suite>:<id>`` has none)."""
    return isinstance(name, str) and "." in name.partition(":")[0] and ":" in name


def factory_of(name: str) -> Callable:
    """The factory ``package.module:factory`` names (``package.module`` imported);
    ``ValueError`` naming ``name`` when the path is malformed, the module cannot be imported
    or the attribute is missing or not callable."""
    if not _IMPORT_PATH.fullmatch(name):
        raise ValueError(f"environment {name!r} is not an import path package.module:factory")
    module_name, _, attr = name.partition(":")
    try:
        target = importlib.import_module(module_name)
    except Exception as err:  # any failure while importing: not found, or its own error
        top = module_name.split(".")[0]
        hint = ("; it is in the current directory, which the rollax command does not search: "
                "`PYTHONPATH=. rollax ...`" if isinstance(err, ModuleNotFoundError)
                and err.name == top and (Path(top).is_dir() or Path(f"{top}.py").is_file())
                else "")
        raise ValueError(f"environment {name!r}: cannot import module {module_name!r} "
                         f"({type(err).__name__}: {err}){hint}") from err
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"environment {name!r}: module {module_name!r} has no attribute "
                             f"{attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"environment {name!r}: {attr!r} is a value of type "
                         f"{type(target).__name__}, not a factory (callable)")
    return target


def takes_horizon(factory: Callable) -> bool:
    """Whether ``factory`` accepts a ``horizon`` keyword (a parameter of that name, or
    ``**kwargs``); True when its signature cannot be read."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == "horizon" and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) for p in parameters)


def make_from_path(name: str, **kwargs) -> Environment:
    """Import ``package.module`` and call its ``factory(**kwargs)``, which must return an
    :class:`Environment`, or a ``gymnasium.Env`` (then every environment of a host pool is a
    call of the factory: :mod:`rollax.envs.host`); ``ValueError`` naming ``name`` otherwise
    (the factory raising included). ``horizon`` reaches a factory that takes one; for one
    that does not, the environment it returns must have that horizon (a Gymnasium one is cut
    there by Gymnasium's ``TimeLimit``)."""
    factory = factory_of(name)
    horizon = None
    if "horizon" in kwargs and not takes_horizon(factory):
        horizon = kwargs.pop("horizon")  # checked against the built environment's below
    attr = name.partition(":")[2]
    call = f"{attr}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    try:
        env = factory(**kwargs)
    except Exception as err:  # the factory's own failure, or arguments it does not take
        first_line = str(err).strip().partition("\n")[0]
        raise ValueError(f"environment {name!r}: {call} failed ({type(err).__name__}: "
                         f"{first_line})") from err
    if not isinstance(env, Environment):
        host = _gymnasium_host(name, env, factory, kwargs, horizon)
        if host is not None:
            return host
        raise ValueError(f"environment {name!r}: {call} returned a value of type "
                         f"{type(env).__name__}, not a rollax.Environment (nor a "
                         f"gymnasium.Env)")
    if horizon is not None and getattr(env, "horizon", None) != horizon:
        raise ValueError(f"environment {name!r}: {attr} takes no horizon and its environment's "
                         f"horizon is {getattr(env, 'horizon', None)!r}, not {horizon!r}")
    return env


def _gymnasium_host(name: str, env, factory, kwargs: dict, horizon: int | None):
    """``env`` (what ``factory(**kwargs)`` returned) as a host environment of ``factory``'s
    environments when it is a ``gymnasium.Env``, cut at ``horizon`` steps by Gymnasium's
    ``TimeLimit`` when the factory takes no horizon (``None`` when it is no ``gymnasium.Env``).
    The same name and arguments give the same object while it lives (its compiled functions
    are reused)."""
    import gymnasium

    from rollax.envs.host import HostEnvironment

    if not isinstance(env, gymnasium.Env):
        return None
    env.close()
    key = (name, tuple(sorted(kwargs.items())), horizon)
    if key not in _HOSTS:

        def make_one(**render):  # render: render_mode="rgb_array" for videos
            one = factory(**kwargs, **render)
            return one if horizon is None else gymnasium.wrappers.TimeLimit(one, horizon)

        _HOSTS[key] = HostEnvironment.build(name, make_one, horizon or kwargs.get("horizon"),
                                            renders=_takes(factory, "render_mode"))
    return _HOSTS[key]


def _takes(function, name: str) -> bool:
    """Whether ``function`` takes a keyword argument ``name`` (by name, or ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin)
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


_HOSTS: dict = {}
"""The host environments built from factories, by name, arguments and horizon."""


def make(name: str, **kwargs) -> Environment:
    """Build a registered environment, e.g. ``make("corridor", horizon=8)``, a suite's one,
    e.g. ``make("gymnax:Catch-bsuite")`` (needs ``pip install rollax[gymnax]``), or one from a
    factory named by import path, e.g. ``make("my_envs.grid:make_env", horizon=20)``, which
    imports ``my_envs.grid`` and returns ``make_env(horizon=20)`` (an :class:`Environment`).
    Anything but a string (an environment object, as a config's ``env``) is a ``ValueError``:
    configs name their environment, so that a run folder's config.json can rebuild it."""
    if not isinstance(name, str):
        raise ValueError(f"env must be the name of an environment (a registered id, "
                         f"<suite>:<id> or package.module:factory), got a value of type "
                         f"{type(name).__name__}; name your own environment by its factory, "
                         f"'package.module:factory', or register it with "
                         f"rollax.register(name, factory)")
    found = split_suite(name)
    if found is not None:
        suite, env_id = found
        return adapter(suite).make(env_id, **kwargs)
    if is_import_path(name) and name not in _REGISTRY:
        return make_from_path(name, **kwargs)
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown environment {name!r}{hint} (registered: {', '.join(registered())}; "
            f"suites as <suite>:<id>: {', '.join(SUITES)})"
        )
    try:
        return _REGISTRY[name](**kwargs)
    except TypeError as error:  # an option the environment's constructor does not take
        if "unexpected keyword argument" not in str(error):
            raise
        given = sorted(k for k in kwargs if k != "horizon")
        raise ValueError(f"env {name!r} does not take the option(s) {given}: {error}") from None


def parse_options(items) -> dict:
    """A config's ``env_options``, ``KEY=VALUE`` strings, as the keyword arguments of the
    environment's constructor: ``true``/``false`` become booleans, integers and decimal
    numbers numbers, anything else stays text; ``ValueError`` naming ``env_options`` for an
    item that is not ``KEY=VALUE``, a key given twice, or ``horizon`` (its own setting).

    >>> parse_options(("episodic_life=true", "noop_max=30", "mode=easy", "scale=0.5"))
    {'episodic_life': True, 'noop_max': 30, 'mode': 'easy', 'scale': 0.5}
    """
    if isinstance(items, str) or not isinstance(items, (tuple, list)):
        raise ValueError(f"env_options must be a list of KEY=VALUE strings, got {items!r}")
    options: dict = {}
    for item in items:
        key, sep, text = item.partition("=") if isinstance(item, str) else ("", "", "")
        if not sep or not key.isidentifier():
            raise ValueError(f"env_options must be KEY=VALUE items (e.g. episodic_life=true), "
                             f"got {item!r}")
        if key in options:
            raise ValueError(f"env_options gives {key} twice")
        if key == "horizon":
            raise ValueError("env_options cannot give horizon: it is a setting of its own "
                             "(--horizon)")
        options[key] = _option_value(text)
    return options


def _option_value(text: str):
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def make_configured(name: str, horizon: int | None = None, env_options=()) -> Environment:
    """The environment a config names: ``make(name, horizon=horizon, **options)`` with
    ``horizon`` left out when ``None`` and ``options`` from :func:`parse_options`."""
    kwargs = parse_options(env_options)
    if horizon is not None:
        kwargs["horizon"] = horizon
    return make(name, **kwargs)


def _corridor(horizon: int = 8) -> Environment:
    from rollax.envs.corridor import Corridor

    return Corridor(horizon=horizon)


def _classic_control(module: str, cls: str, default_horizon: int) -> Callable[..., Environment]:
    def constructor(horizon: int | None = default_horizon, **kwargs) -> Environment:
        env_cls = getattr(importlib.import_module(f"rollax.envs.{module}"), cls)
        return env_cls(horizon=default_horizon if horizon is None else horizon, **kwargs)

    return constructor


def _toy_text(env_id: str) -> Callable[..., Environment]:
    # cached: the same settings give the same environment object, so compiled functions that
    # take it as a static argument are reused instead of rebuilt
    @functools.lru_cache(maxsize=16)
    def build(horizon, items) -> Environment:
        from rollax.envs.tabular import TabularEnv, mdp_from_gymnasium

        return TabularEnv(mdp_from_gymnasium(env_id, horizon, **dict(items)), name=env_id,
                          options=items)

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

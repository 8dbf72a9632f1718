"""Any registered Gymnasium environment, stepped on the host: ``make("gymnasium:<id>")``.

``make("gymnasium:LunarLander-v3")`` is a :class:`~rollax.envs.host.HostEnvironment` of
``gymnasium.make("LunarLander-v3", **options)`` (with its ``TimeLimit``; ``horizon`` replaces
its ``max_episode_steps``), whose pools the compiled collector steps from the host
(:mod:`rollax.envs.host`). Gymnasium is one of rollax's own dependencies; environments that
need more (Box2D, MuJoCo) say so in one line with the install command.
"""

from __future__ import annotations

import importlib.util

from rollax.envs.host import HostEnvironment
from rollax.envs.suites.base import headless_gl, host_maker, rejected_options, unknown_id

PREFIX = "gymnasium"

NEEDS = {"box2d": "pip install 'rollax[box2d]'", "mujoco": "pip install 'gymnasium[mujoco]'"}
"""What Gymnasium's environments that need more than Gymnasium ask for, by their module."""


FAMILIES = {"classic_control": None, "toy_text": None, "box2d": "Box2D", "mujoco": "mujoco"}
"""Gymnasium's own environment families ``rollax envs`` lists, each with the package it needs
(``None``: Gymnasium alone)."""


def ids() -> tuple[str, ...]:
    """Gymnasium's own environments (:data:`FAMILIES`) whose packages are installed, with
    spaces rollax trains on (Blackjack's observation is a ``Tuple``: not yet); any other
    registered id builds too."""
    import gymnasium

    found = []
    for env_id, spec in gymnasium.registry.items():
        entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
        family = entry.removeprefix("gymnasium.envs.").split(".")[0]
        if family in FAMILIES and "blackjack" not in entry and (
                FAMILIES[family] is None or importlib.util.find_spec(FAMILIES[family])):
            found.append(env_id)
    return tuple(sorted(found))


def make(env_id: str, horizon: int | None = None, **options) -> HostEnvironment:
    """The host environment of ``gymnasium.make(env_id, **options)``, its episodes cut at
    ``horizon`` steps when given (else at the registered ``max_episode_steps``). The same
    arguments give the same object (its compiled functions are reused)."""
    return _make(env_id, horizon, options)


def _build(env_id: str, kwargs: dict) -> HostEnvironment:
    headless_gl()  # before a MuJoCo environment imports MuJoCo, so videos can draw it
    import gymnasium

    if env_id not in gymnasium.registry:
        raise unknown_id(PREFIX, env_id, ids())

    def make_one(**render):
        return gymnasium.make(env_id, **kwargs, **render)

    try:
        return HostEnvironment.build(f"{PREFIX}:{env_id}", make_one)
    except gymnasium.error.DependencyNotInstalled as error:
        entry = str(gymnasium.registry[env_id].entry_point)
        hint = next((command for module, command in NEEDS.items() if module in entry),
                    "see the error")
        raise ValueError(f"gymnasium:{env_id} needs more than Gymnasium: `{hint}` "
                         f"({str(error).splitlines()[0]})") from error
    except ImportError as error:  # e.g. Pusher-v4, which Gymnasium builds only on mujoco<3
        raise ValueError(f"gymnasium:{env_id} cannot be built with the packages installed "
                         f"here: {str(error).splitlines()[0]}") from error
    except TypeError as error:  # an option the environment does not take
        raise rejected_options(PREFIX, env_id, kwargs, error) from error


_make = host_maker(PREFIX, _build)

"""MuJoCo Playground environments behind rollax's interface: ``make("playground:<Name>")``.

The adapter is :class:`~rollax.envs.suites.brax.StateApiEnv` (shared with Brax: same
``State`` API); this module only builds Playground's raw environment
(``mujoco_playground.registry.load``). Install with ``pip install rollax[playground]``.

What Playground does at an episode's end (read in playground 0.2.0, ``mujoco_playground/_src``):

- A raw environment has no time limit and no auto-reset. Its ``step`` sets ``done`` (float 0/1)
  to the task's own end: in the DeepMind Control Suite ports (``CartpoleBalance``,
  ``CheetahRun``, ...) only a NaN in ``qpos``/``qvel`` (the simulation blew up); in locomotion
  and manipulation tasks also falling, leaving bounds, dropping or reaching the goal. No
  environment folds its step count into ``done`` (``PandaPickCubeCartesian`` and
  ``AlohaHandOver`` keep a counter ``info["_steps"]`` that wraps at the config's
  ``episode_length``, in step with the wrapper's auto-reset, and ``AlohaHandOver`` shows it in
  the observation).
- The time limit is the config's ``episode_length`` (1000 for the control suite), applied by
  ``wrapper.wrap_for_brax_training``: Brax's ``EpisodeWrapper`` (``steps >= episode_length``
  folded into ``done``, flagged in ``info["truncation"]``) and ``BraxAutoResetWrapper``, which
  by default puts back the *cached first state*.

The adapter steps the raw environment: ``terminated`` is ``done != 0``; the time limit is
rollax's ``horizon``, by default the resolved config's ``episode_length`` (so change it with the
option ``episode_length=N``, which also keeps those internal counters in step; ``horizon=``
alone changes only rollax's limit). It becomes ``truncated``, never ``terminated``. The
wrappers, their ``action_repeat`` and their cached-state auto-reset are never used.

Options are Playground config overrides (flattened keys, e.g. ``episode_length=500``). The
physics implementation defaults to ``impl="jax"`` (MJX in JAX, runs everywhere) instead of
Playground's ``"warp"`` default (NVIDIA GPUs only); pass ``impl="warp"`` on a GPU. Environments
from ``locomotion``/``manipulation`` download MuJoCo Menagerie with ``git`` on first use, and
most have dict observations, which the adapter refuses. ``SwimmerSwimmer6`` sets JAX's global
``jax_default_matmul_precision`` to ``"highest"`` when built (Playground's doing).
"""

from __future__ import annotations

import dataclasses
import subprocess
from typing import ClassVar

from rollax.envs.suites.base import headless_gl, import_suite, unknown_id
from rollax.envs.suites.brax import StateApiEnv

DEFAULT_IMPL = "jax"
"""The physics implementation used unless the option ``impl=`` says otherwise."""

_LOAD_ERRORS = (OSError, subprocess.CalledProcessError, KeyError, AttributeError, TypeError,
                ValueError, NotImplementedError)


def _import_registry():
    headless_gl()  # before MuJoCo is first imported, so its states can be drawn
    return import_suite("mujoco_playground", "playground").registry


@dataclasses.dataclass(frozen=True)
class PlaygroundEnv(StateApiEnv):
    """A raw MuJoCo Playground environment (``registry.load(name, config_overrides=...)``)
    with rollax's contracts (:class:`~rollax.envs.suites.brax.StateApiEnv`); built by
    ``make("playground:<Name>")``. ``env_kwargs`` are config overrides (``impl`` filled in with
    :data:`DEFAULT_IMPL`); the horizon defaults to the config's ``episode_length``."""

    prefix: ClassVar[str] = "playground"

    def _build(self, name, options):
        registry = _import_registry()
        names = tuple(registry.ALL_ENVS)
        if not isinstance(name, str) or name not in names:
            raise unknown_id(self.prefix, name, names)
        overrides = dict(options)
        overrides.setdefault("impl", DEFAULT_IMPL)
        try:
            # a fresh default config: Playground updates the config it is given in place
            env = registry.load(name, registry.get_default_config(name), overrides)
        except _LOAD_ERRORS as error:
            raise ValueError(
                f"playground could not build {name!r} with {overrides!r}: "
                f"{type(error).__name__}: {error}"
            ) from error
        config = getattr(env, "_config", None)  # the resolved config (a few tasks adjust it)
        length = getattr(config, "episode_length", None)
        if length is None:
            length = registry.get_default_config(name).episode_length
        return env, tuple(sorted(overrides.items())), int(length)


def ids() -> tuple[str, ...]:
    """The ids ``make("playground:<id>")`` accepts, in Playground's order; empty when it is not
    installed."""
    try:
        return tuple(_import_registry().ALL_ENVS)
    except ValueError:
        return ()


def make_playground(env_id: str, horizon: int | None = None, **env_kwargs) -> PlaygroundEnv:
    """``PlaygroundEnv(env_id, horizon, env_kwargs)``; what ``make("playground:<env_id>")``
    calls."""
    return PlaygroundEnv(env_id, horizon, tuple(sorted(env_kwargs.items())))


make = make_playground
"""The suite table's entry point (:mod:`rollax.envs.suites`)."""

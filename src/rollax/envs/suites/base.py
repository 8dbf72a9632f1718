"""What every suite adapter shares, written once: the base class :class:`SuiteEnvironment`
(spaces converted once, at construction, into :class:`Spaces`) and the helpers the adapters
would otherwise each restate:

- :func:`import_suite`: import the suite's package, or a one-line ``ValueError`` with the
  install command;
- :func:`unknown_id`: the one error for an id the suite does not have (close matches, the
  installed version from :func:`package_version`, the ids the adapter takes);
- :func:`hashable_options` and :func:`rejected_options`: the suite's options, sorted and
  checked hashable (equality and hash are on ``(name, horizon, options)``), and the error for
  options the suite refuses;
- :func:`strong` (suite outputs without weak types, for stable scan carries), :func:`raw_key`
  (a typed key as its raw ``uint32`` data, for suites that store or split raw keys) and
  :func:`flat_box` (the ``Box`` of an observation flattened to a vector).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, Environment, MultiDiscrete
from rollax.keys import is_key
from rollax.validate import check_horizon

Options = tuple[tuple[str, Any], ...]
"""A suite's options as the adapter keeps them: sorted ``(name, value)`` pairs."""


class Spaces(NamedTuple):
    """An adapter's spaces, converted once from the suite's."""

    observation: Discrete | Box
    """What ``observation(state)`` returns (a flattened ``Box``, or ``Discrete``)."""
    action: Discrete | MultiDiscrete | Box
    """The actions ``step`` takes."""
    raw_shape: tuple[int, ...] | None
    """The suite's own observation shape, before rollax flattens it; ``None`` where the suite's
    observation is not one array (Jumanji's ``NamedTuple`` of fields)."""


@dataclasses.dataclass(frozen=True)
class SuiteEnvironment(Environment):
    """The base of the adapters (frozen dataclasses): their spaces are converted once, at
    construction (``__post_init__``), into :attr:`spaces`."""

    spaces: Spaces = dataclasses.field(init=False, repr=False, compare=False, hash=False)
    """The converted spaces (not part of equality or hash)."""

    @property
    def observation_space(self) -> Discrete | Box:
        return self.spaces.observation

    @property
    def action_space(self) -> Discrete | MultiDiscrete | Box:
        return self.spaces.action

    @property
    def raw_observation_shape(self) -> tuple[int, ...] | None:
        """The suite's own observation shape, before rollax flattens it to a vector (``None``
        where it has none, as in Jumanji)."""
        return self.spaces.raw_shape

    def _fill(self, **fields) -> None:
        """Set resolved fields of this frozen dataclass while ``__post_init__`` builds it."""
        for name, value in fields.items():
            object.__setattr__(self, name, value)


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


def package_version(distribution: str) -> str:
    """The installed version of ``distribution`` (the module's ``__version__`` when it has no
    metadata, ``"?"`` when neither is known)."""
    try:
        return version(distribution)
    except PackageNotFoundError:  # pragma: no cover - imported from a source tree
        return str(getattr(sys.modules.get(distribution), "__version__", "?"))


def unknown_id(prefix: str, name, ids: Sequence[str], listed: str = "has") -> ValueError:
    """The error for an id the suite ``prefix`` does not have: up to three close ``ids`` as
    ``<prefix>:<id>``, then the installed version and ``ids`` (introduced by ``listed``)."""
    close = difflib.get_close_matches(str(name), list(ids), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(f'{prefix}:{c}' for c in close)}?" if close else ""
    return ValueError(f"unknown {prefix} environment {name!r}{hint} "
                      f"({prefix} {package_version(prefix)} {listed}: {', '.join(ids)})")


def hashable_options(prefix: str, options, what: str = "environment options") -> Options:
    """``options`` (pairs or a mapping) as sorted pairs; a ``ValueError`` when a value is not
    hashable (adapters are static arguments: equality and hash include their options)."""
    items = tuple(sorted(dict(options).items()))
    try:
        hash(items)
    except TypeError as error:
        raise ValueError(f"{prefix} {what} must be hashable, got {dict(items)!r}") from error
    return items


def host_maker(prefix: str, build: Callable[[str, dict], Any]) -> Callable[..., Any]:
    """``make(env_id, horizon=None, options)`` of a suite of host environments
    (:mod:`rollax.envs.host`): ``build(env_id, kwargs)`` once per id, horizon and options, with
    ``kwargs`` the options and ``max_episode_steps=horizon`` when a horizon is given. The same
    arguments give the same object (it holds its pools; its compiled functions are reused)."""
    @functools.lru_cache(maxsize=32)
    def cached(env_id: str, horizon: int | None, options: Options):
        kwargs = dict(options)
        if horizon is not None:
            kwargs["max_episode_steps"] = horizon
        return build(env_id, kwargs)

    def make(env_id: str, horizon: int | None, options: dict):
        if horizon is not None:
            check_horizon(horizon)
        return cached(env_id, None if horizon is None else int(horizon),
                      hashable_options(prefix, options))

    return make


def rejected_options(prefix: str, name, options: dict, error: Exception) -> ValueError:
    """The error for options the suite's constructor refuses (raise it ``from error``)."""
    return ValueError(f"{prefix} environment {name!r} does not accept {options!r}: {error}")


def strong(x) -> jax.Array:
    """``x`` as an array of its canonical dtype without weak typing (stable scan carries: some
    suites return Python scalars or weakly typed leaves)."""
    x = jnp.asarray(x)
    return jnp.asarray(x, dtype=x.dtype)


def raw_key(x):
    """A typed key as its raw ``uint32`` key data; anything else unchanged."""
    return jax.random.key_data(x) if is_key(x) else x


def flat_box(low, high, raw_shape: tuple[int, ...]) -> Box:
    """The float32 ``Box`` of an observation of ``raw_shape`` flattened (C order) to a vector:
    ``low`` and ``high`` broadcast to ``raw_shape``, then flattened."""
    size = int(np.prod(raw_shape))

    def flat(bound) -> np.ndarray:
        return np.broadcast_to(np.asarray(bound, np.float32), raw_shape).reshape(size).copy()

    return Box(flat(low), flat(high), (size,))


def headless_gl() -> None:
    """MuJoCo's offscreen OpenGL through EGL (``MUJOCO_GL=egl``) on a machine without a display,
    unless ``MUJOCO_GL`` is set: MuJoCo reads it when first imported, and its default (GLFW)
    needs a display, so pictures of the states (``rollax render``) could not be drawn. Called
    by the suites whose environments MuJoCo draws (Brax, Playground, Gymnasium, EnvPool) before
    they import it."""
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"

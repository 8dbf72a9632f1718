"""JAX's persistent compilation cache, as the ``rollax`` command line uses it.

The CLI turns the cache on for every command (``rollax train --no-compile-cache`` turns it
off): a second process that compiles the same program (same shapes, same static settings; a
traced hyperparameter such as ``lr`` may differ) loads it from disk instead of compiling it
again. The folder is ``$ROLLAX_COMPILE_CACHE`` when that is set (``0``, ``off`` or empty turn
the cache off), else ``$XDG_CACHE_HOME/rollax/jax``, else ``~/.cache/rollax/jax``.

Importing this module changes nothing; the library never turns the cache on by itself. A
library user can call :func:`enable` (before the first compilation of the process: JAX opens
its cache once per process).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import jax

ENV_VAR = "ROLLAX_COMPILE_CACHE"
"""The environment variable that moves (a folder) or disables (``0``, ``off``, empty) the
command line's cache."""

OFF = ("", "0", "off")
"""Values of :data:`ENV_VAR` that turn the cache off (case-insensitive)."""


def default_folder(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/rollax/jax`` (when set to an absolute path), else
    ``~/.cache/rollax/jax``."""
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "rollax" / "jax"


def resolve(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder the command line caches in, or ``None`` when :data:`ENV_VAR` turns the
    cache off."""
    environ = os.environ if environ is None else environ
    if ENV_VAR not in environ:
        return default_folder(environ)
    value = environ[ENV_VAR]
    if value.strip().lower() in OFF:
        return None
    return Path(value).expanduser()


def _check_folder(folder: Path) -> Path:
    """``folder`` as an absolute path, created if missing; ``ValueError`` if it is not (and
    cannot become) a folder."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"compile cache {str(folder)!r} is not a folder (set {ENV_VAR} to a "
                         f"folder, or to off)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"compile cache {str(folder)!r} cannot be created: "
                         f"{err.strerror or err} (set {ENV_VAR} to a folder, or to off)"
                         ) from None
    return folder.absolute()


def enable(folder: str | os.PathLike | None = None) -> Path:
    """Turn JAX's persistent compilation cache on in ``folder`` (default:
    :func:`default_folder`), caching every program however small or quick to compile;
    returns the folder (absolute). Call it before the process compiles anything."""
    path = _check_folder(Path(folder).expanduser() if folder is not None else default_folder())
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size limit
    return path


def disable() -> None:
    """Turn JAX's persistent compilation cache off. Like :func:`enable`, call it before the
    process compiles anything: JAX decides at its first compilation whether the process uses
    the cache at all."""
    jax.config.update("jax_enable_compilation_cache", False)


def from_environment(on: bool = True, environ: Mapping[str, str] | None = None
                     ) -> Path | None:
    """The command line's cache: :func:`enable` in the folder :func:`resolve` gives, or
    :func:`disable` when ``on`` is false or :data:`ENV_VAR` turns it off; returns the folder
    in use or ``None``."""
    folder = resolve(environ) if on else None
    if folder is None:
        disable()
        return None
    return enable(folder)


def current() -> str | None:
    """The folder JAX caches compiled programs in now, or ``None`` when the cache is off."""
    # jax.config flags are attributes set at runtime
    if not jax.config.jax_enable_compilation_cache:  # pyright: ignore[reportAttributeAccessIssue]
        return None
    folder = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    return None if folder is None else str(folder)


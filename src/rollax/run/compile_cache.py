"""JAX's persistent compilation cache, as the ``rollax`` command line uses it.

The CLI turns the cache on for every command (``rollax train --no-compile-cache`` turns it
off): a second process that compiles the same program (same shapes, same static settings; a
traced hyperparameter such as ``lr`` may differ) loads it from disk instead of compiling it
again. The folder is ``$ROLLAX_COMPILE_CACHE`` when that is set (``0``, ``off`` or empty turn
the cache off), else ``$XDG_CACHE_HOME/rollax/jax``, else ``~/.cache/rollax/jax``.

Importing this module changes nothing; the library never turns the cache on by itself. A
library user can call :func:`enable` (before the first compilation of the process: JAX opens
its cache once per process).

:func:`enable` also makes JAX write each entry whole (:class:`_WholeEntries`): a command
stopped while it writes one (Ctrl-C ends ``rollax`` at once) leaves no truncated entry behind,
and an entry that cannot be read is replaced by the next process that compiles its program.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import jax
from jax._src import compilation_cache as jax_cache  # private: see _WholeEntries
from jax._src.lru_cache import LRUCache

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


class _WholeEntries(LRUCache):
    """JAX's file cache, except that an entry is written whole or not at all.

    JAX's own ``put`` writes the entry's file in place and never rewrites an existing one. A
    process ended mid-write (rollax's Ctrl-C handler exits at once; a kill) leaves a truncated
    file, which every later process fails to read: JAX warns and compiles the program again, in
    every command, for good. Here the bytes go to a temporary file in the same folder, renamed
    onto the entry's name (``os.replace``: atomic within one filesystem), so a reader sees the
    whole entry or none. A put also replaces an entry that exists: JAX puts a key only after a
    miss, so the existing file is one it could not read (it heals) or one another process
    wrote meanwhile (the same program). With a size limit (JAX's
    ``jax_compilation_cache_max_size``) or a remote folder, JAX's own locked ``put`` runs."""

    def put(self, key: str, value: bytes) -> None:
        folder = os.fspath(self.path)
        if self.eviction_enabled or "://" in folder or not key:
            super().put(key, value)
            return
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(value)
            os.replace(temporary, os.path.join(folder, f"{key}-cache"))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _write_whole_entries() -> None:
    """Have JAX build its file cache as :class:`_WholeEntries` (its ``get_file_cache`` builds
    the cache from the module's ``LRUCache`` name, on jax 0.9.2 to 0.10.2), when the process
    first compiles with the cache on."""
    jax_cache.LRUCache = _WholeEntries  # pyright: ignore[reportPrivateImportUsage]


def enable(folder: str | os.PathLike | None = None) -> Path:
    """Turn JAX's persistent compilation cache on in ``folder`` (default:
    :func:`default_folder`), caching every program however small or quick to compile, each
    entry written whole (:class:`_WholeEntries`); returns the folder (absolute). Call it before
    the process compiles anything."""
    path = _check_folder(Path(folder).expanduser() if folder is not None else default_folder())
    _write_whole_entries()
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


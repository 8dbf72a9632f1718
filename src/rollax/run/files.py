"""Writing files so that a reader never sees half of one: every write is staged beside its
target and renamed into place in one step (``os.replace``/``os.rename`` are atomic on POSIX)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def default_mode(folder: bool = False) -> int:
    """The permissions ``open``/``mkdir`` would give a new file or folder under the current
    umask (``tempfile`` creates 0600 files and 0700 folders, which would hide a run from
    colleagues that may read it)."""
    return (0o777 if folder else 0o666) & ~_umask()


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Name ``path`` in an ``OSError`` raised inside the block without a file name (a full disk
    fails a ``write`` to a staged temporary file, whose name means nothing to the user)."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err


STAGED_EXTRA = 10
"""The bytes a name gains as the hidden temporary name it is first written under
(:func:`atomic_write_text`, :func:`staged_folder`): ``"." + name + "."`` and ``tempfile``'s 8
random characters."""


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` by a file holding ``text`` (written and synced to a hidden temporary
    file beside it first), with the umask's permissions. An ``OSError`` (a full disk) names
    ``path`` and leaves the old file as it was."""
    with writing(path):
        _atomic_write_text(path, text)


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, default_mode())
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def staged_folder(path: Path, replace: bool = False) -> Iterator[Path]:
    """Yield a hidden staging folder beside ``path``; when the block succeeds, rename it to
    ``path`` in one step (an existing ``path`` is replaced only with ``replace``, else refused
    with ``ValueError``); when it fails, delete it. Readers never see a half-written folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    staging.chmod(default_mode(folder=True))
    try:
        yield staging
        if path.exists():
            if not replace:
                raise ValueError(f"out {str(path)!r} appeared while the run was going: "
                                 f"not replaced")
            shutil.rmtree(path)
        os.rename(staging, path)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def finite_or_none(obj: Any) -> Any:
    """The same JSON-able object with every NaN or infinity replaced by None (JSON's null)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented JSON (NaN and infinities as null), written atomically."""
    atomic_write_text(path, json.dumps(finite_or_none(obj), indent=2, allow_nan=False) + "\n")


def read_json(path: Path) -> Any:
    """The JSON in ``path``; ``ValueError`` naming the file when it is missing or corrupt."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{str(path)!r} is missing: not a rollax run folder") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"{str(path)!r} is unreadable or corrupt: {err}") from None

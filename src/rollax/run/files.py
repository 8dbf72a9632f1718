"""Writing files so that a reader never sees half of one: every write is staged beside its
target and renamed into place in one step (``os.replace``/``os.rename`` are atomic on POSIX)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
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
def writing(path: Path, staged: str | Path | None = None) -> Iterator[None]:
    """Name ``path`` in an ``OSError`` raised inside the block without a file name, or naming
    ``staged``, the temporary file ``path`` is first written as (a full disk fails a ``write``
    to a staged file, whose name means nothing to the user)."""
    try:
        yield
    except OSError as err:
        if err.errno is None or (err.filename is not None
                                 and (staged is None or str(err.filename) != str(staged))):
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err


STAGED_EXTRA = 10
"""The bytes a name gains as the hidden temporary name it is first written under
(:func:`staged_files`, :func:`staged_folder`): ``"."`` and ``"."`` around its stem (the whole
name of a folder) and ``tempfile``'s 8 random characters."""


@contextlib.contextmanager
def staged_files(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Yield a hidden temporary path beside each of ``paths`` (``.<stem>.<8 random
    characters><suffix>``: the same suffix, for writers that choose a format by it, and the same
    folder, so that the rename is atomic) for the block to write; when the block succeeds,
    sync every one of them, give them the umask's permissions and only then rename each to its
    path (``os.replace``). When anything fails, every temporary file is deleted and ``paths``
    are left as they were: a reader sees all the new files or none of the half-written ones.
    An ``OSError`` while syncing names the path it was for; the block names its own
    (:func:`writing`)."""
    staged: list[Path] = []
    try:
        for path in paths:
            with writing(path):
                fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix,
                                           dir=path.parent)
            os.close(fd)
            staged.append(Path(tmp))
        yield list(staged)
        for path, tmp in zip(paths, staged):
            with writing(path, tmp):
                os.chmod(tmp, default_mode())
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        for path, tmp in zip(paths, staged):
            with writing(path, tmp):
                os.replace(tmp, path)
    finally:
        for tmp in staged:
            if os.path.lexists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def staged_file(path: Path) -> Iterator[Path]:
    """:func:`staged_files` for one file: yield the temporary path ``path`` is written as, and
    name ``path`` in an ``OSError`` from the block that names no file or the temporary one
    (a writer that takes a file name: an encoder, ``savefig``, ``onnx.save_model``)."""
    with staged_files([path]) as (tmp,), writing(path, tmp):
        yield tmp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` by a file holding ``data`` (written and synced to a hidden temporary
    file beside it first), with the umask's permissions. An ``OSError`` (a full disk) names
    ``path`` and leaves the old file as it was."""
    with staged_file(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` (UTF-8)."""
    atomic_write_bytes(path, text.encode())


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

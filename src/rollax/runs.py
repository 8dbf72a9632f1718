"""Run folders: created whole or not at all; an existing folder is never written into."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator


def _check_creatable(path: Path) -> None:
    """The nearest existing ancestor of ``path`` must be a writable folder."""
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"out {str(path)!r} cannot be created: {str(ancestor)!r} is not a "
                         f"writable folder")


def check_creatable_folder(path: Path) -> None:
    """``path`` is an existing folder or can be created as one (checked, nothing written)."""
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"out {str(path)!r} exists and is not a folder")
        return
    _check_creatable(path)


def check_new_run_dir(out: str | None, default_name: str, root: str = "runs") -> Path:
    """The folder a new run will be written to. ``out`` must not exist yet (a run folder is
    never overwritten) and must be creatable; without ``out`` a fresh name under ``root`` is
    chosen. Checked before any work starts."""
    if out is not None:
        path = Path(out)
        if path.exists():
            raise ValueError(f"out {str(path)!r} already exists: choose a new folder")
        _check_creatable(path)
        return path
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(root) / f"{default_name}-{stamp}"
    n = 2
    while path.exists():
        path = Path(root) / f"{default_name}-{stamp}-{n}"
        n += 1
    _check_creatable(path)
    return path


@contextlib.contextmanager
def staged_run_dir(path: Path) -> Iterator[Path]:
    """Yield a hidden staging folder beside ``path``; on success rename it to ``path`` in one
    step, on failure delete it. Readers never see a half-written run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield staging
        if path.exists():
            raise ValueError(f"out {str(path)!r} appeared while the run was going: not replaced")
        os.rename(staging, path)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def finite_or_none(obj):
    """The same JSON-able object with every NaN or infinity replaced by None (JSON's null)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(finite_or_none(obj), indent=2, allow_nan=False) + "\n")

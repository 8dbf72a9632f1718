"""Checkpoints: a pytree of arrays saved without pickle, written atomically, verified on load.

Layout of a checkpoint folder ``checkpoints/update-0000040/``:

- ``state.npz``: each leaf under its path in the state (:func:`leaf_names`:
  ``params/actor/0/weight``, ``obs_stats/mean``, ``updates``, ...; NumPy, read back with
  ``allow_pickle=False``); typed PRNG keys are stored as their raw ``uint32`` data.
  Checkpoints written before the paths (their leaves ``leaf_00000 ...`` in order) still load,
  and so do those written before a leaf was renamed (:data:`RENAMED`);
- ``meta.json``: the number of updates done (key ``update``, as in the folder's name and the
  metrics' rows: the key checkpoints have always had, which every version reads), the config
  fingerprint, the run's length setting (key ``budget``: the field's name and value), each
  leaf's name, shape, dtype and kind, and the SHA-256 of ``state.npz``.

A checkpoint is written into a hidden staging folder and renamed into place; only then does
``checkpoints/latest`` (a one-line text file, itself replaced atomically) point at it. A crash
at any moment leaves the previous checkpoint as the latest, never a half-written one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from rollax.keys import is_key
from rollax.run.files import atomic_write_text, staged_folder

LATEST = "latest"

RENAMED = {"update": "updates"}
"""Leaves renamed since checkpoints were first written, old name -> new name, each a whole path
in the state: the counter of updates done, a field of every algorithm's state, was ``update``
until it was named ``updates``. A stored leaf takes its new name only where the template has
that name at the same place, so no other leaf (a ``params/.../update``) is ever renamed."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (missing, corrupt, or from another config)."""


def _leaf_info(leaf) -> dict:
    if is_key(leaf):
        data = jax.random.key_data(leaf)
        return {"kind": "key", "impl": str(jax.random.key_impl(leaf)),
                "shape": list(data.shape), "dtype": str(data.dtype)}
    if not isinstance(leaf, jax.ShapeDtypeStruct):  # a template may give shapes only
        leaf = np.asarray(leaf)
    return {"kind": "array", "shape": list(leaf.shape), "dtype": str(np.dtype(leaf.dtype))}


def leaf_names(tree) -> list[str]:
    """Each leaf's path in ``tree``, in ``tree_leaves`` order: its attribute names, dict keys
    and sequence indices joined by ``/`` (``params/actor/0/weight``); ``leaf`` for a tree that
    is one leaf. A name that would repeat (a dict key holding ``/``) gets ``#<index>``."""
    def part(key) -> str:
        for attr in ("name", "key", "idx"):
            if hasattr(key, attr):
                return str(getattr(key, attr))
        return str(key)

    names, seen = [], set()
    for i, (path, _) in enumerate(jax.tree_util.tree_flatten_with_path(tree)[0]):
        name = "/".join(part(k) for k in path) or "leaf"
        if name in seen:
            name = f"{name}#{i}"
        seen.add(name)
        names.append(name)
    return names


def fingerprint(config: dict) -> str:
    """SHA-256 of a JSON-able config (sorted keys; its ``older`` entry left out): what a
    checkpoint must match."""
    config = {k: v for k, v in config.items() if k != "older"}
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def fingerprints(config: dict) -> set[str]:
    """The fingerprints a checkpoint of ``config`` may carry: its own, and those of the same
    config without any of the settings in ``config["older"]`` (added after older checkpoints
    were written, at the value those were trained with)."""
    older = sorted(config.get("older", {}))
    found = set()
    for dropped in itertools.chain.from_iterable(
            itertools.combinations(older, n) for n in range(len(older) + 1)):
        settings = {k: v for k, v in config["config"].items() if k not in dropped}
        found.add(fingerprint({**config, "config": settings}))
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save(directory: Path, updates: int, state, config: dict, keep: int = 3,
         length_field: str | None = None) -> Path:
    """Write ``state``, the state after ``updates`` updates, as checkpoint
    ``update-<updates>`` under ``directory`` and mark it the latest.
    ``config``: the run's identity, whose ``config`` mapping holds the algorithm's settings;
    ``length_field``: the one among them that sets the run's length, recorded apart so that the
    run can later be trained longer (:func:`load`)."""
    directory.mkdir(parents=True, exist_ok=True)
    state = jax.device_get(state)
    leaves, names = jax.tree_util.tree_leaves(state), leaf_names(state)
    name = f"update-{updates:07d}"
    final = directory / name
    with staged_folder(final, replace=True) as staging:
        arrays: dict[str, Any] = {
            leaf_name: np.asarray(jax.random.key_data(leaf) if is_key(leaf) else leaf)
            for leaf_name, leaf in zip(names, leaves)}
        with (staging / "state.npz").open("wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        meta = {"update": int(updates), "fingerprint": fingerprint(config),
                **({"budget": {length_field: config["config"][length_field]}}
                   if length_field else {}),
                "leaves": [{"name": n, **_leaf_info(leaf)} for n, leaf in zip(names, leaves)],
                "sha256": _sha256(staging / "state.npz")}
        (staging / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    atomic_write_text(directory / LATEST, name + "\n")
    done = sorted(p for p in directory.glob("update-*") if p.is_dir())
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(directory: Path) -> Path:
    """The folder ``checkpoints/latest`` points at."""
    pointer = directory / LATEST
    if not pointer.is_file():
        raise CheckpointError(f"no checkpoint in {str(directory)!r} (missing {LATEST!r})")
    name = pointer.read_text().strip()
    path = directory / name
    if not name.startswith("update-") or "/" in name or not path.is_dir():
        raise CheckpointError(f"{str(pointer)!r} points at {name!r}, which is not a checkpoint")
    return path


def _renamed(infos: list, expected: list[dict]) -> tuple[list, list]:
    """``(names, infos)``: the names ``infos``' arrays are stored under in ``state.npz``, and
    ``infos`` with each leaf that :data:`RENAMED` renamed to the template's name at its place
    (``expected``) named so."""
    if not isinstance(infos, list):
        return [], infos
    stored, current = [], []
    for i, info in enumerate(infos):
        name = info.get("name") if isinstance(info, dict) else None
        if (isinstance(name, str) and name in RENAMED and i < len(expected)
                and RENAMED[name] == expected[i]["name"]):
            info = {**info, "name": RENAMED[name]}
        stored.append(name)
        current.append(info)
    return stored, current


def load(path: Path, template, config: dict, length_field: str | None = None):
    """Read checkpoint ``path`` into the structure of ``template``; returns ``(updates, state)``,
    the number of updates done and the state.

    Refuses (``CheckpointError``, nothing modified) a checkpoint whose data does not match its
    recorded hash, whose config fingerprint differs, or whose leaves differ from the template's.
    ``length_field``: the setting of ``config["config"]`` that may differ (the run's length, see
    :func:`save`): a checkpoint that recorded its value is checked against ``config`` with it.
    ``template``'s array leaves may be ``jax.ShapeDtypeStruct``s (its typed keys must be
    arrays: their implementation is read from them).
    """
    try:
        meta = json.loads((path / "meta.json").read_text())
        updates, recorded, infos = int(meta["update"]), meta["sha256"], meta["leaves"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt: unreadable meta.json "
                              f"({err})") from None
    data = path / "state.npz"
    if not data.is_file() or _sha256(data) != recorded:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt: state.npz does not match "
                              f"its recorded SHA-256")
    recorded_budget = meta.get("budget")
    if (length_field is not None and isinstance(recorded_budget, dict)
            and set(recorded_budget) == {length_field}):
        config = {**config, "config": {**config["config"], **recorded_budget}}
    if meta.get("fingerprint") not in fingerprints(config):
        raise CheckpointError(f"checkpoint {str(path)!r} was written for another config")
    leaves, treedef = jax.tree_util.tree_flatten(template)
    names = leaf_names(template)
    expected = [{"name": n, **_leaf_info(leaf)} for n, leaf in zip(names, leaves)]
    if infos and all(isinstance(info, dict) and "name" not in info for info in infos):
        # written before the leaves were named: leaf_00000, leaf_00001, ... in order
        names = [f"leaf_{i:05d}" for i in range(len(leaves))]
        expected = [{k: v for k, v in info.items() if k != "name"} for info in expected]
    else:
        names, infos = _renamed(infos, expected)
    if infos != expected:
        differ = [e.get("name", str(i)) for i, (a, e) in enumerate(zip(infos, expected))
                  if a != e]
        where = f"; first difference: leaf {differ[0]}" if differ else ""
        raise CheckpointError(f"checkpoint {str(path)!r} does not match this run's state "
                              f"({len(infos)} leaves saved, {len(expected)} expected{where})")
    try:
        with np.load(data, allow_pickle=False) as npz:
            arrays = [npz[name] for name in names]
    except (OSError, ValueError, KeyError) as err:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt: {err}") from None
    restored = []
    for info, arr, leaf in zip(infos, arrays, leaves):
        if info["kind"] == "key":
            restored.append(jax.random.wrap_key_data(arr, impl=jax.random.key_impl(leaf)))
        else:
            restored.append(jax.numpy.asarray(arr))
    return updates, jax.tree_util.tree_unflatten(treedef, restored)


def folders(directory: Path) -> list[Path]:
    """The ``update-NNNNNNN`` checkpoint folders under ``directory``, newest first."""
    found = [p for p in directory.glob("update-*") if p.is_dir() and p.name[7:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[7:]), reverse=True)


class Found(NamedTuple):
    """The checkpoint a stopped run continues from (:func:`resume_point`)."""

    updates: int
    """The number of updates done."""
    state: Any
    path: Path
    note: str | None
    """Why it is not the one ``latest`` names, when it is not (``latest`` was unusable)."""


def _unusable_latest(directory: Path) -> tuple[str, Path | None]:
    """Why ``latest`` cannot be followed (``""`` when it can) and the folder it names."""
    pointer = directory / LATEST
    if not pointer.exists():
        return f"{str(pointer)!r} is missing", None
    try:
        name = pointer.read_text().strip()
    except (OSError, ValueError):
        return f"{str(pointer)!r} is unreadable", None
    if not name:
        return f"{str(pointer)!r} is empty", None
    if not name.startswith("update-") or "/" in name:
        return f"{str(pointer)!r} names no checkpoint ({name!r})", None
    path = directory / name
    if not path.is_dir():
        return f"{str(pointer)!r} points at {name!r}, which does not exist", None
    missing = [f for f in ("meta.json", "state.npz") if not (path / f).is_file()]
    if missing:
        return f"{str(pointer)!r} points at {name!r}, which is half-written (no {missing[0]})", None
    return "", path


def resume_point(directory: Path, template, config: dict, length_field: str | None = None
                 ) -> Found | None:
    """The checkpoint under ``directory`` that a stopped run continues from, loaded as by
    :func:`load`; ``None`` when there is none at all (no ``latest``, no ``update-*`` folder).

    A complete checkpoint that ``latest`` names is the one, refused (``CheckpointError``) when
    it does not verify. When ``latest`` is missing, empty, or names a folder that does not
    exist or lacks one of its files, the newest ``update-*`` folder that verifies is the one
    and its ``note`` says why; when none verifies, ``CheckpointError`` names the folder.
    """
    candidates = folders(directory) if directory.is_dir() else []
    if not (directory / LATEST).exists() and not candidates:
        return None
    reason, named = _unusable_latest(directory)
    if named is not None:
        return Found(*load(named, template, config, length_field), named, None)
    tried = []
    for path in candidates:
        try:
            updates, state = load(path, template, config, length_field)
        except CheckpointError:
            tried.append(path.name)
            continue
        note = f"{reason}; continuing from {str(path)!r}, the newest checkpoint that verifies"
        return Found(updates, state, path, note + (f" ({', '.join(tried)} did not)" if tried
                                                   else ""))
    detail = f" (tried {', '.join(tried)})" if tried else ""
    raise CheckpointError(f"{reason}, and no checkpoint in {str(directory)!r} verifies{detail}")

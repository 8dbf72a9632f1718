"""Run folders: one small API over what a run writes and reads.

A training run's folder holds ``config.json`` (:meth:`RunConfig.to_json` plus versions),
``metrics.jsonl`` (one line per update and lane), ``checkpoints/`` (:mod:`rollax.run.checkpoint`),
``summary.json`` and ``figures/``; a rollout's holds ``rollout.json`` and its figure. A new
folder is created whole or not at all, an existing one is never written into by a new run, and
every file is replaced atomically (:mod:`rollax.run.files`).

A training run's folder is written by one process at a time: the process that trains it holds
an OS lock (``flock``) on the hidden file ``.lock`` in it (:meth:`RunFolder.claim`), which the
kernel drops when the process ends, however it ends; a lock whose holder is gone never blocks.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from rollax.run import checkpoint
from rollax.run.files import (
    STAGED_EXTRA,
    atomic_write_text,
    default_mode,
    read_json,
    write_json,
    writing,
)

try:
    import fcntl
except ImportError:  # Windows: no flock; run folders are not locked there
    fcntl = None

CONFIG, METRICS, SUMMARY, ROLLOUT = "config.json", "metrics.jsonl", "summary.json", "rollout.json"
LOCK = ".lock"
"""The lock file of a run folder in use: it holds the holder's process id, and is removed when
the holder releases the folder (left behind, unlocked, by a killed holder)."""

_HELD: dict[str, int] = {}
"""The run folders this process holds (their real paths) and the descriptors of their locked
``.lock`` files."""
_HELD_GUARD = threading.Lock()


def _limit(name: str, fallback: int) -> int:
    """The file system's ``PC_NAME_MAX`` or ``PC_PATH_MAX`` at the working folder (``fallback``
    where the system does not say, e.g. on Windows)."""
    try:
        return int(os.pathconf(".", name))
    except (AttributeError, OSError, ValueError):
        return fallback


def check_path_fits(path: Path, staged: bool = False) -> None:
    """Every name in ``path`` fits the file system (at most ``NAME_MAX`` bytes, 255 on Linux
    and macOS; the last one :data:`STAGED_EXTRA` fewer when it is ``staged``, first written
    under a temporary name), and so does the whole absolute path (``PATH_MAX``, 4096 on
    Linux): a one-line ``ValueError`` before anything is written, not the operating system's
    error after a parent folder was made."""
    name_max, path_max = _limit("PC_NAME_MAX", 255), _limit("PC_PATH_MAX", 4096)
    for i, part in enumerate(path.parts):
        limit = name_max - (STAGED_EXTRA if staged and i == len(path.parts) - 1 else 0)
        size = len(os.fsencode(part))
        if size > limit:
            why = (f" ({name_max}, the file system's limit, less {STAGED_EXTRA} for the "
                   f"temporary name it is first written under)" if limit < name_max else "")
            raise ValueError(f"out cannot be created: a file name may have at most {limit} "
                             f"bytes{why}, and {part[:20] + '...'!r} has {size}")
    size = len(os.fsencode(str(path.absolute())))
    if size > path_max:
        raise ValueError(f"out cannot be created: a path may have at most {path_max} bytes, "
                         f"and {str(path)[:20] + '...'!r} has {size} as an absolute path")


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
    check_path_fits(path)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"out {str(path)!r} exists and is not a folder")
        return
    _check_creatable(path)


def check_new_run_dir(out: str | None, default_name: str, root: str = "runs",
                      staged: bool = False) -> Path:
    """The folder a new run will be written to. ``out`` must not exist yet (a run folder is
    never overwritten) and must be creatable (:func:`check_path_fits`; ``staged``: the folder is
    made whole under a temporary name first); without ``out`` a fresh name under ``root`` is
    chosen. Checked before any work starts."""
    if out is not None:
        path = Path(out)
        check_path_fits(path, staged)
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


def metric_label(name: str) -> str:
    """How tables, reports and figures name a metric (docs/metrics.md defines each):
    ``"episode_return"`` -> ``"episode return"``, ``"exact_return_initial"`` -> ``"exact
    return before training"``."""
    if name.endswith("_initial"):
        return metric_label(name.removesuffix("_initial")) + " before training"
    return name.replace("_", " ")


def metric_table(rows: list[dict], labels: list[dict], name: str) -> np.ndarray:
    """``(lanes, updates + 1)`` array of metric ``name`` from metric rows (NaN where
    missing); lane ``i`` is the one labelled ``labels[i]``."""
    index = {json.dumps(label, sort_keys=True): i for i, label in enumerate(labels)}
    updates = max(r["update"] for r in rows)
    out = np.full((len(labels), updates + 1), np.nan)
    for r in rows:
        label = {k: r[k] for k in labels[0]}
        value = r.get(name)
        if value is not None:
            out[index[json.dumps(label, sort_keys=True)], r["update"]] = value
    return out


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, and is another user's
        return True
    return True


def _holder(fd: int) -> str:
    """`` (pid N)``: the process id a locked lock file holds, where it names a live process;
    ``""`` where it is unknown (the holder has not written it yet, or it is not a number)."""
    try:
        pid = int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return ""
    return f" (pid {pid})" if pid > 0 and _alive(pid) else ""


def _lock(folder: Path, what: str) -> int:
    """The descriptor of ``folder``'s ``.lock``, created where missing, locked (``flock``,
    exclusive) and holding this process's id; ``ValueError`` naming the folder (and the
    holder's process id where known) when another process holds it."""
    path = folder / LOCK
    assert fcntl is not None
    while True:
        try:
            fd, created = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                  default_mode()), True
        except FileExistsError:
            try:
                fd, created = os.open(path, os.O_RDWR | os.O_CLOEXEC), False
            except FileNotFoundError:  # removed by its holder in between: again
                continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise ValueError(f"{what}the run in {str(folder)!r} is in use by another "
                             f"process{holder}: a run folder is written by one process at a "
                             f"time") from None
        except OSError as err:  # a file system without locks (ENOLCK): leave nothing
            if created:
                path.unlink(missing_ok=True)
            os.close(fd)
            raise OSError(err.errno, f"cannot lock the run folder: {err.strerror}",
                          str(path)) from err
        try:  # the holder before may have removed the file between open and lock: again
            current = os.path.samestat(os.stat(path), os.fstat(fd))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        with writing(path):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
    except BaseException:
        os.close(fd)
        raise
    return fd


def held() -> set[str]:
    """The real paths of the run folders this process holds (:meth:`RunFolder.claim`)."""
    with _HELD_GUARD:
        return set(_HELD)


def release_all() -> None:
    """Release every run folder this process holds (:meth:`RunFolder.release`): run at exit,
    where it removes their lock files (the kernel drops the locks themselves in any case)."""
    for key in list(_HELD):
        RunFolder(key).release()


atexit.register(release_all)


def check_metric_order(path: Path, rows: Iterable[tuple[int, dict]]) -> None:
    """Refuse (``ValueError`` naming the line) metric rows, ``(line number, row)`` in file
    order, that leave the order one process writes them in: every lane's row of update 0, then
    each later update's rows, one per lane; so the update never goes back and no lane has two
    rows of one update. (Two processes training one run at once interleave their updates, and
    a figure drawn from them would mix two runs.) A lane is named by the fields before
    ``update``, as rows are written (``seed``, then the swept values)."""
    why = "was the run trained by two processes at once?"
    last, lanes = -1, set()
    for number, row in rows:
        updates = row["update"]
        lane = []
        for key, value in row.items():
            if key == "update":
                break
            lane.append(f"{key}={json.dumps(value)}")
        if updates < last:
            raise ValueError(f"{str(path)!r} line {number} goes back to update {updates} after "
                             f"update {last} ({why})")
        if updates > last:
            last, lanes = updates, set()
        name = ", ".join(lane)
        if name in lanes:
            raise ValueError(f"{str(path)!r} line {number} repeats update {updates}"
                             + (f" of lane {name}" if name else "") + f" ({why})")
        lanes.add(name)


class RunFolder:
    """The files of one run folder (nothing is read or written until asked)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def figures(self) -> Path:
        return self.path / "figures"

    @property
    def is_rollout(self) -> bool:
        return (self.path / ROLLOUT).exists()

    @property
    def finished(self) -> bool:
        return (self.path / SUMMARY).exists()

    def check_exists(self, what: str = "") -> None:
        if not self.path.is_dir():
            raise ValueError(f"{what}{str(self.path)!r} is not a folder")

    # .lock: one process at a time
    def claim(self, what: str = "") -> bool:
        """Hold this folder for this process: an exclusive ``flock`` on its ``.lock`` (created
        where missing), held until :meth:`release` or the process ends (the kernel drops it
        then, after SIGKILL too, so a lock whose holder is gone never blocks). ``ValueError``
        (``what`` leads it) naming the folder, and the holder's process id where known, when
        another process holds it; nothing in the folder changes then. True when this call
        took the lock, False when this process held it already."""
        if fcntl is None:
            return False
        key = os.path.realpath(self.path)
        with _HELD_GUARD:
            if key in _HELD:
                return False
            _HELD[key] = _lock(self.path, what)
            return True

    def release(self) -> None:
        """Let other processes write this folder again (its ``.lock`` is removed while still
        held, then unlocked); nothing when this process does not hold it."""
        with _HELD_GUARD:
            fd = _HELD.pop(os.path.realpath(self.path), None)
        if fd is None:
            return
        try:
            os.unlink(self.path / LOCK)
        except OSError:  # gone with its folder, or a read-only one: the lock still goes
            pass
        os.close(fd)

    # config.json, summary.json, rollout.json
    def write_config(self, data: dict) -> None:
        atomic_write_text(self.path / CONFIG, json.dumps(data, indent=2) + "\n")

    def read_config(self) -> dict:
        return read_json(self.path / CONFIG)

    def write_summary(self, summary: dict) -> None:
        write_json(self.path / SUMMARY, summary)

    def write_rollout(self, record: dict) -> None:
        atomic_write_text(self.path / ROLLOUT, json.dumps(record) + "\n")

    def read_rollout(self) -> dict:
        data = read_json(self.path / ROLLOUT)
        if not isinstance(data, dict) or not {"active_per_step", "batch_size"} <= set(data):
            raise ValueError(f"{str(self.path / ROLLOUT)!r} is not a rollout record")
        return data

    # metrics.jsonl
    def write_metrics(self, rows: Iterable[dict], append: bool = True) -> None:
        """Write metric rows (one JSON line each), after the existing ones or replacing them."""
        text = "".join(json.dumps(row) + "\n" for row in rows)
        with writing(self.path / METRICS), (self.path / METRICS).open("a" if append else "w") as f:
            f.write(text)

    def read_metrics(self) -> list[dict]:
        """The metric rows; ``ValueError`` naming the file, and the line as an editor numbers
        it, for a line that is not a metric row."""
        return [row for _, row in self._metric_lines(torn_tail=False)]

    def _metric_lines(self, torn_tail: bool) -> list[tuple[str, dict]]:
        """``(line, row)`` of every non-blank line of metrics.jsonl. ``torn_tail``: drop a last
        line cut short (no newline after it, not JSON), the half line a full disk leaves.
        Refused (``ValueError`` naming the line): a line that is not a metrics row, and rows
        out of the order rollax writes them in (:func:`check_metric_order`)."""
        path = self.path / METRICS
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ValueError(f"{str(path)!r} is missing: not a rollax run folder") from None
        except ValueError as err:  # not UTF-8
            raise ValueError(f"{str(path)!r} is corrupt: {err}") from None
        lines = text.split("\n")  # the last item: what follows the last newline
        out, numbers = [], []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                if torn_tail and number == len(lines):
                    break
                raise ValueError(f"{str(path)!r} line {number} is corrupt: {err.msg} (column "
                                 f"{err.colno})") from None
            if not isinstance(row, dict) or not isinstance(row.get("update"), int):
                raise ValueError(f"{str(path)!r} line {number} is not a metrics row (a JSON "
                                 f"object with an integer update)")
            out.append((line, row))
            numbers.append(number)
        check_metric_order(path, zip(numbers, (row for _, row in out)))
        return out

    def check_metrics(self) -> None:
        """Refuse (``ValueError``) a metrics.jsonl that ``truncate_metrics`` cannot keep: a
        corrupt line before the last (a missing file is a run stopped before its first
        metrics)."""
        if (self.path / METRICS).exists():
            self._metric_lines(torn_tail=True)

    def truncate_metrics(self, updates: int) -> None:
        """Keep the metric lines up to update ``updates`` (a killed run may have logged past its
        last checkpoint; a full disk may have left half a line); rewritten atomically."""
        path = self.path / METRICS
        lines = self._metric_lines(torn_tail=True) if path.exists() else []
        kept = [line for line, row in lines if row["update"] <= updates]
        atomic_write_text(path, "".join(line + "\n" for line in kept))

    def metric_table(self, labels: list[dict], name: str) -> np.ndarray:
        return metric_table(self.read_metrics(), labels, name)

    # checkpoints/
    @property
    def has_checkpoint(self) -> bool:
        return (self.checkpoints / checkpoint.LATEST).exists()

    def save_checkpoint(self, updates: int, state: Any, identity: dict,
                        length_field: str | None = None) -> None:
        with writing(self.checkpoints):
            checkpoint.save(self.checkpoints, updates, state, identity,
                            length_field=length_field)

    def load_checkpoint(self, template: Any, identity: dict,
                        length_field: str | None = None) -> tuple[int, Any]:
        """``(updates, state)`` of the latest checkpoint (the number of updates done and the
        state), refused unless it matches (only its ``length_field`` setting may differ, see
        :func:`rollax.run.checkpoint.load`)."""
        return checkpoint.load(checkpoint.latest(self.checkpoints), template, identity,
                               length_field)

    def resume_point(self, template: Any, identity: dict,
                     length_field: str | None = None) -> checkpoint.Found | None:
        """The checkpoint a stopped run continues from
        (:func:`rollax.run.checkpoint.resume_point`)."""
        return checkpoint.resume_point(self.checkpoints, template, identity, length_field)

    def lengthen(self, config: dict) -> None:
        """Make a finished or stopped run longer: summary.json removed, then config.json
        replaced by ``config`` (in between, the folder is an unfinished run of the old length,
        which ``--resume`` finishes)."""
        (self.path / SUMMARY).unlink(missing_ok=True)
        self.write_config(config)

"""Every shell session in the docs runs, and prints what the docs show.

A fenced block of docs/cli.md or docs/devices.md holding ``$ rollax ...`` lines is a session:
each command is followed by its output, up to the next ``$`` line or the end of the block. The
commands of a block run in order in one temporary folder (also the working directory), with
every absolute ``/tmp/<name>`` path of commands and outputs moved into that folder. A command
that names a ``/tmp`` folder made by another block (``rollax eval /tmp/cli-b``) first gets that
folder from the command that writes it (``--out /tmp/cli-b``), run once per test session.

Outputs are compared line by line (stdout, then stderr) after normalising what varies between
runs: timings, throughputs, times left and the timestamp of a generated run-folder name. A
line ``...`` stands for any number of lines. A JSON line is compared as a parsed object, without
``run_dir`` and timing keys, floats to ``rtol 1e-6``. Everything else must match exactly.
Error outputs (``rollax <command>: error: ...``) must come with exit status 2, the others
with 0; ``$ echo $?`` prints the previous command's status. ``| cat`` (stdout not a terminal)
is dropped: stdout is not a terminal here either. A trailing ``# ...`` comment on a command
whose ``--config`` file does not exist gives that file's contents (``# update = 3``).

README.md's cheap commands (``rollax exact``, ``rollax rollout``) are run too; its trainings
are the ones above at other sizes and are not rerun here.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from rollax.cli import main

# every session is executed documentation, each command a `rollax` subprocess
pytestmark = [pytest.mark.integration, pytest.mark.optimized]

ROOT = Path(__file__).resolve().parents[2]
SESSION_DOCS = [ROOT / "docs" / "cli.md", ROOT / "docs" / "devices.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
TMP = re.compile(r"/tmp/([\w.-]+)")
SLOW = ("--env CartPole-v1 --total-steps 4096 --seeds 2", "--devices 8 --out")
"""Sessions that train for a while, or read a folder made so (marked slow; still run in CI)."""

VOLATILE = [
    (re.compile(r"\b(compile|run|final evaluation|wall|command) \d+(\.\d+)? s\b"), r"\1 <T> s"),
    (re.compile(r"\b\d[\d,]* (env )?steps/s\b"), r"<N> \1steps/s"),
    (re.compile(r"\b(\d+ (d|h|min|s) )+left\b"), "<ETA> left"),
    (re.compile(r"-\d{8}-\d{6}\b"), "-<TIMESTAMP>"),
    (re.compile(r" \(cache: [^)]*\)"), " (cache: <FOLDER>)"),
]
TIME_KEYS = re.compile(r"run_dir|time|second|wall|compile|timestamp|date")


def _sessions(doc: Path):
    """(first line, [(command, expected lines)]) of every session block of `doc`."""
    text = doc.read_text()
    for block in FENCE.finditer(text):
        lines = block.group(2).splitlines()
        if not any(line.startswith("$ ") for line in lines):
            continue
        steps: list[tuple[str, list[str]]] = []
        pending = ""
        for line in lines:
            if pending or line.startswith("$ "):
                command = (pending + " " + line.strip() if pending else line[2:]).strip()
                if command.endswith("\\"):
                    pending = command[:-1].strip()
                    continue
                pending = ""
                steps.append((command, []))
            else:
                assert steps, f"{doc.name}: output before the first command: {line!r}"
                steps[-1][1].append(line)
        yield text[:block.start()].count("\n") + 2, steps


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    for block in FENCE.finditer(text):
        for line in block.group(2).splitlines():
            if re.match(r"rollax (exact|rollout)\b", line):
                yield line


def _producers() -> dict[str, str]:
    """/tmp folder name -> the documented command that creates it with --out."""
    found: dict[str, str] = {}
    for doc in SESSION_DOCS:
        for _, steps in _sessions(doc):
            for command, expected in steps:
                m = re.search(r"--out /tmp/([\w.-]+)", command)
                if m and not any(": error:" in line for line in expected):
                    found.setdefault(m.group(1), command)
    return found


PRODUCERS = _producers()


def _params():
    for doc in SESSION_DOCS:
        for line, steps in _sessions(doc):
            made = {m for command, _ in steps for m in re.findall(r"--out /tmp/([\w.-]+)", command)}
            read = {m for command, _ in steps for m in TMP.findall(command)} - made
            commands = [c for c, _ in steps] + [PRODUCERS[m] for m in read if m in PRODUCERS]
            slow = any(s in command for command in commands for s in SLOW)
            yield pytest.param(steps, id=f"{doc.name}:{line}",
                               marks=[pytest.mark.slow] if slow else [])


def _normalise(line: str) -> str:
    for pattern, repl in VOLATILE:
        line = pattern.sub(repl, line)
    return line.rstrip()


def _strip_times(obj):
    if isinstance(obj, dict):
        # a neural run's parameters differ in their last bits between CPUs (AVX2 and AVX-512
        # kernels): its hash is the documenting machine's; tabular runs' hashes are compared
        neural = "eval_return" in obj
        return {k: _strip_times(v) for k, v in obj.items()
                if not TIME_KEYS.search(k) and not (neural and k == "params_sha256")}
    if isinstance(obj, list):
        return [_strip_times(v) for v in obj]
    return obj


def _same_json(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)
    return type(a) is type(b) and a == b


def _same_line(got: str, want: str) -> bool:
    if want.startswith("{"):
        try:
            return _same_json(_strip_times(json.loads(got)), _strip_times(json.loads(want)))
        except json.JSONDecodeError:
            return False
    return _normalise(got) == _normalise(want)


def _match(got: list[str], want: list[str]) -> bool:
    """`want` against `got`, a line `...` matching any number of lines."""
    if not want:
        return not got
    if want[0].strip() == "...":
        return any(_match(got[i:], want[1:]) for i in range(len(got) + 1))
    return bool(got) and _same_line(got[0], want[0]) and _match(got[1:], want[1:])


def _argv(command: str, folder: Path) -> tuple[dict[str, str], list[str], str | None]:
    """(environment assignments, argv after `rollax`, trailing comment) of a command."""
    command = TMP.sub(lambda m: str(folder / m.group(1)), command)
    comment = None
    if " # " in command:
        command, comment = command.split(" # ", 1)
    command = re.sub(r"\s*\|\s*cat\s*$", "", command)
    words = shlex.split(command)
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words and words[0] == "rollax", command
    return env, words[1:], comment.strip() if comment else None


def _lanes(argv: list[str]) -> bool:
    """Whether ``argv`` trains several lanes (``--seeds K``, K > 1, or ``--sweep``)."""
    seeds = argv[argv.index("--seeds") + 1] if "--seeds" in argv[:-1] else "1"
    return argv[:1] == ["train"] and ("--sweep" in argv or seeds != "1")


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    # device flags take effect only in a fresh process; the `rollax` command gives a CPU a
    # device per core, which several lanes share out (docs/devices.md)
    if env or _lanes(argv):
        proc = subprocess.run([sys.executable, "-m", "rollax.cli", *argv], capture_output=True,
                              text=True, cwd=cwd, env={**os.environ, **env}, timeout=600)
        return proc.returncode, proc.stdout + proc.stderr
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue() + err.getvalue()


@pytest.fixture(scope="session")
def produced(tmp_path_factory):
    """/tmp folder name -> a copy made once per session by its producing command."""
    root = tmp_path_factory.mktemp("produced")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            folder = root / name
            folder.mkdir()
            _, argv, _ = _argv(PRODUCERS[name], folder)
            with contextlib.chdir(folder):
                for dep in _needs(argv, folder):
                    shutil.copytree(get(dep), folder / dep)
                rc, output = _run(argv, {}, folder)
            assert rc == 0, output
            made[name] = folder / name
        return made[name]

    return get


def _needs(argv: list[str], folder: Path) -> list[str]:
    """Folders of other blocks this command reads (absent here, made by a known command)."""
    names = []
    for word in argv:
        if word.startswith(str(folder) + "/"):
            name = Path(word).relative_to(folder).parts[0]
            if not (folder / name).exists() and name in PRODUCERS and (
                    "--out " + word) not in " ".join(argv):
                names.append(name)
    return names


@pytest.mark.parametrize("steps", list(_params()))
def test_session(steps, tmp_path, monkeypatch, produced):
    monkeypatch.chdir(tmp_path)  # generated run folders (runs/...) land here
    rc = None
    failures = []
    for command, expected in steps:
        want = [TMP.sub(lambda m: str(tmp_path / m.group(1)), line) for line in expected]
        if command == "echo $?":
            got = [str(rc)]
        else:
            env, argv, comment = _argv(command, tmp_path)
            if "--devices" in argv and env.get("XLA_FLAGS") is None:
                count = int(argv[argv.index("--devices") + 1])
                if "JAX sees only" in "".join(want) and len(jax.devices()) >= count:
                    pytest.skip(f"this process sees {len(jax.devices())} devices")
            if "--config" in argv:
                config = tmp_path / argv[argv.index("--config") + 1]
                if not config.exists():
                    config.write_text((comment or "") + "\n")
            for dep in _needs(argv, tmp_path):
                shutil.copytree(produced(dep), tmp_path / dep)
            rc, output = _run(argv, env, tmp_path)
            got = output.splitlines()
            error = any(re.match(r"rollax( \S+)?: error: ", line) for line in want)
            if rc != (2 if error else 0):
                failures.append(f"$ {command}\nexit status {rc}, expected {2 if error else 0}")
        if not _match(got, want):
            failures.append(f"$ {command}\n--- documented\n" + "\n".join(want)
                            + "\n--- printed\n" + "\n".join(got))
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("command", list(_readme_commands()))
def test_readme_command(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(command, comments=True)[1:]
    rc, output = _run(argv, {}, tmp_path)
    assert rc == 0, output

"""From ``argv`` to a command object, and from a ``train`` command to flat run settings.

Parse errors (tyro's boxed messages) are condensed into one line; ``train --config FILE`` reads
the file into settings that the flags given on the command line override.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
from typing import Any

import tyro

from rollax.cli.flags import COMMANDS, load_config_file
from rollax.run_config import settings_names


class UsageError(Exception):
    """A one-line error for the user."""


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RULE = set("─━-=_ ")


def one_line(box: str) -> str:
    """Condense tyro's boxed parse error (unicode or ASCII layout, colours or not) into its
    first message: the lines after the title, up to the first blank line or rule."""
    lines = [_ANSI.sub("", raw).strip().strip("│┃╭╮╰╯|+").strip() for raw in box.splitlines()]
    message: list[str] = []
    titled = False
    for text in lines:
        is_rule = not text or set(text) <= _RULE
        if not titled:
            titled = not is_rule  # the first line with words is the box title
            continue
        if is_rule:
            if message:
                break
            continue
        message.append(text)
    return re.sub(r"\s+", " ", " ".join(message)).strip() or "invalid arguments"


def given_on_command_line(argv: list[str], name: str) -> bool:
    flag = "--" + name.replace("_", "-")
    negative = "--no-" + name.replace("_", "-")
    return any(a == flag or a.startswith(flag + "=") or a == negative for a in argv)


def split_config(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``--config FILE`` (or ``--config=FILE``), and the file."""
    for i, token in enumerate(argv):
        if token == "--config":
            if i + 1 >= len(argv):
                raise UsageError("--config needs a file")
            return argv[:i] + argv[i + 2:], argv[i + 1]
        if token.startswith("--config="):
            return argv[:i] + argv[i + 1:], token.split("=", 1)[1]
    return argv, None


def parse(argv: list[str]):
    """The command object for ``argv`` (``SystemExit`` after ``--help``)."""
    if sum(a == "--sweep" or a.startswith("--sweep=") for a in argv) > 1:
        raise UsageError("give every swept setting after one --sweep (e.g. --sweep lr=1e-3,3e-4 "
                         "clip_eps=0.1,0.2)")
    buffer = io.StringIO()
    # tyro picks its layout from stdout: a fixed UTF-8, non-terminal stdout keeps it one shape
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    try:
        with contextlib.redirect_stderr(buffer), contextlib.redirect_stdout(out):
            return tyro.extras.subcommand_cli_from_dict(COMMANDS, prog="rollax", args=argv)
    except SystemExit as exit_:
        if exit_.code in (0, None):  # --help: show what tyro printed
            out.flush()
            sys.stdout.write(out.buffer.getvalue().decode("utf-8"))
            raise
        raise UsageError(one_line(buffer.getvalue())) from None


def train_settings(cmd, argv: list[str], file: dict[str, Any]) -> dict[str, Any]:
    """The flat settings of a ``train`` command: the config file's, overridden by the flags
    given on the command line; everything else at the flags' defaults."""
    names = settings_names() + ["out"]
    settings = {}
    for name in names:
        use_file = name in file and not given_on_command_line(argv, name)
        settings[name] = file[name] if use_file else getattr(cmd, name)
    return settings


def resume_extras(cmd) -> list[str]:
    """Flags given beside ``--resume`` other than ``--json``, ``--devices`` and ``--log``."""
    defaults = dataclasses.replace(type(cmd)(), resume=cmd.resume, json=cmd.json,
                                   devices=cmd.devices, log=cmd.log)
    return [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(cmd)
            if getattr(cmd, f.name) != getattr(defaults, f.name)]


def parse_train(argv: list[str]):
    """``(command, settings)`` for ``train ...`` (``settings`` is None with ``--resume``)."""
    rest, path = split_config(argv[1:])
    file = load_config_file(path) if path is not None else {}
    cmd = parse(["train", *rest])
    if cmd.resume is not None:
        extras = resume_extras(cmd) + (["--config"] if path is not None else [])
        if extras:
            raise ValueError(f"--resume takes no other settings (the run's config.json is "
                             f"used); got {', '.join(extras)}")
        return cmd, None
    return cmd, train_settings(cmd, rest, file)

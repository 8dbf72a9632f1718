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
import typing
from typing import Any

import tyro

from rollax.cli.flags import COMMANDS, Train, load_config_file
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


_EXPONENT = re.compile(r"^[+-]?\d+(\.\d*)?[eE]\+?\d+$")


def integer_settings() -> set[str]:
    """Names of the ``train`` settings whose type is an integer (counts, seeds)."""
    names = set()
    for field in dataclasses.fields(Train):
        hint = field.type
        if typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        if int in (typing.get_args(hint) or (hint,)):
            names.add(field.name)
    return names


def whole_number(value: Any) -> Any:
    """``1e6`` (text or float) -> ``1000000`` when it is a whole number; anything else as is.
    Python's ``int`` already reads ``1_000_000``."""
    if isinstance(value, str) and _EXPONENT.match(value.strip()):
        number = float(value)
        return str(int(number)) if number.is_integer() else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def counts_as_integers(argv: list[str]) -> list[str]:
    """``--total-steps 1e6`` -> ``--total-steps 1000000`` for the integer settings."""
    flags = {"--" + name.replace("_", "-") for name in integer_settings()}
    out: list[str] = []
    for token in argv:
        flag, eq, value = token.partition("=")
        if eq and flag in flags:
            token = f"{flag}={whole_number(value)}"
        elif out and out[-1] in flags:
            token = whole_number(token)
        out.append(token)
    return out


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
    """Flags given beside ``--resume`` other than ``--json``, ``--devices``,
    ``--compile-cache`` and ``--log``."""
    defaults = dataclasses.replace(type(cmd)(), resume=cmd.resume, json=cmd.json,
                                   devices=cmd.devices, compile_cache=cmd.compile_cache,
                                   log=cmd.log)
    return [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(cmd)
            if getattr(cmd, f.name) != getattr(defaults, f.name)]


def parse_train(argv: list[str]):
    """``(command, settings, file)`` for ``train ...`` (``settings`` is None with
    ``--resume``; ``file``: the config file's :class:`FileSettings`, or None)."""
    rest, path = split_config(counts_as_integers(argv[1:]))
    file = load_config_file(path) if path is not None else {}
    integers = integer_settings()
    file = {k: whole_number(v) if k in integers else v for k, v in file.items()}
    cmd = parse(["train", *rest])
    if cmd.resume is not None:
        extras = resume_extras(cmd) + (["--config"] if path is not None else [])
        if extras:
            raise ValueError(f"--resume takes no other settings (the run's config.json is "
                             f"used); got {', '.join(extras)}")
        return cmd, None, None
    from_file = {k for k in file if not given_on_command_line(rest, k)}
    return cmd, train_settings(cmd, rest, file), FileSettings(path, from_file) if path else None


@dataclasses.dataclass(frozen=True)
class FileSettings:
    """The config file of a ``train`` command and the settings taken from it."""

    path: str
    names: set[str]

    def name_in(self, error: ValueError) -> ValueError:
        """``error`` prefixed with the file when its message is about a setting from it."""
        message = str(error)
        first = message.split(" ", 1)[0].rstrip(":")
        if first in self.names:
            return ValueError(f"config {self.path!r}: {message}")
        return error

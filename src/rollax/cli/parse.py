"""From ``argv`` to a command object; ``rollax train`` in three steps: :func:`choose` (the
algorithm, the environment and the config file), :func:`parse_train` (the flags into a
:class:`TrainRequest`) and :func:`build` (the request into a run config and its algorithm).

Parse errors (tyro's boxed messages) are condensed into one line; ``train --config FILE`` reads
the file into the defaults that the flags given on the command line override.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
from typing import Any, NamedTuple

import tyro

from rollax.algos import registry
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.cli.config_file import (
    key_name,
    list_flag_error,
    read_table,
    refuse_zoo,
    typed_settings,
)
from rollax.cli.flags import (
    ALIASES,
    COMMANDS,
    RunFlags,
    parse_count,
    train_command,
    train_fields,
)
from rollax.cli.reference import train_flags, train_summary
from rollax.run.config import (
    RUN_SETTINGS,
    RunConfig,
    assemble,
    configure,
    make_and_choose,
    make_env,
)
from rollax.run.folder import RunFolder
from rollax.validate import closest


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


_PARSE_ERROR = re.compile(
    r"Error parsing --([\w-]+): (?:'(.*)' is not a whole number"
    r"|could not convert string to float: '(.*)'"
    r"|no type matching \{None\}\|(INT|FLOAT) could be instantiated from \['(.*)'\]\.?)")
_KINDS = {"INT": "a whole number", "FLOAT": "a number"}


_NO_PARSE = re.compile(r"Error parsing --([\w-]+): (?:Could not find valid parse for arguments:"
                       r"|no type matching .* could be instantiated from) .*")


def _words(argv: list[str], flag: str) -> list[str]:
    """The words the last ``flag`` of ``argv`` was given, as typed (``--flag=V``: ``[V]``;
    ``--flag A B``: up to the next ``--`` token)."""
    words: list[str] = []
    for i, token in enumerate(argv):
        if token.startswith(flag + "="):
            words = [token.split("=", 1)[1]]
        elif token == flag:
            rest = argv[i + 1:]
            stop = next((j for j, t in enumerate(rest) if t.startswith("--")), len(rest))
            words = rest[:stop]
    return words


def readable(message: str, hints: dict[str, Any] | None = None,
             argv: list[str] | None = None) -> str:
    """tyro's "Error parsing --flag: ..." for a count or a number in the form of every other
    setting's error: ``seeds must be a whole number, got '2.5'``; for a flag taking a list of
    numbers (``hints``: each flag's type; ``argv``: the words given), the config file's hint in
    the flag's spelling (:func:`rollax.cli.config_file.list_flag_error`)."""
    match = _PARSE_ERROR.fullmatch(message)
    if match is None:
        listed = _NO_PARSE.fullmatch(message)
        if listed is not None and hints and argv is not None:
            name = listed.group(1).replace("-", "_")
            words = _words(argv, "--" + listed.group(1))
            if name in hints and words:
                return list_flag_error(name, hints[name], words) or message
        return message
    name, count, number, optional, value = match.groups()
    if count is not None:
        kind, got = "a whole number", count
    elif number is not None:
        kind, got = "a number", number
    else:
        kind, got = f"{_KINDS[optional]} or None", value
    return f"{name.replace('-', '_')} must be {kind}, got {got!r}"


def parse(argv: list[str]):
    """The command object for ``argv`` (``SystemExit`` after ``--help``): for ``rollax
    train``, its :class:`TrainRequest` (:func:`choose`, then :func:`parse_train`; the
    request's runner does the third step, :func:`build`)."""
    if argv and argv[0] == "train":
        return parse_train(argv)
    return parse_command(argv)


def parse_command(argv: list[str], train: type | None = None):
    """tyro's command object for ``argv`` (``SystemExit`` after ``--help``); ``train``: the
    ``rollax train`` command to parse a ``train`` argv as."""
    if sum(a == "--sweep" or a.startswith("--sweep=") for a in argv) > 1:
        raise UsageError("give every swept setting after one --sweep (e.g. --sweep lr=1e-3,3e-4 "
                         "clip_eps=0.1,0.2)")
    buffer = io.StringIO()
    # tyro picks its layout from stdout: a fixed UTF-8, non-terminal stdout keeps it one shape
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    try:
        with contextlib.redirect_stderr(buffer), contextlib.redirect_stdout(out):
            if train is not None:
                return tyro.cli(train, prog="rollax train", args=argv[1:])
            # the list of commands shows train's summary, which names the registry's methods
            listed = COMMANDS if argv and argv[0] in COMMANDS else {**COMMANDS,
                                                                   "train": train_flags()}
            return tyro.extras.subcommand_cli_from_dict(listed, prog="rollax", args=argv)
    except SystemExit as exit_:
        if exit_.code in (0, None):  # --help: show what tyro printed
            out.flush()
            sys.stdout.write(out.buffer.getvalue().decode("utf-8"))
            raise
        hints = ({f.name: f.type for f in dataclasses.fields(train)} if train is not None
                 else None)
        raise UsageError(readable(one_line(buffer.getvalue()), hints, argv)) from None


def peek(argv: list[str], name: str) -> str | None:
    """The value of the last ``--name V`` or ``--name=V`` in ``argv`` (``None`` if absent): the
    few flags that decide which command the rest of ``argv`` is parsed as."""
    flag, value = "--" + name, None
    for i, token in enumerate(argv):
        if token == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif token.startswith(flag + "="):
            value = token.split("=", 1)[1]
    return value


def flags_given(argv: list[str], fields) -> set[str]:
    """The fields whose flags ``argv`` holds; :class:`UsageError` for the first ``--flag``
    that is no field of the command, naming the flag it most likely meant."""
    names = [f.name for f in fields]
    known = {"--" + n.replace("_", "-"): n for n in names}
    known |= {"--no-" + f.name.replace("_", "-"): f.name for f in fields if f.hint is bool}
    given = set()
    for token in argv:
        if token == "--":
            break
        flag = token.split("=", 1)[0].replace("_", "-")
        if not token.startswith("--") or flag == "--help":
            continue
        if flag not in known:
            close = closest(flag[2:].replace("-", "_"), names, ALIASES)
            hint = f"; did you mean --{close.replace('_', '-')}?" if close else ""
            raise UsageError(f"unrecognized flag {flag}{hint}")
        given.add(known[flag])
    return given


class Choice(NamedTuple):
    """What the few flags that shape ``rollax train`` pick (:func:`choose`): the algorithm,
    the environment and the config file."""

    spec: AlgorithmSpec
    """The algorithm that trains the environment (with ``--resume``, the run's)."""
    env_name: str
    env: Any
    """The environment, built once (``None`` with ``--resume``: the run's config.json holds
    it)."""
    horizon: int | None
    """The horizon ``env`` was built with (``None``: its own)."""
    path: str | None
    """The ``--config`` file (``None`` when not given)."""
    table: dict[str, Any]
    """The file's table, keys as written (empty without a file)."""

    @property
    def preset(self) -> dict[str, Any]:
        """The algorithm's preset for the environment."""
        return dict(self.spec.preset(self.env_name))


def _count_or_none(text: Any) -> int | None:
    try:
        return text if isinstance(text, int) else parse_count(str(text))
    except ValueError:
        return None


def resumed_spec(path: str) -> AlgorithmSpec:
    """The algorithm of the run in ``path`` (whose flags ``--resume`` parses: its length may
    be given); the first registered one when the folder is no readable run (``--resume``
    then refuses it, naming what is wrong)."""
    try:
        return registry.by_name(RunFolder(path).read_config()["kind"])
    except (ValueError, OSError, KeyError, TypeError):
        return registry.algorithms()[0]


def choose(argv: list[str]) -> Choice:
    """The first step of ``rollax train``: ``--config``, ``--env``, ``--algo`` and
    ``--horizon`` (given as flags, else in the file) pick the environment, built once, and the
    algorithm that trains it (:func:`rollax.run.config.make_and_choose`, as for
    :func:`~rollax.run.config.from_settings`); with ``--resume``, the run's algorithm."""
    rest = argv[1:]
    if rest and rest[-1] == "--config":
        raise UsageError("--config needs a file")
    path = peek(rest, "config")
    table = read_table(path) if path is not None else {}
    if path is not None:
        refuse_zoo(table, path, peek(rest, "env"), peek(rest, "algo"))
    named = {key_name(k): v for k, v in table.items()}
    name = peek(rest, "env") or named.get("env") or RunFlags.env
    if not isinstance(name, str):
        raise ValueError(f"config {path!r}: env must be text, got {name!r}")
    horizon = _count_or_none(peek(rest, "horizon") or named.get("horizon"))
    resume = peek(rest, "resume")
    if resume is not None:
        return Choice(resumed_spec(resume), name, None, horizon, path, table)
    env, spec = make_and_choose(name, horizon, peek(rest, "algo") or named.get("algo"))
    return Choice(spec, name, env, horizon, path, table)


RESUME_TAKES = ("resume", "json", "devices", "compile_cache", "log")
"""The flags ``--resume`` may come with besides the run's length (the rest is the run's
config.json)."""


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """A parsed ``rollax train`` (:func:`parse_train`): the command, what :func:`choose`
    picked, where each setting that is not at the config's own default came from and, for a
    new run, the algorithm's config and the environment it trains."""

    cmd: Any
    """The parsed command (its fields: :func:`rollax.cli.flags.train_fields`)."""
    choice: Choice
    sources: dict = dataclasses.field(default_factory=dict)
    """``name -> "preset" | "file" | "flag"`` for each setting not at its own default."""
    file: FileSettings | None = None
    length: int | None = None
    """With ``--resume``: the new length given to train the run longer (the value of its
    algorithm's length flag, :attr:`~rollax.algos.base.AlgorithmSpec.length_field`, e.g.
    ``--updates``), else ``None``."""
    config: Any = None
    """The algorithm's config, not yet validated (``None`` with ``--resume``)."""
    env: Any = None
    """The environment at the parsed ``--horizon`` (``None`` with ``--resume``)."""

    @property
    def given(self) -> set[str]:
        """The settings the user gave (in the config file or as flags)."""
        return {name for name, source in self.sources.items() if source != "preset"}

    @property
    def settings(self) -> dict[str, Any]:
        """The run's settings (:data:`rollax.run.config.RUN_SETTINGS`)."""
        return {n: getattr(self.cmd, n) for n in RUN_SETTINGS}


def parse_train(argv: list[str], choice: Choice | None = None) -> TrainRequest:
    """The second step of ``rollax train``: the command's flags are built from the chosen
    algorithm's config (``choice``: :func:`choose`'s for ``argv`` when not given), with the
    environment's preset and then the file as defaults (the file is the default instance);
    tyro parses ``argv`` into it, so the flags given override. ``--resume`` takes no other
    settings but the run's length; a new run's config is built from the flags
    (:func:`rollax.run.config.configure`, as for :func:`~rollax.run.config.from_settings`:
    the settings only other algorithms take are refused), and its environment made again when
    the parsed ``--horizon`` is not the one :func:`choose` read."""
    choice = choose(argv) if choice is None else choice
    rest, spec, name, path = argv[1:], choice.spec, choice.env_name, choice.path
    preset = choice.preset
    defaults = {**{f.name: f.default for f in dataclasses.fields(RunFlags)},
                **{f.name: f.default for f in dataclasses.fields(spec.config_type)}, **preset}
    hints = {f.name: f.hint for f in train_fields(spec, defaults, {})}
    file = typed_settings(choice.table, hints, path, spec if choice.env is not None else None,
                          name) if path is not None else {}
    tags = {**{k: f"preset of {name}" for k in preset}, **{k: f"from {path}" for k in file}}
    fields = train_fields(spec, {**defaults, **file, "env": name, "config": path}, tags)
    flags = flags_given(rest, fields)
    cmd = parse_command(["train", *rest], train=train_command(fields, train_summary()))
    sources = {f.name: "flag" if f.name in flags else "file" if f.name in file else "preset"
               for f in fields if f.name in flags or f.name in file or f.name in preset}
    if cmd.resume is not None:
        extras = [n for n, source in sources.items()
                  if source != "preset" and n not in (*RESUME_TAKES, spec.length_field)]
        if extras:
            flags = ", ".join("--" + n.replace("_", "-") for n in extras)
            longer = (f"; --{spec.length_field.replace('_', '-')} N trains it longer"
                      if spec.length_field else "")
            raise ValueError(f"--resume takes no other settings (the run's config.json is "
                             f"used{longer}); got {flags}")
        length = getattr(cmd, spec.length_field) if spec.length_field in flags else None
        return TrainRequest(cmd, choice, length=length)
    config = configure(spec, name, {f.name: getattr(cmd, f.name) for f in fields})
    env = (choice.env if cmd.horizon == choice.horizon and not getattr(config, "env_options", ())
           else make_env(name, cmd.horizon, getattr(config, "env_options", ())))
    from_file = {n for n, source in sources.items() if source == "file"}
    return TrainRequest(cmd, choice, sources,
                        FileSettings(path, from_file) if path is not None else None,
                        config=config, env=env)


def build(request: TrainRequest) -> tuple[RunConfig, Algorithm]:
    """The third step of a new ``rollax train`` run: the :class:`RunConfig` and built
    algorithm of ``request`` (:func:`rollax.run.config.assemble`), everything checked before
    anything is compiled or written; a bad value from the config file names the file."""
    assert request.config is not None, "a --resume request builds nothing"
    try:
        return assemble(request.config, request.env, request.settings, request.given)
    except ValueError as error:
        raise error if request.file is None else request.file.name_in(error) from None


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

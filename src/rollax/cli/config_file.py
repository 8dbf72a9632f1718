"""``rollax train --config FILE``: a TOML or YAML table of settings, read into typed values.

A file holds ``rollax train`` flag names (``-`` or ``_``) and single values, each converted to
its flag's type: ``lr: 3e-4`` (which YAML reads as text) is the float 0.0003, ``total_steps:
1e6`` the integer 1000000, ``hidden: [32, 32]`` the tuple ``(32, 32)``. A file never sets
``config``, ``resume``, ``json``, ``compile_cache`` or ``log``. Every problem of a file (an
unknown key with the closest valid one, a value of the wrong kind, a setting of another
algorithm) is refused in one message; an empty file, a key given twice and an
rl-baselines3-zoo file (a table per environment, answered with its settings in rollax's names)
are refused before that.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

from rollax.algos import registry
from rollax.algos.base import AlgorithmSpec
from rollax.cli.flags import ALIASES, CONFIG_EXCLUDED, RunFlags, parse_count
from rollax.run.config import (
    foreign_message,
    foreign_settings,
    make_and_choose,
    settings_names,
)
from rollax.validate import closest


def read_table(path: str) -> dict[str, Any]:
    """The raw table of a ``.toml`` or ``.yaml``/``.yml`` file (YAML's safe loader: plain
    data only), with each key as written; ``-`` and ``_`` in a key mean the same. Refused: a
    file without settings (empty, comments only, ``{}``) and keys given twice, exactly (YAML
    would keep the last) or as two spellings of one setting (``batch-size``, ``batch_size``),
    every one of them named."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ValueError(f"config {path!r} must be a .toml, .yaml or .yml file")
    try:
        text = file.read_text()
    except OSError as err:
        raise ValueError(f"config {path!r} cannot be read: {err.strerror or err}") from None
    repeated: list[str] = []
    try:
        if suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)  # a key given twice is invalid TOML
        else:
            data, repeated = load_yaml(text)
    except Exception as err:  # the parsers raise their own error types
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"config {path!r} is not valid {suffix[1:].upper()}: {first}") from None
    if data is not None and not isinstance(data, dict):
        raise ValueError(f"config {path!r} must hold a table of settings, got "
                         f"{type(data).__name__}")
    if not data:
        raise ValueError(f"config {path!r} holds no settings")
    table = {str(key): value for key, value in data.items()}
    spellings: dict[str, list[str]] = {}
    for key in table:
        spellings.setdefault(key_name(key), []).append(key)
    repeated += [f"{_and([repr(k) for k in keys])} both set {name}"
                 for name, keys in spellings.items() if len(keys) > 1]
    if repeated:
        keep = "keep one" if len(repeated) == 1 else "keep one of each"
        raise ValueError(f"config {path!r}: {', '.join(repeated)}; {keep}")
    return table


def load_yaml(text: str) -> tuple[Any, list[str]]:
    """``text``'s data (YAML's safe loader: plain data only, no tags that build objects) and
    each key that a mapping of it gives more than once, with the lines (YAML keeps the last)."""
    loader = _unique_key_loader()(text)
    try:
        return loader.get_single_data(), loader.repeated
    finally:
        loader.dispose()


@functools.cache
def _unique_key_loader() -> type:
    import yaml

    class Loader(yaml.SafeLoader):
        """The safe loader, noting the keys a mapping repeats."""

        def __init__(self, stream):
            super().__init__(stream)
            self.repeated: list[str] = []

        def construct_mapping(self, node, deep=False):
            lines: dict[Any, list[int]] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # "<<: *base" may be overridden: that is what it is for
                key = self.construct_object(key_node, deep=True)
                try:
                    lines.setdefault(key, []).append(key_node.start_mark.line + 1)
                except TypeError:  # unhashable: the safe loader refuses it itself
                    continue
            for key, at in lines.items():
                if len(at) > 1:
                    times = "twice" if len(at) == 2 else f"{len(at)} times"
                    self.repeated.append(f"key {key!r} is given {times} (lines "
                                         f"{_and([str(n) for n in at])})")
            return super().construct_mapping(node, deep=deep)

    return Loader


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def key_name(key: str) -> str:
    """The setting a file key names (``batch-size`` and ``batch_size`` alike)."""
    return key.replace("-", "_")


def typed_settings(table: dict[str, Any], hints: dict[str, Any], path: str,
                   spec: AlgorithmSpec | None = None, env: str | None = None) -> dict[str, Any]:
    """``table``'s values converted to the types ``hints`` gives each flag. Every problem is
    refused in one message: an unknown key with the closest valid one (and what is wrong
    with its value there), a value of the wrong kind, and the keys that only algorithms other
    than ``spec`` (the one that trains ``env``) take."""
    valid = [name for name in hints if name not in CONFIG_EXCLUDED]
    fields = spec.fields if spec is not None else ()
    settings, problems = {}, []
    for key, value in table.items():
        name = key_name(key)
        if name not in valid:
            close = closest(name, valid, ALIASES)
            problem = f"unknown key {key!r}"
            if close:
                problem += f"; did you mean {close}?"
                try:
                    convert(value, hints[close])
                except (TypeError, ValueError) as err:
                    problem += f" Its value: {value_problem(close, value, err, fields)}"
            problems.append(problem)
            continue
        try:
            settings[name] = convert(value, hints[name])
        except (TypeError, ValueError) as err:
            problems.append(value_problem(name, value, err, fields))
    if spec is not None and env is not None:
        foreign = foreign_settings(spec, [n for n, v in settings.items() if v is not None])
        if foreign:
            problems.append(foreign_message(spec, env, foreign, flags=False))
    if len(problems) == 1:
        raise ValueError(f"config {path!r}: {problems[0]}")
    if problems:
        listed = " ".join(f"({i}) {problem}" for i, problem in enumerate(problems, 1))
        raise ValueError(f"config {path!r} has {len(problems)} problems: {listed}")
    return settings


def value_problem(name: str, value: Any, err: Exception, fields=()) -> str:
    """``name must be ..., got value``; for Stable-Baselines3's ``lin_X`` (a learning rate
    or clip range falling linearly to 0), rollax's way to write it (``anneal_<name>``) or that
    rollax has none."""
    problem = f"{name} {err.args[0]}, got {value!r}"
    if isinstance(value, str) and value.startswith("lin_"):
        start, anneal = value[4:], f"anneal_{name}"
        if anneal in fields:
            problem += (f" (a linear schedule of Stable-Baselines3: {name} = {start} with "
                        f"{anneal} = true)")
        else:
            problem += (f" (a linear schedule of Stable-Baselines3, which rollax has not for "
                        f"{name}: {name} = {start} keeps it constant)")
    return problem


ZOO_KEYS = {"n_timesteps", "policy", "n_envs", "normalize", "policy_kwargs", "env_wrapper",
            "frame_stack"}
"""Keys of an rl-baselines3-zoo entry whatever its algorithm (the zoo's own, and the
policy's): a table of tables with one of them is a zoo file."""


def refuse_zoo(table: dict[str, Any], path: str, env: str | None = None,
               method: str | None = None) -> None:
    """``ValueError`` for an rl-baselines3-zoo file (``CartPole-v1: {n_envs: 8, ...}``: a
    table per environment): the entry of ``env`` (the one entry when ``env`` is not given) in
    the settings of the algorithm that trains it (``method``: ``--algo``), those that differ
    from what rollax would use, and what rollax has no equivalent of."""
    names = {*settings_names(), *(f.name for f in dataclasses.fields(RunFlags))}
    if not all(isinstance(v, dict) for v in table.values()) or any(
            key_name(k) in names for k in table) or not any(
            ZOO_KEYS & set(v) for v in table.values()):
        return
    zoo = f"config {path!r} holds rl-baselines3-zoo settings"
    entries = list(table)
    if env is None and len(entries) > 1:
        raise ValueError(f"{zoo} for {len(entries)} environments ({', '.join(entries)}), and "
                         "rollax reads one flat table of its own settings: give --env with one "
                         "of them to see its settings in rollax's names")
    name = entries[0] if env is None else env
    if name not in table:
        raise ValueError(f"{zoo}, but none for {name} (it has {', '.join(entries)})")
    try:
        spec = make_and_choose(name, method=method).spec
        offered = [m for s in registry.algorithms() if s.from_zoo for m in s.methods]
        if spec.from_zoo is None:
            raise ValueError(f"rollax reads one flat table of its own settings, and translates "
                             f"zoo settings for --algo {'/'.join(offered)} only, not "
                             f"{'/'.join(spec.methods)}")
        settings, lacks = spec.from_zoo(table[name])
    except ValueError as err:
        raise ValueError(f"{zoo} for {name}: {err}") from None
    rollax = spec.config(name)
    shown = {"env": name, **{k: v for k, v in settings.items() if getattr(rollax, k) != v}}
    message = (f"{zoo} (a table per environment), and rollax reads one flat table of its own; "
               f"the {name} entry, as rollax's {spec.name} takes Stable-Baselines3's settings, "
               f"is (settings not named are the same already): "
               + ", ".join(f"{k} = {toml_value(v)}" for k, v in shown.items()))
    if lacks:
        message += "; rollax has no equivalent of: " + "; ".join(lacks)
    raise ValueError(message)


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it (``true``, ``"mlp"``, ``[64, 64]``, ``0.001``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def convert(value: Any, hint: Any) -> Any:
    """``value`` (as TOML or YAML read it) as a value of type ``hint``; ``ValueError`` saying
    what it must be."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return convert(value, args[0])
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        [inner] = [a for a in args if a is not type(None)]
        return convert(value, inner)
    if isinstance(value, dict):
        raise ValueError("must be a single value, not a table")
    if origin is Literal:
        if value not in args:
            raise ValueError(f"must be one of {', '.join(map(str, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError("must be a whole number")
        try:
            return value if isinstance(value, int) else parse_count(str(value))
        except ValueError:
            raise ValueError("must be a whole number") from None
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError("must be a number")
        try:
            return float(value)
        except ValueError:
            raise ValueError("must be a number") from None
    if origin is tuple:
        listed = _listed(value, args[0]) if isinstance(value, str) else None
        if listed is not None:
            kind = "whole numbers" if args[0] is int else "numbers"
            raise ValueError(f"must be a list of {kind}, written [{', '.join(listed)}]")
        items = value if isinstance(value, (list, tuple)) else [value]
        return tuple(convert(item, args[0]) for item in items)
    if hint is str:
        if isinstance(value, (list, tuple, bool)) or value is None:
            raise ValueError("must be text")
        return str(value)
    raise TypeError(f"has a type config files cannot set ({hint})")


def list_flag_error(name: str, hint: Any, words: list[str]) -> str | None:
    """The one-line error for the words given to ``--name``, a flag taking a list of numbers
    (``hint``: ``tuple[int, ...]`` or ``tuple[float, ...]``, maybe optional or annotated), that
    tyro could not parse: the config file's hint in the flag's spelling (``hidden must be a list
    of whole numbers, written --hidden 64 64, got '64,64'``); ``None`` for another flag."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    while origin is typing.Annotated or origin in (typing.Union, types.UnionType):
        inner = args[:1] if origin is typing.Annotated else [a for a in args
                                                             if a is not type(None)]
        if len(inner) != 1:
            return None
        hint = inner[0]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is not tuple or not args or args[0] not in (int, float):
        return None
    text = " ".join(words)
    example = _listed(text, args[0]) or (["64", "64"] if args[0] is int else ["0.5", "0.5"])
    kind = "whole numbers" if args[0] is int else "numbers"
    return (f"{name} must be a list of {kind}, written --{name.replace('_', '-')} "
            f"{' '.join(example)}, got {text!r}")


def _listed(text: str, item: Any) -> list[str] | None:
    """The items of ``'64,64'`` or ``'64 64'`` (text where a list of numbers was meant), when
    there are several and each is an ``item``; else ``None``."""
    if item not in (int, float):
        return None
    parts = text.strip().strip("[]()").replace(",", " ").split()
    try:
        return [str(convert(part, item)) for part in parts] if len(parts) > 1 else None
    except ValueError:
        return None

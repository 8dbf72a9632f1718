"""``rollax train --config FILE``: a TOML or YAML table of settings, read into typed values.

A file holds ``rollax train`` flag names (``-`` or ``_``) and single values, each converted to
its flag's type: ``lr: 3e-4`` (which YAML reads as text) is the float 0.0003, ``total_steps:
1e6`` the integer 1000000, ``hidden: [32, 32]`` the tuple ``(32, 32)``; a value of the wrong
kind is refused naming the file, the key and what it must be. A file never sets ``config``,
``resume``, ``json``, ``compile_cache`` or ``log``.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal

from rollax.cli.flags import ALIASES, CONFIG_EXCLUDED, parse_count
from rollax.validate import closest


def read_table(path: str) -> dict[str, Any]:
    """The raw table of a ``.toml`` or ``.yaml``/``.yml`` file (YAML's safe loader: plain
    data only), with each key as written; ``-`` and ``_`` in a key mean the same."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ValueError(f"config {path!r} must be a .toml, .yaml or .yml file")
    try:
        text = file.read_text()
    except OSError as err:
        raise ValueError(f"config {path!r} cannot be read: {err.strerror or err}") from None
    try:
        if suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)  # plain data only: no tags, no objects
    except Exception as err:  # the parsers raise their own error types
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"config {path!r} is not valid {suffix[1:].upper()}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"config {path!r} must hold a table of settings, got "
                         f"{type(data).__name__}")
    return {str(key): value for key, value in data.items()}


def key_name(key: str) -> str:
    """The setting a file key names (``batch-size`` and ``batch_size`` alike)."""
    return key.replace("-", "_")


def typed_settings(table: dict[str, Any], hints: dict[str, Any], path: str) -> dict[str, Any]:
    """``table``'s values converted to the types ``hints`` gives each flag; an unknown key is
    refused with the closest valid one."""
    valid = [name for name in hints if name not in CONFIG_EXCLUDED]
    settings = {}
    for key, value in table.items():
        name = key_name(key)
        if name not in valid:
            close = closest(name, valid, ALIASES)
            hint = f"; did you mean {close}?" if close else ""
            raise ValueError(f"config {path!r}: unknown key {key!r}{hint}")
        try:
            settings[name] = convert(value, hints[name])
        except (TypeError, ValueError) as err:
            raise ValueError(f"config {path!r}: {name} {err.args[0]}, got {value!r}") from None
    return settings


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
        items = value if isinstance(value, (list, tuple)) else [value]
        return tuple(convert(item, args[0]) for item in items)
    if hint is str:
        if isinstance(value, (list, tuple, bool)) or value is None:
            raise ValueError("must be text")
        return str(value)
    raise TypeError(f"has a type config files cannot set ({hint})")

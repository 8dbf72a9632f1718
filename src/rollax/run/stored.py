"""An algorithm's config as a run folder stores it (config.json's ``"config"``) and back.

A config is a frozen dataclass of JSON values and tuples; JSON has no tuples, so reading one
back turns lists into tuples where the field's type is a tuple. A field added after run folders
were written carries the value such a folder was trained with (its ``stored`` metadata:
:func:`rollax.algos.base.added`), so an older folder resumes and evaluates as it was trained.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from rollax.algos.base import STORED


def config_to_dict(config) -> dict:
    """A JSON-able dict of an algorithm's ``config``."""
    return dataclasses.asdict(config)


def older_fields(config) -> dict:
    """The fields of ``config`` added after run folders were written (:func:`added`) that hold
    the value such a folder was trained with, by name: a checkpoint written before a field
    existed matches a config that has it at that value (:func:`rollax.run.checkpoint.load`)."""
    return {f.name: f.metadata[STORED] for f in dataclasses.fields(config)
            if STORED in f.metadata
            and json.dumps(getattr(config, f.name)) == json.dumps(f.metadata[STORED])}


def config_from_dict(config_type: type, data: Mapping[str, Any]):
    """The ``config_type`` stored by :func:`config_to_dict` as ``data`` (lists back to tuples;
    fields absent from ``data`` take the value older folders were trained with, where the
    field declares one, else their default)."""
    hints = typing.get_type_hints(config_type)
    older = {f.name: f.metadata[STORED] for f in dataclasses.fields(config_type)
             if STORED in f.metadata}
    fields = {}
    for name, value in {**older, **data}.items():
        if isinstance(value, list) and _is_tuple_type(hints.get(name)):
            value = tuple(value)
        fields[name] = value
    return config_type(**fields)


def _is_tuple_type(hint) -> bool:
    if hint is tuple or typing.get_origin(hint) is tuple:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_tuple_type(arg) for arg in typing.get_args(hint))
    return False

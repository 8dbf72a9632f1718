"""What rollax says about its registered algorithms, derived from the registry
(:mod:`rollax.algos.registry`) and the config dataclasses, never kept by hand: ``rollax
train``'s help summary (the methods each task trains with) and the markdown of the
documentation's generated blocks.

A generated block of a page of ``docs/`` is the text between two marker lines::

    <!-- generated: KEY -->
    ...
    <!-- end generated -->

``KEY`` is ``algorithms`` (:func:`algorithms_table`: every registered method, the tasks it
trains, where its settings are described, whether its runs draw ``ppo_diagnostics``) or
``fields NAME`` (:func:`fields_table`: the settings of the algorithm registered as ``NAME``,
each a flag with its default and its docstring). ``python tools/docs_tables.py`` rewrites every
block (:func:`regenerate`); ``--check`` and ``tests/docs/test_docs_generated.py`` fail on a
stale one, so a field added, renamed, reordered or documented anew in a config shows in the
docs the next time they are generated.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NamedTuple

import jax

from rollax.algos import registry
from rollax.algos.base import ENV_BATCH, AlgorithmSpec, field_with, hyperparams_type
from rollax.cli.flags import RunFlags, field_docs

# --- the methods, as prose names them ----------------------------------------------------------

def spelled(method: str) -> str:
    """How prose spells a method (``--algo`` value): ``ppo`` is PPO, ``a2c`` A2C."""
    return method.upper()


def listed(names: Iterable[str], last: str = "or") -> str:
    """``A``, ``A or B``, ``A, B or C``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {last} {names[-1]}"


def methods_by_task() -> dict[str, tuple[str, ...]]:
    """The methods that train each task (``Task.name``), in the registry's order, each once."""
    tasks: dict[str, dict[str, None]] = {}
    for spec in registry.algorithms():
        tasks.setdefault(spec.trains.name, {}).update(dict.fromkeys(spec.methods))
    return {task: tuple(methods) for task, methods in tasks.items()}


def train_summary() -> str:
    """``rollax train``'s help summary: :class:`~rollax.cli.flags.RunFlags`'s docstring, its
    ``{task}`` fields filled with the methods that train each task (``PPO, A2C, ...``)."""
    methods = {task: listed(map(spelled, ms)) for task, ms in methods_by_task().items()}
    return " ".join((RunFlags.__doc__ or "").split()).format(**methods)


def train_flags() -> type:
    """:class:`~rollax.cli.flags.RunFlags` as ``rollax --help`` lists it: the same flags,
    :func:`train_summary` as its docstring."""
    return type(RunFlags.__name__, (RunFlags,),
                {"__doc__": train_summary(), "__module__": RunFlags.__module__})


# --- a config's fields --------------------------------------------------------------------------

def metavar(hint: Any) -> str:
    """A flag's value as ``rollax train --help`` shows it: ``INT``, ``{tanh,relu}``,
    ``{None}|INT``, ``INT [INT ...]``."""
    args = typing.get_args(hint)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return "{None}|" + "|".join(map(metavar, rest))
    if typing.get_origin(hint) is Literal:
        return "{" + ",".join(map(str, args)) + "}"
    if typing.get_origin(hint) is tuple:
        one = metavar(args[0])
        return f"{one} [{one} ...]"
    return {int: "INT", float: "FLOAT", str: "STR"}.get(hint, getattr(hint, "__name__", "X"))


def flag(name: str, hint: Any) -> str:
    """The flag of field ``name`` in markdown: ``--num-envs INT``, ``--anneal-lr`` /
    ``--no-anneal-lr`` for a boolean."""
    dashed = name.replace("_", "-")
    if hint is bool:
        return f"`--{dashed}` / `--no-{dashed}`"
    return f"`--{dashed} {metavar(hint)}`".replace("|", "\\|")


def default_of(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def literal(value: Any) -> str:
    """A default as Python (and a config file) writes it: ``"CartPole-v1"``, ``(64, 64)``."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _cell(text: str) -> str:
    """Text in a table cell: a bar escaped, ``<`` not taken for HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def fields_table(spec: AlgorithmSpec) -> str:
    """The settings of ``spec``'s config, one row a field in the dataclass's order: its flag,
    its default and its docstring, under a line naming the config, the traced fields (what
    ``--sweep`` takes), the length field and the environment batch."""
    config = spec.config_type
    hints = typing.get_type_hints(config)
    docs = field_docs(config)
    traced = hyperparams_type(config)._fields
    notes = [f"`{config.__name__}` (`{config.__module__}`): every field is a `rollax train` "
             "flag and a config-file key of the same name"]
    if traced:
        notes.append(f"`--sweep` takes the traced ones ({', '.join(f'`{n}`' for n in traced)})")
    if spec.length_field:
        longer = spec.length_field.replace('_', '-')
        notes.append(f"`--resume RUN --{longer} N` trains a run longer")
    batch = field_with(config, ENV_BATCH)
    if batch:
        notes.append(f"`--devices` splits `{batch}`")
    rows = [f"| {flag(f.name, hints[f.name])} | `{literal(default_of(f))}` | "
            f"{_cell(docs.get(f.name, ''))} |" for f in dataclasses.fields(config)]
    return "\n".join(["; ".join(notes) + ".", "", "| flag | default | meaning |",
                      "|---|---|---|", *rows])


# --- the table of algorithms --------------------------------------------------------------------

class Heading(NamedTuple):
    """A markdown heading of a page: where its line starts and ends, and its title."""

    start: int
    end: int
    title: str


def headings(text: str) -> list[Heading]:
    """The headings of a page (``#`` to ``######`` lines outside fenced code), in order."""
    found, fenced, at = [], False, 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} +(.+?) *$", line.rstrip("\n"))):
            found.append(Heading(at, at + len(line), match.group(1)))
        at += len(line)
    return found


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def described_at(spec: AlgorithmSpec, pages: Mapping[str, str]) -> tuple[str, str] | None:
    """Where the docs describe ``spec``'s settings, ``(page, heading)``: the section holding its
    ``fields NAME`` block, else the heading that names its config (`` `PPOConfig` ``); ``None``
    when no page does."""
    for page, text in pages.items():
        at = text.find(f"<!-- generated: fields {spec.name} -->")
        above = [h.title for h in headings(text) if h.end <= at]
        if at >= 0 and above:
            return page, above[-1]
    for page, text in pages.items():
        for heading in headings(text):
            if f"`{spec.config_type.__name__}`" in heading.title:
                return page, heading.title
    return None


class Traced(NamedTuple):
    """What a method's built algorithm shows of itself, traced without compiling."""

    whole_episodes: bool
    """It collects whole episodes (``episodes_per_update``), not fixed-length rollouts."""
    logs_ratios: bool
    """Its update logs ``ratio_min``, whose presence makes :mod:`rollax.run.plots` draw
    ``ppo_diagnostics``."""


@functools.cache
def traced_facts(name: str, method: str) -> Traced:
    """:class:`Traced` of ``method`` of the algorithm registered as ``name``, built for its
    config's own environment (the metrics' shapes from ``jax.eval_shape``)."""
    spec = registry.by_name(name)
    env = default_of(next(f for f in dataclasses.fields(spec.config_type) if f.name == "env"))
    config = spec.config(env, **({"algo": method} if "algo" in spec.fields else {}))
    algo = spec.build(config)
    state = jax.eval_shape(algo.init, jax.random.key(0), algo.hyperparams)
    _, metrics = jax.eval_shape(algo.update, state, algo.hyperparams)
    names = metrics._fields if hasattr(metrics, "_fields") else tuple(metrics)
    return Traced(algo.episodes_per_update is not None, "ratio_min" in names)


def _summary(spec: AlgorithmSpec) -> str:
    """The first words of the algorithm module's docstring, up to its first ``:`` or ``.``."""
    doc = " ".join((sys.modules[spec.config_type.__module__].__doc__ or "").split())
    return re.split(r"[:.](?:\s|$)", doc, maxsplit=1)[0]


def _default_method(spec: AlgorithmSpec) -> str | None:
    """The method ``spec`` trains when none is asked for (``None`` if it is no default)."""
    if not spec.default:
        return None
    algo = next((f for f in dataclasses.fields(spec.config_type) if f.name == "algo"), None)
    return spec.methods[0] if algo is None else default_of(algo)


def algorithms_table(pages: Mapping[str, str], page: str) -> str:
    """One row per registered method: ``--algo``, the tasks it trains (and whether it is their
    default), the algorithm (its module's first words), what an update collects, where its
    settings are described (linked from ``page``), and whether its runs draw
    ``ppo_diagnostics``."""
    rows = ["| `--algo` | trains | algorithm | an update collects | settings | "
            "`ppo_diagnostics` |", "|---|---|---|---|---|---|"]
    for spec in registry.algorithms():
        module = spec.config_type.__module__.removeprefix("rollax.").replace(".", "/")
        where = described_at(spec, pages)
        settings = f"`{spec.config_type.__name__}`"
        if where is not None:
            settings = f"[{settings}]({'' if where[0] == page else where[0]}#{anchor(where[1])})"
        for method in spec.methods:
            trains = spec.trains.name + (" (default)" if method == _default_method(spec) else "")
            facts = traced_facts(spec.name, method)
            collects = ("whole episodes" if facts.whole_episodes
                        else "`T` steps of `B` auto-reset environments")
            drawn = "drawn" if facts.logs_ratios else "not drawn"
            rows.append(f"| `{method}` | {trains} | {_cell(_summary(spec))} (`{module}.py`) | "
                        f"{collects} | {settings} | {drawn} |")
    return "\n".join(rows)


# --- the generated blocks -----------------------------------------------------------------------

BLOCK = re.compile(r"(?P<open><!-- generated: (?P<key>[^>]+?) -->\n)(?P<body>.*?)"
                   r"(?P<close><!-- end generated -->)", re.S)


def block(key: str, pages: Mapping[str, str], page: str) -> str:
    """The markdown of block ``key`` on ``page`` (``pages``: every page's text, for links)."""
    kind, _, name = key.partition(" ")
    makers: dict[str, Callable[[], str]] = {
        "algorithms": lambda: algorithms_table(pages, page),
        "fields": lambda: fields_table(registry.by_name(name)),
    }
    if kind not in makers or (kind == "fields") != bool(name):
        raise ValueError(f"{page}: unknown generated block {key!r} (algorithms, or fields NAME "
                         "for a registered algorithm)")
    return makers[kind]()


def regenerate(pages: Mapping[str, str]) -> dict[str, str]:
    """Every page's text with each of its generated blocks rewritten."""

    def rewrite(page: str, match: re.Match) -> str:
        return f"{match['open']}{block(match['key'], pages, page)}\n{match['close']}"

    return {page: BLOCK.sub(functools.partial(rewrite, page), text)
            for page, text in pages.items()}


def stale(pages: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(page, key)`` of every block whose text is not what :func:`regenerate` writes."""
    fresh = regenerate(pages)
    return [(page, old["key"]) for page, text in pages.items()
            for old, new in zip(BLOCK.finditer(text), BLOCK.finditer(fresh[page]))
            if old["body"] != new["body"]]

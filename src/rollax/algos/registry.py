"""The table of algorithms: each :class:`~rollax.algos.base.AlgorithmSpec` registered once.

Every layer above the algorithms (experiments, training, CLI, plots, evaluation) finds an
algorithm here, by the name stored in a run folder, by the type of a config or by the task it
trains. Adding an algorithm is a module under ``rollax/algos/`` and one line in
:data:`BUILT_IN` below, with its test row and its section of the docs (docs/architecture.md,
"Adding an algorithm").
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

import jax

from rollax.algos import base
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.envs.base import Environment

BUILT_IN = ("rollax.algos.tabular", "rollax.algos.ppo", "rollax.algos.a2c",
            "rollax.algos.reinforce", "rollax.algos.grpo")
"""Modules whose ``SPEC`` is registered on first use."""

_TABLE: dict[str, AlgorithmSpec] = {}


@functools.cache
def _built_in() -> None:
    """Register the built-in algorithms (once, on first use: importing them imports JAX)."""
    for module in BUILT_IN:
        spec = importlib.import_module(module).SPEC
        _TABLE.setdefault(spec.name, spec)


def register_algorithm(spec: AlgorithmSpec) -> None:
    """Add ``spec`` to the table (a name registers once)."""
    _built_in()
    if spec.name in _TABLE and _TABLE[spec.name] is not spec:
        raise ValueError(f"algorithm {spec.name!r} is already registered")
    _TABLE[spec.name] = spec


def algorithms() -> tuple[AlgorithmSpec, ...]:
    """Every registered algorithm, built-in ones first."""
    _built_in()
    return tuple(_TABLE.values())


def by_name(name: str) -> AlgorithmSpec:
    """The algorithm stored as ``name`` in a run folder."""
    _built_in()
    if name not in _TABLE:
        raise ValueError(f"unknown algorithm {name!r} (registered: {', '.join(_TABLE)})")
    return _TABLE[name]


def for_config(config) -> AlgorithmSpec:
    """The algorithm whose config type ``config`` is."""
    for spec in algorithms():
        if isinstance(config, spec.config_type):
            return spec
    raise TypeError(f"no registered algorithm takes a {type(config).__name__}")


def offering(method: str) -> list[AlgorithmSpec]:
    """The algorithms that offer ``method`` (one of their :attr:`~AlgorithmSpec.methods`)."""
    return [s for s in algorithms() if method in s.methods]


def defaults_for(env: Environment) -> list[AlgorithmSpec]:
    """The default algorithms that accept ``env`` (one, where the defaults accept disjoint
    sets of environments as they must)."""
    return [s for s in algorithms() if s.default and s.trains.accepts(env)]


def build(config, checked: bool = False) -> Algorithm:
    """Validate ``config`` (before anything is compiled) and build its algorithm's parts."""
    return for_config(config).build(config, checked=checked)


def make_train(config) -> Callable:
    """Validate ``config`` and return its algorithm's compiled ``train(key, hp=None)``
    (:func:`rollax.algos.base.make_train`). ``train`` is a pure function of its key, so
    ``jax.vmap(train)(keys)`` trains many seeds in one program; ``hp`` takes the numeric
    hyperparameters as traced inputs (sweeps).

    Example::

        train = rollax.make_train(rollax.TabularConfig(algo="reinforce"))
        train(jax.random.key(0)).exact_return[-1]          # 0.9521624
    """
    return base.make_train(build(config))


def train(config, key: jax.Array | None = None):
    """Train once: ``make_train(config)(key)``, the key defaulting to ``key(config.seed)``."""
    return make_train(config)(jax.random.key(config.seed) if key is None else key)

"""The table of algorithms: each :class:`~rollax.algos.base.AlgorithmSpec` registered once.

Every layer above the algorithms (experiments, training, CLI, plots, evaluation) finds an
algorithm here, by the name stored in a run folder, by the type of a config or by the task it
trains. Adding an algorithm is a module under ``rollax/algos/`` and one line in
:data:`BUILT_IN` below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import jax

from rollax.algos import base
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.envs.base import Environment

BUILT_IN = ("rollax.algos.tabular", "rollax.algos.ppo", "rollax.algos.a2c",
            "rollax.algos.reinforce", "rollax.algos.grpo")
"""Modules whose ``SPEC`` is registered on first use."""

_ALGORITHMS: dict[str, AlgorithmSpec] = {}


def register_algorithm(spec: AlgorithmSpec) -> None:
    """Add ``spec`` to the table (a name registers once)."""
    if spec.name in _ALGORITHMS and _ALGORITHMS[spec.name] is not spec:
        raise ValueError(f"algorithm {spec.name!r} is already registered")
    _ALGORITHMS[spec.name] = spec


def algorithms() -> tuple[AlgorithmSpec, ...]:
    """Every registered algorithm, built-in ones first."""
    for module in BUILT_IN:
        register_algorithm(importlib.import_module(module).SPEC)
    return tuple(_ALGORITHMS.values())


def by_name(name: str) -> AlgorithmSpec:
    """The algorithm stored as ``name`` in a run folder."""
    for spec in algorithms():
        if spec.name == name:
            return spec
    raise ValueError(f"unknown algorithm {name!r} (registered: "
                     f"{', '.join(s.name for s in algorithms())})")


def for_config(config) -> AlgorithmSpec:
    """The algorithm whose config type ``config`` is."""
    for spec in algorithms():
        if isinstance(config, spec.config_type):
            return spec
    raise TypeError(f"no registered algorithm takes a {type(config).__name__}")


def for_env(env: Environment, method: str | None = None, name: str | None = None
            ) -> AlgorithmSpec:
    """The algorithm that trains ``env``, by one explicit rule: with ``method`` (``--algo``),
    the algorithm that offers it and accepts ``env``; without, the default algorithm that
    accepts ``env``. Default algorithms accept disjoint sets of environments, so the order
    of registration never matters (two that both accept ``env`` are an error)."""
    specs = algorithms()
    if method is not None:
        offering = [s for s in specs if method in s.methods]
        if not offering:
            methods = ", ".join(dict.fromkeys(m for s in specs for m in s.methods))
            raise ValueError(f"algo must be one of {methods}, got {method!r}")
        found = [s for s in offering if s.accepts(env)]
        if not found:
            trains = for_env(env, name=name)
            raise ValueError(
                f"algo {method} is only available for {' and '.join(s.task for s in offering)}"
                f" tasks; {name} trains with --algo {'/'.join(trains.methods)}")
        return found[0]
    found = [s for s in specs if s.default and s.accepts(env)]
    if len(found) > 1:
        raise ValueError(f"algorithms {', '.join(s.name for s in found)} are all defaults for "
                         f"{name}: choose one with --algo")
    if not found:
        needs = "; ".join(f"{s.name} needs {s.requirement}" for s in specs if s.default)
        raise ValueError(f"no registered algorithm trains {name} ({needs})")
    return found[0]


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

"""What an algorithm is made of, so that one experiment runner, one CLI and one report drive
them all without knowing any algorithm by name.

Two objects describe an algorithm:

- :class:`AlgorithmSpec`, its static facts (name, config type, which tasks it trains, its score
  and progress metrics, its report), registered once in :mod:`rollax.algos.registry`;
- :class:`Algorithm`, one built run: pure parts that split ``train(key)``::

      state = init(key, hp)
      state, metrics = update(state, hp)        # one update; scanned, or run in compiled chunks
      outputs = evaluate(state, hp)             # numbers to report (exact or evaluation return)

``hp`` is a NamedTuple of the numeric hyperparameters (learning rate, clip range, ...): they
are traced inputs, so a sweep ``vmap``s over them exactly like over seeds. Settings that fix
shapes or the program (batch size, steps, epochs, network sizes) stay in the static config.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax

from rollax.envs.base import Box, Environment
from rollax.evaluation import evaluate_policy
from rollax.policies import Policy

TRACED = "traced"
"""Field metadata key of a config field that is a traced hyperparameter."""


def traced(default: float) -> Any:
    """A numeric config field that is a hyperparameter: a traced input of the compiled
    program (so a sweep ``vmap``s over it), listed once, on the config."""
    return dataclasses.field(default=default, metadata={TRACED: True})


@functools.cache
def hyperparams_type(config_type: type) -> Any:
    """The NamedTuple of ``config_type``'s :func:`traced` fields, in field order, named after
    it (``PPOConfig`` -> ``PPOHyperparams``); one type per config type."""
    fields = [f.name for f in dataclasses.fields(config_type) if f.metadata.get(TRACED)]
    return collections.namedtuple(config_type.__name__.replace("Config", "Hyperparams"), fields)


def hyperparams_of(config) -> Any:
    """``config``'s hyperparameters (:func:`hyperparams_type`) at their configured values."""
    hp_type = hyperparams_type(type(config))
    return hp_type(**{name: getattr(config, name) for name in hp_type._fields})


class Algorithm(NamedTuple):
    """One built run: the parts of ``train(key)`` and what the layers above it ask."""

    config: Any
    """The resolved static config."""
    hyperparams: Any
    """Default numeric hyperparameters (a NamedTuple of Python floats)."""
    num_updates: int
    """Updates in a full run."""
    env_steps_per_update: int
    """Environment-step cells each update collects, ``(T, B)``: all of them live steps for
    fixed-length rollouts; the most that can run where an update collects whole episodes
    (``episodes_per_update``), whose finished episodes pad the rest. The steps a run took
    are counted live in the metrics: ``update``'s metrics carry ``env_steps``, the
    cumulative live environment steps of the lane, and every count, rate and step axis
    (progress, summary, loggers, figures) reads it."""
    init: Callable
    """``(key, hp) -> state``."""
    update: Callable
    """``(state, hp) -> (state, metrics)``."""
    evaluate: Callable
    """``(state, hp) -> dict`` of outputs (the spec's score among them)."""
    params: Callable
    """``state -> params`` (what is saved and hashed)."""
    env: Environment
    """The environment the run trains on."""
    policy: Policy
    """The acting policy (``sample``, ``log_prob``, ``greedy``)."""
    policy_params: Callable
    """``state -> params`` as ``policy`` takes them (e.g. with observation statistics)."""
    result: Callable
    """``(state, metrics, initial, final) -> result``: what ``make_train``'s ``train`` returns,
    from the final state, the stacked metrics and the outputs of ``evaluate`` before the first
    and after the last update."""
    env_batch: tuple[str, int]
    """The config field holding the environment batch of one lane and its size (split over
    devices by a sharded experiment)."""
    env_batch_fields: tuple[str, ...]
    """Fields of the (NamedTuple) state whose leaves carry that environment batch on their
    first axis: what a sharded experiment splits over the ``"envs"`` devices (everything else
    is replicated within a lane)."""
    episodes_per_update: int | None = None
    """Whole episodes each update collects (its budget), or ``None`` for fixed-length
    rollouts of ``env_steps_per_update`` live steps."""
    policy_extras: Callable | None = None
    """``(params) -> dict`` of extra numbers about a policy (``rollax eval``), or ``None``."""
    checked: bool = False
    """Whether ``update`` stages the runtime checks of :mod:`rollax.guards`."""


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """The static facts of an algorithm family (registered once, looked up by name, config
    type or task). They are facts, not text: the command line, summaries and figures derive
    their columns, labels and reports from the metric and field names declared here."""

    name: str
    """Stored in a run's config.json (``kind``) and named in messages."""
    task: str
    """The tasks it trains, as messages name them (e.g. 'tabular', 'neural')."""
    config_type: type
    """Its frozen config dataclass."""
    methods: tuple[str, ...]
    """The values ``--algo`` may take for its tasks (e.g. ('ppo', 'reinforce'))."""
    accepts: Callable[[Environment], bool]
    """Whether it can train this environment."""
    build: Callable[..., Algorithm]
    """``(config, checked=False, env=None) -> Algorithm``: the one validating constructor
    (``ValueError`` naming the setting and its range, before anything is compiled); the
    built ``Algorithm.config`` is resolved (dependent defaults filled in). ``env``: the
    environment already built from ``config.env`` and ``config.horizon``."""
    requirement: str
    """What ``accepts`` asks of an environment, as messages say it (e.g. 'a finite task')."""
    score: str
    """The output of ``evaluate`` that scores a finished lane (summaries, reports, sweeps)."""
    progress: str
    """The per-update metric that shows learning (progress bar, curves, lane facts). Known
    before the first update when ``evaluate`` outputs it too (row 0 of the metrics)."""
    shown: tuple[str, ...]
    """The per-update metrics ``rollax train`` tabulates, in order (names of the metrics
    ``update`` returns)."""
    headline: tuple[str, ...]
    """The config fields that name a run's shape in its headline (e.g. batch and step sizes)."""
    default: bool = True
    """Whether it trains the environments it accepts when ``--algo`` is not given. Default
    algorithms accept disjoint sets of environments (:func:`rollax.algos.registry.for_env`)."""
    presets: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Tuned settings per environment name: overrides of the config's defaults."""
    budget: str | None = None
    """The config field that sets a run's length (e.g. ``updates``): a stopped or finished run
    continues to a larger value of it (``rollax train --resume RUN --<budget> N``), and a
    checkpoint still loads when only it differs; ``None``: runs cannot be made longer."""
    stored_defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Values of config fields added after a config.json may have been written: what a run
    folder without them was trained with (so it resumes and evaluates as it was)."""
    from_zoo: Callable[[Mapping[str, Any]], tuple[dict[str, Any], list[str]]] | None = None
    """rl-baselines3-zoo's hyperparameters for this algorithm (one environment's entry of the
    zoo's file) as its config's settings, and what it has no equivalent of; ``None``: not
    offered."""

    @property
    def fields(self) -> tuple[str, ...]:
        """Its config's field names: each one a ``rollax train`` flag and a config-file key."""
        return tuple(f.name for f in dataclasses.fields(self.config_type))

    def method(self, config) -> str:
        """The method ``config`` trains: its ``algo`` field for an algorithm that offers
        several (``methods``), else the algorithm's name."""
        return getattr(config, "algo", self.name)

    def preset(self, env: str) -> Mapping[str, Any]:
        """The tuned settings for ``env`` (empty when it has none)."""
        return self.presets.get(env, {})

    def config(self, env: str, /, **settings):
        """The (unvalidated) config for ``env``: its defaults, then ``env``'s preset, then
        ``settings`` (field names of the config)."""
        return self.config_type(**{**self.preset(env), **settings, "env": env})

    def config_to_dict(self, config) -> dict:
        """A JSON-able dict of ``config`` (what config.json stores)."""
        return dataclasses.asdict(config)

    def config_from_dict(self, data: Mapping[str, Any]):
        """The config stored by :meth:`config_to_dict` (lists back to tuples)."""
        hints = typing.get_type_hints(self.config_type)
        fields = {}
        for name, value in {**self.stored_defaults, **data}.items():
            if isinstance(value, list) and _is_tuple_type(hints.get(name)):
                value = tuple(value)
            fields[name] = value
        return self.config_type(**fields)


def _is_tuple_type(hint) -> bool:
    if hint is tuple or typing.get_origin(hint) is tuple:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_tuple_type(arg) for arg in typing.get_args(hint))
    return False


# --- the neural algorithms ----------------------------------------------------------------------

def accepts_vectors(env: Environment) -> bool:
    """Whether the neural algorithms train ``env``: the actor-critics of :mod:`rollax.nets`
    read vector (rank-1 Box) observations, and a finite task trains with the tabular trainer
    instead."""
    space = env.observation_space
    return (isinstance(space, Box) and len(space.shape) == 1
            and not hasattr(env, "to_mdp"))


def neural_algorithm(config, env: Environment, policy: Policy, *, num_updates: int,
                     env_steps_per_update: int, init: Callable, update: Callable,
                     result: Callable, env_batch: tuple[str, int],
                     env_batch_fields: tuple[str, ...], checked: bool,
                     params: Callable = lambda state: state.params,
                     policy_params: Callable = lambda state: state.params,
                     episodes_per_update: int | None = None) -> Algorithm:
    """The :class:`Algorithm` of a neural policy, the one builder of every neural method.

    Its evaluation is the greedy return of ``config.eval_episodes`` absorbing episodes of
    ``config.eval_steps`` steps (:func:`rollax.evaluation.evaluate_policy`, the key split
    from ``state.key``), output as ``eval_return``; ``result(state, metrics, eval_return)``
    is what ``train`` returns; its hyperparameters are ``config``'s traced fields. The other
    arguments are :class:`Algorithm`'s fields (``params`` and ``policy_params`` default to
    ``state.params``)."""

    def evaluate(state, hp) -> dict:
        del hp
        eval_key, _ = jax.random.split(state.key)
        return {"eval_return": evaluate_policy(env, policy, policy_params(state), eval_key,
                                               config.eval_episodes,
                                               num_steps=config.eval_steps)}

    return Algorithm(
        config=config, hyperparams=hyperparams_of(config), num_updates=num_updates,
        env_steps_per_update=env_steps_per_update, init=init, update=update,
        evaluate=evaluate, params=params, env=env, policy=policy, policy_params=policy_params,
        result=lambda state, metrics, initial, final: result(state, metrics,
                                                             final["eval_return"]),
        env_batch=env_batch, env_batch_fields=env_batch_fields,
        episodes_per_update=episodes_per_update, checked=checked,
    )


def make_train(algo: Algorithm) -> Callable:
    """The compiled ``train(key, hp=None)`` of a built algorithm: ``init``, a ``lax.scan`` of
    ``num_updates`` updates, and ``result`` of the outputs before and after. A pure function of
    its key, so seeds ``vmap``; ``hp`` (the numeric hyperparameters) is traced, so sweeps do."""

    def train(key: jax.Array, hp=None):
        hp = algo.hyperparams if hp is None else hp
        state = algo.init(key, hp)
        initial = algo.evaluate(state, hp)
        state, metrics = jax.lax.scan(lambda s, _: algo.update(s, hp), state, None,
                                      algo.num_updates)
        return algo.result(state, metrics, initial, algo.evaluate(state, hp))

    return jax.jit(train)

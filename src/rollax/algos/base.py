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
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

import jax

from rollax.envs.base import Environment
from rollax.evaluation import scores
from rollax.nets.encoders import encodable_problem
from rollax.policies import Policy

TRACED = "traced"
"""Field metadata key of a config field that is a traced hyperparameter."""
RUN_LENGTH = "run_length"
"""Field metadata key of the config field that sets a run's length."""
ENV_BATCH = "env_batch"
"""Field metadata key of the config field that sizes one lane's environment batch."""
STORED = "stored"
"""Field metadata key: the value a stored config without the field was trained with."""

_C = TypeVar("_C", bound=type)


def traced(default: float) -> Any:
    """A numeric config field that is a hyperparameter: a traced input of the compiled
    program (so a sweep ``vmap``s over it), listed once, on the config."""
    return dataclasses.field(default=default, metadata={TRACED: True})


def run_length(default: int) -> Any:
    """The config field that sets a run's length (e.g. ``updates``): a stopped or finished run
    continues to a larger value of it, and a checkpoint still loads when only it differs.
    A config without one trains runs that cannot be made longer."""
    return dataclasses.field(default=default, metadata={RUN_LENGTH: True})


def env_batch(default: int) -> Any:
    """The config field that sizes one lane's environment batch (what a sharded experiment
    splits over devices, with the state fields of :attr:`Algorithm.env_batch_fields`)."""
    return dataclasses.field(default=default, metadata={ENV_BATCH: True})


def added(default: Any, *, stored: Any) -> Any:
    """A config field added after run folders were written: ``stored`` is what a stored
    config without it was trained with (so such a run resumes and evaluates as it was)."""
    return dataclasses.field(default=default, metadata={STORED: stored})


def new_defaults(**defaults: Any) -> Callable[[_C], _C]:
    """A config class that extends another one with other defaults for some of the fields it
    inherits: each named field keeps its type, place, docstring and markers (:func:`traced`,
    :func:`run_length`, ...), only its default is replaced. Apply it under
    ``@dataclasses.dataclass``, which then makes the fields the class's own::

        @dataclasses.dataclass(frozen=True)
        @new_defaults(num_steps=5, lr=7e-4)
        class A2CConfig(ActorCriticConfig):
            optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    """

    def apply(cls: _C) -> _C:
        inherited = {f.name: f for f in dataclasses.fields(cls)}
        if unknown := sorted(set(defaults) - set(inherited)):
            raise TypeError(f"{cls.__name__} inherits no field {', '.join(unknown)}")
        hints = typing.get_type_hints(cls)
        own = cls.__annotations__ = dict(inspect.get_annotations(cls))
        for name, default in defaults.items():
            own[name] = hints[name]
            setattr(cls, name, dataclasses.field(default=default,
                                                 metadata=inherited[name].metadata))
        return cls

    return apply


def field_with(config_type: type, key: str) -> str | None:
    """The name of ``config_type``'s field marked ``key`` (:data:`RUN_LENGTH`, :data:`ENV_BATCH`),
    or ``None``."""
    return next((f.name for f in dataclasses.fields(config_type) if f.metadata.get(key)),
                None)


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
    num_updates: int
    """Updates in a full run."""
    env_steps_per_update: int
    """Environment-step cells each update collects, ``(T, B)``: all of them live steps for
    fixed-length rollouts; the most that can run where an update collects whole episodes
    (``episodes_per_update``), whose finished episodes pad the rest. The steps a run took
    are counted live in the metrics: ``update``'s metrics carry ``env_steps``, the
    cumulative live environment steps of the lane, and every count, rate and step axis
    (progress, summary, loggers, figures) reads it."""
    episodes_per_update: int | None
    """Whole episodes each update collects (its budget), or ``None`` for fixed-length
    rollouts of ``env_steps_per_update`` live steps."""
    init: Callable
    """``(key, hp) -> state``."""
    update: Callable
    """``(state, hp) -> (state, metrics)``."""
    evaluate: Callable
    """``(state, hp) -> dict`` of outputs (the spec's score among them)."""
    result: Callable
    """``(state, metrics, initial, final) -> result``: what ``make_train``'s ``train`` returns,
    from the final state, the stacked metrics and the outputs of ``evaluate`` before the first
    and after the last update."""
    env: Environment
    """The environment the run trains on."""
    policy: Policy
    """The acting policy (``sample``, ``log_prob``, ``greedy``)."""
    params: Callable
    """``state -> params`` as ``policy`` takes them: what is saved, hashed and evaluated."""
    env_batch_fields: tuple[str, ...]
    """Fields of the (NamedTuple) state whose leaves carry the environment batch
    (:attr:`env_batch`) on their first axis: what a sharded experiment splits over the
    ``"envs"`` devices (everything else is replicated within a lane)."""
    policy_extras: Callable | None = None
    """``(params) -> dict`` of extra numbers about a policy (``rollax eval``), or ``None``."""

    @property
    def hyperparams(self) -> Any:
        """Default numeric hyperparameters: the config's :func:`traced` fields."""
        return hyperparams_of(self.config)

    @property
    def env_batch(self) -> tuple[str, int]:
        """The config field marked :func:`env_batch` and its size: one lane's environment
        batch (split over devices by a sharded experiment)."""
        name = field_with(type(self.config), ENV_BATCH)
        assert name is not None, f"{type(self.config).__name__} marks no env_batch field"
        return name, getattr(self.config, name)


class Task(NamedTuple):
    """The environments an algorithm trains, as a test and as messages name them."""

    name: str
    """e.g. 'tabular', 'neural'."""
    requirement: str
    """What ``accepts`` asks of an environment (e.g. 'a finite task')."""
    accepts: Callable[[Environment], bool]
    """Whether it can train this environment."""


class Report(NamedTuple):
    """What a run of an algorithm reports: names of the outputs of ``evaluate``, of the
    per-update metrics and of config fields."""

    score: str
    """The output of ``evaluate`` that scores a finished lane (summaries, reports, sweeps)."""
    progress: str
    """The per-update metric that shows learning (progress bar, curves, lane facts). Known
    before the first update when ``evaluate`` outputs it too (row 0 of the metrics)."""
    shown: tuple[str, ...]
    """The per-update metrics a report tabulates, in order."""
    headline: tuple[str, ...]
    """The config fields that name a run's shape in its headline (e.g. batch and step sizes)."""


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """The static facts of an algorithm family (registered once, looked up by name, config
    type or task). They are facts, not text: the command line, summaries and figures derive
    their columns, labels and reports from the metric and field names declared here. What
    its config already says is read from it (:attr:`fields`, :attr:`methods`,
    :attr:`length_field`), not declared twice."""

    name: str
    """Stored in a run's config.json (``kind``) and named in messages."""
    config_type: type
    """Its frozen config dataclass."""
    build: Callable[..., Algorithm]
    """``(config, checked=False, env=None) -> Algorithm``: the one validating constructor
    (``ValueError`` naming the setting and its range, before anything is compiled); the
    built ``Algorithm.config`` is resolved (dependent defaults filled in); ``checked``
    stages the runtime checks of :mod:`rollax.guards` into ``update``. ``env``: the
    environment already built from ``config.env`` and ``config.horizon``."""
    trains: Task
    """The environments it trains."""
    report: Report
    """What its runs report."""
    default: bool = True
    """Whether it trains the environments it accepts when no method is asked for. Default
    algorithms accept disjoint sets of environments (:func:`rollax.algos.registry.defaults_for`)."""
    presets: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Tuned settings per environment name: overrides of the config's defaults."""
    from_zoo: Callable[[Mapping[str, Any]], tuple[dict[str, Any], list[str]]] | None = None
    """rl-baselines3-zoo's hyperparameters for this algorithm (one environment's entry of the
    zoo's file) as its config's settings, and what it has no equivalent of; ``None``: not
    offered."""

    @property
    def fields(self) -> tuple[str, ...]:
        """Its config's field names: each one a setting of a run."""
        return tuple(f.name for f in dataclasses.fields(self.config_type))

    @property
    def methods(self) -> tuple[str, ...]:
        """The methods it offers: the values of its config's ``algo`` field (a ``Literal``)
        where it has one, else its name alone."""
        hint = typing.get_type_hints(self.config_type).get("algo")
        return typing.get_args(hint) if hint is not None else (self.name,)

    @property
    def length_field(self) -> str | None:
        """The config field marked :func:`run_length` (``None``: runs cannot be made longer)."""
        return field_with(self.config_type, RUN_LENGTH)

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


# --- the neural algorithms ----------------------------------------------------------------------

def encodable(env: Environment) -> bool:
    """Whether the actor-critics of :mod:`rollax.nets` read ``env``'s observations: a ``Box``
    (a vector, an image), a ``Discrete`` (one-hot), or a ``Dict`` / ``Tuple`` of those
    (:mod:`rollax.nets.encoders`)."""
    return encodable_problem(env.observation_space) is None


def accepts_vectors(env: Environment) -> bool:
    """Whether the neural algorithms train ``env`` by default: the networks read its
    observations (:func:`encodable`) and it is not a finite task, which trains with the tabular
    trainer (a neural method still trains one when built for it directly)."""
    return encodable(env) and not hasattr(env, "to_mdp")


NEURAL = Task("neural", "observations of Box, Discrete, or a Dict / Tuple of them",
              accepts_vectors)
"""What the neural algorithms train (:func:`accepts_vectors`)."""


def neural_algorithm(config, env: Environment, policy: Policy, *, num_updates: int,
                     env_steps_per_update: int, init: Callable, update: Callable,
                     greedy_result: Callable, env_batch_fields: tuple[str, ...],
                     params: Callable = lambda state: state.params,
                     episodes_per_update: int | None = None) -> Algorithm:
    """The :class:`Algorithm` of a neural policy, the one builder of every neural method.

    Its evaluation is the greedy return of ``config.eval_episodes`` absorbing episodes of
    ``config.eval_steps`` steps (:func:`rollax.evaluation.evaluate_policy`, the key split
    from ``state.key``), output as ``eval_return``; in a game of two players, the greedy
    policy against a random legal player, ``eval_episodes`` games from each seat
    (:func:`rollax.evaluation.game_scores`: ``eval_return`` and the rates of wins, draws and
    losses), and with ``config.eval_search_simulations`` against the search player too
    (:func:`rollax.evaluation.search_scores`); ``greedy_result(state, metrics, eval_return)``
    is what ``train`` returns (the :attr:`Algorithm.result` of four arguments built from it).
    The other arguments are :class:`Algorithm`'s fields
    (``params`` defaults to ``state.params``)."""

    def evaluate(state, hp) -> dict:
        del hp
        eval_key, _ = jax.random.split(state.key)
        return scores(env, policy, params(state), eval_key, config.eval_episodes,
                      num_steps=config.eval_steps,
                      search_simulations=getattr(config, "eval_search_simulations", 0))

    return Algorithm(
        config=config, num_updates=num_updates, env_steps_per_update=env_steps_per_update,
        episodes_per_update=episodes_per_update, init=init, update=update, evaluate=evaluate,
        result=lambda state, metrics, initial, final: greedy_result(
            state, metrics, final["eval_return"]),
        env=env, policy=policy, params=params, env_batch_fields=env_batch_fields)


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

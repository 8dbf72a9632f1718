"""One typed run configuration: what ``rollax train`` runs, built once from settings.

A :class:`RunConfig` holds the resolved algorithm config (a ``TabularConfig``, ``PPOConfig``,
...) and the experiment around it: seeds, sweep, chunking, checkpoint spacing, checked mode and
devices. :func:`from_settings` turns a flat mapping of settings into a ``RunConfig`` and its
built algorithm, checking everything before anything is compiled or written; the command line
(:mod:`rollax.cli.parse`) takes the same steps from its flags and config files:
:func:`make_and_choose`, :func:`configure` and :func:`assemble`. Training accepts only a
``RunConfig``; a run folder's config.json stores :meth:`RunConfig.to_json` and :func:`from_json`
reads it back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

from rollax.algos import registry
from rollax.algos.base import Algorithm, AlgorithmSpec
from rollax.contracts.preflight import check_before_run, check_host_before_run
from rollax.envs.base import space_tree
from rollax.envs.host import is_host
from rollax.envs.registry import factory_of, is_import_path, make_configured, takes_horizon
from rollax.keys import DEFAULT_KEY_IMPL, KEY_IMPLS
from rollax.run.experiment import Lanes, make_lanes, parse_sweep
from rollax.run.stored import config_from_dict, config_to_dict, older_fields
from rollax.validate import check_bool, check_count, check_seed, closest

RUN_SETTINGS = ("env", "algo", "seed", "seeds", "sweep", "chunk_size", "checkpoint_every",
                "checked", "devices", "eval_every", "eval_episodes", "video_every", "key_impl")
"""Settings of the experiment around the algorithm (its own are its config's fields; ``env``,
``seed``, ``algo`` and ``eval_episodes`` are also fields of some configs, which take them)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything that defines a run (built with keywords)."""

    config: Any
    """The resolved algorithm config (its type names the algorithm)."""
    seeds: int = 1
    """Lanes per hyperparameter combination; seed k uses ``key(config.seed + k)``."""
    sweep: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    """Swept numeric hyperparameters: every combination x seed is one lane."""
    paired: bool = False
    """The sweep's lists are read together, entry ``i`` of each being combination ``i``
    (``rollax tune``'s trials), instead of as every combination of their values."""
    chunk_size: int = 1
    """Updates per compiled chunk (never changes results)."""
    checkpoint_every: int = 1
    """Updates between checkpoints (at chunk ends)."""
    checked: bool = False
    """Run the runtime checks of :mod:`rollax.guards` (never changes results)."""
    devices: int | None = None
    """Devices the lanes and environment batch are split over (``None``: one device)."""
    eval_every: int | None = None
    """Greedy evaluation every this many updates, on keys of its own (``None``: none); never
    changes the training results."""
    eval_episodes: int = 32
    """Episodes per lane of each evaluation during training."""
    video_every: int | None = None
    """A GIF of one greedy episode of lane 0 every this many updates, in ``videos/``
    (:func:`rollax.run.video.training_video`; ``None``: none); never changes the training
    results."""
    key_impl: str = DEFAULT_KEY_IMPL
    """JAX's random-key implementation of the lanes' root keys, one of :data:`KEY_IMPLS`
    (``docs/contract.md`` §2: what each keeps reproducible)."""

    @property
    def spec(self) -> AlgorithmSpec:
        return registry.for_config(self.config)

    @property
    def seed(self) -> int:
        return self.config.seed

    def lanes(self) -> Lanes:
        return make_lanes(self.seed, self.seeds, dict(self.sweep), self.paired, self.key_impl)

    def build(self) -> Algorithm:
        """The algorithm; a user's environment is rebuilt and checked first
        (:func:`user_env`)."""
        name = self.config.env
        env = (user_env(name, self.config.horizon, self.config.env_options)
               if is_import_path(name) else None)
        return self.spec.build(self.config, checked=self.checked, env=env)

    def identity(self) -> dict:
        """What a checkpoint must match (chunking, checkpoint spacing, checked mode and the
        device count excluded: they never change results beyond float tolerance)."""
        return {"kind": self.spec.name, "config": config_to_dict(self.config),
                "seed": self.seed, "seeds": self.seeds,
                "sweep": {k: list(v) for k, v in self.sweep.items()},
                **({"paired": True} if self.paired else {}),
                **({"key_impl": self.key_impl} if self.key_impl != DEFAULT_KEY_IMPL else {}),
                "older": older_fields(self.config)}

    def to_json(self) -> dict:
        identity = {k: v for k, v in self.identity().items() if k != "older"}
        return {**identity, "chunk_size": self.chunk_size,
                "checkpoint_every": self.checkpoint_every, "checked": self.checked,
                "num_devices": self.devices, "eval_every": self.eval_every,
                "eval_episodes": self.eval_episodes, "video_every": self.video_every}


def from_json(stored: Mapping[str, Any], where: str = "config.json") -> RunConfig:
    """The :class:`RunConfig` of :meth:`RunConfig.to_json` (a run folder's config.json)."""
    try:
        spec = registry.by_name(stored["kind"])
        return RunConfig(config=config_from_dict(spec.config_type, stored["config"]),
                         seeds=stored["seeds"],
                         sweep={k: tuple(v) for k, v in stored["sweep"].items()},
                         paired=bool(stored.get("paired", False)),
                         chunk_size=stored["chunk_size"],
                         checkpoint_every=stored["checkpoint_every"],
                         checked=bool(stored.get("checked", False)),
                         devices=stored.get("num_devices"), eval_every=stored.get("eval_every"),
                         eval_episodes=stored.get("eval_episodes", 32),
                         video_every=stored.get("video_every"),
                         key_impl=stored.get("key_impl", DEFAULT_KEY_IMPL))
    except KeyError as err:
        raise ValueError(f"{where!r} lacks {err}: not a training run") from None
    except (TypeError, AttributeError) as err:
        raise ValueError(f"{where!r} is not a rollax run config: {err}") from None


def _check_run_settings(settings: Mapping[str, Any], env, name: str) -> None:
    """``ValueError`` for a run setting that is not valid: videos of an environment ``env``
    (named ``name``) that rollax cannot draw (:func:`check_drawable`), a count, the seeds,
    checked mode. The algorithm is not needed yet."""
    if settings.get("video_every") is not None:
        check_drawable(env, name)
    seeds = settings.get("seeds", 1)
    check_count("seeds", seeds)
    check_seed(settings.get("seed", 0), seeds)
    for name in ("chunk_size", "checkpoint_every", "eval_every", "eval_episodes", "video_every"):
        if settings.get(name) is not None:
            check_count(name, settings[name])
    check_bool("checked", settings.get("checked", False))
    impl = settings.get("key_impl", DEFAULT_KEY_IMPL)
    if impl not in KEY_IMPLS:
        raise ValueError(f"key_impl must be one of {', '.join(KEY_IMPLS)}, got {impl!r}")


def choose_algorithm(env, method: str | None = None, name: str | None = None
                     ) -> AlgorithmSpec:
    """The algorithm that trains ``env`` (named ``name`` in messages), by one explicit rule:
    with ``method`` (``--algo``), the algorithm that offers it and accepts ``env``; without,
    the default algorithm that accepts ``env``. Default algorithms accept disjoint sets of
    environments, so the order of registration never matters (two that both accept ``env``
    are an error). ``ValueError`` in one line otherwise."""
    if method is not None:
        offering = registry.offering(method)
        if not offering:
            methods = ", ".join(dict.fromkeys(m for s in registry.algorithms()
                                              for m in s.methods))
            raise ValueError(f"algo must be one of {methods}, got {method!r}")
        found = [s for s in offering if s.trains.accepts(env)]
        if not found:
            trains = choose_algorithm(env, name=name)
            tasks = " and ".join(s.trains.name for s in offering)
            raise ValueError(
                f"algo {method} is only available for {tasks}"
                f" tasks; {name} trains with --algo {'/'.join(trains.methods)}")
        return found[0]
    found = registry.defaults_for(env)
    if len(found) > 1:
        raise ValueError(f"algorithms {', '.join(s.name for s in found)} are all defaults for "
                         f"{name}: choose one with --algo")
    if not found:
        needs = "; ".join(f"{s.name} needs {s.trains.requirement}" for s in registry.algorithms()
                          if s.default)
        raise ValueError(f"no registered algorithm trains {name} ({needs})")
    return found[0]


def foreign_settings(spec: AlgorithmSpec, names) -> list[str]:
    """The ``names`` that are settings of other algorithms only (not of the run or ``spec``)."""
    known = set(RUN_SETTINGS) | set(spec.fields)
    others = {n for s in registry.algorithms() if s is not spec for n in s.fields}
    return [n for n in names if n not in known and n in others]


def refuse_foreign(spec: AlgorithmSpec, env: str, foreign: list[str]) -> None:
    """``ValueError`` naming settings given for ``env`` that only other algorithms take."""
    if foreign:
        raise ValueError(foreign_message(spec, env, foreign))


def foreign_message(spec: AlgorithmSpec, env: str, foreign: list[str], flags: bool = True
                    ) -> str:
    """Why ``foreign`` (settings only other algorithms take) are refused for ``env``, named as
    flags (``--batch-size``) or, with ``flags=False``, as config-file keys (``batch_size``);
    with the setting of ``spec`` that does the same work, where there is one."""
    def named(name: str) -> str:
        return "--" + name.replace("_", "-") if flags else name

    verb = "applies" if len(foreign) == 1 else "apply"
    chosen = "" if spec.default else f" --algo {spec.methods[0]}"
    message = (f"{', '.join(map(named, foreign))} only {verb} to {taken_by(spec, foreign)}; "
               f"{env} is {spec.trains.name} and trains with --algo {'/'.join(spec.methods)} "
               f"(`rollax "
               f"train --env {env}{chosen} --help` lists its settings)")
    if "batch_size" in foreign and "minibatches" in spec.fields:
        m = named("minibatches")
        given = f"{m} " if flags else f"{m} = "
        message += (f"; here {m} M sets the minibatch size to num_envs x num_steps / M "
                    f"(Stable-Baselines3's batch_size B is {given}num_envs x num_steps / B)")
    return message


def taken_by(spec: AlgorithmSpec, names) -> str:
    """Who else takes all of ``names``, as messages say it: the other tasks' algorithms by
    task, those of ``spec``'s task by method (``tabular tasks or --algo reinforce/grpo``)."""
    owners = [s for s in registry.algorithms() if s is not spec and set(names) <= set(s.fields)]
    task = spec.trains.name
    tasks = dict.fromkeys(f"{s.trains.name} tasks" for s in owners if s.trains.name != task)
    methods = [m for s in owners if s.trains.name == spec.trains.name for m in s.methods]
    return " or ".join([*tasks, *([f"--algo {'/'.join(methods)}"] if methods else [])]
                       ) or "other algorithms"


def settings_names() -> list[str]:
    """Every setting a run takes (run-level first, then each algorithm's config fields)."""
    names: list[str] = list(RUN_SETTINGS)
    for spec in registry.algorithms():
        names += [n for n in spec.fields if n not in names]
    return names


def user_env(name: str, horizon: int | None = None, env_options=()):
    """A user's environment ``package.module:factory`` (``horizon`` passed when the factory
    takes one: :func:`~rollax.envs.registry.make_from_path`; ``env_options`` as keyword
    arguments), checked before anything is compiled or written: one reset and one step traced
    against its declared spaces (:func:`~rollax.contracts.preflight.check_before_run`; a
    Gymnasium one's run: :func:`~rollax.contracts.preflight.check_host_before_run`).
    ``ValueError`` in one line."""
    env = make_configured(name, horizon, env_options)
    if is_host(env):  # a gymnasium.Env: its first reset and step against its spaces
        check_host_before_run(env, name)
    else:
        check_before_run(env, name)
    return env


def make_env(name: str, horizon: int | None = None, env_options=()):
    """The environment ``name`` (with ``horizon`` when given, and ``env_options``: a config's
    ``KEY=VALUE`` strings), built once per run. A user's environment is refused when
    ``horizon`` is given but its factory takes none, and checked by :func:`user_env`."""
    if not is_import_path(name):
        return make_configured(name, horizon, env_options)
    if horizon is not None and not takes_horizon(factory_of(name)):
        raise ValueError(f"environment {name!r}: {name.partition(':')[2]} takes no horizon "
                         f"parameter, so --horizon cannot be given (its environment's own "
                         f"horizon is used)")
    return user_env(name, horizon, env_options)


class Chosen(NamedTuple):
    """The environment a run trains and the algorithm that trains it."""

    env: Any
    spec: AlgorithmSpec


def make_and_choose(name: str, horizon: int | None = None, method: str | None = None
                    ) -> Chosen:
    """The environment ``name``, made once (:func:`make_env`, with ``horizon`` when given),
    and the algorithm that trains it: with ``method`` (``--algo``), the one that offers it,
    else the default one (:func:`choose_algorithm`)."""
    env = make_env(name, horizon)
    return Chosen(env, choose_algorithm(env, method, name))


def configure(spec: AlgorithmSpec, name: str, settings: Mapping[str, Any]):
    """``spec``'s config (not yet validated) for the environment ``name``: its defaults, then
    the environment's preset, then ``settings`` (flat; those not ``spec``'s are ignored, and a
    setting other than ``None`` that only other algorithms take is refused:
    :func:`refuse_foreign`)."""
    refuse_foreign(spec, name, foreign_settings(
        spec, [k for k, v in settings.items() if v is not None]))
    return spec.config(name, **{k: v for k, v in settings.items() if k in spec.fields})


def from_settings(settings: Mapping[str, Any], paired: bool = False
                  ) -> tuple[RunConfig, Algorithm]:
    """The :class:`RunConfig` and built algorithm for flat ``settings`` (names as
    :func:`settings_names`; absent ones take the environment's preset, then the config's
    defaults); ``paired``: the sweep's lists are read together (:attr:`RunConfig.paired`).
    Raises ``ValueError`` naming the setting before anything is compiled or written."""
    settings = {k: v for k, v in settings.items() if v is not None}
    unknown = [k for k in settings if k not in settings_names()]
    if unknown:
        close = closest(unknown[0], settings_names())
        hint = f"; did you mean {close}?" if close else ""
        raise ValueError(f"unknown setting {unknown[0]!r}{hint}")
    name = settings.setdefault("env", "corridor")
    env, spec = make_and_choose(name, settings.get("horizon"), settings.get("algo"))
    config = configure(spec, name, settings)
    if getattr(config, "env_options", ()):  # given, or the preset's: the environment they make
        env = make_env(name, config.horizon, config.env_options)
    return assemble(config, env, {**settings, "paired": paired}, given=set(settings))


def assemble(config, env, settings: Mapping[str, Any], given: set[str]
             ) -> tuple[RunConfig, Algorithm]:
    """The :class:`RunConfig` and built algorithm of an algorithm ``config`` (not yet
    validated) for ``env`` (built from ``config.env`` and ``config.horizon``) and the run's
    ``settings`` (:data:`RUN_SETTINGS`; absent ones take their defaults). ``given``: the
    settings the user gave (a swept one may not be among them). Everything is checked here,
    before anything is compiled or written."""
    settings = {**{k: v for k, v in settings.items() if v is not None}, "seed": config.seed}
    _check_run_settings(settings, env, config.env)
    spec = registry.for_config(config)
    checked = settings.get("checked", False)
    algo = spec.build(config, checked=checked, env=env)
    paired = bool(settings.get("paired", False))
    sweep = parse_sweep(settings.get("sweep", ()), algo.hyperparams, distinct=not paired)
    if paired and len({len(v) for v in sweep.values()}) > 1:
        raise ValueError("a paired sweep needs as many values of every name")
    _check_sweep(spec, algo.config, env, sweep, given)
    chunk = settings.get("chunk_size") or max(1, -(-algo.num_updates // 20))
    every = settings.get("checkpoint_every") or max(chunk, -(-algo.num_updates // 5))
    if (not hasattr(algo.config, "eval_episodes") and "eval_episodes" in given
            and settings.get("eval_every") is None):
        raise ValueError("eval_episodes counts the episodes of --eval-every evaluations, and "
                         "this task's score after training is exact: give --eval-every N too")
    episodes = getattr(algo.config, "eval_episodes", settings.get("eval_episodes", 32))
    run = RunConfig(config=algo.config, seeds=settings.get("seeds", 1),
                    sweep={k: tuple(v) for k, v in sweep.items()}, paired=paired,
                    chunk_size=min(chunk, algo.num_updates), checkpoint_every=every,
                    checked=checked, devices=settings.get("devices"),
                    eval_every=settings.get("eval_every"), eval_episodes=episodes,
                    video_every=settings.get("video_every"),
                    key_impl=settings.get("key_impl", DEFAULT_KEY_IMPL))
    check_run_devices(run, algo)
    check_memory(algo, len(run.lanes()), run.devices or 1)
    return run, algo


def check_drawable(env, name: str) -> None:
    """``ValueError`` naming ``video_every`` unless rollax can draw ``env``'s states
    (:func:`rollax.envs.frames.frame_renderer`)."""
    from rollax.envs.frames import DRAWN
    from rollax.run.video import drawable

    try:
        can = drawable(env, repr(name))
    except ValueError as err:  # a drawing whose package is missing
        raise ValueError(f"video_every: {err}") from None
    if not can:
        raise ValueError(f"video_every: rollax cannot draw {name!r} yet; it draws "
                         f"{', '.join(DRAWN)}")


def batch_bytes(algo: Algorithm) -> int:
    """A rough size of one update's batch on one lane: every environment-step cell of it
    (``env_steps_per_update``) holds the observation twice (before and after the step), a
    few scalars (action, reward, flags, log-probability, value, advantage: 64 bytes), and the
    activations the gradient keeps (4 bytes x 2 passes x 2 networks per hidden unit)."""
    import jax

    env = algo.env
    if is_host(env):  # no state to trace: the observations its space declares
        obs = space_tree(env.observation_space, lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype))
    else:
        obs = jax.eval_shape(lambda k: env.observation(env.reset(k)), jax.random.key(0))
    obs_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(obs))
    hidden = sum(getattr(algo.config, "hidden", ()) or ())
    return algo.env_steps_per_update * (2 * obs_bytes + 64 + 16 * hidden)


def available_bytes() -> int | None:
    """The memory a run may use: this process's first device's limit where JAX reports one (a
    GPU), else the host's available memory (Linux ``/proc/meminfo``); ``None`` when unknown."""
    import jax

    try:  # this process's own device: another host's cannot be asked
        stats = jax.local_devices()[0].memory_stats() or {}
    except Exception:  # a backend without memory statistics
        stats = {}
    if "bytes_limit" in stats:
        return int(stats["bytes_limit"])
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(algo: Algorithm, lanes: int, devices: int = 1,
                 available: int | None = None) -> None:
    """``ValueError`` (before anything is compiled or written) when the batches of ``lanes``
    lanes over ``devices`` devices (:func:`batch_bytes`) would not fit in ``available`` bytes
    (default :func:`available_bytes`), naming the settings that size them."""
    need = batch_bytes(algo) * -(-lanes // devices)
    have = available_bytes() if available is None else available
    if have is None or need <= have:
        return
    field, size = algo.env_batch
    steps = algo.env_steps_per_update // size
    length = "horizon" if algo.episodes_per_update is not None else "num_steps"
    raise ValueError(f"the run would need about {_gib(need)} for its batches ({size:,} x "
                     f"{steps:,} env-step cells per update, {lanes} lane{'s' * (lanes != 1)}"
                     f"), more memory than the machine has available: lower {field} or "
                     f"{length}")


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def _check_sweep(spec: AlgorithmSpec, config, env, sweep: Mapping[str, list[float]],
                 given: set[str]) -> None:
    for name, values in sweep.items():
        if name in given:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"sweep: {name!r} is also set on its own ({flag} "
                             f"{getattr(config, name)}); give its values in --sweep only")
        for value in values:  # each swept value must be a valid setting on its own
            if name in spec.fields:
                spec.build(dataclasses.replace(config, **{name: value}), env=env)


def check_run_devices(run: RunConfig, algo: Algorithm) -> None:
    """``ValueError`` (before anything is compiled or written) unless ``run.devices`` divides
    lanes x environment batch and that many devices are visible."""
    if run.devices is None:
        return
    from rollax import sharding

    if is_host(algo.env) and run.devices > 1:
        raise ValueError(f"devices is {run.devices} but {algo.env.name} is stepped on the host, "
                         f"from one device: leave --devices out")
    batch_name, batch = algo.env_batch
    sharding.check_devices(run.devices, len(run.lanes()), batch, batch_name)
    sharding.check_available(run.devices)

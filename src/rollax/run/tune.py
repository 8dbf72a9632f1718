"""Hyperparameter search whose trials are the lanes of one program (``rollax tune``).

Optuna (the ``tune`` extra) proposes trials through its ask/tell interface, ``parallel`` at a
time; each batch of trials is one run of ``parallel`` lanes (a *paired* sweep,
:attr:`rollax.run.config.RunConfig.paired`: lane ``i`` takes trial ``i``'s values), compiled
once, trained together, and each lane's final score told back to the study. A setting that
changes the program's shape (``num_envs``, ``num_steps``, ``epochs``, ``minibatches``, ...) may
be searched too, as a list of choices: the trials of a batch that drew the same values share
a program, so a batch is as many programs as it has distinct shapes (:func:`run_program`).

A study folder holds ``tune.json`` (the search's settings, read back by ``--resume``),
``study.db`` (Optuna's RDB storage on SQLite: each program's trials are told, with their run
folder as the user attribute ``run``, as soon as the program finishes), ``runs/program-NNN/``
(each program's run folder) and ``best.yaml`` (the best trial, as ``rollax train --config``
reads it). The folder is held by one tuner at a time (the ``.lock`` of
:meth:`rollax.run.folder.RunFolder.claim`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rollax.run.config import from_settings
from rollax.run.files import read_json, write_json
from rollax.run.folder import RunFolder

DEFAULT_SPACE: dict[str, Any] = {
    "lr": {"low": 1e-5, "high": 2e-3, "log": True},
    "ent_coef": {"low": 1e-8, "high": 0.1, "log": True},
    "clip_eps": [0.1, 0.2, 0.3, 0.4],
    "gamma": {"low": 0.97, "high": 0.9999},
    "gae_lambda": {"low": 0.9, "high": 0.9999},
    "max_grad_norm": {"low": 0.3, "high": 2.0},
}
"""The search space without ``--space``: rl-baselines3-zoo's PPO sampler (``rl_zoo3``'s
``hyperparams_opt.py``, ``sample_ppo_params``, read at DLR-RM/rl-baselines3-zoo 0a9df50)
restricted to the per-lane settings (its batch size, rollout length, epochs, network and
activation change the program's shape and are left out). The zoo draws ``1 - gamma`` in
[1e-4, 0.03] and ``1 - gae_lambda`` in [1e-4, 0.1] on a log scale; here ``gamma`` and
``gae_lambda`` are uniform over the same intervals."""

INSTALL = "pip install 'rollax[tune]'"
SAMPLERS = ("tpe", "random", "cmaes", "grid")
"""Optuna's samplers ``--sampler`` names: TPE, uniform random, CMA-ES (ranges only: a list of
choices is drawn by Optuna's independent random sampler beside it) and the grid (every
combination of the choices, each once: every entry a list)."""
STUDY = "rollax"
SETTINGS = "tune.json"


@dataclasses.dataclass(frozen=True)
class TuneSetup:
    """What a search is: its fixed run settings (flat, :func:`rollax.run.config.from_settings`
    names), its space, its length and the study's sampler."""

    fixed: Mapping[str, Any]
    space: Mapping[str, Any]
    trials: int
    parallel: int
    sampler: str = "tpe"
    metric: str | None = None
    seed: int = 0
    pruner: str | None = None
    """Optuna's pruner (:data:`rollax.run.pruning.PRUNERS`): lanes as slots, a trial stopped
    early where it scores poorly (:mod:`rollax.run.pruning`); ``None``: every trial runs whole."""
    prune_every: int | None = None
    """With a pruner, the updates between reports (a rung)."""

    def to_json(self) -> dict:
        return {"fixed": dict(self.fixed), "space": dict(self.space), "trials": self.trials,
                "parallel": self.parallel, "sampler": self.sampler, "metric": self.metric,
                "seed": self.seed, "pruner": self.pruner, "prune_every": self.prune_every}


def require_optuna():
    """The ``optuna`` module, or ``ValueError`` with the install command."""
    try:
        import optuna  # pyright: ignore[reportMissingImports]
    except ImportError:
        raise ValueError(f"rollax tune needs Optuna, which is not installed: {INSTALL}") from None
    return optuna


def read_space(path: str | None) -> dict[str, Any]:
    """The space of a YAML file (``name: {low, high, log}`` or ``name: [choices]``), or
    :data:`DEFAULT_SPACE` without one; its form is checked here, its names and values by
    :func:`check_space`."""
    if path is None:
        return dict(DEFAULT_SPACE)
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"space {path!r} cannot be read: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"space {path!r} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"space {path!r} must be a table of settings to search")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _values(name: str, entry: Any) -> list[float]:
    """The values of one space entry whose validity stands for the whole entry: a range's
    ends, or every choice."""
    if isinstance(entry, list) and entry:
        values = entry
    elif isinstance(entry, dict) and set(entry) <= {"low", "high", "log"} and {
            "low", "high"} <= set(entry):
        values = [entry["low"], entry["high"]]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise ValueError(f"space: {name}'s low and high must be numbers")
        if not values[0] < values[1]:
            raise ValueError(f"space: {name} needs low < high, got {values[0]} and {values[1]}")
        if entry.get("log") and values[0] <= 0:
            raise ValueError(f"space: {name} is searched on a log scale, so low must be > 0")
    else:
        raise ValueError(f"space: {name} must be {{low: L, high: H[, log: true]}} or a list "
                         f"of choices, got {entry!r}")
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"space: {name}'s values must be numbers, got {values!r}") from None


def shape_names(fixed: Mapping[str, Any], space: Mapping[str, Any]) -> list[str]:
    """The names of ``space`` that change the program's shape (not per-lane settings): a
    trial's value of each picks its program."""
    _, algo = from_settings(fixed)
    return [name for name in space if name not in algo.hyperparams._fields]


def check_space(fixed: Mapping[str, Any], space: Mapping[str, Any]) -> None:
    """``ValueError`` in one line for a space the run cannot search: a name that is no
    setting, one also fixed, a setting that changes the program's shape given as a range
    (it must be a list of choices: one program per choice), or values (a range's ends, each
    choice) that the algorithm's own checks refuse. Nothing is compiled or written."""
    run, algo = from_settings(fixed)
    searchable = algo.hyperparams._fields
    for name, entry in space.items():
        if name in fixed:
            raise ValueError(f"space: {name!r} is also fixed by a flag; give one or the other")
        if name not in searchable:
            if name not in run.spec.fields or name in ("env", "algo", "seed"):
                raise ValueError(f"space: {name!r} is not a setting of {run.spec.name.upper()}; "
                                 f"searchable per lane: {', '.join(searchable)}")
            if not isinstance(entry, list) or not entry or any(
                    isinstance(v, list | dict) for v in entry):
                raise ValueError(f"space: {name!r} changes the program's shape: give it as a "
                                 f"list of single values (each its own program), got {entry!r}")
            for value in entry:
                try:
                    from_settings({**fixed, name: value})
                except ValueError as err:
                    raise ValueError(f"space: {name}: {err.args[0]}") from None
            continue
        values = sorted(set(_values(name, entry)))
        if len(values) == 1:
            values = values * 2
        try:
            from_settings({**fixed, "sweep": (f"{name}={','.join(map(repr, values))}",)},
                          paired=True)
        except ValueError as err:
            raise ValueError(f"space: {name}: {err.args[0]}") from None


def distributions(space: Mapping[str, Any], shapes: Collection[str] = ()) -> dict[str, Any]:
    """Optuna's distribution of every entry of ``space``: the choices of a per-lane setting as
    floats, those of a setting in ``shapes`` (:func:`shape_names`) as written."""
    optuna = require_optuna()
    dists: dict[str, Any] = {}
    for name, entry in space.items():
        if isinstance(entry, list):
            dists[name] = optuna.distributions.CategoricalDistribution(
                list(entry) if name in shapes else [float(v) for v in entry])
        else:
            dists[name] = optuna.distributions.FloatDistribution(
                float(entry["low"]), float(entry["high"]), log=bool(entry.get("log", False)))
    return dists


def grid_size(space: Mapping[str, Any]) -> int:
    """The number of points of the grid over ``space``'s choices."""
    return math.prod(len(set(entry)) for entry in space.values())


def check_sampler(setup: TuneSetup) -> None:
    """``ValueError`` in one line for a sampler the search cannot use: an unknown name, the
    grid over a range or with more trials than points, CMA-ES without its package."""
    if setup.sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {setup.sampler!r}")
    if setup.sampler == "grid":
        ranges = [name for name, entry in setup.space.items() if not isinstance(entry, list)]
        if ranges:
            raise ValueError(f"--sampler grid needs a list of choices for every setting; "
                             f"{ranges[0]} is a range")
        if setup.trials > grid_size(setup.space):
            raise ValueError(f"--trials {setup.trials} is more than the grid's "
                             f"{grid_size(setup.space)} points")
    if setup.sampler == "cmaes":
        try:
            import cmaes  # noqa: F401  # pyright: ignore[reportMissingImports]
        except ImportError:
            raise ValueError(f"--sampler cmaes needs the cmaes package, which is not "
                             f"installed: {INSTALL}") from None


def make_sampler(setup: TuneSetup):
    """The Optuna sampler ``setup.sampler`` names, seeded with ``setup.seed``."""
    optuna = require_optuna()
    samplers = optuna.samplers
    if setup.sampler == "grid":

        class Grid(samplers.GridSampler):
            def after_trial(self, study, trial, state, values) -> None:
                """Nothing: Optuna's grid stops the study when its last point is told,
                which only ``study.optimize`` allows; :func:`search` stops at ``trials``
                (at most the grid's points, :func:`check_sampler`)."""

        return Grid({name: [float(v) for v in entry] for name, entry in setup.space.items()},
                    seed=setup.seed)
    if setup.sampler == "cmaes":
        return samplers.CmaEsSampler(seed=setup.seed, warn_independent_sampling=False)
    if setup.sampler == "random":
        return samplers.RandomSampler(seed=setup.seed)
    return samplers.TPESampler(seed=setup.seed)


def open_study(out: Path, setup: TuneSetup, pruner=None):
    """The study in ``out/study.db`` (made, or loaded when it exists), its sampler seeded;
    ``pruner``: Optuna's pruner of a search with one (:func:`rollax.run.pruning.make_pruner`)."""
    optuna = require_optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = make_sampler(setup)
    return optuna.create_study(storage=f"sqlite:///{out / 'study.db'}", study_name=STUDY,
                               direction="maximize", sampler=sampler, pruner=pruner,
                               load_if_exists=True)


def finished(study) -> list:
    """The trials whose program finished (told, with their run folder)."""
    return [t for t in study.get_trials(deepcopy=False) if "run" in t.user_attrs]


def fail_unfinished(study) -> list[int]:
    """Mark the trials asked but never told (their program was stopped) failed, with the
    user attribute ``interrupted``; their numbers. They do not count towards the trials."""
    optuna = require_optuna()
    stopped = [t.number for t in study.get_trials(deepcopy=False,
                                                  states=(optuna.trial.TrialState.RUNNING,))]
    for number in stopped:
        study._storage.set_trial_user_attr(study.trials[number]._trial_id, "interrupted", True)
        study.tell(number, state=optuna.trial.TrialState.FAIL)
    return stopped


@dataclasses.dataclass(frozen=True)
class ProgramDone:
    """One finished program: its run folder, its trials' numbers, values and scores."""

    index: int
    folder: Path
    numbers: list[int]
    params: list[dict[str, float]]
    scores: list[float | None]
    seconds: float


def run_program(study, setup: TuneSetup, out: Path, index: int) -> Iterator[ProgramDone]:
    """Ask for the next trials and train them, those that share the values of the settings
    that change the program's shape (:func:`shape_names`) as the lanes of one run in
    ``out/runs/program-NNN`` (numbered on from ``index``), and tell the study each lane's score
    (a lane without a finite score fails); each program yielded as it ends."""
    count = min(setup.parallel, setup.trials - len(finished(study)))
    shapes = shape_names(setup.fixed, setup.space)
    dists = distributions(setup.space, shapes)
    asked = [study.ask(dists) for _ in range(count)]
    groups: dict[tuple, list] = {}
    for trial in asked:
        groups.setdefault(tuple(trial.params[name] for name in shapes), []).append(trial)
    for k, (values, trials) in enumerate(groups.items()):
        yield train_trials(study, setup, out, index + k, dict(zip(shapes, values)), trials)


def train_trials(study, setup: TuneSetup, out: Path, index: int, shape: dict[str, Any],
                 trials: list) -> ProgramDone:
    """One program: ``trials`` (each with the values ``shape`` of the shape settings) as the
    lanes of a paired sweep over the per-lane settings; without any, the trials are the same
    training (one seed, one setting) and share one lane's score."""
    import time

    from rollax.run import training

    optuna = require_optuna()
    lane_names = [name for name in setup.space if name not in shape]
    sweep = paired_sweep([t.params for t in trials], lane_names)
    run, algo = from_settings({**setup.fixed, **shape, "sweep": sweep}, paired=True)
    start = time.perf_counter()
    folder = out / "runs" / f"program-{index:03d}"
    with training.begin(run, algo, str(folder)) as session:
        summary, _ = session.execute()
    metric = setup.metric or run.spec.report.score
    lanes = [_finite(lane.get(metric)) for lane in summary["lanes"]]
    scores = lanes if lane_names else lanes * len(trials)
    for trial, score in zip(trials, scores):
        trial.set_user_attr("run", str(folder))
        if score is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, score)
    return ProgramDone(index, folder, [t.number for t in trials],
                       [dict(t.params) for t in trials], scores, time.perf_counter() - start)


def paired_sweep(rows: Sequence[Mapping[str, Any]], names: list[str]) -> tuple[str, ...]:
    """The ``sweep`` entries (``name=v0,v1,...``) whose lane ``i`` takes ``rows[i]``'s values of
    ``names``: a paired sweep's lists, one per name."""
    return tuple(f"{name}={','.join(repr(float(row[name])) for row in rows)}" for name in names)


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def search(out: Path, setup: TuneSetup, on_program: Callable[[ProgramDone], None]):
    """Run programs until ``setup.trials`` trials finished, the figures drawn again after
    each; returns the study (a search with a pruner: :func:`rollax.run.pruning.search_pruned`)."""
    study = open_study(out, setup)
    runs = out / "runs"  # a stopped program's folder stays: the next takes a new name
    index = len(list(runs.iterdir())) if runs.is_dir() else 0
    while len(finished(study)) < setup.trials:
        for done in run_program(study, setup, out, index):
            on_program(done)
            index += 1
        draw_figures(study, setup, out)
    return study


def scored(study) -> list:
    """The trials with a score, in the order they were asked."""
    optuna = require_optuna()
    return sorted(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)),
                  key=lambda t: t.number)


def draw_figures(study, setup: TuneSetup, out: Path) -> list[Path]:
    """``out/figures/history`` (each trial's score by trial number, and the best so far) and
    ``out/figures/settings`` (a panel per searched setting: each trial's value against its
    score, on a log axis where the space is searched on one), PNG and SVG, each written whole
    (:func:`rollax.run.plots.save_figures`); none while no trial has a score."""
    from matplotlib.figure import Figure

    from rollax.run.plots import figure_files, save_figures

    done = scored(study)
    if not done:
        return []
    numbers = [t.number for t in done]
    values = [t.value for t in done]
    best = [max(values[:i + 1]) for i in range(len(values))]
    history = Figure(figsize=(6, 4), dpi=120)
    ax = history.add_subplot()
    ax.plot(numbers, values, "o", ms=4, label="trial")
    ax.step(numbers, best, where="post", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel(setup.metric or "score")
    ax.set_title(f"{setup.fixed['env']}: {len(done)} trials with a score")
    ax.legend(loc="lower right")
    names = list(setup.space)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    settings = Figure(figsize=(4 * cols, 3 * rows), dpi=120)
    for i, name in enumerate(names):
        ax = settings.add_subplot(rows, cols, i + 1)
        ax.plot([t.params[name] for t in done], values, "o", ms=4)
        entry = setup.space[name]
        if isinstance(entry, dict) and entry.get("log"):
            ax.set_xscale("log")
        ax.set_xlabel(name)
        ax.set_ylabel(setup.metric or "score")
    settings.tight_layout()
    folder = out / "figures"
    folder.mkdir(exist_ok=True)
    return save_figures({**figure_files(history, folder, "history"),
                         **figure_files(settings, folder, "settings")})


def best_settings(study, setup: TuneSetup) -> dict[str, Any] | None:
    """The settings of the best trial, as ``rollax train --config`` reads them; ``None``
    when no trial has a score."""
    optuna = require_optuna()
    if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        return None
    return {**setup.fixed, **study.best_trial.params}


def write_best(out: Path, settings: Mapping[str, Any]) -> Path:
    """``out/best.yaml``, written atomically."""
    import yaml

    from rollax.run.files import atomic_write_text

    path = out / "best.yaml"
    atomic_write_text(path, yaml.safe_dump(dict(settings), sort_keys=False))
    return path


def create(out: Path, settings: Mapping[str, Any], resumable: bool = True) -> RunFolder:
    """A new tune folder holding ``tune.json`` (``settings``: a search's
    :meth:`TuneSetup.to_json`, or a population's), held for this process."""
    from rollax.run.folder import check_creatable_folder

    check_creatable_folder(out)
    if out.exists() and any(out.iterdir()):
        hint = f", or --resume {out} to continue its search" if resumable else ""
        raise ValueError(f"out {str(out)!r} is not empty: choose a new folder{hint}")
    out.mkdir(parents=True, exist_ok=True)
    folder = RunFolder(out)
    folder.claim("tune: ")
    write_json(out / SETTINGS, dict(settings))
    return folder


def read_setup(out: Path) -> TuneSetup:
    """The settings of the study folder ``out`` (``ValueError`` in one line where it is none)."""
    if not (out / SETTINGS).is_file():
        raise ValueError(f"{str(out)!r} is not a rollax tune folder (no {SETTINGS})")
    stored = read_json(out / SETTINGS)
    if stored.get("pbt"):
        raise ValueError(f"{str(out)!r} holds a population (--pbt), not an Optuna study: its "
                         f"run is runs/pbt, its lineage pbt.jsonl")
    return TuneSetup(**stored)


def reopen(out: Path) -> tuple[RunFolder, TuneSetup]:
    """A study folder to continue: held for this process, its settings read back."""
    setup = read_setup(out)
    folder = RunFolder(out)
    folder.claim("tune: ")
    return folder, setup

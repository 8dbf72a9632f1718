"""``rollax tune``: a search's settings checked, its programs run (a line each), the best
trials shown and ``best.yaml`` written (the engine: :mod:`rollax.run.tune`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rollax.cli.flags import TuneCommand, parse_count
from rollax.cli.train import console, emit
from rollax.validate import check_count


def fixed_settings(cmd: TuneCommand) -> dict[str, Any]:
    """The run settings every trial shares (names of :func:`rollax.run.config.from_settings`)."""
    fixed: dict[str, Any] = {"env": cmd.env, "seed": cmd.seed}
    if cmd.algo is not None:
        fixed["algo"] = cmd.algo
    if cmd.budget is not None:
        fixed["total_steps"] = parse_count(cmd.budget)
    return fixed


def new_folder(cmd: TuneCommand) -> Path:
    """``--out``, or the first free ``tune/ENV-N``."""
    if cmd.out is not None:
        return Path(cmd.out)
    n = 0
    while (Path("tune") / f"{cmd.env.replace(':', '-')}-{n}").exists():
        n += 1
    return Path("tune") / f"{cmd.env.replace(':', '-')}-{n}"


def setup_of(cmd: TuneCommand):
    """The search ``cmd`` asks for, every setting and the space checked (nothing compiled or
    written)."""
    from rollax.run import tune

    check_count("trials", cmd.trials)
    check_count("parallel", cmd.parallel)
    fixed = fixed_settings(cmd)
    space = tune.read_space(cmd.space)
    tune.check_space(fixed, space)
    setup = tune.TuneSetup(fixed=fixed, space=space, trials=cmd.trials, parallel=cmd.parallel,
                           sampler=cmd.sampler, metric=cmd.metric, seed=cmd.seed,
                           pruner=cmd.pruner, prune_every=rung_length(cmd, fixed, space))
    tune.check_sampler(setup)
    return setup


def rung_length(cmd: TuneCommand, fixed: dict[str, Any], space: dict[str, Any]) -> int | None:
    """``--pruner``'s updates between reports (``--prune-every`` or its default), checked;
    ``None`` without a pruner."""
    from rollax.run import pruning, tune
    from rollax.run.config import from_settings

    if cmd.pruner is None:
        if cmd.prune_every is not None:
            raise ValueError("--prune-every is a setting of --pruner")
        return None
    shapes = tune.shape_names(fixed, space)
    if shapes:
        raise ValueError(f"space: {shapes[0]!r} changes the program's shape, and --pruner's "
                         f"slots share one program")
    run, algo = from_settings(fixed)
    if cmd.metric not in (None, run.spec.report.score):
        raise ValueError(f"--pruner scores a trial by its evaluation at the end "
                         f"({run.spec.report.score}); --metric {cmd.metric} is not one")
    n = algo.num_updates
    every = cmd.prune_every if cmd.prune_every is not None else pruning.default_every(n)
    if every is None:
        raise ValueError(f"--pruner needs rungs, and the run's {n} updates have no divisor "
                         f"from a tenth of them to the whole: give --prune-every")
    check_count("prune_every", every)
    pruning.check_every(every, n)
    return every


def open_search(cmd: TuneCommand):
    """``(folder, setup, held)``: a new study folder made, or ``--resume``'s read back."""
    from rollax.run import tune

    if cmd.resume is None:
        setup = setup_of(cmd)
        out = new_folder(cmd)
        return out, setup, tune.create(out, setup.to_json())
    if dataclasses.replace(cmd, json=False) != TuneCommand(resume=cmd.resume):
        raise ValueError("--resume takes the search's settings from its folder: give no "
                         "other flag but --json")
    held, setup = tune.reopen(Path(cmd.resume))
    return Path(cmd.resume), setup, held


class TrialBar:
    """On a terminal, a bar on stderr over the search's trials with the best score so far
    (nothing piped or with ``--json``, where the lines per program or trial say it)."""

    def __init__(self, enabled: bool, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        err = console(stderr=True)
        self.bar = Bar(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("best {task.fields[best]}"), TimeElapsedColumn(),
                       console=err, disable=not enabled or not err.is_terminal)
        self.total, self.task, self.best = total, None, None

    def start(self, done: int, scores: list) -> None:
        """Begin at ``done`` finished trials whose scores are ``scores``."""
        self._note(scores)
        self.task = self.bar.add_task("tune", total=self.total, completed=done,
                                      best=self._best())

    def ended(self, scores: list, line: str | None, show) -> None:
        """Trials ended with ``scores`` (``None``: no score): ``line`` printed, the bar on."""
        if line is not None:
            self.bar.console.print(line) if self.bar.live.is_started else show.print(line)
        self._note(scores)
        if self.task is not None:
            self.bar.update(self.task, advance=len(scores), best=self._best())

    def _note(self, scores: list) -> None:
        for score in scores:
            if score is not None and (self.best is None or score > self.best):
                self.best = score

    def _best(self) -> str:
        return "—" if self.best is None else f"{self.best:.4g}"

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)


def program_line(done) -> str:
    """``program 0 (2 trials, 9.1 s): #0 212.5, #1 failed; runs/program-000``."""
    scores = ", ".join(f"#{n} " + ("failed" if s is None else f"{s:.4g}")
                       for n, s in zip(done.numbers, done.scores))
    return (f"program {done.index} ({len(done.numbers)} trials, {done.seconds:.1f} s): "
            f"{scores}; {done.folder}")


def trial_line(done) -> str:
    """``trial 5 (slot 1): pruned after 24 updates, 87.5`` (a search with a pruner)."""
    score = "no score" if done.score is None else f"{done.score:.4g}"
    return (f"trial {done.number} (slot {done.slot}): {done.state} after {done.updates} "
            f"updates, {score}")


def shown(value) -> str:
    """A setting's value in a table: a float to 4 significant digits, others as they are."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def best_table(study, space, top: int = 5):
    """The ``top`` trials with a score, best first: number, score, settings, run folder."""
    from rich.table import Table

    from rollax.run.tune import require_optuna

    optuna = require_optuna()
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    table = Table("trial", "score", *space, "run", title=f"best {min(top, len(done))} trials")
    for t in sorted(done, key=lambda t: -t.value)[:top]:
        table.add_row(str(t.number), f"{t.value:.4g}", *[shown(t.params[n]) for n in space],
                      Path(t.user_attrs["run"]).name)
    return table


def run_tune(cmd: TuneCommand) -> int:
    """Run the search ``cmd`` asks for (or continue ``--resume``'s) to its last trial, or
    show ``--show``'s."""
    from rollax.run import tune

    if cmd.pbt or cmd.pbt_every is not None:
        return run_population(cmd)
    for folder in (cmd.show, cmd.resume):  # a population's folder is refused without Optuna
        if folder is not None:
            tune.read_setup(Path(folder))
    tune.require_optuna()
    if cmd.show is not None:
        return show_study(cmd, cmd.show)
    out, setup, held = open_search(cmd)
    show = console()
    bar = TrialBar(not cmd.json, setup.trials)
    try:
        study = tune.open_study(out, setup)
        stopped = tune.fail_unfinished(study)
        if stopped and not cmd.json:
            show.print(f"trials {', '.join(map(str, stopped))} were asked but their program "
                       f"was stopped: marked failed; new trials take their place")
        if not cmd.json:
            show.print(f"tuning {setup.fixed['env']}: {setup.trials} trials, "
                       f"{setup.parallel} per program; study folder: {out}")
        bar.start(len(tune.finished(study)), [t.value for t in tune.scored(study)])
        with bar:
            if setup.pruner is not None:
                from rollax.run.pruning import search_pruned

                study = search_pruned(out, setup, lambda d: bar.ended(
                    [d.score], None if cmd.json else trial_line(d), show))
            else:
                study = tune.search(out, setup, lambda d: bar.ended(
                    d.scores, None if cmd.json else program_line(d), show))
        best = tune.best_settings(study, setup)
        path = tune.write_best(out, best) if best is not None else None
    finally:
        held.release()
    return _report(cmd.json, study, setup, out, path)


def population_of(cmd: TuneCommand):
    """``(run, algo, population, starting values)`` of ``--pbt``, every setting checked
    (nothing compiled or written)."""
    from rollax.algos.base import NEURAL
    from rollax.run import pbt, tune
    from rollax.run.config import from_settings

    if not cmd.pbt:
        raise ValueError("--pbt-every is a setting of --pbt")
    if cmd.resume is not None or cmd.show is not None:
        raise ValueError("--pbt starts a population; --resume and --show are for Optuna's "
                         "searches")
    if cmd.pruner is not None or cmd.prune_every is not None:
        raise ValueError("--pruner stops an Optuna search's trials; --pbt replaces its lanes "
                         "its own way")
    if cmd.sampler != "tpe":
        raise ValueError("--pbt draws its starting settings uniformly from the space: "
                         "--sampler is for Optuna's searches")
    check_count("parallel", cmd.parallel)
    if cmd.parallel < 2:
        raise ValueError(f"--pbt needs a population of at least 2 (--parallel), got "
                         f"{cmd.parallel}")
    fixed = fixed_settings(cmd)
    base, algo = from_settings(fixed)
    if base.spec.trains is not NEURAL:
        raise ValueError(f"--pbt trains neural networks; {base.spec.name.upper()} on "
                         f"{fixed['env']} is not one")
    space = tune.read_space(cmd.space)
    tune.check_space(fixed, space)
    shapes = tune.shape_names(fixed, space)
    if shapes:
        raise ValueError(f"space: {shapes[0]!r} changes the program's shape, and a "
                         f"population's lanes share one program")
    every = cmd.pbt_every if cmd.pbt_every is not None else max(1, algo.num_updates // 10)
    check_count("pbt_every", every)
    if every >= algo.num_updates:
        raise ValueError(f"--pbt-every {every} leaves no exploit step in a run of "
                         f"{algo.num_updates} updates")
    values = pbt.starting_values(space, cmd.parallel, cmd.seed)
    sweep = tune.paired_sweep(values, list(space))
    run, algo = from_settings({**fixed, "sweep": sweep, "chunk_size": every}, paired=True)
    population = pbt.Population(space=space, every=every, metric=run.spec.report.progress,
                                seed=cmd.seed)
    return run, algo, population, values


def run_population(cmd: TuneCommand) -> int:
    """``--pbt``: one run of ``--parallel`` lanes, exploiting and exploring every
    ``--pbt-every`` updates (:mod:`rollax.run.pbt`), in a tune folder: ``tune.json``,
    ``runs/pbt`` (the run folder), ``pbt.jsonl``, ``best.yaml`` (the best lane's settings at the
    end) and ``figures/pbt``."""
    from rollax.run import pbt, training, tune

    run, algo, population, values = population_of(cmd)
    out = new_folder(cmd)
    held = tune.create(out, {"pbt": True, "fixed": fixed_settings(cmd),
                             "space": dict(population.space), "lanes": cmd.parallel,
                             "every": population.every, "fraction": population.fraction,
                             "metric": population.metric, "seed": cmd.seed,
                             "starting": values}, resumable=False)
    show = console()
    try:
        if not cmd.json:
            show.print(f"population-based training on {cmd.env}: {cmd.parallel} lanes, an "
                       f"exploit step every {population.every} of {algo.num_updates} updates; "
                       f"folder: {out}")
        start = list(values)
        with training.begin(run, algo, str(out / "runs" / "pbt")) as session:
            summary, _ = session.execute(between=pbt.exploit_hook(population, values,
                                                                  out / "pbt.jsonl"))
        metric = cmd.metric or run.spec.report.score
        scores = [tune._finite(lane.get(metric)) for lane in summary["lanes"]]
        lineage = pbt.read_lineage(out / "pbt.jsonl")
        figures = pbt.draw_lineage(lineage, start, population, out / "figures")
        ranked = [i for i in sorted(range(len(scores)), key=lambda i: -(scores[i] or -1e300))
                  if scores[i] is not None]
        path = None
        if ranked:
            path = tune.write_best(out, {**fixed_settings(cmd), **values[ranked[0]]})
    finally:
        held.release()
    copies = sum(row["from"] != row["lane"] for row in lineage)
    if cmd.json:
        emit({"best": None if not ranked else scores[ranked[0]],
              "best_lane": None if not ranked else ranked[0], "scores": scores,
              "settings": values, "copies": copies, "best_yaml": None if path is None
              else str(path), "lineage": str(out / "pbt.jsonl"),
              "figures": [str(p) for p in figures]})
        return 0 if ranked else 1
    if not ranked:
        show.print("no lane finished with a score")
        return 1
    from rich.table import Table

    table = Table("lane", metric, *population.space, title="the population at the end")
    for i in ranked:
        table.add_row(str(i), f"{scores[i]:.4g}", *[f"{values[i][n]:.4g}"
                                                   for n in population.space])
    show.print(table)
    show.print(f"{copies} copies in {len(lineage) // cmd.parallel} exploit steps; lineage: "
               f"{out / 'pbt.jsonl'}; best: lane {ranked[0]}, {scores[ranked[0]]:.6g}; "
               f"its settings at the end: {path}")
    return 0


def show_study(cmd: TuneCommand, folder: str) -> int:
    """``--show DIR``: the study as it stands (a search may still be running in it): its best
    trials printed and its figures drawn again; nothing trained, the folder not held."""
    from rollax.run import tune

    if dataclasses.replace(cmd, json=False) != TuneCommand(show=cmd.show):
        raise ValueError("--show reads the search from its folder: give no other flag but --json")
    out = Path(folder)
    setup = tune.read_setup(out)
    if not (out / "study.db").is_file():
        raise ValueError(f"{str(out)!r} holds no study yet (no study.db)")
    study = tune.open_study(out, setup)
    figures = tune.draw_figures(study, setup, out)
    done = len(tune.finished(study))
    best = tune.best_settings(study, setup)
    path = out / "best.yaml" if (out / "best.yaml").is_file() else None
    if cmd.json:
        emit({"best": None if best is None else study.best_trial.value,
              "best_trial": None if best is None else study.best_trial.number,
              "settings": best, "study": str(out / "study.db"),
              "best_yaml": None if path is None else str(path), "finished": done,
              "trials": setup.trials, "figures": [str(p) for p in figures]})
        return 0
    show = console()
    show.print(f"{setup.fixed['env']}: {done} of {setup.trials} trials finished; {out}")
    if best is None:
        show.print("no trial has a score yet")
        return 0
    show.print(best_table(study, setup.space))
    show.print(f"best: trial {study.best_trial.number}, {study.best_trial.value:.6g}; "
               + (f"rollax train --config {path}" if path is not None
                  else "best.yaml is written when the search ends"))
    show.print(f"figures: {', '.join(str(p) for p in figures if p.suffix == '.png')}")
    return 0


def _report(as_json: bool, study, setup, out: Path, path: Path | None) -> int:
    if as_json:
        emit({"best": None if path is None else study.best_trial.value,
              "best_trial": None if path is None else study.best_trial.number,
              "settings": tune_best(study, setup), "study": str(out / "study.db"),
              "best_yaml": None if path is None else str(path),
              "trials": len(study.trials)})
        return 0 if path is not None else 1
    show = console()
    if path is None:
        show.print("no trial finished with a score (every lane diverged or has no episode)")
        return 1
    show.print(best_table(study, setup.space))
    show.print(f"best: trial {study.best_trial.number}, {study.best_trial.value:.6g}; "
               f"rollax train --config {path}")
    return 0


def tune_best(study, setup) -> dict | None:
    from rollax.run.tune import best_settings

    return best_settings(study, setup)

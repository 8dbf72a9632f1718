"""A search that stops poor trials early (``rollax tune --pruner``): lanes as slots.

The ``parallel`` lanes of one compiled program are slots, each training one trial at a time.
The program runs in chunks of ``every`` updates (a rung); after each chunk, each slot's trial
reports its score of that chunk to Optuna (the mean of the algorithm's progress metric over the
chunk's updates, as :func:`rollax.run.pbt.interval_scores` takes it; a chunk in which the lane
ended no episode reports nothing) with its own update count as the step, and Optuna's pruner
decides:

- a trial that reached the run's ``num_updates`` is evaluated as a run's end is (the
  algorithm's greedy evaluation, ``eval_return``) and told that score (``COMPLETE``);
- a trial the pruner stops is told ``PRUNED`` (Optuna keeps its last reported score);
- either way the slot takes the next trial Optuna proposes: its lane's settings are replaced
  and its whole state (parameters, optimiser and its step count, observation statistics,
  environments, key) is the algorithm's ``init`` again, so the new trial trains exactly as if
  its lane had started the program (tested bit for bit), its learning-rate schedule included.

So the lanes never wait for one another and the compiled program is the same throughout (a
trial's settings are traced). Every trial trains with the run's seed, as in a search without a
pruner. ``pruning.jsonl`` keeps a line per report: the trial, its slot, the program's chunk,
the trial's update count, its score and what became of it (``report``, ``pruned``,
``complete``, ``failed``). A search stopped part-way is continued by ``rollax tune --resume``:
the trials it left running are marked failed and new ones take their places
(:func:`rollax.run.tune.fail_unfinished`).

Pruners (Optuna's): ``halving`` (asynchronous successive halving: at each rung, a trial goes on
only when its score is in the top third of the scores reported at that rung), ``hyperband``
(successive halving in brackets of different starting rungs) and ``median`` (stopped when below
the median of earlier trials at the same step).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.keys import is_key

PRUNERS = ("halving", "hyperband", "median")
REDUCTION = 3
"""Successive halving's reduction factor (Optuna's ``reduction_factor``): a third go on."""
LOG = "pruning.jsonl"


def default_every(num_updates: int) -> int | None:
    """The rung length without ``--prune-every``: the smallest divisor of ``num_updates`` of at
    least a tenth of it, or ``None`` where that is the whole run (no rung to stop at)."""
    for every in range(max(1, math.ceil(num_updates / 10)), num_updates):
        if num_updates % every == 0:
            return every
    return None


def check_every(every: int, num_updates: int) -> None:
    """``ValueError`` in one line unless ``every`` divides the run into at least two rungs."""
    if every >= num_updates or num_updates % every:
        raise ValueError(f"--prune-every must divide the run's {num_updates} updates into "
                         f"rungs (at least two), got {every}")


def make_pruner(name: str, every: int, num_updates: int):
    """Optuna's pruner ``name`` with rungs of ``every`` updates (steps count updates)."""
    from rollax.run.tune import require_optuna

    pruners = require_optuna().pruners
    if name == "halving":
        return pruners.SuccessiveHalvingPruner(min_resource=every, reduction_factor=REDUCTION)
    if name == "hyperband":
        return pruners.HyperbandPruner(min_resource=every, max_resource=num_updates,
                                       reduction_factor=REDUCTION)
    if name == "median":
        return pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0)
    raise ValueError(f"pruner must be one of {', '.join(PRUNERS)}, got {name!r}")


@dataclasses.dataclass
class Slot:
    """The trial a lane trains now and the updates it has had."""

    trial: Any
    """Optuna's ``Trial``."""
    updates: int = 0


@dataclasses.dataclass(frozen=True)
class TrialDone:
    """A trial told: its number, slot, updates, state (``complete``, ``pruned``, ``failed``)
    and score, and its settings."""

    number: int
    slot: int
    updates: int
    state: str
    score: float | None
    params: dict


def lanes_replaced(state, fresh, lanes: list[int]):
    """``state`` (leaves ``(lanes, ...)``) with the ``lanes`` listed taken from ``fresh``."""
    mask = np.zeros(jax.tree_util.tree_leaves(state)[0].shape[0], bool)
    mask[lanes] = True
    where = jnp.asarray(mask)

    def pick(old, new):
        if is_key(old):
            return jax.random.wrap_key_data(pick(jax.random.key_data(old),
                                                 jax.random.key_data(new)),
                                            impl=jax.random.key_impl(old))
        return jnp.where(where.reshape((-1,) + (1,) * (old.ndim - 1)), new, old)

    return jax.tree_util.tree_map(pick, state, fresh)


def search_pruned(out: Path, setup, on_trial: Callable[[TrialDone], None]):
    """The study in ``out`` (opened with ``setup``'s pruner) searched to its last trial
    (:func:`search`), its figures drawn; returns the study."""
    from rollax.run.config import from_settings
    from rollax.run.tune import draw_figures, open_study

    every = int(setup.prune_every)
    _, algo = from_settings(setup.fixed)
    study = open_study(out, setup, make_pruner(setup.pruner, every, algo.num_updates))
    search(study, setup, out, every, on_trial)
    draw_figures(study, setup, out)
    return study


def search(study, setup, out: Path, every: int, on_trial: Callable[[TrialDone], None]):
    """Train ``setup.trials`` trials (counting those already finished in ``study``) in
    ``min(parallel, trials left)`` slots, ``every`` updates a chunk, until each is complete,
    pruned or failed; returns the study."""
    from rollax.run.config import from_settings
    from rollax.run.experiment import Runner
    from rollax.run.pbt import interval_scores
    from rollax.run.tune import distributions, finished, paired_sweep

    left = setup.trials - len(finished(study))
    if left <= 0:
        return study
    dists = distributions(setup.space)
    names = list(setup.space)
    first = [study.ask(dists) for _ in range(min(setup.parallel, left))]
    slots: list[Slot | None] = [Slot(trial) for trial in first]
    asked = len(slots)
    sweep = paired_sweep([t.params for t in first], names)
    run, algo = from_settings({**setup.fixed, "sweep": sweep, "chunk_size": every},
                              paired=True)
    metric = setup.metric or run.spec.report.score
    runner = Runner(algo, run.lanes(), every)
    state = runner.initial_state()
    log = out / LOG
    chunk = 0
    while any(s is not None for s in slots):
        state, metrics = runner.run_chunk(state, every)
        chunk += 1
        scores = interval_scores(metrics, run.spec.report.progress)
        ending = [i for i, s in enumerate(slots) if s is not None
                  and s.updates + every >= algo.num_updates]
        final = ({k: np.asarray(v, np.float64) for k, v in
                  runner.to_host(runner.evaluate(state, runner.hp)).items()} if ending else {})
        freed = []
        rows = []
        for i, slot in enumerate(slots):
            if slot is None:
                continue
            slot.updates += every
            trial = slot.trial
            score = None if np.isnan(scores[i]) else float(scores[i])
            value = final.get(metric)
            value = (None if value is None or not np.isfinite(value[i]) else float(value[i]))
            kind, score = judge(study, trial, slot.updates, score, i in ending, value, log)
            rows.append({"trial": trial.number, "slot": i, "chunk": chunk, "update": slot.updates,
                         "score": score, "event": kind, **trial.params})
            if kind != "report":
                freed.append(i)
                on_trial(TrialDone(trial.number, i, slot.updates, kind, score,
                                   dict(trial.params)))
        with log.open("a") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        renewed = []
        for i in freed:
            if asked < left:
                slots[i] = Slot(study.ask(dists))
                asked += 1
                renewed.append(i)
            else:
                slots[i] = None
        if renewed:
            runner.hp = runner.layout.place(runner.hp._replace(**{
                name: jnp.asarray([float(s.trial.params[name]) if s is not None
                                   else float(getattr(runner.hp, name)[i])
                                   for i, s in enumerate(slots)], jnp.float32)
                for name in names}))
            state = lanes_replaced(state, runner.initial_state(), renewed)
    return study


def judge(study, trial, updates: int, score: float | None, ending: bool,
          value: float | None, log: Path) -> tuple[str, float | None]:
    """What becomes of ``trial`` after a rung, told to ``study``, and the score logged with it:
    at the run's end (``ending``) it is told its evaluation ``value`` (``complete``) or fails
    without one (``failed``); before, it reports ``score`` at ``updates`` and goes on
    (``report``) or is stopped by the pruner (``pruned``)."""
    from rollax.run.tune import require_optuna

    states = require_optuna().trial.TrialState
    if ending:
        trial.set_user_attr("run", str(log))
        if value is None:
            study.tell(trial, state=states.FAIL)
            return "failed", None
        study.tell(trial, value)
        return "complete", value
    if score is not None:
        trial.report(score, updates)
    if not trial.should_prune():
        return "report", score
    trial.set_user_attr("run", str(log))
    study.tell(trial, state=states.PRUNED)
    return "pruned", score

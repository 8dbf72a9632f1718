"""The report every algorithm gets from the names its spec declares (score, progress, shown
metrics, headline fields): the lane facts of summary.json, the readable parameters and the
headline, checked by hand on small inputs and on a spec that is neither built-in algorithm."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from rollax.algos.registry import algorithms
from rollax.cli.train import headline, lane_values, readable_params
from rollax.run.folder import metric_label
from rollax.run.training import lane_facts

NAN = float("nan")


def _spec(score: str, progress: str, **extra):
    return SimpleNamespace(report=SimpleNamespace(score=score, progress=progress), **extra)


def test_lane_facts_of_a_progress_known_from_the_start_that_is_the_score():
    facts = lane_facts(_spec("exact_return", "exact_return"), np.array([0.25, 0.5, 0.75]))
    assert facts == {"exact_return_initial": 0.25}


def test_lane_facts_of_a_noisy_progress_average_the_last_ten_finite_updates():
    history = np.array([NAN, *range(1, 13), NAN], np.float64)  # updates 1..12 finite, 13 not
    facts = lane_facts(_spec("eval_return", "episode_return"), history)
    assert facts == {"final_episode_return": np.mean(np.arange(3, 13))}  # 3..12


def test_lane_facts_when_no_episode_finished():
    facts = lane_facts(_spec("eval_return", "episode_return"), np.array([NAN, NAN, NAN]))
    assert facts == {"final_episode_return": None}


def test_readable_params_flatten_each_lane_leaf_by_leaf():
    params = {"a": np.arange(6.0).reshape(2, 3), "b": np.array([[10.0, 11.0], [12.0, 13.0]])}
    assert readable_params(params, 2) == [[0, 1, 2, 10, 11], [3, 4, 5, 12, 13]]
    big = {"w": np.zeros((1, 257))}
    assert readable_params(big, 1) is None
    assert readable_params({"w": np.zeros((1, 256))}, 1) == [[0.0] * 256]


def test_lane_values_put_the_facts_first_and_the_score_last():
    run = SimpleNamespace(sweep={"lr": (0.1, 0.2)}, spec=_spec("eval_return", "episode_return"))
    summary = {"lanes": [
        {"seed": 0, "lr": 0.1, "eval_return": 3.0, "params_sha256": "x",
         "final_episode_return": 1.0},
        {"seed": 0, "lr": 0.2, "eval_return": 4.0, "params_sha256": "y",
         "final_episode_return": None}]}
    assert list(lane_values(run, summary).items()) == [
        ("final_episode_return", [1.0, None]), ("eval_return", [3.0, 4.0])]


def test_metric_labels():
    assert metric_label("episode_return") == "episode return"
    assert metric_label("exact_return_initial") == "exact return before training"
    assert metric_label("final_episode_return") == "final episode return"


@pytest.mark.parametrize("spec", algorithms(), ids=lambda s: s.name)
def test_every_declared_name_exists(spec):
    """The report can only show what the algorithm has: each headline field is a config field
    and the progress metric is one of the shown ones."""
    assert set(spec.report.headline) <= set(spec.fields)
    assert spec.report.progress in spec.report.shown


def test_headline_from_the_declared_fields():
    @dataclasses.dataclass(frozen=True)
    class Config:
        env: str = "corridor"
        seed: int = 0
        width: int = 7
        rate: float = 0.25

    spec = SimpleNamespace(report=SimpleNamespace(headline=("width", "rate")),
                           method=lambda config: "toy")
    run = SimpleNamespace(config=Config(), spec=spec, lanes=lambda: [0, 1, 2])
    assert headline(run) == "toy on corridor: width=7, rate=0.25, 3 lanes"

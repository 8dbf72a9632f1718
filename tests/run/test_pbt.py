"""Population-based training in one program (``rollax tune --pbt``, :mod:`rollax.run.pbt`):
the exploit step by hand, the explore step's bounds, a lane's key never copied, and a real
population whose lineage is checked against its own logged scores and whose new settings reach
the compiled program."""

from __future__ import annotations

import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import run
from rollax.run import pbt

SPACE = {"lr": {"low": 1e-4, "high": 1e-2, "log": True}, "gamma": {"low": 0.9, "high": 0.99},
         "clip_eps": [0.1, 0.2, 0.3]}


def test_the_lowest_quarter_copies_from_the_highest_quarter():
    scores = np.array([5.0, np.nan, 9.0, 1.0, 7.0, 3.0, 8.0, 2.0])  # NaN ranks lowest
    values = [{"lr": 1e-3 * (i + 1), "gamma": 0.95, "clip_eps": 0.2} for i in range(8)]
    source, new = pbt.exploit_explore(scores, values, SPACE, 0.25, np.random.default_rng(0))
    # by hand: the two lowest are lanes 1 (NaN) and 3 (1.0); the two highest 6 (8.0), 2 (9.0)
    assert sorted(np.flatnonzero(source != np.arange(8))) == [1, 3]
    assert {int(source[1]), int(source[3])} <= {2, 6}
    for lane in (0, 2, 4, 5, 6, 7):
        assert new[lane] == values[lane]  # the others go on unchanged
    for lane in (1, 3):
        donor = values[int(source[lane])]
        assert new[lane]["lr"] in (pytest.approx(donor["lr"] * 0.8),
                                   pytest.approx(donor["lr"] * 1.2))
        assert new[lane]["gamma"] in (pytest.approx(0.95 - 0.009), pytest.approx(0.95 + 0.009))
        assert new[lane]["clip_eps"] in (0.1, 0.3)


def test_explore_stays_inside_the_space():
    rng = np.random.default_rng(1)
    edge = {"lr": 1e-2, "gamma": 0.9, "clip_eps": 0.3}
    for _ in range(50):
        out = pbt.perturbed(edge, SPACE, rng)
        assert 1e-4 <= out["lr"] <= 1e-2 and 0.9 <= out["gamma"] <= 0.99
        assert out["clip_eps"] in (0.2, 0.3)


def test_starting_values_are_drawn_from_the_space_and_reproducible():
    a = pbt.starting_values(SPACE, 16, seed=3)
    assert a == pbt.starting_values(SPACE, 16, seed=3) != pbt.starting_values(SPACE, 16, seed=4)
    logs = np.log10([v["lr"] for v in a])
    assert logs.min() >= -4 and logs.max() <= -2 and logs.max() - logs.min() > 0.5  # spread
    assert all(0.9 <= v["gamma"] <= 0.99 and v["clip_eps"] in (0.1, 0.2, 0.3) for v in a)


def test_interval_scores_are_the_mean_of_each_lanes_updates_with_an_episode():
    class Metrics(NamedTuple):
        episode_return: np.ndarray

    m = Metrics(np.array([[1.0, 3.0, np.nan], [np.nan, np.nan, np.nan], [2.0, 2.0, 5.0]]))
    scores = pbt.interval_scores(m, "episode_return")
    assert scores[0] == 2.0 and np.isnan(scores[1]) and scores[2] == 3.0


def test_a_copied_lane_keeps_its_own_key():
    class State(NamedTuple):
        params: jax.Array
        key: jax.Array

    keys = jax.vmap(jax.random.key)(jnp.arange(3))
    state = State(jnp.arange(6.0).reshape(3, 2), keys)
    copied = pbt.copy_lanes(state, np.array([0, 0, 2]))
    np.testing.assert_array_equal(copied.params, [[0, 1], [0, 1], [4, 5]])
    np.testing.assert_array_equal(jax.random.key_data(copied.key), jax.random.key_data(keys))


@pytest.mark.slow
def test_a_population_copies_by_its_logged_scores_and_its_settings_reach_the_program(
        capsys, tmp_path):
    out = tmp_path / "pbt"
    code, printed, err = run(capsys, "tune", "--pbt", "--env", "CartPole-v1", "--parallel", "4",
                             "--budget", "4096", "--pbt-every", "2", "--out", out, "--json")
    assert code == 0, err
    shown = json.loads(printed)
    lineage = pbt.read_lineage(out / "pbt.jsonl")
    steps = sorted({r["update"] for r in lineage})
    assert steps == [2, 4, 6]  # 8 updates of 4 envs x 128 steps, a step every 2, none at the end
    assert len(lineage) == 4 * len(steps)
    for update in steps:
        rows = [r for r in lineage if r["update"] == update]
        scores = np.array([np.nan if r["score"] is None else r["score"] for r in rows])
        ranked = np.argsort(np.where(np.isnan(scores), -np.inf, scores), kind="stable")
        moved = [r["lane"] for r in rows if r["from"] != r["lane"]]
        assert moved == [int(ranked[0])]  # 4 lanes: one replaced, by one of the best
        assert rows[moved[0]]["from"] == int(ranked[-1])
    assert shown["copies"] == len(steps)
    # the settings each lane goes on with are the program's: PPO's logged learning rate is
    # lr times the same annealing factor in every lane at an update (rows in lane order)
    rows = [json.loads(line) for line in (out / "runs" / "pbt" / "metrics.jsonl").read_text()
            .splitlines()]
    for update in steps:
        lr = {r["lane"]: r["lr"] for r in lineage if r["update"] == update}
        logged = dict(enumerate(r["learning_rate"] for r in rows if r["update"] == update + 1))
        ratios = [logged[lane] / lr[lane] for lane in lr]
        assert max(ratios) == pytest.approx(min(ratios), rel=1e-5)
    best = json.loads(json.dumps(shown["settings"][shown["best_lane"]]))
    assert (out / "best.yaml").read_text().count("lr:") == 1 and best["lr"] > 0
    assert (out / "figures" / "pbt.png").stat().st_size > 5000
    for flag in ("--resume", "--show"):  # Optuna's: refused in one line, the folder untouched
        before = sorted(p.name for p in out.rglob("*"))
        code, printed, err = run(capsys, "tune", flag, out)
        assert code == 2 and "holds a population (--pbt), not an Optuna study" in err, err
        assert sorted(p.name for p in out.rglob("*")) == before


@pytest.mark.parametrize("argv, message", [
    (["--pbt", "--parallel", "1"], "--pbt needs a population of at least 2 (--parallel), got 1"),
    (["--pbt-every", "2"], "--pbt-every is a setting of --pbt"),
    (["--pbt", "--pbt-every", "8"], "--pbt-every 8 leaves no exploit step in a run of 8 updates"),
    (["--pbt", "--env", "corridor"], "--pbt trains neural networks"),
    (["--pbt", "--sampler", "random"], "--sampler is for Optuna's searches"),
])
def test_a_population_it_cannot_run_is_refused(capsys, tmp_path, argv, message):
    budget = [] if "corridor" in argv else ["--budget", "4096"]
    code, printed, err = run(capsys, "tune", *argv, *budget, "--out", tmp_path / "p")
    assert code == 2 and printed == "" and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "p").exists()

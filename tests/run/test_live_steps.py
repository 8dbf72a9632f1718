"""Every step count of a run is live environment steps (issue: the whole-episode methods
counted their padded cells): summary.json, ``--json``, the trackers' step, the figures' axis
and the header, against the live steps rebuilt from each update's mean episode length."""

import json
from typing import ClassVar

import numpy as np
import pytest

from rollax.cli import main
from rollax.run import loggers
from rollax.run.plots import RunCurves


class Recorder:
    """A tracker that keeps the steps it is given."""

    seen: ClassVar[list] = []

    def __init__(self, folder, run):
        pass

    def write(self, lane, label, step, values):
        Recorder.seen.append((lane, step))

    def close(self, failed):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["reinforce", "grpo"])
def test_whole_episode_runs_count_live_steps(algo, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(loggers.PACKAGES, "rec", "json")
    monkeypatch.setitem(loggers.SINKS, "rec", Recorder)
    monkeypatch.setattr(Recorder, "seen", [])
    out_dir, batch, horizon, updates = tmp_path / "run", 8, 60, 3
    code = main(["train", "--env", "CartPole-v1", "--algo", algo, "--updates", str(updates),
                 "--batch-size", str(batch), "--group-size", "4", "--horizon", str(horizon),
                 "--hidden", "8", "--log", "rec", "--chunk-size", "2", "--out", str(out_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if r["update"] > 0]
    # independent: each update's live steps are its batch's mean episode length x episodes
    live = np.cumsum([round(r["episode_length"] * batch) for r in trained])
    assert [r["env_steps"] for r in trained] == live.tolist()
    assert live[-1] < updates * batch * horizon  # CartPole's random episodes end early
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["env_steps_per_lane"] == summary["lanes"][0]["env_steps"] == live[-1]
    steps = [step for _, step in Recorder.seen]
    assert steps[0] == 0 and max(steps) == live[-1]
    assert sorted(set(steps)) == [0, *live.tolist()]
    curves = RunCurves(out_dir)
    np.testing.assert_array_equal(curves.x("env_steps"), [0, *live.tolist()][curves.start:])
    assert (f"{updates} updates x {batch} episodes of at most {horizon} steps = "
            f"{updates * batch} episodes per lane; run folder") in out
    assert f"update {updates}/{updates}  {live[-1]:,} env steps" in out


@pytest.mark.slow
def test_json_env_steps_is_the_live_count(capsys, tmp_path):
    out_dir = tmp_path / "run"
    code = main(["train", "--env", "CartPole-v1", "--algo", "reinforce", "--updates", "2",
                 "--batch-size", "4", "--horizon", "40", "--hidden", "8", "--json",
                 "--out", str(out_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert json.loads(out.splitlines()[-1])["env_steps"] == rows[-1]["env_steps"]
    assert rows[-1]["env_steps"] == sum(round(r["episode_length"] * 4) for r in rows[1:])

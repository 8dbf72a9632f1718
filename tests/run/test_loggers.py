"""``rollax train --log``: names checked before anything is compiled or written, tracker tags,
and the listener's rows and steps (with a recording tracker: runs without the extras)."""

import importlib.util
import json
from typing import ClassVar

import pytest

from helpers import run
from rollax.cli.parse import parse_train
from rollax.run import loggers


def no_compiling(monkeypatch):
    def refuse(settings):
        raise AssertionError("from_settings reached")

    monkeypatch.setattr("rollax.run.config.from_settings", refuse)


@pytest.mark.skipif(importlib.util.find_spec("tensorboardX") is not None,
                    reason="tensorboardX is installed")
def test_absent_extra_is_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch):
    no_compiling(monkeypatch)
    out_dir = tmp_path / "run"
    code, out, err = run(capsys, "train", "--log", "tensorboard", "--out", str(out_dir))
    assert code == 2 and out == ""
    assert err == ('rollax train: error: log tensorboard needs tensorboardX: '
                   'pip install "rollax[tensorboard]"\n')
    assert not out_dir.exists()


@pytest.mark.parametrize("log", [["--log", "tensorbord"], ["--log", "tensorboard,mlflow"],
                                 ["--log", "wandb", "--log", "csv"]])
def test_unknown_logger_refused(capsys, tmp_path, monkeypatch, log):
    no_compiling(monkeypatch)
    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda name: object())
    code, _, err = run(capsys, "train", *log, "--out", str(tmp_path / "run"))
    assert code == 2 and len(err.splitlines()) == 1
    assert "unknown logger" in err and "choose from tensorboard, wandb" in err
    assert not (tmp_path / "run").exists()


def test_names_tags_and_lanes():
    assert loggers.parse_names(["tensorboard,wandb", "wandb", " tensorboard "]) == [
        "tensorboard", "wandb"]
    assert loggers.tag("episode_return") == "charts/episodic_return"
    assert loggers.tag("clip_fraction") == "losses/clipfrac"
    assert loggers.tag("env_steps_per_second") == "charts/SPS"
    assert loggers.tag("exact_return") == "rollax/exact_return"
    assert loggers.lane_tag({"seed": 0, "lr": 0.001}, ("seed", "lr")) == "seed0-lr0.001"
    assert loggers.lane_tag({"seed": 3}, ("seed",)) == "seed3"
    assert loggers.scalars({"seed": 0, "update": 2, "loss": 1.5, "entropy": None,
                            "episode_return": float("nan")}, ("seed",)) == {"rollax/loss": 1.5}


def test_log_is_run_level_and_allowed_with_resume(tmp_path):
    request = parse_train(["train", "--log", "tensorboard,wandb", "--updates", "2"])
    assert request.cmd.log == ("tensorboard,wandb",) and "log" not in request.settings
    request = parse_train(["train", "--resume", str(tmp_path), "--log", "wandb"])
    assert request.config is None and request.cmd.log == ("wandb",)
    config = tmp_path / "c.toml"
    config.write_text('log = "wandb"\n')
    with pytest.raises(ValueError, match="unknown key 'log'"):
        parse_train(["train", "--config", str(config)])


class Recorder:
    """A tracker that keeps what it is given."""

    seen: ClassVar[list] = []

    def __init__(self, folder, run):
        self.path = folder.path

    def write(self, lane, label, step, values):
        assert self.path.is_dir()  # opened once the run folder exists
        Recorder.seen.append((lane, step, dict(values)))

    def close(self, failed):
        Recorder.seen.append(("closed", failed))


@pytest.mark.slow
def test_listener_logs_every_row_at_env_steps(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(loggers.PACKAGES, "rec", "json")
    monkeypatch.setitem(loggers.SINKS, "rec", Recorder)
    monkeypatch.setattr(Recorder, "seen", [])
    out_dir = tmp_path / "run"
    code, _, err = run(capsys, "train", "--json", "--log", "rec", "--updates", "3",
                       "--batch-size", "16", "--seeds", "2", "--chunk-size", "2",
                       "--out", str(out_dir))
    assert code == 0, err
    assert Recorder.seen[-1] == ("closed", False)
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    # the step: the lane's live env steps, rebuilt from each update's mean episode length
    live = {0: 0, 1: 0}
    expected = []
    for r in rows:
        live[r["seed"]] += round(r.get("episode_length", 0) * 16)
        expected.append((f"seed{r['seed']}", live[r["seed"]], loggers.scalars(r, ("seed",))))
    assert Recorder.seen[:-1] == expected
    assert "log" not in json.loads((out_dir / "config.json").read_text())

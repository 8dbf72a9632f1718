"""What a run's times count: compilation and drawing videos are never training time. Checked
by bookkeeping (JAX's own compile events, seconds a planted video is known to take at least),
never by how fast something runs: throughput is measured in benchmarks/."""

from __future__ import annotations

import importlib.util
import time

import jax
import pytest

from rollax.run import training
from rollax.run.config import from_settings

_compiles: list[str] = []
"""The programs JAX compiled (or loaded from the compile cache) while :data:`_watching`."""

_watching: list[bool] = []


def _heard(event: str, seconds: float, fun_name: str | None = None, **_) -> None:
    if _watching and event == "/jax/core/compile/backend_compile_duration":
        _compiles.append(str(fun_name))


jax.monitoring.register_event_duration_secs_listener(_heard)


def _loop_compiles(monkeypatch) -> list[str]:
    """The programs compiled while the run's loop over chunks (what ``run_time_s`` times)
    runs: its loop is watched from its first to its last line."""
    compiled: list[str] = []
    loop = training.run_loop

    def watched(*args, **kwargs):
        _compiles.clear()
        _watching.append(True)
        try:
            return loop(*args, **kwargs)
        finally:
            _watching.clear()
            compiled.extend(_compiles)

    monkeypatch.setattr(training, "run_loop", watched)
    return compiled


SMALL = {"num_envs": 2, "num_steps": 8, "hidden": (8,), "minibatches": 1, "epochs": 1,
         "chunk_size": 2, "eval_episodes": 2}
"""5 updates in chunks of 2, 2 and a shorter last one of 1."""


@pytest.mark.parametrize("settings", [
    # a host environment: its programs hold host callbacks, which JAX never caches on disk
    {"env": "gymnasium:CartPole-v1", "eval_every": 2},
    # checked mode's chunks run exactly their updates, as a host environment's do
    {"env": "CartPole-v1", "checked": True},
    # a JAX environment: one program for every chunk length; the evaluations of --eval-every
    {"env": "CartPole-v1", "eval_every": 2},
], ids=["host", "checked", "jax"])
def test_nothing_compiles_while_the_run_is_timed(tmp_path, monkeypatch, settings):
    """The last, shorter chunk and the evaluations during training are compiled before the
    clock starts (a host environment's programs cannot come from the compile cache: JAX does
    not store programs with host callbacks), so ``run_time_s`` and every throughput count
    training alone."""
    config, algo = from_settings({**SMALL, **settings, "total_steps": 5 * 16})
    assert algo.num_updates == 5  # the premise: a remainder chunk
    compiled = _loop_compiles(monkeypatch)
    folder = training.create_run(config, str(tmp_path / "run"))
    summary, _ = training.execute(config, algo, folder)
    assert summary["env_steps_per_lane"] == 80
    assert compiled == []
    rows = folder.read_metrics()
    if "eval_every" in settings:  # the evaluations ran (updates 2, 4 and the last)
        assert [r["update"] for r in rows if "greedy_return" in r] == [2, 4, 5]


@pytest.mark.slow  # 3 videos of an environment's episodes: ~10 s
@pytest.mark.parametrize("settings", [
    {"env": "corridor", "updates": 5, "batch_size": 16, "chunk_size": 2},  # drawn by rollax
    pytest.param({**SMALL, "env": "gymnasium:CartPole-v1", "horizon": 20, "total_steps": 80},
                 marks=pytest.mark.skipif(importlib.util.find_spec("pygame") is None,
                                          reason="Gymnasium draws its CartPole with pygame: "
                                                 "pip install 'rollax[render]'")),
], ids=["corridor", "gymnasium-cartpole"])
def test_drawing_videos_is_timed_apart_from_training(tmp_path, monkeypatch, settings):
    """A JAX environment's videos and a host environment's alike: each video takes at least
    ``PAUSE`` seconds more (a planted slow drawing): the run reports those seconds as
    ``video_time_s``, not in ``run_time_s`` nor in the throughput (the lane's steps /
    ``run_time_s``), and the loop and the videos together fit in the run's wall time."""
    from rollax.run import video

    PAUSE = 1.0
    drawn: list[int] = []
    draw = video.training_video

    def slow(*args, **kwargs):
        time.sleep(PAUSE)
        drawn.append(1)
        return draw(*args, **kwargs)

    monkeypatch.setattr(video, "training_video", slow)
    config, algo = from_settings({**settings, "video_every": 2})
    folder = training.create_run(config, str(tmp_path / "run"))
    summary, _ = training.execute(config, algo, folder)
    assert len(drawn) == len(summary["videos"]) == 3  # updates 2, 4 and the last
    assert summary["video_time_s"] >= 3 * PAUSE
    assert (summary["compile_time_s"] + summary["run_time_s"] + summary["video_time_s"]
            <= summary["wall_time_s"])
    steps = summary["env_steps_per_lane"]
    assert steps == settings.get("total_steps", steps)
    assert summary["env_steps_per_second"] == pytest.approx(steps / summary["run_time_s"])


def test_the_closing_lines_name_the_drawing_time_apart(capsys, tmp_path):
    """``rollax train --video-every`` prints the videos' seconds on a line of their own, the
    number summary.json records."""
    import json
    import re

    from helpers import run

    code, out, err = run(capsys, "train", "--updates", "4", "--batch-size", "16",
                         "--chunk-size", "1", "--video-every", "2", "--out", tmp_path / "run")
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    line = re.search(r"^videos: 2 drawn in ([0-9.]+) s \(apart from the run's time and "
                     r"throughput\)$", out, re.MULTILINE)
    assert line is not None, out
    assert float(line.group(1)) == pytest.approx(summary["video_time_s"], abs=0.05)

"""``--log tensorboard`` and ``--log wandb`` with the trackers installed (``pip install
".[test,tensorboard,wandb]"``; ``.ci/run`` runs this folder in its own venv)."""

import json

import numpy as np
import pytest

from rollax.cli import main
from rollax.run.loggers import tag

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")


def train(capsys, out_dir, *argv):
    code = main(["train", "--json", "--updates", "3", "--batch-size", "32", "--seeds", "2",
                 "--out", str(out_dir), *argv])
    _, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def read_events(folder):
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def check_events(run_dir, rows, keys, batch=32):
    """Each lane's events equal its metric rows, each at the lane's live env steps so far,
    rebuilt from each update's mean episode length over the batch's ``batch`` episodes."""
    lanes = {}
    for row in rows:
        lane = "-".join(f"{k}{format(row[k], 'g') if isinstance(row[k], float) else row[k]}"
                        for k in keys)
        lanes.setdefault(lane, []).append(row)
    steps = {}
    for lane, lane_rows in lanes.items():
        live = 0
        for r in sorted(lane_rows, key=lambda r: r["update"]):
            live += round(r.get("episode_length", 0) * batch) if r["update"] else 0
            steps[lane, r["update"]] = live
    assert sorted(p.name for p in (run_dir / "tensorboard").iterdir()) == sorted(lanes)
    for lane, lane_rows in lanes.items():
        scalars = read_events(run_dir / "tensorboard" / lane)
        metrics = {k for r in lane_rows for k in r if k not in (*keys, "update")}
        assert set(scalars) == {tag(m) for m in metrics}
        for metric in metrics:
            expected = {steps[lane, r["update"]]: r[metric] for r in lane_rows
                        if r.get(metric) is not None}
            got = scalars[tag(metric)]
            # steps: env steps per lane, each once (a resumed run's are replaced)
            assert [step for step, _ in got] == sorted(expected), metric
            np.testing.assert_allclose([value for _, value in got],
                                       [expected[step] for step, _ in got], rtol=1e-6,
                                       err_msg=metric)


def test_tensorboard_events_equal_metrics(capsys, tmp_path):
    run_dir = tmp_path / "run"
    rows = train(capsys, run_dir, "--log", "tensorboard", "--sweep", "lr=0.5,0.1")
    assert {tag("episode_return"), tag("clip_fraction")} <= set(
        read_events(run_dir / "tensorboard" / "seed0-lr0.5"))
    check_events(run_dir, rows, ("seed", "lr"))


def test_tensorboard_after_resume_equals_metrics(capsys, tmp_path):
    run_dir = tmp_path / "run"
    rows = train(capsys, run_dir, "--log", "tensorboard", "--chunk-size", "1")
    (run_dir / "summary.json").unlink()  # as if stopped after update 3: resume relogs
    (run_dir / "checkpoints" / "latest").write_text(
        sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir())[0])
    code = main(["train", "--resume", str(run_dir), "--json", "--log", "tensorboard"])
    _, err = capsys.readouterr()
    assert code == 0, err
    again = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(again) == len(rows)
    check_events(run_dir, again, ("seed",))


def test_wandb_offline_run_in_run_folder(capsys, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    run_dir = tmp_path / "run"
    train(capsys, run_dir, "--log", "wandb")
    runs = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 2  # one W&B run per lane
    for run in runs:
        assert list(run.glob("run-*.wandb"))


def test_tensorboard_has_every_evaluation_at_its_env_step(capsys, tmp_path):
    """The greedy evaluations, before, during (--eval-every) and after training (the score of
    summary.json), are one series at their env steps; the last is the final evaluation."""
    run_dir = tmp_path / "run"
    code = main(["train", "--json", "--env", "CartPole-v1", "--total-steps", "256",
                 "--num-envs", "4", "--num-steps", "16", "--minibatches", "1", "--epochs", "1",
                 "--hidden", "8", "--chunk-size", "2", "--eval-every", "2",
                 "--eval-episodes", "2", "--log", "tensorboard", "--out", str(run_dir)])
    _, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    per_update, last = 64, summary["env_steps_per_lane"]
    assert last == 4 * per_update
    got = read_events(run_dir / "tensorboard" / "seed0")[tag("eval_return")]
    assert [step for step, _ in got] == [0, 2 * per_update, last]
    expected = [rows[0]["eval_return"], rows[2]["greedy_return"],
                summary["lanes"][0]["eval_return"]]
    np.testing.assert_allclose([value for _, value in got], expected, rtol=1e-6)


def test_video_every_gifs_go_to_both_trackers_at_their_steps(capsys, tmp_path, monkeypatch):
    """Each GIF of --video-every is one video of lane 0's series in TensorBoard (its frames
    as written) and in W&B, at the env steps of the update that drew it."""
    pytest.importorskip("wandb")
    pytest.importorskip("moviepy")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    run_dir = tmp_path / "run"
    code = main(["train", "--json", "--updates", "4", "--batch-size", "16", "--chunk-size",
                 "1", "--seeds", "2", "--video-every", "2", "--log", "tensorboard,wandb",
                 "--out", str(run_dir)])
    _, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [next(r["env_steps"] for r in rows if r["seed"] == 0 and r["update"] == u)
             for u in (2, 4)]
    acc = event_accumulator.EventAccumulator(str(run_dir / "tensorboard" / "seed0"),
                                             size_guidance={"images": 0})
    acc.Reload()
    videos = acc.Images("videos/greedy_episode")
    assert [v.step for v in videos] == steps
    assert "videos/greedy_episode" not in event_accumulator.EventAccumulator(
        str(run_dir / "tensorboard" / "seed1")).Reload().Tags()["images"]
    media = list((run_dir / "wandb").glob("offline-run-*/files/media/videos/**/*.gif"))
    assert len(media) == 2

"""``rollax train --resume``: a damaged ``checkpoints/`` never makes a run start again from
update 0 (it continues from the newest checkpoint that verifies, saying so, or refuses); a
finished run trains longer with a larger budget; metrics lines are named by file and line."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import rollax
from helpers import run
from rollax.cli import main
from rollax.cli.parse import parse_train
from rollax.run import plots
from rollax.run.folder import RunFolder

BASE = ["train", "--json", "--updates", "4", "--batch-size", "16", "--chunk-size", "1",
        "--checkpoint-every", "1"]
"""Four tabular updates, a checkpoint after each: update-0000002, -3 and -4 are kept."""


def digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def updates(run_dir: Path) -> list[int]:
    return [json.loads(line)["update"] for line in
            (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume") / "finished"
    assert main([*BASE, "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "latest", "update-0000002", "update-0000003", "update-0000004"]
    return out


@pytest.fixture()
def killed(finished, tmp_path) -> Path:
    """The run as SIGKILL after logging update 4 but before its checkpoint leaves it."""
    out = tmp_path / "killed"
    shutil.copytree(finished, out)
    (out / "summary.json").unlink()
    shutil.rmtree(out / "figures")
    shutil.rmtree(out / "checkpoints" / "update-0000004")
    (out / "checkpoints" / "latest").write_text("update-0000003\n")
    return out


def _half_written(run_dir: Path, finished: Path) -> None:
    """latest names update-0000004, copied without its state.npz (a copy cut short)."""
    shutil.copytree(finished / "checkpoints" / "update-0000004",
                    run_dir / "checkpoints" / "update-0000004")
    (run_dir / "checkpoints" / "update-0000004" / "state.npz").unlink()
    (run_dir / "checkpoints" / "latest").write_text("update-0000004\n")


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _newest_corrupt(run_dir: Path, finished: Path) -> None:
    (run_dir / "checkpoints" / "latest").unlink()
    _flip_byte(run_dir / "checkpoints" / "update-0000003" / "state.npz")


DAMAGE = {
    "latest-missing": (lambda r, f: (r / "checkpoints" / "latest").unlink(), 3,
                       "'{c}/latest' is missing; continuing from '{c}/update-0000003', the "
                       "newest checkpoint that verifies"),
    "latest-empty": (lambda r, f: (r / "checkpoints" / "latest").write_text(""), 3,
                     "'{c}/latest' is empty; continuing from '{c}/update-0000003', the newest "
                     "checkpoint that verifies"),
    "latest-half-written": (_half_written, 3,
                            "'{c}/latest' points at 'update-0000004', which is half-written (no "
                            "state.npz); continuing from '{c}/update-0000003', the newest "
                            "checkpoint that verifies (update-0000004 did not)"),
    "newest-corrupt": (_newest_corrupt, 2,
                       "'{c}/latest' is missing; continuing from '{c}/update-0000002', the "
                       "newest checkpoint that verifies (update-0000003 did not)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_latest_continues_from_the_newest_checkpoint_that_verifies(
        capsys, monkeypatch, finished, killed, damage):
    monkeypatch.setattr(plots, "plot_runs", lambda *args: [])  # figures: not tested here
    breaks, start, note = DAMAGE[damage]
    breaks(killed, finished)
    earliest = digest(killed / "checkpoints" / "update-0000002")
    lines = (killed / "metrics.jsonl").read_text().splitlines()
    code, out, err = run(capsys, "train", "--resume", killed)
    assert code == 0, err
    assert err == "rollax train: " + note.format(c=killed / "checkpoints") + "\n"
    assert out.splitlines()[:2] == [  # the header: the run, its folder and the update
        "ppo on corridor: updates=4, batch_size=16, horizon=8, epochs=3, lr=0.5, 1 lane",
        f"resuming the run in {killed} at update {start} of 4 (checkpoint "
        f"update-{start:07d}); {4 - start} x 16 episodes per lane to go"]
    # it ends where the uninterrupted run ended, bit for bit
    sha = json.loads((finished / "summary.json").read_text())["params_sha256"]
    assert json.loads((killed / "summary.json").read_text())["params_sha256"] == sha
    assert digest(killed / "checkpoints" / "update-0000002") == earliest
    assert updates(killed) == [0, 1, 2, 3, 4]
    assert (killed / "metrics.jsonl").read_text().splitlines()[:start + 1] == lines[:start + 1]
    assert (killed / "checkpoints" / "latest").read_text() == "update-0000004\n"


def test_a_corrupt_checkpoint_that_latest_names_is_refused(capsys, killed):
    _flip_byte(killed / "checkpoints" / "update-0000003" / "state.npz")
    before = digest(killed)
    code, out, err = run(capsys, "train", "--resume", killed)
    assert (code, out) == (2, "")
    assert err == (f"rollax train: error: checkpoint '{killed}/checkpoints/update-0000003' is "
                   f"corrupt: state.npz does not match its recorded SHA-256\n")
    assert digest(killed) == before


def test_no_checkpoint_that_verifies_is_refused_touching_nothing(capsys, killed):
    (killed / "checkpoints" / "latest").write_text("update-0000009\n")
    for name in ("update-0000002", "update-0000003"):
        _flip_byte(killed / "checkpoints" / name / "state.npz")
    before = digest(killed)
    code, out, err = run(capsys, "train", "--resume", killed)
    checkpoints = killed / "checkpoints"
    assert (code, out) == (2, "")
    assert err == (f"rollax train: error: '{checkpoints}/latest' points at 'update-0000009', "
                   f"which does not exist, and no checkpoint in '{checkpoints}' verifies (tried "
                   f"update-0000003, update-0000002)\n")
    assert digest(killed) == before


def test_a_finished_run_trains_longer(capsys, finished, tmp_path):
    out = tmp_path / "longer"
    shutil.copytree(finished, out)
    kept = digest(out / "checkpoints" / "update-0000004")
    lines = (out / "metrics.jsonl").read_text().splitlines()
    code, stdout, err = run(capsys, "train", "--resume", out, "--updates", "6", "--json")
    assert code == 0, err
    assert updates(out) == list(range(7))
    assert (out / "metrics.jsonl").read_text().splitlines()[:5] == lines
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "latest", "update-0000004", "update-0000005", "update-0000006"]  # the last 3 kept
    assert digest(out / "checkpoints" / "update-0000004") == kept
    assert json.loads((out / "config.json").read_text())["config"]["updates"] == 6
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # live steps: the sum over the 6 updates of the batch's 16 episodes' mean length
    live = sum(round(r["episode_length"] * 16) for r in rows if r["update"] > 0)
    assert summary["env_steps_per_lane"] == rows[-1]["env_steps"] == live <= 6 * 128
    assert json.loads(stdout)["params_sha256"] == summary["params_sha256"]
    # the tabular trainer has no schedule: 4 then 2 more updates are 6 from the start
    code, fresh, err = run(capsys, *BASE[:3], "6", *BASE[4:], "--out", tmp_path / "fresh")
    assert code == 0, err
    assert json.loads(fresh)["params_sha256"] == summary["params_sha256"]


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "message"), [
    (["--updates", "4"], "resume: --updates 4 would not train longer than the run's --updates "
                         "4 (4 updates)"),
    (["--updates", "2"], "resume: --updates 2 would not train longer than the run's --updates "
                         "4 (4 updates)"),
    (["--updates", "8", "--batch-size", "32"],
     "--resume takes no other settings (the run's config.json is used; --updates N trains it "
     "longer); got --batch-size"),
])
def test_a_budget_that_is_not_larger_or_another_setting_is_refused(capsys, finished, tmp_path,
                                                                  argv, message):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    before = digest(out)
    code, stdout, err = run(capsys, "train", "--resume", out, *argv)
    assert (code, stdout, err) == (2, "", f"rollax train: error: {message}\n")
    assert digest(out) == before


def test_a_checkpoint_past_the_runs_end_is_refused(capsys, finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    (out / "summary.json").unlink()
    config = json.loads((out / "config.json").read_text())
    config["config"]["updates"] = 2  # edited by hand: the checkpoint records 4
    (out / "config.json").write_text(json.dumps(config))
    before = digest(out)
    code, _, err = run(capsys, "train", "--resume", out)
    assert code == 2
    assert err == (f"rollax train: error: resume: checkpoint '{out}/checkpoints/update-0000004' "
                   f"is at update 4, past the run's 2 updates\n")
    assert digest(out) == before


UPDATE_COUNTER = Path(__file__).resolve().parents[1] / "data" / "checkpoint-update-counter"
"""Two finished runs written by rollax (commit d6c00ab) while the states' counter of updates done
was the field ``update`` (the leaf ``update`` of ``state.npz``), each kept with its last
checkpoint only (``update-0000002``) and without figures: ``tabular``, tabular PPO on the
corridor (``--updates 2 --batch-size 16``), and ``ppo``, PPO on CartPole
(``--total-steps 128 --num-envs 2 --num-steps 32 --minibatches 2 --epochs 1 --hidden 4
--eval-episodes 2``), both with ``--chunk-size 1 --checkpoint-every 1``."""


@pytest.mark.parametrize(("name", "longer", "header"), [
    ("tabular", ["--updates", "4"], "2 x 16 episodes per lane to go"),
    ("ppo", ["--total-steps", "256"], "2 x 64 env steps per lane to go"),
])
def test_a_run_from_before_the_counter_was_named_updates_trains_longer(
        capsys, monkeypatch, tmp_path, name, longer, header):
    monkeypatch.setattr(plots, "plot_runs", lambda *args: [])  # figures: not tested here
    out = tmp_path / name
    shutil.copytree(UPDATE_COUNTER / name, out)
    with np.load(out / "checkpoints" / "update-0000002" / "state.npz") as npz:
        assert "update" in npz.files and npz["update"].tolist() == [2]
    loaded = rollax.load_run(out)
    assert loaded.updates == 2
    with pytest.warns(DeprecationWarning, match=r"LoadedPolicy.update is deprecated"):
        assert loaded.update == 2  # the old name, kept for a while
    before = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    code, stdout, err = run(capsys, "train", "--resume", out, *longer)
    assert code == 0, err
    assert stdout.splitlines()[1] == (f"resuming the run in {out} at update 2 of 4 (checkpoint "
                                      f"update-0000002); {header}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[:3] == before
    if name == "ppo":  # PPO counts its environment steps from the counter: (updates) x 64
        assert [r["env_steps"] for r in rows[1:]] == [64, 128, 192, 256]
    latest = out / "checkpoints" / "update-0000004"
    assert (out / "checkpoints" / "latest").read_text() == "update-0000004\n"
    assert json.loads((latest / "meta.json").read_text())["update"] == 4
    with np.load(latest / "state.npz") as npz:  # the counter as it is named now
        assert "update" not in npz.files and npz["updates"].tolist() == [4]
    assert rollax.load_run(out).updates == 4


@pytest.mark.slow
def test_resume_takes_the_length_flag_of_the_runs_algorithm(tmp_path):
    (tmp_path / "config.json").write_text('{"kind": "ppo"}')  # all that parsing reads
    assert parse_train(["train", "--resume", str(tmp_path), "--total-steps", "1e6"]).length \
        == 1_000_000
    assert parse_train(["train", "--resume", str(tmp_path)]).length is None
    with pytest.raises(ValueError, match=r"; --total-steps N trains it longer\); got --lr$"):
        parse_train(["train", "--resume", str(tmp_path), "--lr", "0.1"])


def test_metrics_lines_are_named_by_file_and_line_as_an_editor_counts(tmp_path):
    folder = RunFolder(tmp_path)
    good = json.dumps({"seed": 0, "update": 0})
    (tmp_path / "metrics.jsonl").write_text(f"{good}\n\n{good}\n{{\"update\": 2,\n{good}\n")
    with pytest.raises(ValueError) as caught:
        folder.read_metrics()
    assert str(caught.value) == (f"'{tmp_path}/metrics.jsonl' line 4 is corrupt: Expecting "
                                 f"property name enclosed in double quotes (column 14)")
    (tmp_path / "metrics.jsonl").write_text(f"{good}\n[1, 2]\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl' line 2 is not a metrics row"):
        folder.read_metrics()
    # only a last line cut short (no newline after it) is the half line of a full disk
    (tmp_path / "metrics.jsonl").write_text(f"{good}\n{{\"update\": 1, \"exa")
    folder.truncate_metrics(5)
    assert (tmp_path / "metrics.jsonl").read_text() == good + "\n"
    (tmp_path / "metrics.jsonl").write_text(f"{good}\n{{\"update\": 1, \"exa\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl' line 2 is corrupt"):
        folder.truncate_metrics(5)

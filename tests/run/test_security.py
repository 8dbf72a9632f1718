"""No file a run reads is loaded with pickle or a code-executing loader."""

import hashlib
import json
import pathlib
import pickle
import shutil

import numpy as np
import pytest

from helpers import run

MARKER = "rollax-pwned-marker"


class Payload:
    """Unpickling this would create a marker file (it must never happen)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


@pytest.fixture()
def run_dir(tabular_run, tmp_path):
    """The session's tabular run (tests/conftest.py), copied and made resumable."""
    out = tmp_path / "run"
    shutil.copytree(tabular_run, out)
    (out / "summary.json").unlink()  # resumable
    return out


def test_pickled_checkpoint_is_refused_without_unpickling(capsys, tmp_path, run_dir):
    marker = tmp_path / MARKER
    latest = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()
    meta = json.loads((latest / "meta.json").read_text())
    # a forged state.npz whose first leaf is a pickled object, with a matching hash in meta
    arrays = {info["name"]: np.zeros(info["shape"], info["dtype"]) for info in meta["leaves"]}
    evil = np.empty((), dtype=object)
    evil[()] = Payload(str(marker))
    arrays[meta["leaves"][0]["name"]] = evil
    with (latest / "state.npz").open("wb") as f:
        np.savez(f, **arrays)  # np.savez pickles object arrays
    meta["sha256"] = hashlib.sha256((latest / "state.npz").read_bytes()).hexdigest()
    (latest / "meta.json").write_text(json.dumps(meta))
    code, _, err = run(capsys, "train", "--resume", str(run_dir))
    assert code == 2 and "checkpoint" in err
    assert not marker.exists()
    # the same file through pickle would have run the payload: the test can tell
    pickle.loads(pickle.dumps(Payload(str(marker))))
    assert marker.exists()


def test_yaml_config_with_python_tags_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / MARKER
    config = tmp_path / "evil.yaml"
    config.write_text(f"updates: !!python/object/apply:pathlib.Path.touch [['{marker}']]\n")
    code, _, err = run(capsys, "train", "--config", str(config))
    assert code == 2 and "is not valid YAML" in err
    assert not marker.exists()


def test_run_files_are_read_as_plain_json(capsys, run_dir):
    (run_dir / "config.json").write_bytes(pickle.dumps({"kind": "tabular"}))
    code, _, err = run(capsys, "train", "--resume", str(run_dir))
    assert code == 2 and "config.json" in err and "corrupt" in err


def test_no_pickle_anywhere_in_the_package():
    src = pathlib.Path(__file__).parents[2] / "src" / "rollax"
    for path in src.rglob("*.py"):
        text = path.read_text()
        assert "import pickle" not in text and "allow_pickle=True" not in text, path
        assert "yaml.load(" not in text and "yaml.unsafe_load" not in text, path

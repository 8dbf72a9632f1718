"""``--key-impl``: a run's root keys in another JAX key implementation. The run is reproduced
bit for bit by the same command, resumes and chunks bit for bit, records its implementation,
and bad values are refused before anything is written."""

import json

import jax
import numpy as np
import pytest

from helpers import run
from rollax.keys import KEY_IMPLS, root_key

pytestmark = pytest.mark.optimized
"""Claims about the program rollax compiles (tests/conftest.py)."""

CORRIDOR = ["train", "--batch-size", "16", "--json"]


def sha(capsys, *argv) -> str:
    common = ["train", "--json"] if "--resume" in argv else CORRIDOR
    code, out, err = run(capsys, *common, *argv)
    assert code == 0, err
    return json.loads(out)["params_sha256"]


@pytest.mark.parametrize("impl", KEY_IMPLS)
def test_root_keys_are_of_the_implementation_named(impl):
    key = root_key(3, impl)
    assert str(jax.random.key_impl(key)) == impl
    same = jax.random.key(3, impl=impl)
    assert np.array_equal(jax.random.key_data(key), jax.random.key_data(same))


@pytest.mark.slow  # six corridor runs: ~16 s here
def test_rbg_runs_repeat_resume_and_chunk_bit_for_bit(capsys, tmp_path):
    rbg = ["--key-impl", "rbg"]
    whole = sha(capsys, "--updates", "24", *rbg, "--out", str(tmp_path / "whole"))
    assert sha(capsys, "--updates", "24", *rbg, "--out", str(tmp_path / "again")) == whole
    assert sha(capsys, "--updates", "24", "--chunk-size", "5", *rbg,
               "--out", str(tmp_path / "chunks")) == whole
    sha(capsys, "--updates", "12", *rbg, "--out", str(tmp_path / "half"))
    assert sha(capsys, "--resume", str(tmp_path / "half"), "--updates", "24") == whole
    stored = json.loads((tmp_path / "half" / "config.json").read_text())
    assert stored["key_impl"] == "rbg"
    # the setting takes effect: the default implementation trains other numbers
    assert sha(capsys, "--updates", "24", "--out", str(tmp_path / "threefry")) != whole
    default = json.loads((tmp_path / "threefry" / "config.json").read_text())
    assert "key_impl" not in default  # run folders from before the setting read the same


@pytest.mark.parametrize("argv, message", [
    (["--key-impl", "philox"], "--key-impl"),
])
def test_an_unknown_implementation_is_refused(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, *CORRIDOR, *argv, "--out", str(tmp_path / "r"))
    assert code == 2 and message in err and "philox" in err
    assert not (tmp_path / "r").exists()


def test_an_unknown_implementation_in_a_config_file_is_refused(capsys, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('key_impl = "philox"\n')
    code, _, err = run(capsys, *CORRIDOR, "--config", str(config), "--out", str(tmp_path / "r"))
    assert code == 2
    assert "philox" in err and "key_impl" in err
    assert not (tmp_path / "r").exists()

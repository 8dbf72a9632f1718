"""JAX's persistent compilation cache in the command line (rollax.run.compile_cache).

The cache is per process, so the runs that read it back are subprocesses, each with
``ROLLAX_COMPILE_CACHE`` (and HOME, XDG_CACHE_HOME) pointing into the test's temporary folder:
the user's ~/.cache is never touched, nor the session's cache (tests/conftest.py), which every
other test compiles into.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollax.cli import main
from rollax.cli.parse import parse_train
from rollax.run import compile_cache

TRAIN = ["train", "--updates", "3", "--json"]
"""A tiny corridor run (3 tabular PPO updates)."""


def _train(tmp_path: Path, cache: str, out: str, *extra: str) -> tuple[dict, dict]:
    env = {**os.environ, "ROLLAX_COMPILE_CACHE": cache, "HOME": str(tmp_path / "home"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run([sys.executable, "-m", "rollax.cli", *TRAIN, *extra, "--out",
                           str(tmp_path / out)], env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # jaxlib's log lines about each program loaded from the cache are dropped (cli/quiet.py)
    assert "cpu_aot_loader" not in proc.stderr and "Assume version" not in proc.stderr
    summary = json.loads((tmp_path / out / "summary.json").read_text())
    return json.loads(proc.stdout), summary


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.integration
def test_second_process_reuses_the_cache(tmp_path):
    folder = tmp_path / "cache"
    cold, _ = _train(tmp_path, str(folder), "a")
    entries = _entries(folder)
    assert entries, "the first run wrote no cache entry"
    warm, warm_summary = _train(tmp_path, str(folder), "b")
    # everything came from the cache (no wall-clock assertion: times belong to benchmarks)
    assert _entries(folder) == entries
    assert cold["compile_cache"] == warm["compile_cache"] == str(folder)
    assert warm_summary["compile_cache"] == str(folder)
    assert cold["params_sha256"] == warm["params_sha256"]
    # a traced hyperparameter is an input of the compiled programs, not a constant in them
    other, _ = _train(tmp_path, str(folder), "c", "--lr", "0.25")
    assert _entries(folder) == entries, "changing --lr compiled a new program"
    assert other["params_sha256"] != cold["params_sha256"]
    # without the cache: the same result, and nothing reported
    off, off_summary = _train(tmp_path, "off", "d")
    assert off["params_sha256"] == cold["params_sha256"]
    assert off["compile_cache"] is None and off_summary["compile_cache"] is None
    assert not (tmp_path / "home" / ".cache" / "rollax").exists()
    assert not (tmp_path / "xdg" / "rollax").exists()


@pytest.mark.slow
def test_no_compile_cache_flag_and_config(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ROLLAX_COMPILE_CACHE", str(folder))
    out = tmp_path / "run"
    assert main([*TRAIN, "--no-compile-cache", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["compile_cache"] is None
    assert json.loads((out / "summary.json").read_text())["compile_cache"] is None
    assert not folder.exists()
    config = json.loads((out / "config.json").read_text())
    assert "compile_cache" not in config and "compile_cache" not in config["config"]


@pytest.mark.parametrize("flag", ["--compile-cache", "--no-compile-cache"])
def test_resume_accepts_the_flag(flag):
    request = parse_train(["train", "--resume", "somewhere", flag])
    assert request.config is None and request.cmd.compile_cache == (flag == "--compile-cache")


def test_config_file_refuses_the_flag(capsys, tmp_path):
    (tmp_path / "c.toml").write_text("compile-cache = false\n")
    assert main(["train", "--config", str(tmp_path / "c.toml")]) == 2
    assert "unknown key 'compile-cache'" in capsys.readouterr().err


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, Path.home() / ".cache" / "rollax" / "jax"),
    ({"XDG_CACHE_HOME": "/x/cache"}, Path("/x/cache/rollax/jax")),
    ({"XDG_CACHE_HOME": "relative"}, Path.home() / ".cache" / "rollax" / "jax"),
    ({"ROLLAX_COMPILE_CACHE": "/y/jax", "XDG_CACHE_HOME": "/x"}, Path("/y/jax")),
    ({"ROLLAX_COMPILE_CACHE": "off"}, None),
    ({"ROLLAX_COMPILE_CACHE": "OFF"}, None),
    ({"ROLLAX_COMPILE_CACHE": "0"}, None),
    ({"ROLLAX_COMPILE_CACHE": ""}, None),
])
def test_resolve(environ, expected):
    assert compile_cache.resolve(environ) == expected


def test_a_file_is_not_a_cache_folder(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        compile_cache.enable(tmp_path / "afile")
    with pytest.raises(ValueError, match="cannot be created"):
        compile_cache.enable(tmp_path / "afile" / "sub")


@pytest.mark.parametrize("piecewise", [False, True])
def test_the_chatter_filter_drops_only_the_cache_log_lines(piecewise):
    import threading
    import time

    from rollax.cli.quiet import _pump

    chatter = (b"W1201 11:20:43.935492   18100 pjrt_executable.cc:642] Assume version "
               b"compatibility. PjRt-IFRT does not track XLA executable versions.\n"
               b"E1201 11:20:43.936858   18106 cpu_aot_loader.cc:220] Loading XLA:CPU AOT "
               b"result. Target machine feature +prefer-no-gather is not  supported\n")
    other = b"E1201 11:20:44.000000   18106 other.cc:1] a real error\n"
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    pump = threading.Thread(target=_pump, args=(read_in, write_out))
    if piecewise:  # the reader sees each piece apart
        pump.start()
    for piece in (b"\rupdate 1/4", chatter[:50], chatter[50:], b"\rupdate 2/4", other,
                  b"rollax train: error: x\n", b"no newline at the end"):
        os.write(write_in, piece)
        time.sleep(0.01 if piecewise else 0)
    os.close(write_in)
    if not piecewise:  # the reader sees everything at once
        pump.start()
    pump.join(timeout=10)
    os.close(write_out)
    with os.fdopen(read_out, "rb") as f:
        assert f.read() == (b"\rupdate 1/4\rupdate 2/4" + other + b"rollax train: error: x\n"
                            b"no newline at the end")


def test_an_entry_is_written_whole_and_replaced(tmp_path, monkeypatch):
    cache = compile_cache._WholeEntries(str(tmp_path), max_size=-1)
    cache.put("k", b"first")
    assert _entries(tmp_path) == ["k-cache"] and cache.get("k") == b"first"
    # JAX puts a key only after a miss: an entry it could not read is replaced
    cache.put("k", b"second")
    assert _entries(tmp_path) == ["k-cache"] and cache.get("k") == b"second"

    def interrupted(source, target):
        raise KeyboardInterrupt

    # a write stopped before its rename leaves neither an entry nor its temporary file
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.put("other", b"never whole")
    assert _entries(tmp_path) == ["k-cache"]


def test_enable_makes_jax_build_the_whole_entry_cache(tmp_path):
    # the hook reaches into JAX's private module: a JAX that moved it fails here
    from jax._src import compilation_cache as jax_cache
    compile_cache._write_whole_entries()
    assert jax_cache.LRUCache is compile_cache._WholeEntries
    cache, _ = jax_cache.get_file_cache(str(tmp_path))
    assert isinstance(cache, compile_cache._WholeEntries)


HEAL = """
import sys
from rollax.run import compile_cache
compile_cache.enable(sys.argv[1])
import jax, jax.numpy as jnp, numpy as np
print(jax.jit(lambda x: jnp.cumsum(x * 3.0))(np.arange(4.0, dtype=np.float32)).tolist())
"""


@pytest.mark.integration
def test_a_truncated_entry_heals(tmp_path):
    folder = tmp_path / "cache"

    def run() -> str:
        proc = subprocess.run([sys.executable, "-c", HEAL, str(folder)], capture_output=True,
                              text=True, check=True, timeout=120)
        assert proc.stdout == "[0.0, 3.0, 9.0, 18.0]\n"
        return proc.stderr

    assert "persistent compilation cache" not in run()
    [entry] = [p for p in folder.iterdir() if p.name.endswith("-cache")]
    truncated = entry.read_bytes()[:-100]
    entry.write_bytes(truncated)  # what a process killed mid-write left
    assert "Error reading persistent compilation cache entry" in run()
    # the process that compiled the program again rewrote it, and the next one reads it
    assert entry.read_bytes() != truncated
    assert "persistent compilation cache" not in run()
    assert _entries(folder) == [entry.name]

"""The bad-input catalogue of docs/errors.md, replayed entry by entry.

The table in docs/errors.md is the single source: each row gives an input (a ``rollax ...``
command line or a Python expression), its setup, the exact message and the exit status (or the
exception type). This module parses that table and, for every row:

- builds the row's setup in an empty ``tmp_path`` (run folders are copied from one tiny tabular
  run trained once per session, ``tabular_run`` of tests/conftest.py, then broken as the setup
  says);
- hashes every file and folder under ``tmp_path``;
- runs the input: a command line in-process through ``rollax.cli.main`` (cwd = ``tmp_path``),
  a Python expression with ``eval`` under ``pytest.raises``;
- asserts the exact message (``<cwd>`` in the table stands for the working directory,
  ``<methods>`` for the registered methods), exit
  status 2 and exactly one line on stderr (nothing on stdout) for the command line, the exact
  exception type for Python; and that nothing under ``tmp_path`` changed.

Rows that document a defect (a traceback, an exit status other than 2, a message that differs
in-process from a real run, something written) are strict xfails with the reason in ``XFAIL``.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.algos.registry import algorithms
from rollax.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
HEADER = ["id", "setup", "input", "message", "exit", "note"]


# --- the table -------------------------------------------------------------------------------

def _split_row(line: str) -> list[str]:
    """Cells of a markdown table row; ``\\|`` is a literal bar inside a cell."""
    body = line.strip()
    assert body.startswith("|") and body.endswith("|"), line
    cells = re.split(r"(?<!\\)\|", body[1:-1])
    return [c.strip().replace("\\|", "|") for c in cells]


def _unquote(cell: str) -> str:
    """The text of a cell that is one code span (`` `x` `` or ``` `` x `` ```)."""
    match = re.fullmatch(r"(`+)\s?(.*?)\s?\1", cell)
    return match.group(2) if match else cell


def read_catalogue(path: Path = DOC) -> list[dict]:
    """The rows of the catalogue table (the table whose header is ``HEADER``)."""
    rows, in_table = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.lstrip().startswith("|"):
            if in_table:
                break
            continue
        cells = _split_row(line)
        if not in_table:
            in_table = cells == HEADER
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the delimiter row
        assert len(cells) == len(HEADER), line
        row = dict(zip(HEADER, cells))
        for key in ("id", "setup", "input", "message", "exit"):
            row[key] = _unquote(row[key])
        rows.append(row)
    return rows


ENTRIES = read_catalogue()

XFAIL: dict[str, str] = {
    # rows that document a defect would go here: id -> reason (strict xfail)
}


# --- setups ----------------------------------------------------------------------------------

CONFIG_FILES = {
    "typo.toml": "updates = 2\nbatch_sise = 16\n",
    "typo.yaml": "updates: 2\nchekpoint_every: 2\n",
    "unknown.yaml": "updates: 2\nlearning_rate: 0.1\n",
    "settings.json": '{"updates": 2}\n',
    "unsafe.yaml": 'env: !!python/object/apply:os.system ["echo hi"]\n',
    "broken.toml": "updates = \n",
    "list.yaml": "- updates\n- 2\n",
    "table.toml": "[updates]\nx = 1\n",
    "zero.toml": "updates = 0\n",
    "string.toml": 'updates = "x"\n',
    "sb3.yaml": ("env: CartPole-v1\nn_envs: 8\nn_timesteps: 1e5\npolicy: MlpPolicy\nn_steps: 32\n"
                 "batch_size: 256\ngae_lambda: 0.8\ngamma: 0.98\nn_epochs: 20\nent_coef: 0.0\n"
                 "learning_rate: lin_0.001\nclip_range: lin_0.2\nhidden: \"64,64\"\n"),
    "twice.toml": "batch-size = 32\nbatch_size = 64\n",
    "twice.yaml": "lr: 0.1\nupdates: 2\nlr: 0.2\n",
    "empty.toml": "",
    "ppo.yml": ("CartPole-v1:\n  n_envs: 8\n  n_timesteps: !!float 1e5\n  policy: 'MlpPolicy'\n"
                "  n_steps: 32\n  batch_size: 256\n  gae_lambda: 0.8\n  gamma: 0.98\n"
                "  n_epochs: 20\n  ent_coef: 0.0\n  learning_rate: lin_0.001\n"
                "  clip_range: lin_0.2\n"),
    "two.yml": "CartPole-v1:\n  n_envs: 8\nAcrobot-v1:\n  n_envs: 4\n",
    "hidden.yaml": 'env: CartPole-v1\nhidden: "64,64"\n',
    "linear.yaml": "env: CartPole-v1\nlr: lin_0.001\n",
}
"""The config files named as setups: name -> content."""


def _latest(run: Path) -> Path:
    return run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()


def _unfinish(run: Path) -> None:
    """Make a finished run look killed before its end (no summary.json, no figures)."""
    (run / "summary.json").unlink()
    shutil.rmtree(run / "figures")


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _other_config(run: Path) -> None:
    path = run / "config.json"
    stored = json.loads(path.read_text())
    assert stored["config"]["lr"] == 0.5
    stored["config"]["lr"] = 0.25
    path.write_text(json.dumps(stored, indent=2) + "\n")


def _dangling(run: Path) -> None:
    (run / "checkpoints" / "latest").write_text("update-0000099\n")


def _no_checkpoint_verifies(run: Path) -> None:
    (run / "checkpoints" / "latest").unlink()
    for name in ("update-0000002", "update-0000004"):
        _flip_byte(run / "checkpoints" / name / "state.npz")


def _corrupt_metrics(run: Path) -> None:
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[2] = '{"seed": 0, "update": 2,\n'  # line 3 cut short
    (run / "metrics.jsonl").write_text("".join(lines))


def _no_checkpoints(run: Path) -> None:
    shutil.rmtree(run / "checkpoints")


def _diverged(run: Path) -> None:
    """The latest checkpoint's policy parameters (leaf 0 of the tabular state) made NaN, its
    recorded hash updated: a run that diverged."""
    import numpy as np

    latest = _latest(run)
    with np.load(latest / "state.npz") as npz:
        arrays = dict(npz)
    meta = json.loads((latest / "meta.json").read_text())
    first = meta["leaves"][0]["name"]
    arrays[first] = np.full_like(arrays[first], np.nan)
    with (latest / "state.npz").open("wb") as f:
        np.savez(f, **arrays)
    meta["sha256"] = hashlib.sha256((latest / "state.npz").read_bytes()).hexdigest()
    (latest / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def _corrupt_config(run: Path) -> None:
    (run / "config.json").write_text("{\n")


def _config_without_kind(run: Path) -> None:
    path = run / "config.json"
    stored = json.loads(path.read_text())
    del stored["kind"]
    path.write_text(json.dumps(stored, indent=2) + "\n")


USER_ENVS = '''"""Planted environments of a user's, each breaking the contract one way."""
import dataclasses

import jax.numpy as jnp

import rollax
from rollax.envs.cartpole import CartPole
from rollax.envs.pendulum import Pendulum


class ShortObservation(CartPole):
    def observation(self, state):
        return super().observation(state)[:3]  # observation_space says (4,)


class FloatTerminated(CartPole):
    def transition(self, state, action, key):
        next_state, reward, terminated = super().transition(state, action, key)
        return next_state, reward, terminated.astype(jnp.float32)


class Unwritten(CartPole):
    def transition(self, state, action, key):
        raise NotImplementedError("transition is not written yet")


@dataclasses.dataclass
class Unhashable(rollax.Environment):
    """CartPole in a dataclass that is not frozen (so not hashable), with a list field."""

    horizon: int = 500
    gains: list = dataclasses.field(default_factory=lambda: [1.0, 1.0])

    def reset(self, key):
        return CartPole(horizon=self.horizon).reset(key)

    def transition(self, state, action, key):
        return CartPole(horizon=self.horizon).transition(state, action, key)

    def observation(self, state):
        return CartPole(horizon=self.horizon).observation(state)

    @property
    def observation_space(self):
        return CartPole().observation_space

    @property
    def action_space(self):
        return CartPole().action_space


class Mutable(rollax.Environment):
    """CartPole's behaviour in a plain class that sets its attributes in ``__init__`` (hashable
    by identity, but mutable)."""

    def __init__(self, horizon=500):
        self.horizon = horizon
        self.cartpole = CartPole(horizon=horizon)

    def reset(self, key):
        return self.cartpole.reset(key)

    def transition(self, state, action, key):
        return self.cartpole.transition(state, action, key)

    def observation(self, state):
        return self.cartpole.observation(state)

    @property
    def observation_space(self):
        return self.cartpole.observation_space

    @property
    def action_space(self):
        return self.cartpole.action_space


def mutable(horizon=500):
    return Mutable(horizon=horizon)


class WrongMask(CartPole):
    def action_mask(self, state):
        return jnp.ones(3, bool)  # Discrete(2) needs bool[2]


class BoxMask(Pendulum):
    def action_mask(self, state):
        return jnp.ones(1, bool)  # a Box action takes no mask


class MaskedCorridor(rollax.Corridor):
    def action_mask(self, state):
        return jnp.ones(2, bool)


def wrong_mask(horizon=500):
    return WrongMask(horizon=horizon)


def box_mask(horizon=200):
    return BoxMask(horizon=horizon)


def masked_corridor(horizon=8):
    return MaskedCorridor(horizon=horizon)


class DictObservation(CartPole):
    def observation(self, state):
        values = super().observation(state)
        return {"position": values[:2], "velocity": values[2:]}  # observation_space says (4,)


class DictSpace(DictObservation):
    @property
    def observation_space(self):
        half = rollax.Box(-jnp.inf, jnp.inf, (2,))
        return {"position": half, "velocity": half}


def short_observation(horizon=500):
    return ShortObservation(horizon=horizon)


def unhashable(horizon=500):
    return Unhashable(horizon=horizon)


def dict_observation(horizon=500):
    return DictObservation(horizon=horizon)


def dict_space(horizon=500):
    return DictSpace(horizon=horizon)


def float_terminated(horizon=500):
    return FloatTerminated(horizon=horizon)


def unwritten(horizon=500):
    return Unwritten(horizon=horizon)


def endless(horizon=10**9):
    return CartPole(horizon=horizon)


def raising(horizon=500):
    raise RuntimeError("no licence for the simulator")


def fixed():
    return rollax.Corridor(horizon=5)
'''
"""``userenvs/bad.py`` of the ``userenvs`` setups."""


def _write_user_envs(base: Path) -> None:
    (base / "userenvs").mkdir()
    (base / "userenvs" / "__init__.py").write_text("")
    (base / "userenvs" / "bad.py").write_text(USER_ENVS)


def _user_env(factory: str):
    def point(run: Path) -> None:
        path = run / "config.json"
        stored = json.loads(path.read_text())
        stored["config"]["env"] = f"userenvs.bad:{factory}"
        path.write_text(json.dumps(stored, indent=2) + "\n")

    return point


RUN_BREAKS = {
    "run": [],
    "run-unfinished": [_unfinish],
    "run-corrupt": [lambda r: _flip_byte(_latest(r) / "state.npz")],
    "run-unfinished-corrupt": [_unfinish, lambda r: _flip_byte(_latest(r) / "state.npz")],
    "run-other-config": [_other_config],
    "run-unfinished-other-config": [_unfinish, _other_config],
    "run-dangling-latest": [_dangling],
    "run-unfinished-no-checkpoint-verifies": [_unfinish, _no_checkpoint_verifies],
    "run-corrupt-metrics": [_corrupt_metrics],
    "run-unfinished-corrupt-metrics": [_unfinish, _corrupt_metrics],
    "run-corrupt-config": [_corrupt_config],
    "run-config-without-kind": [_config_without_kind],
    "run-without-metrics": [lambda r: (r / "metrics.jsonl").unlink()],
    "run-diverged": [_diverged],
    "run-userenvs-raising": [_user_env("raising")],
    "run-userenvs-float-terminated": [_user_env("float_terminated")],
    "run-unfinished-userenvs-short-observation": [_unfinish, _user_env("short_observation")],
}
"""Setups that copy the prepared run to ``run`` and then break it."""


def build_setup(name: str, base: Path, prepared: Path | None) -> None:
    """Build setup ``name`` (``-`` for none) in folder ``base``; ``prepared`` is the prepared run
    (needed by the ``run*`` setups only)."""
    if name == "-":
        return
    if "userenvs" in name:
        _write_user_envs(base)
    if name == "userenvs":
        return
    if name in RUN_BREAKS:
        run = base / "run"
        shutil.copytree(prepared, run)
        for brk in RUN_BREAKS[name]:
            brk(run)
    elif name == "empty":
        (base / "empty").mkdir()
    elif name == "afile":
        (base / "afile").write_text("a regular file\n")
    elif name in CONFIG_FILES:
        (base / name).write_text(CONFIG_FILES[name])
    else:
        raise KeyError(f"unknown setup {name!r}")


def needs_prepared_run(name: str) -> bool:
    return name in RUN_BREAKS


def snapshot(base: Path) -> dict[str, str]:
    """Every file (its SHA-256) and folder under ``base``."""
    out = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def command_line(text: str) -> tuple[dict[str, str], list[str]] | None:
    """``(environment variables, argv after rollax)`` of a row's command line (``NAME=value``
    assignments may precede ``rollax``), or None for a Python row."""
    words = shlex.split(text)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return (env, words[1:]) if words and words[0] == "rollax" else None


NAMESPACE = {"jax": jax, "jnp": jnp, "np": np, "rollax": rollax}
"""What the Python expressions of the table see."""

METHODS = ", ".join(dict.fromkeys(m for s in algorithms() for m in s.methods))
"""What ``<methods>`` stands for: every registered method, in the registry's order."""


# --- tests -----------------------------------------------------------------------------------

def test_catalogue_table():
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) >= 35
    assert len(set(ids)) == len(ids), "ids must be unique"
    assert set(XFAIL) <= set(ids), set(XFAIL) - set(ids)
    for e in ENTRIES:
        cli = command_line(e["input"]) is not None
        assert e["exit"].isdigit() == cli, e["id"]
        if not cli:
            assert isinstance(getattr(builtins, e["exit"], None), type), e["id"]
        assert e["setup"] == "-" or e["setup"] in RUN_BREAKS or e["setup"] in CONFIG_FILES \
            or e["setup"] in ("empty", "afile", "userenvs"), e["setup"]
        assert "\n" not in e["message"] and e["message"], e["id"]


def _param(entry):
    marks = ([pytest.mark.xfail(strict=True, reason=XFAIL[entry["id"]])]
             if entry["id"] in XFAIL else [])
    return pytest.param(entry, id=entry["id"], marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_bad_input(entry, tmp_path, monkeypatch, capsys, request):
    for suite in ("gymnax", "jumanji", "pgx"):
        if f"{suite}:" in entry["input"] and importlib.util.find_spec(suite) is None:
            pytest.skip(f"{suite} is not installed (pip install rollax[{suite}])")
    prepared = (request.getfixturevalue("tabular_run")
                if needs_prepared_run(entry["setup"]) else None)
    build_setup(entry["setup"], tmp_path, prepared)
    if "userenvs" in entry["setup"]:  # importable from the folder, leaving no __pycache__
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
        for name in ("userenvs.bad", "userenvs"):
            monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.chdir(tmp_path)
    expected = entry["message"].replace("<cwd>", os.getcwd()).replace("<methods>", METHODS)
    before = snapshot(tmp_path)
    capsys.readouterr()
    command = command_line(entry["input"])
    if command is not None:
        for name, value in command[0].items():
            monkeypatch.setenv(name, value)
        code = main(command[1])
        out, err = capsys.readouterr()
        assert err == expected + "\n"
        assert err.count("\n") == 1 and out == ""
        assert code == int(entry["exit"])
        assert code == 2
    else:
        exc_type = getattr(builtins, entry["exit"])
        with pytest.raises(exc_type, match="^" + re.escape(expected) + "$") as info:
            eval(entry["input"], dict(NAMESPACE))  # the catalogue's own inputs
        assert type(info.value) is exc_type
    assert snapshot(tmp_path) == before, "the bad input changed something on disk"


@pytest.mark.parametrize("spec", algorithms(), ids=lambda s: s.config_type.__name__)
def test_every_config_refuses_an_environment_object(spec):
    """As the py-ppo-env-object row: one line naming env, alike for every registered
    algorithm's config (a config names its environment, so that config.json can rebuild it)."""
    expected = next(e["message"] for e in ENTRIES if e["id"] == "py-ppo-env-object")
    with pytest.raises(ValueError) as info:
        rollax.make_train(spec.config_type(env=rollax.make("CartPole-v1")))
    assert str(info.value) == expected

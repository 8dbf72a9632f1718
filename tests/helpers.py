"""Helpers that several test modules share (not a test module: pytest collects ``test_*.py``
only). Test modules import from here, never from one another."""

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

import rollax

ON_TPU = jax.default_backend() == "tpu"
"""Whether the tests run on a TPU (``benchmarks/accel.sh tests``); CI runs them on the CPU."""


def f32_rtol(cpu: float) -> float:
    """The relative tolerance of a float32 log, exp or inverse CDF against a float64 reference.

    The CPU's are within a few units in the last place, so a test states the tolerance it holds
    there; a TPU's vector unit computes them to about 1e-4 (log-probabilities off by up to 1.4e-4
    relative on a v5e), so there the bound is 3e-4 whatever the CPU's."""
    return max(cpu, 3e-4) if ON_TPU else cpu


def f32_atol(cpu: float) -> float:
    """The absolute tolerance beside :func:`f32_rtol`: 1e-4 on a TPU for results of order one."""
    return max(cpu, 1e-4) if ON_TPU else cpu


@dataclasses.dataclass(frozen=True)
class TracedPolicy(rollax.BernoulliPolicy):
    """``BernoulliPolicy`` that records each trace of ``sample`` (one per compilation)."""

    traces: list = dataclasses.field(default_factory=list, compare=False, hash=False)

    def sample(self, params, observation, key):
        self.traces.append(None)
        return super().sample(params, observation, key)


def gif_ends(path) -> tuple[int, np.ndarray, np.ndarray]:
    """A GIF's frame count and its first and last frames, RGB."""
    from PIL import Image

    with Image.open(path) as gif:
        first = np.asarray(gif.convert("RGB"))
        gif.seek(gif.n_frames - 1)
        return gif.n_frames, first, np.asarray(gif.convert("RGB"))


def greedy_return(loaded, key, episodes: int) -> jax.Array:
    """A plain absorbing loop acting with ``loaded.act``: reset keys as collect derives them,
    ``env.horizon`` steps under ``lax.scan``, mean over episodes of the summed rewards."""
    env = loaded.env
    reset_keys, _, _ = rollax.collection_keys(key, episodes, env.horizon, env.stochastic)
    states = jax.vmap(env.reset)(reset_keys)

    def body(states, _):
        actions = jax.vmap(loaded.act)(jax.vmap(env.observation)(states))
        states, reward, _, _ = jax.vmap(env.step)(states, actions)
        return states, reward

    _, rewards = jax.lax.scan(body, states, None, env.horizon)
    return jnp.mean(jnp.sum(rewards, axis=0))


def train_refused(capsys, tmp_path, argv, words: str) -> None:
    """``rollax train *argv`` into ``tmp_path / "run"`` exits with status 2 and one line on
    stderr holding ``words``, and makes no run folder."""
    code, _, err = run(capsys, "train", *argv, "--out", tmp_path / "run")
    assert code == 2 and words in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def run(capsys, *argv) -> tuple[int, str, str]:
    """``rollax *argv`` in-process (``rollax.cli.main``): exit status, stdout, stderr."""
    from rollax.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def train_json(capsys, *argv) -> dict:
    """``rollax train --json *argv`` in-process; it must succeed; its JSON object."""
    code, out, err = run(capsys, "train", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


class Tiny(NamedTuple):
    """The smallest run of a registered algorithm, for the tests that check a run goes through,
    not what it learns."""

    env: str
    """An environment it trains."""
    settings: dict
    """Config fields: two updates, a budget that halves to one (a run cut short and resumed),
    a constant learning rate (an annealed one depends on the budget), rollouts as long as the
    20-step horizon of tests/algos/test_algorithms.py (an episode ends in every update)."""


TINY: dict[str, Tiny] = {
    "tabular": Tiny("corridor", dict(updates=2, batch_size=8)),
    "ppo": Tiny("CartPole-v1", dict(total_steps=256, num_envs=4, num_steps=32, epochs=2,
                                    minibatches=2, anneal_lr=False)),
    "a2c": Tiny("CartPole-v1", dict(total_steps=160, num_envs=4, num_steps=20,
                                    anneal_lr=False)),
    "reinforce": Tiny("CartPole-v1", dict(updates=2, batch_size=4, group_size=2,
                                          baseline="loo")),
    "grpo": Tiny("CartPole-v1", dict(updates=2, batch_size=4, group_size=2, epochs=2)),
}
"""One row per registered algorithm, by its registry name: every per-algorithm test (each
algorithm's flags and config keys, the same checks of every neural algorithm, the combined
spaces) takes it from here, and fails for an algorithm that has none."""


def flags(settings: dict) -> list[str]:
    """Config fields as ``rollax train`` flags: ``--name value``, ``--name`` / ``--no-name`` for
    a boolean, a tuple's values as separate words."""
    argv = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            argv += [flag, *map(str, value)] if isinstance(value, tuple) else [flag, str(value)]
    return argv


TINY_FLAGS = {name: flags(row.settings) for name, row in TINY.items()}
"""Each algorithm's :data:`TINY` settings as flags (after ``--env`` and ``--algo``)."""


def checkpoint_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under a run folder's ``checkpoints/``, by relative path."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((folder / "checkpoints").rglob("*")) if p.is_file()}


def run_metrics(folder: Path) -> list[dict]:
    """A run folder's metrics.jsonl rows without the throughput (a wall-clock figure)."""
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "env_steps_per_second"} for row in rows]


# --- Gymnasium environments stepped by hand (tests of host environments) ---

def seed_of(key) -> int:
    """The Gymnasium seed a pool reset with ``key`` gets (environment ``b``: seed + b)."""
    return int(jax.random.bits(key, dtype=jnp.uint32))


def gymnasium_rows(env_id, seed, actions, horizon=None, clip=None, **options):
    """Gymnasium's own environments, one per column of ``actions`` (T, B, ...), each reset with
    ``seed + b`` and again (unseeded) after an episode ends: the rows a same-step collector
    records (observation, next observation, reward, terminated, truncated)."""
    kwargs = options if horizon is None else {"max_episode_steps": horizon, **options}
    envs = [gymnasium.make(env_id, **kwargs) for _ in range(actions.shape[1])]
    obs = [e.reset(seed=seed + b)[0] for b, e in enumerate(envs)]
    rows = []
    for t in range(actions.shape[0]):
        row = []
        for b, e in enumerate(envs):
            action = actions[t, b] if clip is None else np.clip(actions[t, b], *clip)
            nxt, reward, term, trunc, _ = e.step(action)
            row.append((obs[b], nxt, reward, term, trunc))
            obs[b] = e.reset()[0] if term or trunc else nxt
        rows.append(row)
    return rows


def assert_gymnasium_rows(traj, rows):
    for t, row in enumerate(rows):
        for b, (obs, nxt, reward, term, trunc) in enumerate(row):
            np.testing.assert_array_equal(traj.observation[t, b], obs)
            np.testing.assert_array_equal(traj.next_observation[t, b], nxt)
            assert traj.reward[t, b] == np.float32(reward)
            # Gymnasium may report both on one step; rollax counts that as terminated only
            assert bool(traj.terminated[t, b]) == term
            assert bool(traj.truncated[t, b]) == (trunc and not term)


def lookout_observations(n: int) -> dict:
    """``n`` observations of tests/custom_envs/lookout.py's ``Dict``: a lit 5x5x1 grid, a
    2-vector, a cue."""
    keys = jax.random.split(jax.random.key(2), 3)
    cells = np.asarray(jax.random.randint(keys[0], (n,), 0, 25))
    grid = np.zeros((n, 25), np.float32)
    grid[np.arange(n), cells] = 1.0
    return {"cue": np.asarray(jax.random.randint(keys[1], (n,), 0, 2), np.int32),
            "grid": grid.reshape(n, 5, 5, 1),
            "reading": np.asarray(jax.random.uniform(keys[2], (n, 2), minval=-1, maxval=1))}


def disk_full_for_staged_files(monkeypatch) -> None:
    """Make every file rollax stages before renaming it (:func:`rollax.run.files.staged_files`)
    a link to ``/dev/full``: whatever writes it (Python, Pillow, matplotlib, the ffmpeg
    encoder) gets the kernel's own ENOSPC, as on a full disk; deleting the staged file deletes
    the link only."""
    import os

    from rollax.run import files

    made = files.tempfile.mkstemp

    def on_a_full_disk(*args, **kwargs):
        fd, name = made(*args, **kwargs)
        os.close(fd)
        os.unlink(name)
        os.symlink("/dev/full", name)
        return os.open(name, os.O_WRONLY), name

    full = os.stat("/dev/full").st_rdev
    chmod, fchmod = os.chmod, os.fchmod

    def chmod_not_dev_full(path, mode, *args, **kwargs):  # /dev/full's own mode is kept
        if os.stat(path).st_rdev != full:
            chmod(path, mode, *args, **kwargs)

    def fchmod_not_dev_full(fd, mode):
        if os.fstat(fd).st_rdev != full:
            fchmod(fd, mode)

    monkeypatch.setattr(files.tempfile, "mkstemp", on_a_full_disk)
    monkeypatch.setattr(os, "chmod", chmod_not_dev_full)
    monkeypatch.setattr(os, "fchmod", fchmod_not_dev_full)

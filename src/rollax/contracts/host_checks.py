"""``check_host_env``: the collector's contract on an environment stepped on the host
(:class:`rollax.envs.host.HostEnvironment`: ``gymnasium:<id>``, ``envpool:<id>``, a user's
Gymnasium factory).

A host environment has no state for the absorbing checks of :func:`check_env` to re-step, and
its randomness is the pool's, not the collector's keys; what can be checked is what the
compiled collector records of it. The collector (:func:`rollax.collect_autoreset`, uniformly
random actions) records ``num_steps`` rows of ``batch_size`` environments; a fresh pool opened
with the same seed is then stepped by the same actions in a plain Python loop, through the
pool's own ``step``, and every recorded row must be the pool's own row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from rollax.contracts.probe import RandomPolicy, first_line
from rollax.contracts.registry import HOST_REGISTRY, host_check
from rollax.contracts.report import CheckReport, Finding, judge, outcome
from rollax.envs.host import HostEnvironment, gymnasium_leaves, host_failure, is_host
from rollax.validate import check_count

__all__ = ["check_host_env"]


@dataclasses.dataclass
class HostRun:
    """What the host checks read: the recorded trajectory and the pool's own rows."""

    env: HostEnvironment
    batch_size: int
    num_steps: int
    seed: int
    traj: Any = None
    """The compiled collector's ``AutoResetTrajectory`` (host arrays)."""
    rows: Any = None
    """The pool's own rows: ``(observation, next observation, reward, terminated,
    truncated)`` per step, each ``(B, ...)`` (observations as their leaves)."""


def _leaves(observation: Any) -> list[np.ndarray]:
    """A recorded observation's leaves, in :func:`rollax.envs.base.space_leaves` order."""
    return [np.asarray(x) for x in jax.tree.leaves(observation)]


def _flat(leaf: Any, batch_size: int) -> np.ndarray:
    """``(batch_size, -1)`` float64, a copy (a pool may reuse its arrays)."""
    return np.array(leaf, np.float64).reshape(batch_size, -1)


def _differ(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``got != want``, elementwise, with a NaN equal to a NaN (a row that holds the pool's
    NaN is the pool's row: ``host_finite`` is what reports it)."""
    differ = got != want
    if np.issubdtype(got.dtype, np.inexact):
        differ &= ~(np.isnan(got) & np.isnan(want))
    return differ


def _pool_rows(env: HostEnvironment, seed: int, batch_size: int, actions: np.ndarray) -> list:
    """A fresh pool seeded as the collector's, stepped by ``actions`` (T, B, ...) in Python."""
    pool, first = env.open_pool(batch_size, seed)
    space = env.observation_space
    try:
        obs = gymnasium_leaves(first, space)
        rows = []
        for action in actions:
            nxt, reward, terminated, truncated, info = pool.step(env.host_action(action))
            after = [_flat(x, batch_size) for x in gymnasium_leaves(nxt, space)]
            final = [x.copy() for x in after]
            for b in np.flatnonzero(info.get("_final_obs", ())):
                for i, leaf in enumerate(gymnasium_leaves(info["final_obs"][b], space)):
                    final[i][b] = np.reshape(leaf, -1)
            before = [_flat(x, batch_size) for x in obs]
            rows.append((before, final, np.asarray(reward, np.float64),
                         np.asarray(terminated, bool), np.asarray(truncated, bool)))
            obs = after
        return rows
    finally:
        pool.close()


@host_check("host_collects", "the compiled collector records `num_steps` rows of "
            "`batch_size` environments (uniformly random actions) without an error, and a "
            "fresh pool seeded the same way steps through them in Python", gate=True)
def host_collects(run: HostRun) -> Any:
    from rollax.collect import collect_autoreset, reset_batch

    policy = RandomPolicy.for_space(run.env.action_space)
    key = jax.random.key(run.seed)
    reset_key, action_key = jax.random.split(key)
    try:
        state = reset_batch(run.env, reset_key, run.batch_size)
        _, traj = collect_autoreset(run.env, policy, None, state, action_key, run.num_steps)
        run.traj = jax.tree.map(np.asarray, traj)
    except Exception as err:  # a pool that failed: its one line (HostOutputError)
        return outcome("failed", host_failure(err) or first_line(err))
    seed = int(np.asarray(jax.random.bits(reset_key, dtype=np.uint32)))
    run.rows = _pool_rows(run.env, seed, run.batch_size, run.traj.action)
    return outcome("passed", f"{run.num_steps} steps of {run.batch_size} environments")


@host_check("host_rows", "every recorded row is the pool's own: the observation, the next "
            "observation (the episode's true final one where it ended), the reward, and "
            "`terminated` and `truncated` apart (a step the pool reports as both counts as "
            "terminated); a NaN equals a NaN (`host_finite` reports it)")
def host_rows(run: HostRun) -> Any:
    findings = []
    B = run.batch_size
    for t, (before, final, reward, terminated, truncated) in enumerate(run.rows):
        got_before = [_flat(x[t], B) for x in _leaves(run.traj.observation)]
        got_final = [_flat(x[t], B) for x in _leaves(run.traj.next_observation)]
        for name, got, want in (("observation", got_before, before),
                                ("next_observation", got_final, final)):
            for g, w in zip(got, want):
                same = np.isclose(g, w, rtol=1e-6, atol=0, equal_nan=True)  # NaN is NaN
                bad = np.flatnonzero(~np.all(same, axis=1))
                if bad.size:
                    b = int(bad[0])
                    findings.append(Finding(t, b, f"{name} differs from the pool's",
                                            {name: g[b], "pool's": w[b]}))
        for name, got, want in (
                ("reward", run.traj.reward[t].astype(np.float64),
                 reward.astype(np.float32).astype(np.float64)),
                ("terminated", run.traj.terminated[t], terminated),
                ("truncated", run.traj.truncated[t], truncated & ~terminated)):
            bad = np.flatnonzero(_differ(got, want))
            if bad.size:
                b = int(bad[0])
                findings.append(Finding(t, b, f"{name} differs from the pool's",
                                        {name: got[b], "pool's": want[b]}))
    return judge(findings, "every row is the pool's own")


@host_check("host_live", "every recorded cell is a live transition (`active`), and no cell "
            "is both terminated and truncated")
def host_live(run: HostRun) -> Any:
    findings = []
    cell = np.argwhere(~np.asarray(run.traj.active, bool))
    if cell.size:
        findings.append(Finding(int(cell[0][0]), int(cell[0][1]), "an inactive cell", {}))
    both = np.argwhere(run.traj.terminated & run.traj.truncated)
    if both.size:
        findings.append(Finding(int(both[0][0]), int(both[0][1]),
                                "terminated and truncated both", {}))
    return judge(findings, "every cell live, endings apart")


@host_check("host_carry", "inside an episode the next row starts where this one ended: "
            "`next_observation[t] == observation[t + 1]`")
def host_carry(run: HostRun) -> Any:
    ended = run.traj.terminated | run.traj.truncated
    findings = []
    for got, nxt in zip(_leaves(run.traj.observation),
                        _leaves(run.traj.next_observation)):
        T, B = ended.shape
        same = np.all(nxt[:-1].reshape(T - 1, B, -1) == got[1:].reshape(T - 1, B, -1), axis=2)
        cell = np.argwhere(~same & ~ended[:-1])
        if cell.size:
            t, b = (int(i) for i in cell[0])
            findings.append(Finding(t, b, "next_observation[t] != observation[t + 1] inside "
                                    "an episode", {"next_observation": nxt[t, b],
                                                   "observation[t + 1]": got[t + 1, b]}))
    return judge(findings, "every episode carried on")


@host_check("host_finite", "recorded rewards and observations are finite")
def host_finite(run: HostRun) -> Any:
    findings = []
    for name, leaves in (("reward", [run.traj.reward]),
                         ("observation", _leaves(run.traj.observation)),
                         ("next_observation", _leaves(run.traj.next_observation))):
        for x in leaves:
            T, B = x.shape[:2]
            bad = np.argwhere(~np.all(np.isfinite(x.reshape(T, B, -1)), axis=2))
            if bad.size:
                t, b = (int(i) for i in bad[0])
                findings.append(Finding(t, b, f"{name} is not finite", {name: x[t, b]}))
    return judge(findings, "every value finite")


def check_host_env(env: HostEnvironment, *, batch_size: int = 4, num_steps: int | None = None,
                   seed: int = 0) -> CheckReport:
    """Check the compiled collector on a host environment (``HOST_CHECKS``, in order): the
    rows it records of ``batch_size`` environments over ``num_steps`` steps (default the
    horizon + 3, at most 256) with uniformly random actions, against a fresh pool with the
    same seed stepped by the same actions in plain Python.

    Example::

        report = check_host_env(rollax.make("gymnasium:CartPole-v1", horizon=20))
        report.raise_if_failed()
    """
    if not is_host(env):
        raise ValueError(f"check_host_env checks environments stepped on the host; "
                         f"{env!r} is a JAX environment: use check_env")
    check_count("batch_size", batch_size)
    steps = min(env.horizon + 3, 256) if num_steps is None else num_steps
    check_count("num_steps", steps)
    run = HostRun(env, int(batch_size), int(steps), int(seed))
    settings = {"batch_size": run.batch_size, "num_steps": run.num_steps, "seed": run.seed}
    return CheckReport(f"check_host_env({env.name})", HOST_REGISTRY.run(run), settings)

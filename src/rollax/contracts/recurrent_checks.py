"""The recurrent checks of ``check_recurrent``: where a recurrent policy's memory is reset by
the collectors and by the replay of the update (``docs/contract.md`` §7).

The checker drives the collectors with :class:`CountingPolicy`, whose memory is the number of
observations it has read in the current episode and whose log-probabilities reveal that number,
so each cell's stored log-probability says with how much memory the policy acted. The expected
count follows from the trajectory alone: 1 on the first observation of an episode, one more on
each later one, the absorbing collector's padding reading with the memory frozen at the episode's
end.

For an environment with action masks (:mod:`rollax.envs.masks`) the probe acts under each
state's mask, as every policy does, and its log-probabilities are read under the mask stored in
the trajectory; a cell whose every component has one legal value shows no count (its
log-probability is 0 whatever the memory) and is not judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.collect import collect, collect_autoreset_recurrent, reset_batch
from rollax.contracts.probe import Setup, default_steps, describe
from rollax.contracts.registry import RECURRENT_REGISTRY, NotRun, recurrent_check
from rollax.contracts.report import (
    SKIPPED,
    CheckReport,
    CheckResult,
    Finding,
    attempt,
    judge,
    outcome,
)
from rollax.distributions import MASK_LOGIT, PAD_LOGIT, Categorical, MultiCategorical
from rollax.envs.base import Discrete, MultiBinary, MultiDiscrete
from rollax.recurrent import RecurrentHeads, initial_carries, replay_log_prob
from rollax.validate import check_count

SLOPE = 0.01
"""The probe's logits are ``SLOPE * count * (0, 1, ..., n - 1)``."""

ROLLOUTS = 3
"""Auto-reset rollouts in a row, each from the state and memory the previous one handed on."""


@dataclasses.dataclass(frozen=True)
class CountingPolicy(RecurrentHeads):
    """A recurrent probe: its carry counts the observations read in the episode (0 at the
    start), and it acts from logits ``SLOPE * count * (0, 1, ..., n - 1)``, so a log-probability
    tells the count it acted with: a categorical over ``Discrete(n)`` actions, or, given
    ``nvec`` (``MultiDiscrete(nvec)``, or ``MultiBinary(k)`` as ``(2,) * k``), one such
    categorical per component over its ``nvec[i]`` values (``n`` is then ``max(nvec)``)."""

    n: int
    nvec: tuple[int, ...] | None = None

    @classmethod
    def for_space(cls, space: Any) -> CountingPolicy:
        """The probe for an action space: ``Discrete`` (or any space with ``n``),
        ``MultiDiscrete`` or ``MultiBinary``; anything else is a ``ValueError``."""
        if isinstance(space, (MultiDiscrete, MultiBinary)):
            nvec = tuple(int(v) for v in space.nvec)
            return cls(max(nvec), nvec)
        if isinstance(space, Discrete) or hasattr(space, "n"):
            return cls(int(space.n))
        raise ValueError(f"check_recurrent needs a Discrete, MultiDiscrete or MultiBinary "
                         f"action space, got {space!r}")

    def initial_carry(self, params) -> jax.Array:
        return jnp.float32(0.0)

    def step(self, params, carry, observation):
        return carry + 1.0, carry + 1.0

    def distribution(self, params, features):
        logits = SLOPE * features * jnp.arange(self.n, dtype=jnp.float32)
        if self.nvec is None:
            return Categorical(logits)
        valid = np.arange(self.n)[None, :] < np.asarray(self.nvec)[:, None]
        return MultiCategorical(jnp.where(valid, logits, PAD_LOGIT))


def log_probs(policy: CountingPolicy, counts: np.ndarray, actions: np.ndarray,
              masks: np.ndarray | None = None) -> np.ndarray:
    """The probe's log-probabilities of ``actions`` at memory ``counts`` (float64), under the
    action ``masks`` when given (an illegal value's logit is ``MASK_LOGIT``, as
    ``dist.masked`` sets it)."""
    nvec = (policy.n,) if policy.nvec is None else policy.nvec
    if policy.nvec is None:  # one component
        actions = actions[..., None]
        masks = None if masks is None else masks[..., None, :]
    logits = SLOPE * counts[..., None, None].astype(np.float64) * np.arange(policy.n)
    logits = np.broadcast_to(logits, actions.shape + (policy.n,))
    if masks is not None:
        logits = np.where(masks, logits, MASK_LOGIT)
    valid = np.arange(policy.n)[None, :] < np.asarray(nvec)[:, None]
    logits = np.where(valid, logits, -np.inf)
    top = logits.max(axis=-1, keepdims=True)
    norm = top[..., 0] + np.log(np.exp(logits - top).sum(axis=-1))
    picked = np.take_along_axis(logits, actions[..., None].astype(np.int64), -1)[..., 0]
    return (picked - norm).sum(axis=-1)


UNREAD = -1
"""The count :func:`counts_read` gives a cell whose log-probability shows none."""


def counts_read(policy: CountingPolicy, stored: np.ndarray, actions: np.ndarray, most: int,
                masks: np.ndarray | None = None) -> np.ndarray:
    """The count whose log-probability is nearest each stored one (0 .. ``most``), or
    :data:`UNREAD` where every count gives the same (one legal value per component)."""
    table = np.stack([log_probs(policy, np.full(stored.shape, count), actions, masks)
                      for count in range(most + 1)], axis=-1)
    read = np.abs(table - stored[..., None]).argmin(axis=-1)
    flat = np.ptp(table, axis=-1) < 1e-9
    return np.where(flat, UNREAD, read)


def expected_counts(done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(count at each cell (N, B), carry after each cell (N, B))`` of an auto-reset stream
    whose ``done`` (N, B) ends episodes (memory reset after a done step)."""
    count, after = np.zeros_like(done, np.int64), np.zeros_like(done, np.int64)
    carry = np.zeros(done.shape[1], np.int64)
    for t in range(done.shape[0]):
        count[t] = carry + 1
        carry = np.where(done[t], 0, carry + 1)
        after[t] = carry
    return count, after


@dataclasses.dataclass
class RecurrentRun(Setup):
    """One recurrent check run: the setup, the functions checked, and what they returned."""

    collect_fn: Callable | None = None
    replay_fn: Callable | None = None
    absorbing_fn: Callable | None = None
    carries: list = dataclasses.field(default_factory=list)
    """The carry each rollout started with, then the last one handed on (host arrays)."""
    trajs: list = dataclasses.field(default_factory=list)

    def rollouts(self) -> None:
        """``ROLLOUTS`` auto-reset rollouts in a row, from fresh states and initial carries."""
        assert self.collect_fn is not None
        state = reset_batch(self.env, jax.random.key(self.seed), self.batch_size)
        carry = initial_carries(self.policy, self.params, self.batch_size)
        self.carries, self.trajs = [np.asarray(carry)], []
        for r in range(ROLLOUTS):
            state, carry, traj = self.collect_fn(self.env, self.policy, self.params, state, carry,
                                                 jax.random.key(self.seed + 1 + r),
                                                 self.num_steps)
            self.carries.append(np.asarray(carry))
            self.trajs.append(traj)
        shapes = {np.shape(self.carries[-1]), np.shape(self.trajs[-1].log_prob)}
        if shapes != {(self.batch_size,), (self.num_steps, self.batch_size)}:
            raise ValueError(f"carry (B,) and log_prob (T, B) expected, got shapes {shapes}")

    def stream(self, name: str) -> np.ndarray:
        """A trajectory field of the rollouts, one after the other ``(ROLLOUTS * T, B)``."""
        if not self.trajs:
            raise NotRun
        return np.concatenate([np.asarray(getattr(t, name)) for t in self.trajs])

    def counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(expected counts, counts read, expected carries after each cell)``, all
        ``(ROLLOUTS * T, B)``."""
        done = self.stream("terminated") | self.stream("truncated")
        expected, after = expected_counts(done)
        masks = None if self.trajs[0].action_mask is None else self.stream("action_mask")
        seen = counts_read(self.policy, self.stream("log_prob"), self.stream("action"),
                           int(expected.max()) + self.num_steps + 1, masks)
        return expected, seen, after

    def where(self, cell: int) -> tuple[int, int]:
        """``(rollout, step in it)`` of a cell of the stream."""
        return divmod(cell, self.num_steps)


NO_COUNT = ("no cell shows the memory (the masks leave one legal value per component "
            "everywhere)")


def _first(mask: np.ndarray) -> tuple[int, int] | None:
    cells = np.argwhere(mask)
    return None if not len(cells) else (int(cells[0][0]), int(cells[0][1]))


@recurrent_check("recurrent_runs", "`collect_fn(env, policy, params, state, carry, key, T)` "
                 f"returns `(state, carry, trajectory)`, {ROLLOUTS} rollouts in a row.",
                 gate=True)
def recurrent_runs(run: RecurrentRun) -> CheckResult:
    """Collect the rollouts."""
    return attempt(run.rollouts, f"{ROLLOUTS} rollouts of (state, carry, trajectory)")


@recurrent_check("memory_reset_on_restart", "the policy acts on each episode's first "
                 "observation with a fresh memory and counts on from there: never carried "
                 "across an auto-reset, never reset a step late.")
def memory_reset_on_restart(run: RecurrentRun) -> CheckResult:
    """Every cell's count is the number of observations of its episode so far."""
    expected, seen, _ = run.counts()
    if (seen == UNREAD).all():
        return outcome(SKIPPED, NO_COUNT)
    cell = _first((seen != expected) & (seen != UNREAD))
    if cell is None:
        return judge([], "memory fresh at every restart")
    t, b = cell
    late = expected[t, b] == 1 and t + 1 < len(seen) and seen[t + 1, b] == 1
    what = ("memory reset one step late (the first step of the new episode still read the "
            "previous episode's memory)" if late else
            "memory carried across an auto-reset" if expected[t, b] == 1 else
            "memory does not count the episode's observations")
    rollout, step = run.where(t)
    return judge([Finding(step, b, what, {"rollout": rollout,
                                          "observations remembered": seen[t, b] - 1,
                                          "expected": expected[t, b] - 1})])


@recurrent_check("memory_handed_on", "the carry a rollout returns is the one the next rollout "
                 "starts from: reset where the last step ended an episode.")
def memory_handed_on(run: RecurrentRun) -> CheckResult:
    """The returned carries equal the expected counts after each rollout's last step."""
    _, _, after = run.counts()
    T = run.num_steps
    for r in range(ROLLOUTS):
        carry, expected = run.carries[r + 1], after[(r + 1) * T - 1]
        b = next((int(i) for i in np.flatnonzero(carry != expected)), None)
        if b is not None:
            return judge([Finding(T - 1, b, "returned carry is not the next rollout's memory",
                                  {"rollout": r, "carry": carry[b], "expected": expected[b]})])
    return judge([], "carries handed on")


@recurrent_check("memory_frozen_when_absorbed", "the absorbing collector starts from "
                 "`initial_carry` and freezes a finished episode's memory: padding cells read "
                 "with the memory of the episode's end.")
def memory_frozen_when_absorbed(run: RecurrentRun) -> CheckResult:
    """Counts of `absorbing_fn(env, policy, params, key, B, T)` over ``env.horizon + 3``
    steps, at most 1024 (every episode ends, padding follows): ``min(t, L) + 1``."""
    if run.absorbing_fn is None:
        return outcome(SKIPPED, "no absorbing collector given")
    steps = default_steps(run.env)[0]
    _, traj = run.absorbing_fn(run.env, run.policy, run.params, jax.random.key(run.seed),
                               run.batch_size, steps)
    active = np.asarray(traj.active)
    length = active.sum(axis=0)
    expected = np.minimum(np.arange(steps)[:, None], length[None]) + 1
    masks = None if traj.action_mask is None else np.asarray(traj.action_mask)
    seen = counts_read(run.policy, np.asarray(traj.log_prob), np.asarray(traj.action),
                       2 * steps + 1, masks)
    if (seen == UNREAD).all():
        return outcome(SKIPPED, NO_COUNT)
    cell = _first((seen != expected) & (seen != UNREAD))
    if cell is None:
        return judge([], "memory frozen after each episode's end")
    t, b = cell
    what = ("memory moved after the episode ended (not frozen)" if not active[t, b] else
            "memory does not start from initial_carry and count the episode's observations")
    return judge([Finding(t, b, what, {"observations remembered": seen[t, b] - 1,
                                       "expected": expected[t, b] - 1})])


def _replayed(run: RecurrentRun) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(stored, replayed)`` log-probabilities of each rollout (cached on the run)."""
    cache = getattr(run, "_replays", None)
    if cache is None:
        if not run.trajs or run.replay_fn is None:
            raise NotRun
        cache = [(np.asarray(traj.log_prob),
                  np.asarray(run.replay_fn(run.policy, run.params, jnp.asarray(carry), traj)))
                 for carry, traj in zip(run.carries, run.trajs)]
        run._replays = cache  # type: ignore[attr-defined]
    return cache


def _replay_check(run: RecurrentRun, first_segment: bool, what: str, passed: str) -> CheckResult:
    """Replayed vs stored log-probabilities on the cells before (``first_segment``) or from the
    first restart inside each rollout; skipped when no such cell shows a difference to find."""
    seen_any, findings = False, []
    for r, (stored, replayed) in enumerate(_replayed(run)):
        traj = run.trajs[r]
        done = np.asarray(traj.terminated) | np.asarray(traj.truncated)
        restarted = np.cumsum(np.concatenate([np.zeros_like(done[:1]), done[:-1]]), axis=0) > 0
        cells = ~restarted if first_segment else restarted
        if first_segment:
            cells &= (run.carries[r] != 0)[None]  # a zero stored memory shows nothing
        seen_any |= bool(cells.any())
        bad = cells & ~np.isclose(replayed, stored, rtol=1e-5, atol=1e-6)
        cell = _first(bad)
        if cell is not None:
            t, b = cell
            findings.append(Finding(t, b, what, {"rollout": r, "stored log_prob": stored[t, b],
                                                 "replayed": replayed[t, b]}))
    if not seen_any:
        return outcome(SKIPPED, "no cell to check (no rollout "
                       + ("started mid-episode)" if first_segment else "restarted an episode)"))
    return judge(findings[:1], passed)  # the first rollout that shows it


@recurrent_check("replay_from_stored_carry", "`replay_fn(policy, params, carry, trajectory)` "
                 "starts each sequence from the carry the rollout started with, not from zeros.")
def replay_from_stored_carry(run: RecurrentRun) -> CheckResult:
    """Cells before any restart, in environments whose rollout began mid-episode."""
    return _replay_check(run, True, "replay does not start from the stored carry",
                         "replay starts from the stored carries")


@recurrent_check("replay_resets_at_starts", "the replay resets the memory exactly where the "
                 "trajectory's episodes restart (`episode_starts`).")
def replay_resets_at_starts(run: RecurrentRun) -> CheckResult:
    """Cells from the first restart inside the rollout on."""
    return _replay_check(run, False, "replay does not reset the memory where an episode "
                         "restarted", "replay resets where episodes restart")


def check_recurrent(env: Any, collect_fn: Callable = collect_autoreset_recurrent,
                    replay_fn: Callable = replay_log_prob,
                    absorbing_fn: Callable | None = collect, *, batch_size: int = 8,
                    num_steps: int | None = None, seed: int = 0) -> CheckReport:
    """Check where a recurrent policy's memory is reset (``docs/contract.md`` §7).

    ``collect_fn`` has the signature of :func:`rollax.collect_autoreset_recurrent`,
    ``replay_fn(policy, params, carry, trajectory) -> log_prob (T, B)`` that of
    :func:`rollax.recurrent.replay_log_prob`, ``absorbing_fn`` that of :func:`rollax.collect`
    (``None`` skips its check). They are driven with :class:`CountingPolicy` (``env`` needs a
    ``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` action space; with ``action_mask`` the
    probe acts under each state's mask) for ``ROLLOUTS`` auto-reset rollouts of ``num_steps``
    steps in a row (default ``env.horizon // 2 + 1``: every environment restarts at least once).

    Example::

        report = check_recurrent(rollax.make("CartPole-v1", horizon=20))
        report.raise_if_failed()
    """
    check_count("batch_size", batch_size)
    policy = CountingPolicy.for_space(env.action_space)
    if num_steps is None:
        horizon = getattr(env, "horizon", None)
        num_steps = horizon // 2 + 1 if isinstance(horizon, int) and horizon > 0 else 64
    check_count("num_steps", num_steps)
    run = RecurrentRun(env, policy, None, int(batch_size), int(num_steps), seed,
                       collect_fn=collect_fn, replay_fn=replay_fn, absorbing_fn=absorbing_fn)
    name = getattr(collect_fn, "__qualname__", None) or repr(collect_fn)
    return CheckReport(f"check_recurrent({name}, {describe(env)})",
                       RECURRENT_REGISTRY.run(run), run.settings)

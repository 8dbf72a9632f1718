"""The collector checks of ``check_collector`` (also run by ``check_env(...,
collect_fn=...)``), in report order, and :func:`check_collector`."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from rollax.collect import collect
from rollax.contracts.probe import RandomPolicy, Setup, default_steps, describe
from rollax.contracts.registry import COLLECTOR_REGISTRY, NotRun, collector_check
from rollax.contracts.report import (
    FAILED,
    PASSED,
    SKIPPED,
    CheckReport,
    CheckResult,
    Finding,
    attempt,
    error_text,
    judge,
    outcome,
)
from rollax.contracts.trees import (
    ULPS,
    bits,
    cell_mismatch,
    distance,
    first_cell,
    host,
    scalar_cells,
    tree_difference,
)
from rollax.envs.masks import has_action_mask, has_legal, is_legal, mask_problem
from rollax.validate import check_count, counted

FIELDS = ("observation", "action", "reward", "active", "terminated", "truncated", "log_prob")
"""The trajectory fields compared (time-major ``(T, B, ...)``)."""

BOOL_FIELDS = ("active", "terminated", "truncated")


@dataclasses.dataclass
class CollectorRun(Setup):
    """One collector check: the setup, the collector's outputs (host arrays) for ``key``
    (twice) and ``key + 1``, and its trajectory fields once their shapes are checked."""

    collect_fn: Callable | None = None
    out: Any = None
    again: Any = None
    other: Any = None
    final: Any = None
    fields: dict | None = None

    def collect(self, seed: int) -> Any:
        """``collect_fn``'s output for ``jax.random.key(seed)`` (host arrays)."""
        assert self.collect_fn is not None  # always given; defaulted only for the dataclass
        return host(self.collect_fn(self.env, self.policy, self.params, jax.random.key(seed),
                                    self.batch_size, self.num_steps))

    def collect_all(self) -> None:
        """``out``, ``again`` (both ``key(seed)``) and ``other`` (``key(seed + 1)``)."""
        self.out, self.again = self.collect(self.seed), self.collect(self.seed)
        self.other = self.collect(self.seed + 1)

    def field(self, name: str) -> np.ndarray:
        """A trajectory field; :class:`NotRun` before ``collector_shapes`` passed."""
        if self.fields is None:
            raise NotRun
        return np.asarray(self.fields[name])

    @property
    def event(self) -> np.ndarray:
        """``terminated | truncated`` (T, B)."""
        return self.field("terminated") | self.field("truncated")

    @functools.cached_property
    def reference(self) -> tuple[Any, str]:
        """``(rollax.collect's output or None, the error it raised)`` for the same inputs."""
        try:
            return host(collect(self.env, self.policy, self.params, jax.random.key(self.seed),
                                self.batch_size, self.num_steps)), ""
        except Exception as error:
            return None, error_text(error)


@collector_check("collector_runs", "`collect_fn(env, policy, params, key, B, T)` returns "
                 "`(final_state, trajectory)`.", gate=True)
def collector_runs(run: CollectorRun) -> CheckResult:
    """Call the collector with ``key(seed)`` twice and ``key(seed + 1)``."""
    return attempt(run.collect_all, "returned (final_state, trajectory)")


@collector_check("collector_shapes", "every field time-major `(T, B, ...)`; reward float32, "
                 "active / events bool.", gate=True)
def collector_shapes(run: CollectorRun) -> CheckResult:
    """The trajectory's fields and their shapes; the later checks read them."""
    T, B = run.num_steps, run.batch_size
    try:
        final, traj = run.out
        fields = {name: getattr(traj, name) for name in FIELDS}
    except Exception as error:
        return outcome(FAILED, f"not (final_state, Trajectory): {error_text(error)}")
    findings = []
    for name, value in fields.items():
        shapes = [np.shape(leaf) for leaf in jax.tree.leaves(value)]
        bad = next((s for s in shapes if tuple(s[:2]) != (T, B)), None)
        if bad is not None:
            findings.append(Finding(None, None, f"{name} is not time-major (T, B) = ({T}, {B})",
                                    {"shape": str(bad)}))
    for name, dtype, what in [(n, np.bool_, "bool") for n in BOOL_FIELDS] + [
            ("reward", np.float32, "float32")]:
        x = np.asarray(fields[name])
        if x.shape != (T, B) or x.dtype != dtype:
            findings.append(Finding(None, None, f"{name} is not {what} (T, B)",
                                    {name: f"{x.dtype}{list(x.shape)}"}, 1))
    if not findings:
        run.final, run.fields = final, fields
    return judge(findings, "time-major (T, B) fields")


def live_before(event: np.ndarray) -> np.ndarray:
    """(T, B): the environment was live before step t (start states are live)."""
    live = np.ones(event.shape, bool)
    for t in range(1, event.shape[0]):
        live[t] = live[t - 1] & ~event[t - 1]
    return live


@collector_check("active_mask", "`active` is \"live before the step\": true up to and "
                 "including the transition whose event ends the episode (that transition keeps "
                 "its reward), false after it.")
def active_mask(run: CollectorRun) -> CheckResult:
    """``active`` equals liveness before the step."""
    active, event = run.field("active"), run.event
    live = live_before(event)
    findings = []
    cell = first_cell(event & ~active & live)
    if cell is not None:
        findings.append(Finding(*cell, "the transition that ends the episode is marked "
                                "inactive (mask taken after the step?)",
                                {"active": active[cell],
                                 **{n: run.field(n)[cell] for n in
                                    ("terminated", "truncated", "reward")}}))
    cell = first_cell(active != live)
    if cell is not None:
        findings.append(Finding(*cell, "active is not 'live before the step'",
                                {"active": active[cell], "live before": live[cell]}, 1))
    return judge(findings, "active == live before the step")


@collector_check("active_never_rises", "no environment becomes active again (the active count "
                 "never rises).")
def active_never_rises(run: CollectorRun) -> CheckResult:
    """No inactive -> active transition."""
    active = run.field("active")
    cell = first_cell(active[1:] & ~active[:-1]) if len(active) > 1 else None
    findings = []
    if cell is not None:
        t, b = cell[0] + 1, cell[1]
        findings.append(Finding(t, b, "active count rose (an environment revived)",
                                {"active count before": int(active[t - 1].sum()),
                                 "active count": int(active[t].sum())}))
    return judge(findings, "active count never rises")


@collector_check("padding_zero_reward", "inactive cells carry reward 0 and no events.")
def padding_zero_reward(run: CollectorRun) -> CheckResult:
    """Padding is inert."""
    inactive, reward = ~run.field("active"), run.field("reward")
    findings = []
    cell = first_cell(inactive & (reward != 0))
    if cell is not None:
        findings.append(Finding(*cell, "padding reward", {"reward": reward[cell]}))
    cell = first_cell(inactive & run.event)
    if cell is not None:
        findings.append(Finding(*cell, "event on a padded cell",
                                {"terminated": run.field("terminated")[cell],
                                 "truncated": run.field("truncated")[cell]}, 1))
    return judge(findings, "padding: reward 0, no events")


@collector_check("collector_actions_legal", "with `action_mask`: the trajectory stores each "
                 "step's mask (`action_mask`, that of the state before the step, as "
                 "`rollax.collect` does) and every active action is legal under it (the "
                 "collector hands the policy the mask).")
def collector_actions_legal(run: CollectorRun) -> CheckResult:
    """Stored masks present, and the active actions legal under them."""
    if not has_action_mask(run.env):
        return outcome(PASSED, "no action_mask: every action legal")
    stored = getattr(run.out[1], "action_mask", None)
    findings = []
    if stored is None:
        findings.append(Finding(None, None, "trajectory has no action_mask (the update cannot "
                                "score the actions under the masks they were drawn with)", {}))
        reference, _ = run.reference
        stored = None if reference is None else reference[1].action_mask
    if stored is None:
        return judge(findings, "")
    space, action = run.env.action_space, run.field("action")
    stored = np.asarray(stored)
    if mask_problem(run.env, stored[0, 0], "") is not None:
        return judge(findings, "") if findings else outcome(
            SKIPPED, "needs a mask of the action space's layout (see check_env's "
                     "'action_mask_shape')")
    live = run.field("active") & np.asarray(has_legal(space, stored))
    illegal = live & ~np.asarray(is_legal(space, stored, action))
    cell = first_cell(illegal)
    if cell is not None:
        findings.append(Finding(*cell, "illegal action sampled",
                                {"action": action[cell], "action_mask": stored[cell]}, 1))
    return judge(findings, f"masks stored, {counted(int(live.sum()), 'active action')} legal")


@collector_check("collector_replay", "the same key replays every field and the final state bit "
                 "for bit.")
def collector_replay(run: CollectorRun) -> CheckResult:
    """Two calls with one key agree."""
    return judge([tree_difference(run.out, run.again, "same key, different outputs")],
                 "same key replays bit for bit")


@collector_check("collector_key_changes_actions", "another key changes the actions.")
def collector_key_changes_actions(run: CollectorRun) -> CheckResult:
    """``key(seed + 1)`` gives other actions."""
    other = getattr(run.other[1], "action", None) if isinstance(run.other, tuple) else None
    changed = None if other is None else cell_mismatch(run.field("action"), np.asarray(other), 2)
    findings = []
    if changed is None:
        findings.append(Finding(None, None, "another key gave actions of another shape", {}))
    elif not changed.any():
        findings.append(Finding(None, None, "another key gave the same actions", {}))
    return judge(findings, "another key changes the actions")


def repeats(x: np.ndarray, axis: int) -> tuple[int, int | None]:
    """``(count, first index)`` of slices along ``axis`` (0: rows over time, 1: columns over
    environments) that repeat an earlier slice bit for bit. Constant slices (one action all
    along) carry no information and are not counted: under a key reused across steps every
    column is constant, under a key broadcast to all environments every row is."""
    x = np.moveaxis(scalar_cells(np.asarray(x), 2), axis, 0)
    seen, count, first = set(), 0, None
    for i in range(x.shape[0]):
        cells = bits(x[i]).reshape(x.shape[1], -1)
        if (cells == cells[:1]).all():
            continue
        blob = cells.tobytes()
        if blob in seen:
            count += 1
            first = i if first is None else first
        seen.add(blob)
    return count, first


def _repeat_result(run: CollectorRun, axis: int, slices: str, what: str) -> CheckResult:
    """Repeated action ``slices`` along ``axis``, against ``rollax.collect``'s own count."""
    reference, _ = run.reference
    count, first = repeats(run.field("action"), axis)
    ref = 0 if reference is None else repeats(np.asarray(reference[1].action), axis)[0]
    size = run.num_steps if axis == 0 else run.batch_size
    findings = []
    if size >= 2 and count >= ref + max(1, size // 4):
        step, env = (first, None) if axis == 0 else (0, first)
        findings.append(Finding(step, env, what, {f"repeated {slices}": count,
                                                  "in the reference": ref}))
    return judge(findings, f"{count} repeated action {slices} (reference {ref})")


@collector_check("keys_per_env", "no key broadcast to all environments: informative action "
                 "columns do not repeat across environments more often than under "
                 "`rollax.collect` with the same key (needs a stochastic policy).")
def keys_per_env(run: CollectorRun) -> CheckResult:
    """Action columns (one per environment) repeat no more than the reference's."""
    return _repeat_result(run, 1, "columns", "action columns repeat across environments (one "
                          "key broadcast to all environments?)")


@collector_check("keys_per_step", "no key reused across steps: informative action rows do not "
                 "repeat over time more often than under `rollax.collect`.")
def keys_per_step(run: CollectorRun) -> CheckResult:
    """Action rows (one per step) repeat no more than the reference's."""
    return _repeat_result(run, 0, "rows", "action rows repeat over time (a key reused across "
                          "steps?)")


@collector_check("matches_reference", "every field and the final state equal "
                 "`rollax.collect`'s for the same inputs: integers and booleans bit for bit, "
                 f"floats up to {ULPS} ulps apart (another program, or the same environment in "
                 "another lane of a batch, may round differently).")
def matches_reference(run: CollectorRun) -> CheckResult:
    """Field by field, then the final state, against ``rollax.collect`` (floats up to ``ULPS``
    units in the last place apart)."""
    reference, error = run.reference
    if reference is None:
        return outcome(SKIPPED, f"rollax.collect failed: {error}")
    findings = []
    for index, name in enumerate(FIELDS):
        run.field("reward")  # NotRun before collector_shapes passed
        assert run.fields is not None
        got, want = run.fields[name], getattr(reference[1], name)
        if jax.tree.structure(got) != jax.tree.structure(want):
            findings.append(Finding(None, None, f"{name} has another structure than "
                                    f"rollax.collect's", {}))
            continue
        for (path, value), expected in zip(jax.tree_util.tree_flatten_with_path(got)[0],
                                           jax.tree.leaves(want)):
            value, expected = np.asarray(value), np.asarray(expected)
            label = name + jax.tree_util.keystr(path)  # a leaf of a pytree observation
            d = cell_mismatch(value, expected, 2, ULPS)
            if d is None:
                findings.append(Finding(None, None, f"{label} has another shape or dtype than "
                                        f"rollax.collect's", {}))
                continue
            cell = first_cell(d)
            if cell is not None:
                findings.append(Finding(*cell, f"{label} differs from rollax.collect",
                                        {"collector": value[cell],
                                         "rollax.collect": expected[cell],
                                         **distance(value[cell], expected[cell])}, index))
    mask, expected_mask = getattr(run.out[1], "action_mask", None), reference[1].action_mask
    if mask is not None and expected_mask is not None:
        d = cell_mismatch(np.asarray(mask), np.asarray(expected_mask), 2)
        cell = None if d is None else first_cell(d)
        if d is None or cell is not None:
            findings.append(Finding(*(cell or (None, None)), "action_mask differs from "
                                    "rollax.collect", {}, len(FIELDS)))
    if not findings:
        findings.append(tree_difference(run.final, reference[0],
                                        "final state differs from rollax.collect's", lead=1,
                                        ulps=ULPS))
    return judge(findings, f"equal to rollax.collect (floats within {ULPS} ulps)")


def collector_results(collect_fn: Callable, setup: Setup) -> list[CheckResult]:
    """The collector checks' results for ``collect_fn`` driven by ``setup``, in order
    (``COLLECTOR_CHECKS``)."""
    fields = {f.name: getattr(setup, f.name) for f in dataclasses.fields(Setup)}
    return COLLECTOR_REGISTRY.run(CollectorRun(**fields, collect_fn=collect_fn))


def check_collector(collect_fn: Callable, env: Any, policy: Any = None, params: Any = None, *,
                    batch_size: int = 16, num_steps: int | None = None,
                    seed: int = 0) -> CheckReport:
    """Check a collector with the signature of :func:`rollax.collect` against
    ``docs/contract.md`` §2.

    ``collect_fn(env, policy, params, key, batch_size, num_steps) -> (final_state,
    trajectory)`` is called with ``jax.random.key(seed)`` (twice) and ``jax.random.key(seed +
    1)``, and compared with ``rollax.collect`` on the same inputs. ``policy`` defaults to
    uniformly random actions (:class:`RandomPolicy`); the key checks (``keys_per_env``,
    ``keys_per_step``) need a stochastic policy and count repeated action columns / rows
    against the reference's own count, so a correct collector never fails them. ``num_steps``
    defaults to ``env.horizon + 3``, at most 1024. Check names: ``COLLECTOR_CHECKS``.

    Example::

        policy = rollax.BernoulliPolicy(3)
        report = check_collector(my_collect, rollax.make("corridor"), policy, policy.init(),
                                 batch_size=16, num_steps=10)
        report.raise_if_failed()
    """
    check_count("batch_size", batch_size)
    if num_steps is None:
        num_steps = default_steps(env)[0]
    check_count("num_steps", num_steps)
    if policy is None:
        policy = RandomPolicy.for_space(env.action_space)
        params = policy.init()
    name = getattr(collect_fn, "__qualname__", None) or repr(collect_fn)
    setup = Setup(env, policy, params, int(batch_size), int(num_steps), seed)
    return CheckReport(f"check_collector({name}, {describe(env)})",
                       collector_results(collect_fn, setup), setup.settings)

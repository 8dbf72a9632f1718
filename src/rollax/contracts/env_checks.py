"""The environment checks of ``check_env``, in report order, and :func:`check_env`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from rollax.collect import collect_autoreset
from rollax.contracts.autoreset_checks import final_observation_findings, record_rows
from rollax.contracts.collector_checks import collector_results
from rollax.contracts.env_run import EnvRun, state_step
from rollax.contracts.key_checks import draws_from_key, key_used_once
from rollax.contracts.probe import (
    RandomPolicy,
    default_steps,
    describe,
    leaf_paths,
    unsupported_observation,
    unsupported_space,
)
from rollax.contracts.registry import ENV_REGISTRY, env_check
from rollax.contracts.report import (
    FAILED,
    PASSED,
    SKIPPED,
    WARNING,
    CheckReport,
    CheckResult,
    Finding,
    attempt,
    error_text,
    judge,
    outcome,
)
from rollax.contracts.tracer import permute, trace_difference
from rollax.contracts.trees import (
    ULPS,
    any_last,
    cell_mismatch,
    first_cell,
    scalar_cells,
    tree_difference,
)
from rollax.envs.base import (
    Discrete,
    MultiBinary,
    MultiDiscrete,
    is_structured,
    mismatch_words,
    space_leaves,
    space_tree,
)
from rollax.envs.masks import has_action_mask, has_legal, is_legal, mask_problem, mask_shape
from rollax.validate import check_count, counted


def _type(x: Any) -> str:
    """``float32[4]``; for a pytree of arrays (a dict of observations) its type's name."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        return type(x).__name__
    return f"{x.dtype}{list(x.shape)}"


def _is(x: Any, shape: tuple[int, ...], dtype: Any) -> bool:
    """``x`` is one array of this shape and dtype."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        return False
    return tuple(x.shape) == shape and np.dtype(x.dtype) == np.dtype(dtype)


@env_check("runs", "reset, step, observation and done trace, compile and run under `jit` and "
           "`vmap`; the environment is hashable and immutable (`jit` takes it as a static "
           "argument: no attribute can be set, as in a frozen dataclass) and its "
           "observation one array (the leaves of its `Dict` / `Tuple` space).", gate=True)
def runs(run: EnvRun) -> CheckResult:
    """Trace and run the environment; every later check needs it."""
    return attempt(run.start, "reset, step, observation, done under jit+vmap")


def _spec(space: Any) -> str:
    """``float32[4]``: the dtype and shape a space's arrays have."""
    return f"{np.dtype(space.dtype)}{list(space.shape)}"


def _space_text(space: Any) -> str:
    """``Discrete(2)``, ``Box(float32[2], -1.0..1.0)``: a leaf space in a finding."""
    if isinstance(space, Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, MultiBinary):
        return f"MultiBinary({space.n})"
    if isinstance(space, MultiDiscrete):
        return f"MultiDiscrete({list(space.nvec)})"
    low, high = np.min(np.asarray(space.low)), np.max(np.asarray(space.high))
    return f"{type(space).__name__}({_spec(space)}, {low}..{high})"


def observation_finding(observation: Any, space: Any, what: str,
                        priority: int = 0) -> Finding | None:
    """``what`` (an observation's abstract value) against ``space``: one array of its shape and
    dtype, or for a ``Dict`` / ``Tuple`` the same leaves, each of its leaf space's shape and
    dtype (the finding names the first leaf that is not)."""
    if not is_structured(space):
        if _is(observation, tuple(space.shape), space.dtype):
            return None
        return Finding(None, None, mismatch_words(what),
                       {"observation": _type(observation), "space": _spec(space)}, priority)
    if unsupported_observation(observation, space, "") is not None:
        return Finding(None, None, f"{what} does not have observation_space's leaves",
                       {"observation": leaf_paths(observation),
                        "space": leaf_paths(space_tree(space, lambda s: 0))}, priority)
    for (path, leaf), x in zip(space_leaves(space), jax.tree.leaves(observation)):
        if not _is(x, tuple(leaf.shape), leaf.dtype):
            return Finding(None, None, mismatch_words(what, path),
                           {"observation": _type(x), "space": _spec(leaf)}, priority)
    return None


@env_check("reset_output", "the start state's observation has the observation space's shape "
           "and dtype (each leaf its leaf space's, for a `Dict` or `Tuple` space); `done` is "
           "a bool scalar.", gated=False)
def reset_output(run: EnvRun) -> CheckResult:
    """Shapes and dtypes of a reset (abstract evaluation)."""
    shapes, space = run.require_shapes(), run.env.observation_space
    findings = [observation_finding(shapes.observation, space, "start observation")]
    if not _is(shapes.done, (), np.bool_):
        findings.append(Finding(None, None, "done(state) is not a bool scalar",
                                {"done": _type(shapes.done)}, 1))
    return judge(findings, "observation shape/dtype match, done is bool")


def _state_type_finding(before: Any, after: Any) -> Finding | None:
    """The step changed the state's structure, or a leaf's shape or dtype."""
    leaves_before, tree_before = jax.tree_util.tree_flatten_with_path(before)
    leaves_after, tree_after = jax.tree_util.tree_flatten_with_path(after)
    if tree_before != tree_after:
        return Finding(None, None, "step changes the state's structure",
                       {"reset": str(tree_before), "step": str(tree_after)}, 2)
    for (path, a), (_, b) in zip(leaves_before, leaves_after):
        if a.shape != b.shape or a.dtype != b.dtype:
            return Finding(None, None, f"step changes state leaf {jax.tree_util.keystr(path)}",
                           {"reset": _type(a), "step": _type(b)}, 2)
    return None


@env_check("step_output", "reward is a float32 scalar, `terminated` / `truncated` bool "
           "scalars; the next state has the start state's structure, shapes and dtypes.",
           gated=False)
def step_output(run: EnvRun) -> CheckResult:
    """Shapes and dtypes of a step (abstract evaluation)."""
    shapes, space = run.require_shapes(), run.env.observation_space
    findings = []
    if not _is(shapes.reward, (), np.float32):
        findings.append(Finding(None, None, "reward is not a float32 scalar",
                                {"reward": _type(shapes.reward)}))
    flags = {"terminated": shapes.terminated, "truncated": shapes.truncated}
    if shapes.transition_terminated is not None:  # step casts it: look at what transition gives
        flags["terminated"] = shapes.transition_terminated
    for name, flag in flags.items():
        if np.dtype(flag.dtype) != np.bool_:
            findings.append(Finding(None, None, f"{name} must be bool", {name: _type(flag)}, 1))
        elif flag.shape != ():
            findings.append(Finding(None, None, f"{name} must be a scalar", {name: _type(flag)},
                                    1))
    findings.append(_state_type_finding(shapes.state, shapes.next_state))
    findings.append(observation_finding(shapes.next_observation, space,
                                        "observation after a step", 3))
    return judge(findings, "float32 reward, bool events, stable state types")


@env_check("action_mask_shape", "an environment with `action_mask(state)` gives one bool array "
           "laid out for its action space: `(n,)` for `Discrete(n)`, `(K, max(nvec))` for "
           "`MultiDiscrete(nvec)`, `(n, 2)` for `MultiBinary(n)`; no mask for `Box` (passes "
           "without a mask: every action legal).", gated=False)
def action_mask_shape(run: EnvRun) -> CheckResult:
    """The start state's mask against the action space (abstract evaluation)."""
    shapes = run.require_shapes()
    if not has_action_mask(run.env) or shapes.action_mask is None:
        return outcome(PASSED, "no action_mask: every action legal")
    if mask_problem(run.env, shapes.action_mask, describe(run.env)) is not None:
        want = mask_shape(run.env.action_space)
        what = ("action mask of the wrong shape or dtype" if want is not None else
                f"action mask on a {type(run.env.action_space).__name__} action space (masks "
                f"need Discrete, MultiDiscrete or MultiBinary actions)")
        return judge([Finding(None, None, what,
                              {"action_mask": _type(shapes.action_mask),
                               "expected": "no mask" if want is None else f"bool{list(want)}"})],
                     "")
    return outcome(PASSED, f"bool{list(shapes.action_mask.shape)}, laid out for "
                           f"{type(run.env.action_space).__name__}")


env_check("key_used_once", "every key `reset` and `step` hold or make (the key argument, a key "
          "in the state, each part of a split) feeds at most one `random_bits`, `random_split` "
          "or `random_fold_in`; read off their jaxprs, nothing compiled. A reuse wholly inside "
          "a suite's own code (every use outside rollax's files, for an adapted suite "
          "environment) is a warning: the adapter hands the suite its key unchanged and cannot "
          "fix it.", gated=False)(key_used_once)
env_check("draws_from_key", "when `reset`, or the `step` of a stochastic environment, draws "
          "random numbers, some derive from its key argument, not all from a constant key (or "
          "the state); a `reset` that draws nothing is a deterministic start.",
          gated=False)(draws_from_key)


@env_check("observation_in_space", "every visited state's observation (start states "
           "included) is in `observation_space` (each leaf in its space, named when not).")
def observation_in_space(run: EnvRun) -> CheckResult:
    """``observation_space.contains`` on every observation of the trace (of each leaf's space
    on each leaf, for a ``Dict`` or ``Tuple``: the finding names the leaf)."""
    trace = run.require_trace()
    outside = ~np.asarray(trace.in_space, bool)  # (T + 1, B), or (T + 1, B, leaves)
    cell = first_cell(outside if outside.ndim == 2 else outside.any(axis=-1))
    findings = []
    if cell is not None and outside.ndim == 2:
        i, b = cell
        findings.append(Finding(state_step(i), b, "observation outside observation_space",
                                {"observation": np.asarray(trace.observation)[i, b]}))
    elif cell is not None:
        i, b = cell
        k = int(np.argmax(outside[i, b]))
        path, space = space_leaves(run.env.observation_space)[k]
        value = np.asarray(jax.tree.leaves(trace.observation)[k])[i, b]
        findings.append(Finding(state_step(i), b, f"observation leaf {path} outside its space",
                                {"observation": value, "space": _space_text(space)}))
    return judge(findings, f"{counted((run.num_steps + 1) * run.batch_size, 'observation')} in "
                           f"the space")


def _masks(run: EnvRun) -> tuple[np.ndarray, str | None]:
    """The trace's masks ``(T + 1, B, ...)``, or why the mask checks do not apply."""
    if not has_action_mask(run.env):
        return np.zeros(0), "no action_mask: every action legal"
    masks = run.require_trace().action_mask
    if masks is None:
        return np.zeros(0), "needs a mask of the action space's layout (see 'action_mask_shape')"
    return np.asarray(masks), None


@env_check("legal_action_exists", "with `action_mask`: every live (not done) state visited "
           "allows at least one action (a legal value for every component).")
def legal_action_exists(run: EnvRun) -> CheckResult:
    """``has_legal`` on the mask of every live state of the trace (start states included)."""
    masks, why = _masks(run)
    if why is not None:
        return outcome(PASSED if "no action_mask" in why else SKIPPED, why)
    none = ~np.asarray(has_legal(run.env.action_space, masks)) & ~run.flags.done
    cell = first_cell(none)
    findings = []
    if cell is not None:
        i, b = cell
        findings.append(Finding(state_step(i), b, "a live state with no legal action",
                                {"action_mask": masks[i, b]}))
    return judge(findings, f"every live state of {counted(run.batch_size, 'episode')} has a "
                           f"legal action")


@env_check("actions_legal", "with `action_mask`: every action the checker's policy sampled in "
           "a live state (one with a legal action) is legal under that state's mask (the "
           "policy and the collectors hand it the mask).")
def actions_legal(run: EnvRun) -> CheckResult:
    """``is_legal`` of the rollout's actions under the masks of the states they were taken in."""
    masks, why = _masks(run)
    if why is not None:
        return outcome(PASSED if "no action_mask" in why else SKIPPED, why)
    trace, space = run.require_trace(), run.env.action_space
    action = np.asarray(trace.action)
    before = masks[:-1]
    live = ~run.flags.done_before & np.asarray(has_legal(space, before))
    illegal = live & ~np.asarray(is_legal(space, before, action))
    cell = first_cell(illegal)
    findings = []
    if cell is not None:
        findings.append(Finding(*cell, "illegal action sampled",
                                {"action": action[cell], "action_mask": before[cell]}))
    return judge(findings, f"{counted(int(live.sum()), 'live action')} legal")


@env_check("finite_values", "no NaN or inf in observations and rewards.")
def finite_values(run: EnvRun) -> CheckResult:
    """Floating observations and rewards are finite."""
    trace, reward = run.require_trace(), run.flags.reward
    findings = []
    for path, obs in jax.tree_util.tree_flatten_with_path(trace.observation)[0]:
        obs = np.asarray(obs)
        if not np.issubdtype(obs.dtype, np.inexact):
            continue
        cell = first_cell(~np.isfinite(scalar_cells(obs, 2)).all(axis=-1))
        if cell is not None:
            leaf = f" (leaf {jax.tree_util.keystr(path)})" if path else ""
            findings.append(Finding(state_step(cell[0]), cell[1],
                                    f"non-finite observation{leaf}", {"observation": obs[cell]}))
    if np.issubdtype(reward.dtype, np.inexact):
        cell = first_cell(~np.isfinite(reward).all(axis=-1))
        if cell is not None:
            findings.append(Finding(*cell, "non-finite reward",
                                    {"reward": np.asarray(trace.reward)[cell]}))
    return judge(findings, "no NaN or inf")


@env_check("events", "`terminated` / `truncated` are events: never both on one step, at most "
           "one ending event per episode (an absorbing rollout is one episode per "
           "environment), none once done.")
def events(run: EnvRun) -> CheckResult:
    """Ending events of the absorbing rollout."""
    f = run.flags
    findings = []
    cell = first_cell(f.term & f.trunc)
    if cell is not None:
        findings.append(Finding(*cell, "terminated and truncated on one step", {}))
    cell = first_cell(f.event & (np.cumsum(f.event, axis=0) >= 2))
    if cell is not None:
        t, b = cell
        name = "terminated" if f.term[t, b] else "truncated"
        findings.append(Finding(t, b, f"second ending event in one episode ({name})",
                                {"first event at step": int(np.argmax(f.event[:, b]))}, 1))
    cell = first_cell(f.event & f.done_before)
    if cell is not None:
        findings.append(Finding(*cell, "ending event after done",
                                {"terminated": f.term[cell], "truncated": f.trunc[cell]}, 2))
    return judge(findings, f"{counted(f.event.sum(), 'event')}, one per episode")


@env_check("done_flag", "`done(reset(key))` is False and `done` turns true exactly when an "
           "event fires: done after a step = done before it, or an event.")
def done_flag(run: EnvRun) -> CheckResult:
    """``done(next) == done(state) | terminated | truncated``."""
    f = run.flags
    findings = []
    cell = first_cell(f.done[:1])
    if cell is not None:
        findings.append(Finding(None, cell[1], "done(reset state) is True", {}))
    cell = first_cell(f.done_after != (f.done_before | f.event))
    if cell is not None:
        findings.append(Finding(*cell, "done does not match the events",
                                {"done before": f.done_before[cell], "terminated": f.term[cell],
                                 "truncated": f.trunc[cell], "done after": f.done_after[cell]}))
    return judge(findings, "done == an event has fired")


def _moved_leaf(run: EnvRun) -> Finding | None:
    """The first done state that the rollout's step changed, with the leaf that moved."""
    done_before = run.flags.done_before
    moved = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(run.require_trace().states)[0]:
        leaf = np.asarray(leaf)
        moved.append((jax.tree_util.keystr(path), leaf,
                      cell_mismatch(leaf[:-1], leaf[1:], 2) & done_before))
    cell = first_cell(np.logical_or.reduce([m for *_, m in moved] + [np.zeros_like(done_before)]))
    if cell is None:
        return None
    t, b = cell
    name, leaf, _ = next(item for item in moved if item[2][t, b])
    return Finding(t, b, f"done state moved (leaf {name})",
                   {"before": leaf[t, b], "after": leaf[t + 1, b]})


def _probe_finding(run: EnvRun, bad: np.ndarray, what: str, fields: tuple[str, ...],
                   priority: int = 1) -> Finding | None:
    """The first done state where a probe action broke a contract (``bad``: (T, B, K))."""
    bad = run.flags.done_before[..., None] & bad
    cell = first_cell(bad.any(axis=-1))
    if cell is None:
        return None
    k = int(np.argmax(bad[cell]))
    trace = run.require_trace()
    values = {name: np.asarray(getattr(trace, f"probe_{name}"))[cell][k] for name in fields}
    return Finding(*cell, what, values, priority)


@env_check("absorbing_state", "stepping a done state returns it unchanged, every leaf bit for "
           "bit (rollout action and several probe actions).")
def absorbing_state(run: EnvRun) -> CheckResult:
    """Done states stay put, under the rollout's action and every probe."""
    moved = ~np.asarray(run.require_trace().probe_same, bool)
    findings = [_moved_leaf(run),
                _probe_finding(run, moved, "done state moved under a probe action", ("action",))]
    return judge(findings, f"{counted(run.flags.done_before.sum(), 'done state')} unchanged")


@env_check("absorbing_reward", "stepping a done state gives reward 0.")
def absorbing_reward(run: EnvRun) -> CheckResult:
    """Reward 0 from done states, under the rollout's action and every probe."""
    f, trace = run.flags, run.require_trace()
    findings = []
    cell = first_cell(f.done_before & (f.reward != 0).any(axis=-1))
    if cell is not None:
        findings.append(Finding(*cell, "reward after done",
                                {"reward": np.asarray(trace.reward)[cell]}))
    bad = (scalar_cells(trace.probe_reward, 3) != 0).any(axis=-1)
    findings.append(_probe_finding(run, bad, "reward after done (probe action)",
                                   ("reward", "action")))
    return judge(findings, "reward 0 once done")


@env_check("absorbing_events", "stepping a done state gives no event.")
def absorbing_events(run: EnvRun) -> CheckResult:
    """No event from done states, under the rollout's action and every probe."""
    f, trace = run.flags, run.require_trace()
    findings = []
    cell = first_cell(f.done_before & f.event)
    if cell is not None:
        findings.append(Finding(*cell, "event after done",
                                {"terminated": f.term[cell], "truncated": f.trunc[cell]}))
    bad = (any_last(scalar_cells(trace.probe_terminated, 3).astype(bool))
           | any_last(scalar_cells(trace.probe_truncated, 3).astype(bool)))
    findings.append(_probe_finding(run, bad, "event after done (probe action)",
                                   ("terminated", "truncated", "action")))
    return judge(findings, "no event once done")


@env_check("determinism", "the same keys replay reset and the whole rollout bit for bit; a "
           "different key changes something.")
def determinism(run: EnvRun) -> CheckResult:
    """Replay with the same keys; another seed's keys."""
    trace = run.require_trace()
    findings = []
    diff = trace_difference(trace, run.run(run.keys, run.identity))
    if diff is not None:
        findings.append(diff._replace(what=f"same keys, different outputs: {diff.what}"))
    other = run.run(run.key_data(run.seed + 1), run.identity)
    passed = "same key replays bit for bit; another key changes the rollout"
    if trace_difference(trace, other) is None:
        findings.append(Finding(None, None, "a different key changed nothing", {}, 1))
    elif tree_difference(jax.tree.map(lambda x: x[0], trace.states),
                         jax.tree.map(lambda x: x[0], other.states), "", lead=1) is None:
        passed += " (though not the start states: reset ignores its key)"
    return judge(findings, passed)


@env_check("batch_permutation", "permuting the batch's reset keys and per-step keys permutes "
           f"every output: integers and booleans bit for bit, floats up to {ULPS} ulps apart (XLA "
           "may round one lane of a vectorised batch differently from another).")
def batch_permutation(run: EnvRun) -> CheckResult:
    """A permutation of the keys' batch axis permutes the trace (floats up to ``ULPS`` units
    in the last place apart: the permuted run puts each environment in another lane)."""
    trace, B = run.require_trace(), run.batch_size
    if B < 2:
        return outcome(SKIPPED, "needs batch_size >= 2")
    perm = np.random.default_rng(run.seed).permutation(B)
    if (perm == np.arange(B)).all():
        perm = np.roll(perm, 1)
    diff = trace_difference(permute(trace, perm), run.run(run.keys, perm.astype(np.int32)),
                            ULPS)
    findings = []
    if diff is not None:
        values = dict(diff.values)
        values["original env"] = int(perm[diff.env]) if diff.env is not None else -1
        findings.append(diff._replace(what=f"permuted keys do not permute the outputs: "
                                           f"{diff.what}", values=values))
    return judge(findings, f"permuted keys permute every output (floats within {ULPS} ulps)")


@env_check("autoreset_final_observation", "`rollax.collect_autoreset` keeps the true final "
           "observation: on an ending transition `next_observation` is the observation of the "
           "state the step produced (up to rounding), otherwise `next_observation[t] == "
           "observation[t + 1]`; after an ending the next row is a fresh, live episode.")
def autoreset_final_observation(run: EnvRun) -> CheckResult:
    """The auto-reset collector against absorbing re-steps (see ``autoreset_checks``)."""
    trace, shapes = run.require_trace(), run.require_shapes()
    if run.autoreset_fn is None:
        return outcome(SKIPPED, "autoreset_fn=None")
    if not _is(shapes.terminated, (), np.bool_) or not _is(shapes.truncated, (), np.bool_):
        return outcome(SKIPPED, "needs bool terminated and truncated (see 'step_output')")
    try:
        start_states = jax.tree.map(lambda x: x[0], trace.states)
        rows = record_rows(run.env, run.policy, run.params, run.autoreset_fn, start_states,
                           jax.random.key(run.seed + 2), run.keys, run.run)
        findings = final_observation_findings(rows)
    except Exception as error:
        return outcome(FAILED, f"auto-reset collection raised {error_text(error)}")
    return judge(findings, f"{counted(rows.ending.sum(), 'episode end')}, final observations "
                           f"kept")


def _episodes_end_result(run: EnvRun) -> CheckResult:
    event, T, B = run.flags.event, run.num_steps, run.batch_size
    ended = event.any(axis=0)
    horizon = run.horizon
    hint = (f"; horizon {horizon} <= {counted(T, 'step')}: truncation missing?"
            if horizon is not None and horizon <= T else " (raise num_steps)")
    if not ended.any():
        return outcome(WARNING, f"no episode ended within {counted(T, 'step')}, the ending "
                                f"contracts were not exercised{hint}")
    if not ended.all():
        missing = int(np.flatnonzero(~ended)[0])
        return outcome(WARNING, f"{int((~ended).sum()):,} of {counted(B, 'episode')} did not "
                                f"end within {counted(T, 'step')} (first: env {missing}){hint}",
                       None, missing)
    lengths = np.argmax(event, axis=0) + 1
    return outcome(PASSED, f"{'all ' if B > 1 else ''}{counted(B, 'episode')} ended "
                           f"(lengths {int(lengths.min())}.."
                           f"{int(lengths.max())})")


@env_check("episodes_end", "a warning (never a failure) when some episode did not end within "
           "`num_steps`.")
def episodes_end(run: EnvRun) -> CheckResult:
    """Every episode ended within ``num_steps`` (else the ending contracts were not tested)."""
    result = _episodes_end_result(run)
    if run.from_horizon:
        return result
    return outcome(WARNING, f"env has no horizon, ran {counted(run.num_steps, 'step')}: "
                            f"{result.message}",
                   result.step, result.env)


def check_env(env: Any, *, batch_size: int = 16, num_steps: int | None = None, seed: int = 0,
              collect_fn: Callable | None = None,
              autoreset_fn: Callable | None = collect_autoreset) -> CheckReport:
    """Check ``env`` against the environment contracts of ``docs/contract.md`` §1-2, jitted and
    vmapped.

    Drives ``batch_size`` environments for ``num_steps`` steps (default: ``env.horizon + 3``, so
    every episode can end and some absorbing steps follow, at most ``MAX_DEFAULT_STEPS`` =
    1024: a continuing task's long horizon is checked on its first 1024 steps) with uniformly
    random actions (:class:`RandomPolicy`), keys derived from ``jax.random.key(seed)`` as
    :func:`rollax.collect` derives them. Works for deterministic and stochastic environments,
    ``Discrete``, ``Box``, ``MultiDiscrete`` and ``MultiBinary`` spaces, and observations of a
    ``Dict`` or ``Tuple`` of them (another space, e.g. a plain dict, is a ``ValueError``). Nothing
    is raised for a broken environment: the report says which checks failed (``ENV_CHECKS``,
    described in the package docstring) and where.

    ``collect_fn``: also check this collector (signature of :func:`rollax.collect`) with the
    random policy, as ``check_collector`` does. ``autoreset_fn``: the auto-reset collector
    whose final observations are checked (signature of :func:`rollax.collect_autoreset`).

    Example::

        report = check_env(rollax.make("corridor"))
        print(report)             # one row per check
        report.raise_if_failed()  # EnvContractError (a ValueError) listing the failures
    """
    check_count("batch_size", batch_size)
    if num_steps is None:
        num_steps, from_horizon = default_steps(env)
    else:
        check_count("num_steps", num_steps)
        from_horizon = True
    problem = unsupported_space(env, describe(env))
    if problem is not None:
        raise ValueError(problem)
    policy = RandomPolicy.for_space(env.action_space)
    run = EnvRun(env, policy, policy.init(), int(batch_size), int(num_steps), seed, from_horizon,
                 autoreset_fn)
    results = ENV_REGISTRY.run(run)
    if collect_fn is not None and run.trace is not None:
        results += collector_results(collect_fn, run)
    return CheckReport(f"check_env({describe(env)})", results, run.settings)

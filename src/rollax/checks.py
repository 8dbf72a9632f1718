"""Contract checks for environments and collectors: ``check_env`` and ``check_collector``.

``check_env(env)`` drives any environment that follows :mod:`rollax.envs.base` (deterministic
or stochastic, ``Discrete`` or ``Box`` actions) with uniformly random actions, under ``jit`` and
``vmap``, and checks the contracts of spec §1-2 on every state it visits. ``check_collector``
checks a collector function with the signature of :func:`rollax.collect` against the key
ownership and masks of spec §2, with :func:`rollax.collect` itself as the reference.

Both return a :class:`CheckReport`: one :class:`CheckResult` per named check, ``passed``,
``failed``, ``warning`` or ``skipped``; a failure names the first offending step and
environment index and the values involved, e.g.
``absorbing_reward: reward after done: step 5, env 3, reward 0.5``.

Conventions of the reports:

- ``step t`` is the transition index (0-based) of a time-major rollout; an observation or state
  is reported at the step that *produced* it, and a start state as ``reset`` (``step`` None).
- ``env b`` is the index in the batch; "first" means smallest step, then smallest env.
- Keys: ``check_env`` derives its keys exactly like :func:`rollax.collect` does,
  ``rollax.collection_keys(jax.random.key(seed), batch_size, num_steps, env.stochastic)``, so
  its absorbing rollout is ``rollax.rollout(env, RandomPolicy.for_space(env.action_space),
  None, *keys)`` and a failure can be replayed with the library's own functions. The
  "different key" run uses ``seed + 1``; the auto-reset run starts from the same start states
  with ``jax.random.key(seed + 2)``. Done states are also stepped with a few fixed probe
  actions (first / last / second actions of a ``Discrete`` space; corners and centre of a
  ``Box``), with the cell's own transition key.

Check names (``check_env``):

``runs``
    reset / step / observation / done trace, compile and run under ``jit`` and ``vmap``.
``reset_output``
    the start state's observation has the observation space's shape and dtype; ``done`` is a
    bool scalar.
``step_output``
    reward is a float32 scalar, ``terminated`` / ``truncated`` bool scalars; the next state has
    the start state's structure, shapes and dtypes.
``observation_in_space``
    every visited state's observation (start states included) is in ``observation_space``.
``finite_values``
    no NaN or inf in observations and rewards.
``events``
    ``terminated`` / ``truncated`` are events: never both on one step, at most one ending event
    per episode (an absorbing rollout is one episode per environment), none once done.
``done_flag``
    ``done(reset(key))`` is False and ``done`` becomes true exactly when an event fires:
    ``done(next) == done(state) | terminated | truncated``.
``absorbing_state``
    stepping a done state returns it unchanged, every leaf bit for bit (rollout action and
    several probe actions).
``absorbing_reward``
    stepping a done state gives reward 0.
``absorbing_events``
    stepping a done state gives no event.
``determinism``
    the same keys replay reset and the whole rollout bit for bit; a different key changes
    something.
``batch_permutation``
    permuting the batch's reset keys and per-step keys permutes every output.
``autoreset_final_observation``
    :func:`rollax.collect_autoreset` keeps the true final observation: on an ending transition
    ``next_observation`` is the observation of the state the step produced (re-stepped
    absorbingly from the same state, action and key; floats equal up to rounding, rtol 1e-5,
    since the re-step is a separately compiled program); otherwise ``next_observation[t] ==
    observation[t + 1]`` bit for bit; after an ending the next row is a fresh, live episode.
``episodes_end``
    a warning (never a failure) when some episode did not end within ``num_steps``.

Check names (``check_collector``, also run by ``check_env(..., collect_fn=...)``):

``collector_runs``
    ``collect_fn(env, policy, params, key, B, T)`` returns ``(final_state, trajectory)``.
``collector_shapes``
    every field time-major ``(T, B, ...)``; reward float32, active / events bool.
``active_mask``
    ``active`` is "live before the step": true up to and including the transition whose event
    ends the episode (that transition keeps its reward), false after it.
``active_never_rises``
    no environment becomes active again (the active count never rises).
``padding_zero_reward``
    inactive cells carry reward 0 and no events.
``collector_replay``
    the same key replays every field and the final state bit for bit.
``collector_key_changes_actions``
    another key changes the actions.
``keys_per_env``
    no key broadcast to all environments: informative action columns do not repeat across
    environments more often than under ``rollax.collect`` with the same key (needs a
    stochastic policy).
``keys_per_step``
    no key reused across steps: informative action rows do not repeat over time more often
    than under ``rollax.collect``.
``matches_reference``
    every field and the final state equal ``rollax.collect``'s for the same inputs, bit for bit.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollax.collect import collect, collect_autoreset, collection_keys
from rollax.envs.base import Discrete, Environment

__all__ = [
    "COLLECTOR_CHECKS",
    "ENV_CHECKS",
    "CheckReport",
    "CheckResult",
    "EnvContractError",
    "RandomPolicy",
    "check_collector",
    "check_env",
]

EXTRA_STEPS = 3
"""``num_steps`` defaults to ``env.horizon + EXTRA_STEPS``: every episode ends and a few
absorbing steps follow."""

FALLBACK_STEPS = 64
"""``num_steps`` for an environment without a ``horizon``."""

NUM_PROBES = 4
"""Extra actions tried on every state (done states must absorb all of them)."""

PASSED, FAILED, WARNING, SKIPPED = "passed", "failed", "warning", "skipped"

ENV_CHECKS = (
    "runs",
    "reset_output",
    "step_output",
    "observation_in_space",
    "finite_values",
    "events",
    "done_flag",
    "absorbing_state",
    "absorbing_reward",
    "absorbing_events",
    "determinism",
    "batch_permutation",
    "autoreset_final_observation",
    "episodes_end",
)

COLLECTOR_CHECKS = (
    "collector_runs",
    "collector_shapes",
    "active_mask",
    "active_never_rises",
    "padding_zero_reward",
    "collector_replay",
    "collector_key_changes_actions",
    "keys_per_env",
    "keys_per_step",
    "matches_reference",
)


# ---------------------------------------------------------------------------------------------
# Reports


class EnvContractError(ValueError):
    """An environment or collector broke a contract; the message is the report's summary."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One named check: its status and, for a failure, where it first failed."""

    name: str
    status: str
    """``"passed"``, ``"failed"``, ``"warning"`` or ``"skipped"``."""
    message: str = ""
    step: int | None = None
    """First offending step (transition index), None when not tied to a step (or at reset)."""
    env: int | None = None
    """First offending environment index in the batch, None when not tied to one."""
    values: dict = dataclasses.field(default_factory=dict)
    """The values involved, by name."""

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def line(self) -> str:
        return f"{self.name}: {self.status}" + (f": {self.message}" if self.message else "")


@dataclasses.dataclass
class CheckReport:
    """The results of :func:`check_env` or :func:`check_collector`, in check order."""

    subject: str
    results: list[CheckResult]
    settings: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skips do not count)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == FAILED]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == WARNING]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.results)

    def __getitem__(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no check named {name!r} (checks: {', '.join(self.names)})")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def __iter__(self):
        return iter(self.results)

    def summary(self) -> str:
        """One line per failure (and warning)."""
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        counts = {s: sum(r.status == s for r in self.results) for s in
                  (PASSED, FAILED, WARNING, SKIPPED)}
        head = (f"{self.subject} [{settings}]: " + ", ".join(f"{n} {s}" for s, n in
                                                            counts.items() if n))
        lines = [head] + [f"  {r.line()}" for r in self.failures + self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        width = max([len("check")] + [len(r.name) for r in self.results])
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        lines = [f"{self.subject} [{settings}]: {'OK' if self.ok else 'FAILED'}",
                 f"  {'check'.ljust(width)}  {'status'.ljust(7)}  details",
                 f"  {'-' * width}  {'-' * 7}  {'-' * 7}"]
        for r in self.results:
            status = r.status.upper() if r.status == FAILED else r.status
            lines.append(f"  {r.name.ljust(width)}  {status.ljust(7)}  {r.message}".rstrip())
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """``EnvContractError`` (a ``ValueError``) with the summary when a check failed."""
        if not self.ok:
            raise EnvContractError(self.summary())


# ---------------------------------------------------------------------------------------------
# Random actions


@dataclasses.dataclass(frozen=True)
class RandomPolicy:
    """Uniformly random actions from an action space, with the rollax policy interface
    (``sample(params, observation, key) -> (action, log_prob)``; ``params`` is ignored).

    ``Discrete``: uniform over ``0 .. n-1`` (a 32-bit draw modulo ``n``, like ``randint``).
    ``Box``: each coordinate uniform in ``[low, high]`` where both bounds are finite (and their
    distance is a finite float32), ``low + |normal|`` / ``high - |normal|`` where one is,
    standard normal where neither is (one uniform draw, Box-Muller for the normal).

    Hashable, so it is a valid static argument of :func:`rollax.collect`. Build it with
    :meth:`for_space`::

        policy = RandomPolicy.for_space(env.action_space)
        _, traj = rollax.collect(env, policy, None, jax.random.key(0), 16, env.horizon)
    """

    kind: str
    shape: tuple[int, ...]
    dtype: str
    n: int = 0
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @classmethod
    def for_space(cls, space) -> RandomPolicy:
        shape = tuple(int(d) for d in space.shape)
        dtype = np.dtype(space.dtype).name
        if isinstance(space, Discrete) or hasattr(space, "n"):
            return cls("discrete", shape, dtype, n=int(space.n))
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).ravel()
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).ravel()
        return cls("box", shape, dtype, low=tuple(float(v) for v in low),
                   high=tuple(float(v) for v in high))

    def init(self):
        return None

    def _bounds(self):
        low = np.asarray(self.low, np.float64).reshape(self.shape)
        high = np.asarray(self.high, np.float64).reshape(self.shape)
        width = high - low
        bounded = np.isfinite(low) & np.isfinite(high) & (np.abs(width) < np.finfo(np.float32).max)
        only_low = np.isfinite(low) & ~bounded & ~np.isfinite(high)
        only_high = np.isfinite(high) & ~bounded & ~np.isfinite(low)
        def safe(x):
            return np.where(np.isfinite(x), x, 0.0).astype(np.float32)

        return (safe(low), safe(high), np.where(bounded, width, 1.0).astype(np.float32),
                bounded, only_low, only_high)

    def sample(self, params, observation, key):
        if self.kind == "discrete":
            # one 32-bit draw reduced modulo n: uniform up to a bias below n / 2**32 (as
            # close to uniform as jax.random.randint, and much cheaper to compile)
            bits = jax.random.bits(key, self.shape, jnp.uint32)
            action = (bits % jnp.uint32(self.n)).astype(jnp.dtype(self.dtype))
            return action, self.log_prob(params, observation, action)
        low, high, width, bounded, only_low, only_high = self._bounds()
        u, v = jax.random.uniform(key, (2,) + self.shape, jnp.float32)
        # Box-Muller from the same draw: z standard normal
        z = jnp.sqrt(-2.0 * jnp.log1p(-u)) * jnp.cos(2.0 * jnp.pi * v)
        x = jnp.where(bounded, jnp.clip(low + u * width, low, high),
                      jnp.where(only_low, low + jnp.abs(z),
                                jnp.where(only_high, high - jnp.abs(z), z)))
        action = x.astype(jnp.dtype(self.dtype))
        return action, self.log_prob(params, observation, action)

    def log_prob(self, params, observation, action) -> jax.Array:
        if self.kind == "discrete":
            return jnp.float32(-math.log(self.n))
        low, high, width, bounded, only_low, only_high = self._bounds()
        x = jnp.asarray(action, jnp.float32)
        gauss = -0.5 * math.log(2 * math.pi)
        half = jnp.where(only_low, x - low, high - x)
        per = jnp.where(bounded, -jnp.log(width),
                        jnp.where(only_low | only_high, math.log(2.0) + gauss - 0.5 * half**2,
                                  gauss - 0.5 * x**2))
        return jnp.sum(per).astype(jnp.float32)


# ---------------------------------------------------------------------------------------------
# Small helpers


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _host(tree):
    """Every leaf as a numpy array (typed keys as their key data)."""
    return jax.tree.map(lambda x: np.asarray(jax.random.key_data(x) if _is_key(x) else x), tree)


def _bits(x: np.ndarray) -> np.ndarray:
    """``x``'s bytes, shape ``x.shape + (itemsize,)``: equal bits <=> equal bytes."""
    x = np.asarray(x)
    return np.ascontiguousarray(x.reshape(x.shape + (1,))).view(np.uint8)


def _cell_mismatch(a: np.ndarray, b: np.ndarray, lead: int) -> np.ndarray | None:
    """Per-cell bitwise difference over the first ``lead`` axes; None if the shapes differ."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    diff = _bits(a) != _bits(b)
    return diff.reshape(a.shape[:lead] + (-1,)).any(axis=-1)


def _cell_mismatch_close(a: np.ndarray, b: np.ndarray, lead: int, rtol=1e-5, atol=1e-6):
    """Like :func:`_cell_mismatch`, but floats only need to agree up to rounding (separately
    compiled programs may round the same computation differently in the last bits)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if not np.issubdtype(a.dtype, np.inexact):
        return _cell_mismatch(a, b, lead)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    return ~close.reshape(a.shape[:lead] + (-1,)).all(axis=-1)


def _same_bits(a, b) -> jax.Array:
    """In ``jit``: every leaf of ``a`` and ``b`` equal bit for bit (same structure required)."""
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    if tree_a != tree_b:
        return jnp.bool_(False)
    same = jnp.bool_(True)
    for x, y in zip(leaves_a, leaves_b):
        x, y = jnp.asarray(x), jnp.asarray(y)
        if _is_key(x) or _is_key(y):
            if not (_is_key(x) and _is_key(y)):
                return jnp.bool_(False)
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return jnp.bool_(False)
        if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype.itemsize in (2, 4, 8):
            unsigned = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[x.dtype.itemsize]
            x = jax.lax.bitcast_convert_type(x, unsigned)
            y = jax.lax.bitcast_convert_type(y, unsigned)
        same = same & jnp.all(x == y)
    return same


def _fmt(x) -> str:
    x = np.asarray(x)
    if x.ndim == 0:
        value = x.item()
        return repr(value) if not isinstance(value, float) else f"{value:.6g}"
    if x.size <= 8:
        return np.array2string(x, precision=6, separator=", ")
    flat = np.array2string(x.ravel()[:6], precision=6, separator=", ")[:-1]
    return f"{flat}, ...] (shape {x.shape})"


def _where(step, env) -> str:
    if step is None and env is None:
        return ""
    at = "reset" if step is None else f"step {step}"
    return at if env is None else f"{at}, env {env}"


class _Finding(NamedTuple):
    step: int | None
    env: int | None
    what: str
    values: dict
    priority: int = 0

    def order(self):
        return (-1 if self.step is None else self.step, -1 if self.env is None else self.env,
                self.priority)


def _result(name: str, findings: list[_Finding], passed: str = "") -> CheckResult:
    """Failed at the first finding (smallest step, then env), else passed."""
    findings = [f for f in findings if f is not None]
    if not findings:
        return CheckResult(name, PASSED, passed)
    first = min(findings, key=_Finding.order)
    details = [_where(first.step, first.env)]
    details += [f"{k} {_fmt(v)}" for k, v in first.values.items()]
    details = ", ".join(d for d in details if d)
    message = first.what + (f": {details}" if details else "")
    return CheckResult(name, FAILED, message, first.step, first.env,
                       {k: np.asarray(v) for k, v in first.values.items()})


def _first_cell(mask: np.ndarray):
    """(t, b) of the first True cell in row-major order, or None."""
    cells = np.argwhere(np.asarray(mask))
    return None if len(cells) == 0 else (int(cells[0][0]), int(cells[0][1]))


def _scalar_cells(x: np.ndarray, lead: int) -> np.ndarray:
    """``x`` with everything after the first ``lead`` axes flattened into one last axis."""
    x = np.asarray(x)
    return x.reshape(x.shape[:lead] + (-1,))


def _default_steps(env) -> tuple[int, bool]:
    horizon = getattr(env, "horizon", None)
    if isinstance(horizon, (int, np.integer)) and not isinstance(horizon, bool) and horizon > 0:
        return int(horizon) + EXTRA_STEPS, True
    return FALLBACK_STEPS, False


def _check_count(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _env_step(env, state, action, key):
    if env.stochastic:
        return env.step(state, action, key)
    return env.step(state, action)


def _describe(env) -> str:
    text = repr(env)
    if len(text) <= 80:
        return text
    name, horizon = getattr(env, "name", None), getattr(env, "horizon", None)
    if isinstance(name, str):
        text = f"{type(env).__name__}({name!r}, horizon={horizon})"
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------------------------------------------------------
# The absorbing trace


class _Trace(NamedTuple):
    """An absorbing rollout with everything the checks look at (host numpy arrays)."""

    states: Any
    """State pytree, leading ``(T + 1, B)``: the start states, then the state after each step."""
    observation: Any
    """``(T + 1, B, ...)``: observation of each state."""
    in_space: Any
    """``(T + 1, B)``: ``observation_space.contains`` of each observation."""
    done: Any
    """``(T + 1, B, ...)``: ``env.done`` of each state."""
    step_done: Any
    """``(T, B, ...)``: ``env.done`` of the state each step started from (``done[:-1]`` unless
    the states were overridden)."""
    action: Any
    reward: Any
    terminated: Any
    truncated: Any
    """``(T, B, ...)``: the rollout's action and the raw step outputs."""
    probe_action: Any
    probe_same: Any
    probe_reward: Any
    probe_terminated: Any
    probe_truncated: Any
    """``(T, B, K, ...)``: ``K`` extra actions tried on each state before the step; whether the
    state came back unchanged (bit for bit) and the step outputs."""


_STATE_FIELDS = ("states", "observation", "in_space", "done")


def _probe_actions(space) -> np.ndarray:
    """A few fixed actions of ``space``, shape ``(K,) + space.shape``: for ``Discrete`` the
    first, last, second and second-to-last; for ``Box`` the lower and upper corners, the centre
    and an alternating corner (an infinite bound replaced by a finite neighbour)."""
    shape, dtype = tuple(space.shape), np.dtype(space.dtype)
    if isinstance(space, Discrete) or hasattr(space, "n"):
        n = int(space.n)
        values = list(dict.fromkeys(v for v in (0, n - 1, 1, n - 2) if 0 <= v < n))
        return np.stack([np.full(shape, v, dtype) for v in values])
    low = np.broadcast_to(np.asarray(space.low, np.float64), shape)
    high = np.broadcast_to(np.asarray(space.high, np.float64), shape)
    fin_low, fin_high = np.isfinite(low), np.isfinite(high)
    lo = np.where(fin_low, low, np.where(fin_high, high - 1.0, -1.0))
    hi = np.where(fin_high, high, np.where(fin_low, low + 1.0, 1.0))
    mid = lo / 2 + hi / 2
    alternate = np.where(np.arange(lo.size).reshape(shape) % 2 == 0, lo, hi)
    return np.stack([lo, hi, mid, alternate]).astype(dtype)


_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 32


def _cached(build: Callable, *args):
    """``build(*args)``, memoised (the last ``_CACHE_SIZE``) on ``args`` when they are hashable:
    compiled functions are then reused across checks of the same environment."""
    try:
        key = (build, *args)
        hash(key)
    except TypeError:
        return build(*args)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = _CACHE[key] = build(*args)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


_KEYS_LOCK = threading.Lock()


@functools.cache
def _keys_fn(batch_size: int, num_steps: int, stochastic: bool):
    """``rollax.collection_keys`` as key data, compiled once per shape (shared by all
    environments)."""

    def keys(key):
        derived = collection_keys(key, batch_size, num_steps, stochastic)
        return jax.tree.map(jax.random.key_data, derived)

    return jax.jit(keys)


def _collection_key_data(batch_size, num_steps, stochastic, seed):
    with _KEYS_LOCK:  # one compilation per shape, also when checks run on several threads
        return _keys_fn(batch_size, num_steps, stochastic)(jax.random.key(seed))


def _make_tracer(env, policy, params):
    """A jitted ``(keys, perm, override, override_states, override_actions) -> _Trace``.

    ``keys``: key data of ``rollax.collection_keys(root_key, B, T, env.stochastic)``, their
    batch axis permuted by ``perm`` (B,). With ``override`` False the rollout is
    ``rollax.rollout``'s (same policy, same keys) with the states kept, and the fixed
    :func:`_probe_actions` tried on every state too (with the cell's own transition key: probes
    are not collection, and reusing the key keeps them permutable with the batch).

    With ``override`` True, step ``t`` starts from ``override_states[t]`` (T, B) with
    ``override_actions[t]`` instead of the carried state and sampled action: one absorbing
    step from each given state (used to re-step an auto-reset trajectory). The same compiled
    function serves both.
    """
    obs_space = env.observation_space
    probe_actions = _probe_actions(env.action_space)

    def view(state):
        observation = env.observation(state)
        return observation, jnp.asarray(obs_space.contains(observation), bool), env.done(state)

    def run(keys, perm, override, override_states, override_actions):
        reset_data, action_data, transition_data = keys
        wrap = jax.random.wrap_key_data
        reset_keys, action_keys = wrap(reset_data[perm]), wrap(action_data[:, perm])
        transition_keys = None if transition_data is None else wrap(transition_data[:, perm])

        def one(state, action_key, transition_key, forced_action):
            observation = env.observation(state)
            done = env.done(state)
            action, _ = policy.sample(params, observation, action_key)
            action = jnp.where(override, jnp.asarray(forced_action, action.dtype), action)
            # the rollout's action and the probes in one batched step (one copy of the code)
            actions = jnp.concatenate([jnp.asarray(action)[None],
                                       jnp.asarray(probe_actions, action.dtype)])

            def step(a):
                s, r, te, tr = _env_step(env, state, a, transition_key)
                return s, _same_bits(s, state), r, te, tr

            states, same, rewards, terms, truncs = jax.vmap(step)(actions)
            next_state = jax.tree.map(lambda x: x[0], states)
            row = (next_state, *view(next_state), done, action, rewards[0], terms[0],
                   truncs[0], actions[1:], same[1:], rewards[1:], terms[1:], truncs[1:])
            return next_state, row

        def body(carry, xs):
            akeys, tkeys, forced_states, forced_actions = xs
            state = jax.lax.cond(override, lambda: forced_states, lambda: carry)
            if tkeys is None:
                return jax.vmap(lambda s, k, a: one(s, k, None, a))(state, akeys, forced_actions)
            return jax.vmap(one)(state, akeys, tkeys, forced_actions)

        state0 = jax.vmap(env.reset)(reset_keys)
        xs = (action_keys, transition_keys, override_states, override_actions)
        _, rows = jax.lax.scan(body, state0, xs)
        (next_states, observation, in_space, done, step_done, action, reward, terminated,
         truncated, p_action, p_same, p_reward, p_term, p_trunc) = rows
        obs0, in0, done0 = jax.vmap(view)(state0)

        def prepend(first, rest):
            return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], axis=0), first, rest)

        return _Trace(prepend(state0, next_states), prepend(obs0, observation),
                      prepend(in0, in_space), prepend(done0, done), step_done, action, reward,
                      terminated, truncated, p_action, p_same, p_reward, p_term, p_trunc)

    return jax.jit(run)


def _no_override(env, policy, params, batch_size, num_steps):
    """Zero ``(override_states, override_actions)`` of the right shapes (host arrays)."""
    key = jax.random.key(0)
    state = jax.eval_shape(env.reset, key)
    action = jax.eval_shape(lambda s, k: policy.sample(params, env.observation(s), k)[0],
                            state, key)
    lead = (num_steps, batch_size)

    def zeros(leaf):
        if _is_key(leaf):  # a key inside the state: zero key data, wrapped
            data = jax.eval_shape(jax.random.key_data, leaf)
            return jax.random.wrap_key_data(np.zeros(lead + data.shape, data.dtype))
        return np.zeros(lead + tuple(leaf.shape), leaf.dtype)

    return jax.tree.map(zeros, state), zeros(action)


# ---------------------------------------------------------------------------------------------
# Static checks (shapes and dtypes, by jax.eval_shape)


def _static_checks(env, policy, params, key):
    """``(reset_output, step_output)`` results from abstract evaluation of one environment."""
    obs_space = env.observation_space
    want_shape, want_dtype = tuple(obs_space.shape), np.dtype(obs_space.dtype)
    state = jax.eval_shape(env.reset, key)
    obs = jax.eval_shape(env.observation, state)
    done = jax.eval_shape(env.done, state)

    reset = []
    if tuple(obs.shape) != want_shape or np.dtype(obs.dtype) != want_dtype:
        reset.append(_Finding(None, None, "start observation does not match observation_space",
                              {"observation": f"{obs.dtype}{list(obs.shape)}",
                               "space": f"{want_dtype}{list(want_shape)}"}))
    if tuple(done.shape) != () or np.dtype(done.dtype) != np.bool_:
        reset.append(_Finding(None, None, "done(state) is not a bool scalar",
                              {"done": f"{done.dtype}{list(done.shape)}"}, 1))

    action = jax.eval_shape(lambda o, k: policy.sample(params, o, k)[0], obs, key)
    next_state, reward, terminated, truncated = jax.eval_shape(
        lambda s, a, k: _env_step(env, s, a, k), state, action, key)
    step = []
    if tuple(reward.shape) != () or np.dtype(reward.dtype) != np.float32:
        step.append(_Finding(None, None, "reward is not a float32 scalar",
                             {"reward": f"{reward.dtype}{list(reward.shape)}"}))
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if tuple(flag.shape) != () or np.dtype(flag.dtype) != np.bool_:
            step.append(_Finding(None, None, f"{name} is not a bool scalar",
                                 {name: f"{flag.dtype}{list(flag.shape)}"}, 1))
    before, tree_before = jax.tree_util.tree_flatten_with_path(state)
    after, tree_after = jax.tree_util.tree_flatten_with_path(next_state)
    if tree_before != tree_after:
        step.append(_Finding(None, None, "step changes the state's structure",
                             {"reset": str(tree_before), "step": str(tree_after)}, 2))
    else:
        for (path, a), (_, b) in zip(before, after):
            if a.shape != b.shape or a.dtype != b.dtype:
                step.append(_Finding(None, None, f"step changes state leaf "
                                     f"{jax.tree_util.keystr(path)}",
                                     {"reset": f"{a.dtype}{list(a.shape)}",
                                      "step": f"{b.dtype}{list(b.shape)}"}, 2))
                break
    next_obs = jax.eval_shape(env.observation, next_state)
    if tuple(next_obs.shape) != want_shape or np.dtype(next_obs.dtype) != want_dtype:
        step.append(_Finding(None, None, "observation after a step does not match "
                             "observation_space",
                             {"observation": f"{next_obs.dtype}{list(next_obs.shape)}",
                              "space": f"{want_dtype}{list(want_shape)}"}, 3))
    return (_result("reset_output", reset, "observation shape/dtype match, done is bool"),
            _result("step_output", step, "float32 reward, bool events, stable state types"))


# ---------------------------------------------------------------------------------------------
# Checks on one trace


def _trace_checks(trace: _Trace, num_steps: int, batch_size: int,
                  horizon: int | None) -> list[CheckResult]:
    T, B = num_steps, batch_size
    done = _scalar_cells(trace.done, 2).any(axis=-1)  # (T + 1, B)
    done_before, done_after = done[:-1], done[1:]
    reward = _scalar_cells(trace.reward, 2)  # (T, B, R)
    term = _scalar_cells(trace.terminated, 2).astype(bool).any(axis=-1)
    trunc = _scalar_cells(trace.truncated, 2).astype(bool).any(axis=-1)
    event = term | trunc
    obs = np.asarray(trace.observation)
    results = []

    def state_step(i):  # index into (T + 1) -> the step that produced it
        return None if i == 0 else i - 1

    # observation_in_space ------------------------------------------------------------------
    findings = []
    cell = _first_cell(~np.asarray(trace.in_space, bool))
    if cell is not None:
        i, b = cell
        findings.append(_Finding(state_step(i), b, "observation outside observation_space",
                                 {"observation": obs[i, b]}))
    results.append(_result("observation_in_space", findings,
                           f"{(T + 1) * B} observations in the space"))

    # finite_values ---------------------------------------------------------------------------
    findings = []
    if np.issubdtype(obs.dtype, np.inexact):
        cell = _first_cell(~np.isfinite(_scalar_cells(obs, 2)).all(axis=-1))
        if cell is not None:
            i, b = cell
            findings.append(_Finding(state_step(i), b, "non-finite observation",
                                     {"observation": obs[i, b]}))
    if np.issubdtype(reward.dtype, np.inexact):
        cell = _first_cell(~np.isfinite(reward).all(axis=-1))
        if cell is not None:
            t, b = cell
            findings.append(_Finding(t, b, "non-finite reward",
                                     {"reward": np.asarray(trace.reward)[t, b]}))
    results.append(_result("finite_values", findings, "no NaN or inf"))

    # events ----------------------------------------------------------------------------------
    findings = []
    cell = _first_cell(term & trunc)
    if cell is not None:
        findings.append(_Finding(*cell, "terminated and truncated on one step", {}))
    count = np.cumsum(event, axis=0)
    cell = _first_cell(event & (count >= 2))
    if cell is not None:
        t, b = cell
        first = int(np.argmax(event[:, b]))
        name = "terminated" if term[t, b] else "truncated"
        findings.append(_Finding(t, b, f"second ending event in one episode ({name})",
                                 {"first event at step": first}, 1))
    cell = _first_cell(event & done_before)
    if cell is not None:
        t, b = cell
        findings.append(_Finding(t, b, "ending event after done",
                                 {"terminated": term[t, b], "truncated": trunc[t, b]}, 2))
    results.append(_result("events", findings, f"{int(event.sum())} events, one per episode"))

    # done_flag -------------------------------------------------------------------------------
    findings = []
    cell = _first_cell(done[:1])
    if cell is not None:
        findings.append(_Finding(None, cell[1], "done(reset state) is True", {}))
    expected = done_before | event
    cell = _first_cell(done_after != expected)
    if cell is not None:
        t, b = cell
        findings.append(_Finding(t, b, "done does not match the events",
                                 {"done before": done_before[t, b], "terminated": term[t, b],
                                  "truncated": trunc[t, b], "done after": done_after[t, b]}))
    results.append(_result("done_flag", findings, "done == an event has fired"))

    # absorbing_state -------------------------------------------------------------------------
    findings = []
    leaves, _ = jax.tree_util.tree_flatten_with_path(trace.states)
    leaf_moved = []
    for path, leaf in leaves:
        leaf = np.asarray(leaf)
        leaf_moved.append((jax.tree_util.keystr(path), leaf,
                           _cell_mismatch(leaf[:-1], leaf[1:], 2) & done_before))
    moved = np.zeros((T, B), bool)
    for _, _, m in leaf_moved:
        moved |= m
    cell = _first_cell(moved)
    if cell is not None:
        t, b = cell
        name, leaf, _ = next(item for item in leaf_moved if item[2][t, b])
        findings.append(_Finding(t, b, f"done state moved (leaf {name})",
                                 {"before": leaf[t, b], "after": leaf[t + 1, b]}))
    probe_moved = done_before[..., None] & ~np.asarray(trace.probe_same, bool)
    cell = _first_cell(probe_moved.any(axis=-1))
    if cell is not None:
        t, b = cell
        k = int(np.argmax(probe_moved[t, b]))
        findings.append(_Finding(t, b, "done state moved under a probe action",
                                 {"action": np.asarray(trace.probe_action)[t, b, k]}, 1))
    results.append(_result("absorbing_state", findings,
                           f"{int(done_before.sum())} done states unchanged"))

    # absorbing_reward ------------------------------------------------------------------------
    findings = []
    cell = _first_cell(done_before & (reward != 0).any(axis=-1))
    if cell is not None:
        t, b = cell
        findings.append(_Finding(t, b, "reward after done",
                                 {"reward": np.asarray(trace.reward)[t, b]}))
    p_reward = _scalar_cells(trace.probe_reward, 3)
    p_bad = done_before[..., None] & (p_reward != 0).any(axis=-1)
    cell = _first_cell(p_bad.any(axis=-1))
    if cell is not None:
        t, b = cell
        k = int(np.argmax(p_bad[t, b]))
        findings.append(_Finding(t, b, "reward after done (probe action)",
                                 {"reward": np.asarray(trace.probe_reward)[t, b, k],
                                  "action": np.asarray(trace.probe_action)[t, b, k]}, 1))
    results.append(_result("absorbing_reward", findings, "reward 0 once done"))

    # absorbing_events ------------------------------------------------------------------------
    findings = []
    cell = _first_cell(done_before & event)
    if cell is not None:
        t, b = cell
        findings.append(_Finding(t, b, "event after done",
                                 {"terminated": term[t, b], "truncated": trunc[t, b]}))
    p_event = (_scalar_cells(trace.probe_terminated, 3).astype(bool).any(axis=-1)
               | _scalar_cells(trace.probe_truncated, 3).astype(bool).any(axis=-1))
    p_bad = done_before[..., None] & p_event
    cell = _first_cell(p_bad.any(axis=-1))
    if cell is not None:
        t, b = cell
        k = int(np.argmax(p_bad[t, b]))
        findings.append(_Finding(t, b, "event after done (probe action)",
                                 {"terminated": np.asarray(trace.probe_terminated)[t, b, k],
                                  "truncated": np.asarray(trace.probe_truncated)[t, b, k],
                                  "action": np.asarray(trace.probe_action)[t, b, k]}, 1))
    results.append(_result("absorbing_events", findings, "no event once done"))

    # episodes_end ----------------------------------------------------------------------------
    ended = event.any(axis=0)
    hint = (f"; horizon {horizon} <= {T} steps: truncation missing?"
            if horizon is not None and horizon <= T else " (raise num_steps)")
    if not ended.any():
        results.append(CheckResult("episodes_end", WARNING,
                                   f"no episode ended within {T} steps, the ending contracts "
                                   f"were not exercised{hint}"))
    elif not ended.all():
        missing = np.flatnonzero(~ended)
        results.append(CheckResult("episodes_end", WARNING,
                                   f"{len(missing)} of {B} episodes did not end within {T} "
                                   f"steps (first: env {int(missing[0])}){hint}",
                                   None, int(missing[0])))
    else:
        lengths = np.argmax(event, axis=0) + 1
        results.append(CheckResult("episodes_end", PASSED,
                                   f"all {B} episodes ended (lengths {int(lengths.min())}.."
                                   f"{int(lengths.max())})"))
    return results


def _first_difference(a: _Trace, b: _Trace):
    """The first (step, env, field) where two traces differ bit for bit, or None."""
    best = None
    for field in _Trace._fields:
        leaves_a, tree_a = jax.tree_util.tree_flatten_with_path(getattr(a, field))
        leaves_b, tree_b = jax.tree_util.tree_flatten_with_path(getattr(b, field))
        if tree_a != tree_b:
            return _Finding(None, None, f"{field} changed structure", {})
        for (path, x), (_, y) in zip(leaves_a, leaves_b):
            diff = _cell_mismatch(x, y, 2)
            name = field + jax.tree_util.keystr(path)
            if diff is None:
                return _Finding(None, None, f"{name} changed shape or dtype", {})
            cell = _first_cell(diff)
            if cell is None:
                continue
            i, env = cell
            step = (None if i == 0 else i - 1) if field in _STATE_FIELDS else i
            finding = _Finding(step, env, f"{name} differs", {"first": np.asarray(x)[i, env],
                                                               "second": np.asarray(y)[i, env]})
            if best is None or finding.order() < best.order():
                best = finding
    return best


def _permute(trace: _Trace, perm: np.ndarray) -> _Trace:
    return jax.tree.map(lambda x: np.asarray(x)[:, perm], trace)


# ---------------------------------------------------------------------------------------------
# Auto-reset: the true final observation


class _RecordedState(NamedTuple):
    inner: Any
    key: jax.Array
    """uint32 key data of the transition key that produced this state (zeros after reset)."""


@dataclasses.dataclass(frozen=True)
class _Recording(Environment):
    """``inner`` with observations ``(inner observation, state)`` and the transition key kept
    in the state, so an auto-reset trajectory shows which state and key each row came from."""

    inner: Any
    key_shape: tuple[int, ...] = (0,)

    @property
    def stochastic(self):  # type: ignore[override]
        return bool(self.inner.stochastic)

    @property
    def horizon(self):  # type: ignore[override]
        return getattr(self.inner, "horizon", None)

    def reset(self, key):
        return _RecordedState(self.inner.reset(key), jnp.zeros(self.key_shape, jnp.uint32))

    def step(self, state, action, key=None):
        next_state, reward, terminated, truncated = _env_step(self.inner, state.inner, action, key)
        data = (jax.random.key_data(key) if key is not None and self.stochastic
                else jnp.zeros(self.key_shape, jnp.uint32))
        return _RecordedState(next_state, data.astype(jnp.uint32)), reward, terminated, truncated

    def observation(self, state):
        return (self.inner.observation(state.inner), state)

    def done(self, state):
        return self.inner.done(state.inner)

    @property
    def observation_space(self):
        return self.inner.observation_space

    @property
    def action_space(self):
        return self.inner.action_space


@dataclasses.dataclass(frozen=True)
class _FirstOf:
    """The policy reading only the first element of a recorded observation."""

    policy: Any

    def sample(self, params, observation, key):
        return self.policy.sample(params, observation[0], key)


def _autoreset_check(env, policy, params, autoreset_fn, start_states, key, keys, run):
    """``autoreset_final_observation``: run ``autoreset_fn`` on a recording wrapper of ``env``
    from ``start_states`` (B,) and compare each row with an absorbing re-step from the same
    state, action and transition key (``run`` with the states overridden)."""
    key_shape = tuple(jax.random.key_data(key).shape)
    recording = _Recording(env, key_shape)
    B = jax.tree.leaves(start_states)[0].shape[0]
    T = keys[1].shape[0]
    state = _RecordedState(start_states, np.zeros((B,) + key_shape, np.uint32))
    _, traj = autoreset_fn(recording, _FirstOf(policy), params, state, key, T)
    (obs, before), (next_obs, after) = _host((traj.observation, traj.next_observation))
    term, trunc = np.asarray(traj.terminated), np.asarray(traj.truncated)
    restep_keys = (keys[0], keys[1], after.key if env.stochastic else None)
    restepped = run(restep_keys, np.arange(B, dtype=np.int32), True,
                    (before.inner, np.asarray(traj.action)))
    expected_obs = restepped.observation[1:]
    expected_state = jax.tree.map(lambda x: x[1:], restepped.states)
    expected_done = _scalar_cells(restepped.done[1:], 2).any(axis=-1)
    done_before = _scalar_cells(restepped.step_done, 2).any(axis=-1)
    before, after = before.inner, after.inner
    ending = np.asarray(term, bool) | np.asarray(trunc, bool)
    findings = []

    mismatch = _cell_mismatch_close(next_obs, expected_obs, 2)
    if mismatch is None:
        findings.append(_Finding(None, None, "next_observation has the wrong shape or dtype",
                                 {"next_observation": f"{next_obs.dtype}{list(next_obs.shape)}"}))
    else:
        cell = _first_cell(mismatch & ending)
        if cell is not None:
            t, b = cell
            findings.append(_Finding(t, b, "final observation lost at an episode end",
                                     {"next_observation": next_obs[t, b],
                                      "observation of the stepped state": expected_obs[t, b]}))
        cell = _first_cell(mismatch & ~ending)
        if cell is not None:
            t, b = cell
            findings.append(_Finding(t, b, "next_observation is not the observation of the "
                                     "stepped state",
                                     {"next_observation": next_obs[t, b],
                                      "observation of the stepped state": expected_obs[t, b]}))
    state_diff = np.zeros((T, B), bool)
    for x, y in zip(jax.tree.leaves(after), jax.tree.leaves(expected_state)):
        d = _cell_mismatch_close(x, y, 2)
        state_diff |= True if d is None else d
    cell = _first_cell(state_diff & ending)
    if cell is not None:
        findings.append(_Finding(*cell, "final state differs from an absorbing step from the "
                                 "same state, action and key", {}, 1))
    cell = _first_cell(ending & ~expected_done)
    if cell is not None:
        findings.append(_Finding(*cell, "ending transition leaves a state that is not done", {},
                                 2))
    if T > 1:
        carry = _cell_mismatch(next_obs[:-1], obs[1:], 2)
        cell = _first_cell(carry & ~ending[:-1])
        if cell is not None:
            t, b = cell
            findings.append(_Finding(t, b, "next_observation[t] != observation[t + 1] inside an "
                                     "episode", {"next_observation": next_obs[t, b],
                                                 "observation[t + 1]": obs[t + 1, b]}, 3))
        inner_diff = np.zeros((T - 1, B), bool)
        for x, y in zip(jax.tree.leaves(after), jax.tree.leaves(before)):
            d = _cell_mismatch(np.asarray(x)[:-1], np.asarray(y)[1:], 2)
            inner_diff |= True if d is None else d
        cell = _first_cell(inner_diff & ~ending[:-1])
        if cell is not None:
            findings.append(_Finding(*cell, "the state carried to the next step is not the "
                                     "stepped state inside an episode", {}, 4))
        fresh_done = done_before[1:]
        cell = _first_cell(ending[:-1] & fresh_done)
        if cell is not None:
            findings.append(_Finding(cell[0] + 1, cell[1], "the row after an episode end is not "
                                     "a live fresh episode", {}, 5))
    return _result("autoreset_final_observation", findings,
                   f"{int(ending.sum())} episode ends, final observations kept")


# ---------------------------------------------------------------------------------------------
# check_env


def check_env(env, *, batch_size: int = 16, num_steps: int | None = None, seed: int = 0,
              collect_fn: Callable | None = None,
              autoreset_fn: Callable = collect_autoreset) -> CheckReport:
    """Check ``env`` against the environment contracts of spec §1-2, jitted and vmapped.

    Drives ``batch_size`` environments for ``num_steps`` steps (default: ``env.horizon + 3``, so
    every episode can end and some absorbing steps follow) with uniformly random actions
    (:class:`RandomPolicy`), keys derived from ``jax.random.key(seed)`` as
    :func:`rollax.collect` derives them. Works for deterministic and stochastic environments,
    ``Discrete`` and ``Box`` actions. Nothing is raised for a broken environment: the report
    says which checks failed (see the module docstring for the check names) and where.

    ``collect_fn``: also check this collector (signature of :func:`rollax.collect`) with the
    random policy, as :func:`check_collector` does. ``autoreset_fn``: the auto-reset collector
    whose final observations are checked (signature of :func:`rollax.collect_autoreset`).

    Example::

        report = check_env(rollax.make("corridor"))
        print(report)             # one row per check
        report.raise_if_failed()  # EnvContractError (a ValueError) listing the failures
    """
    _check_count("batch_size", batch_size)
    if num_steps is None:
        num_steps, from_horizon = _default_steps(env)
    else:
        _check_count("num_steps", num_steps)
        from_horizon = True
    B, T = int(batch_size), int(num_steps)
    subject = f"check_env({_describe(env)})"
    settings = {"batch_size": B, "num_steps": T, "seed": seed}
    policy = RandomPolicy.for_space(env.action_space)
    params = policy.init()
    results: list[CheckResult] = []

    def finish():
        done = {r.name for r in results}
        for name in ENV_CHECKS:
            if name not in done:
                results.append(CheckResult(name, SKIPPED, "not run (see 'runs')"))
        order = {n: i for i, n in enumerate(ENV_CHECKS + COLLECTOR_CHECKS)}
        results.sort(key=lambda r: order.get(r.name, len(order)))
        return CheckReport(subject, results, settings)

    # static shapes and dtypes, then the traces
    try:
        reset_result, step_result = _static_checks(env, policy, params, jax.random.key(seed))
        results += [reset_result, step_result]
        compiled = _cached(_make_tracer, env, policy, params)
        no_override = _no_override(env, policy, params, B, T)

        def run(keys, perm, override=False, overrides=no_override):
            return _host(compiled(keys, perm, np.bool_(override), *overrides))

        identity = np.arange(B, dtype=np.int32)
        keys = _collection_key_data(B, T, bool(env.stochastic), seed)
        trace = run(keys, identity)
    except Exception as error:  # noqa: BLE001 - any failure to trace is the finding
        results.append(CheckResult("runs", FAILED, f"{type(error).__name__}: {error}"))
        return finish()
    results.append(CheckResult("runs", PASSED, "reset, step, observation, done under jit+vmap"))
    horizon = getattr(env, "horizon", None)
    horizon = int(horizon) if isinstance(horizon, (int, np.integer)) else None
    results += _trace_checks(trace, T, B, horizon)
    if not from_horizon:
        ends = results[-1]
        results[-1] = CheckResult("episodes_end", WARNING,
                                  f"env has no horizon, ran {T} steps: {ends.message}",
                                  ends.step, ends.env)

    # determinism: same keys replay bit for bit; another key changes something
    findings = []
    again = run(keys, identity)
    diff = _first_difference(trace, again)
    if diff is not None:
        findings.append(diff._replace(what=f"same keys, different outputs: {diff.what}"))
    other = run(_collection_key_data(B, T, bool(env.stochastic), seed + 1), identity)
    passed = "same key replays bit for bit; another key changes the rollout"
    if _first_difference(trace, other) is None:
        findings.append(_Finding(None, None, "a different key changed nothing", {}, 1))
    elif _tree_difference(jax.tree.map(lambda x: x[0], trace.states),
                          jax.tree.map(lambda x: x[0], other.states), "", lead=1) is None:
        passed += " (though not the start states: reset ignores its key)"
    results.append(_result("determinism", findings, passed))

    # batch permutation
    if B < 2:
        results.append(CheckResult("batch_permutation", SKIPPED, "needs batch_size >= 2"))
    else:
        perm = np.random.default_rng(seed).permutation(B)
        if (perm == np.arange(B)).all():
            perm = np.roll(perm, 1)
        permuted = run(keys, perm.astype(np.int32))
        diff = _first_difference(_permute(trace, perm), permuted)
        findings = []
        if diff is not None:
            values = dict(diff.values)
            values["original env"] = int(perm[diff.env]) if diff.env is not None else -1
            findings.append(diff._replace(what=f"permuted keys do not permute the outputs: "
                                               f"{diff.what}", values=values))
        results.append(_result("batch_permutation", findings,
                               "permuted keys permute every output"))
    # auto-reset keeps the final observation
    if autoreset_fn is None:
        results.append(CheckResult("autoreset_final_observation", SKIPPED,
                                   "autoreset_fn=None"))
    else:
        try:
            start_states = jax.tree.map(lambda x: x[0], trace.states)
            results.append(_autoreset_check(env, policy, params, autoreset_fn, start_states,
                                            jax.random.key(seed + 2), keys, run))
        except Exception as error:  # noqa: BLE001
            results.append(CheckResult("autoreset_final_observation", FAILED,
                                       f"auto-reset collection raised {type(error).__name__}: "
                                       f"{error}"))

    if collect_fn is not None:
        results += _collector_results(collect_fn, env, policy, params, B, T, seed)
    return finish()


# ---------------------------------------------------------------------------------------------
# check_collector


_BOOL_FIELDS = ("active", "terminated", "truncated")


def _duplicates(x: np.ndarray, axis: int):
    """``(count, first index)`` of slices along ``axis`` (0: rows over time, 1: columns over
    environments) that repeat an earlier slice bit for bit. Constant slices (one action all
    along) carry no information and are not counted: under a key reused across steps every
    column is constant, under a key broadcast to all environments every row is."""
    x = np.moveaxis(_scalar_cells(np.asarray(x), 2), axis, 0)
    seen, count, first = set(), 0, None
    for i in range(x.shape[0]):
        cells = _bits(x[i]).reshape(x.shape[1], -1)
        if (cells == cells[:1]).all():
            continue
        blob = cells.tobytes()
        if blob in seen:
            count += 1
            first = i if first is None else first
        seen.add(blob)
    return count, first


def _collector_results(collect_fn, env, policy, params, B, T, seed) -> list[CheckResult]:
    results: list[CheckResult] = []
    key, other_key = jax.random.key(seed), jax.random.key(seed + 1)
    names = COLLECTOR_CHECKS

    def skip_rest(reason):
        done = {r.name for r in results}
        results.extend(CheckResult(n, SKIPPED, reason) for n in names if n not in done)
        return results

    try:
        out = _host(collect_fn(env, policy, params, key, B, T))
        again = _host(collect_fn(env, policy, params, key, B, T))
        other = _host(collect_fn(env, policy, params, other_key, B, T))
    except Exception as error:  # noqa: BLE001
        results.append(CheckResult("collector_runs", FAILED, f"{type(error).__name__}: {error}"))
        return skip_rest("not run (see 'collector_runs')")
    results.append(CheckResult("collector_runs", PASSED, "returned (final_state, trajectory)"))
    try:
        reference = _host(collect(env, policy, params, key, B, T))
    except Exception as error:  # noqa: BLE001 - e.g. an unhashable policy
        reference = None
        reference_error = f"{type(error).__name__}: {error}"

    # collector_shapes ----------------------------------------------------------------------
    findings = []
    try:
        final, traj = out
        fields = {name: getattr(traj, name) for name in
                  ("observation", "action", "reward", "active", "terminated", "truncated",
                   "log_prob")}
    except Exception as error:  # noqa: BLE001
        results.append(CheckResult("collector_shapes", FAILED,
                                   f"not (final_state, Trajectory): {type(error).__name__}: "
                                   f"{error}"))
        return skip_rest("not run (see 'collector_shapes')")
    for name, value in fields.items():
        for leaf in jax.tree.leaves(value):
            if tuple(np.shape(leaf)[:2]) != (T, B):
                findings.append(_Finding(None, None, f"{name} is not time-major (T, B) = "
                                         f"({T}, {B})", {"shape": str(np.shape(leaf))}))
                break
    for name in _BOOL_FIELDS:
        x = np.asarray(fields[name])
        if x.shape != (T, B) or x.dtype != np.bool_:
            findings.append(_Finding(None, None, f"{name} is not bool (T, B)",
                                     {name: f"{x.dtype}{list(x.shape)}"}, 1))
    x = np.asarray(fields["reward"])
    if x.shape != (T, B) or x.dtype != np.float32:
        findings.append(_Finding(None, None, "reward is not float32 (T, B)",
                                 {"reward": f"{x.dtype}{list(x.shape)}"}, 1))
    results.append(_result("collector_shapes", findings, "time-major (T, B) fields"))
    if findings:
        return skip_rest("not run (see 'collector_shapes')")

    active = np.asarray(fields["active"])
    term, trunc = np.asarray(fields["terminated"]), np.asarray(fields["truncated"])
    reward = np.asarray(fields["reward"])
    event = term | trunc

    # active_mask: from the state before the step ------------------------------------------
    findings = []
    live_before = np.ones((T, B), bool)  # start states are live
    for t in range(1, T):
        live_before[t] = live_before[t - 1] & ~event[t - 1]
    cell = _first_cell(event & ~active & live_before)
    if cell is not None:
        t, b = cell
        findings.append(_Finding(t, b, "the transition that ends the episode is marked "
                                 "inactive (mask taken after the step?)",
                                 {"active": active[t, b], "terminated": term[t, b],
                                  "truncated": trunc[t, b], "reward": reward[t, b]}))
    cell = _first_cell(active != live_before)
    if cell is not None:
        t, b = cell
        findings.append(_Finding(t, b, "active is not 'live before the step'",
                                 {"active": active[t, b], "live before": live_before[t, b]}, 1))
    results.append(_result("active_mask", findings, "active == live before the step"))

    # active_never_rises ----------------------------------------------------------------------
    findings = []
    if T > 1:
        cell = _first_cell(active[1:] & ~active[:-1])
        if cell is not None:
            t, b = cell[0] + 1, cell[1]
            findings.append(_Finding(t, b, "active count rose (an environment revived)",
                                     {"active count before": int(active[t - 1].sum()),
                                      "active count": int(active[t].sum())}))
    results.append(_result("active_never_rises", findings, "active count never rises"))

    # padding_zero_reward ---------------------------------------------------------------------
    findings = []
    cell = _first_cell(~active & (reward != 0))
    if cell is not None:
        findings.append(_Finding(*cell, "padding reward", {"reward": reward[cell]}))
    cell = _first_cell(~active & event)
    if cell is not None:
        findings.append(_Finding(*cell, "event on a padded cell",
                                 {"terminated": term[cell], "truncated": trunc[cell]}, 1))
    results.append(_result("padding_zero_reward", findings, "padding: reward 0, no events"))

    # collector_replay ------------------------------------------------------------------------
    findings = []
    findings.append(_tree_difference(out, again, "same key, different outputs"))
    results.append(_result("collector_replay", findings, "same key replays bit for bit"))

    # collector_key_changes_actions -----------------------------------------------------------
    findings = []
    other_action = getattr(other[1], "action", None) if isinstance(other, tuple) else None
    changed = (None if other_action is None
               else _cell_mismatch(fields["action"], np.asarray(other_action), 2))
    if changed is None:
        findings.append(_Finding(None, None, "another key gave actions of another shape", {}))
    elif not changed.any():
        findings.append(_Finding(None, None, "another key gave the same actions", {}))
    results.append(_result("collector_key_changes_actions", findings,
                           "another key changes the actions"))

    # keys_per_env / keys_per_step ------------------------------------------------------------
    action = np.asarray(fields["action"])
    ref_action = None if reference is None else np.asarray(reference[1].action)
    dup_env, first_env = _duplicates(action, 1)
    ref_env = 0 if ref_action is None else _duplicates(ref_action, 1)[0]
    findings = []
    if B >= 2 and dup_env >= ref_env + max(1, B // 4):
        findings.append(_Finding(0, first_env, "action columns repeat across environments "
                                 "(one key broadcast to all environments?)",
                                 {"repeated columns": dup_env, "in the reference": ref_env}))
    results.append(_result("keys_per_env", findings,
                           f"{dup_env} repeated action columns (reference {ref_env})"))
    dup_step, first_step = _duplicates(action, 0)
    ref_step = 0 if ref_action is None else _duplicates(ref_action, 0)[0]
    findings = []
    if T >= 2 and dup_step >= ref_step + max(1, T // 4):
        findings.append(_Finding(first_step, None, "action rows repeat over time (a key reused "
                                 "across steps?)",
                                 {"repeated rows": dup_step, "in the reference": ref_step}))
    results.append(_result("keys_per_step", findings,
                           f"{dup_step} repeated action rows (reference {ref_step})"))

    # matches_reference -----------------------------------------------------------------------
    if reference is None:
        results.append(CheckResult("matches_reference", SKIPPED,
                                   f"rollax.collect failed: {reference_error}"))
    else:
        findings = []
        _, ref_traj = reference
        for index, (name, value) in enumerate(fields.items()):
            expected = np.asarray(getattr(ref_traj, name))
            d = _cell_mismatch(value, expected, 2)
            if d is None:
                findings.append(_Finding(None, None, f"{name} has another shape or dtype than "
                                         f"rollax.collect's", {}))
                continue
            cell = _first_cell(d)
            if cell is not None:
                findings.append(_Finding(*cell, f"{name} differs from rollax.collect",
                                         {"collector": np.asarray(value)[cell],
                                          "rollax.collect": expected[cell]}, index))
        if not findings:
            d = _tree_difference(final, reference[0], "final state differs from rollax.collect's",
                                 lead=1)
            findings.append(d)
        results.append(_result("matches_reference", findings,
                               "bit for bit equal to rollax.collect"))
    return results


def _tree_difference(a, b, what: str, lead: int = 2):
    """The first (step, env) where two pytrees of time-major (or batch) arrays differ."""
    leaves_a, tree_a = jax.tree_util.tree_flatten_with_path(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten_with_path(b)
    if tree_a != tree_b:
        return _Finding(None, None, f"{what}: different structure", {})
    best = None
    for (path, x), (_, y) in zip(leaves_a, leaves_b):
        x, y = np.asarray(x), np.asarray(y)
        k = min(lead, x.ndim)
        d = _cell_mismatch(x, y, k)
        name = jax.tree_util.keystr(path)
        if d is None:
            return _Finding(None, None, f"{what}: {name} changed shape or dtype", {})
        if k == 0:
            cell = (0, 0) if d.any() else None
            f = None if cell is None else _Finding(None, None, f"{what} ({name})", {})
        elif k == 1:
            idx = np.flatnonzero(d)
            f = None if len(idx) == 0 else _Finding(None, int(idx[0]), f"{what} ({name})",
                                                    {"first": x[idx[0]], "second": y[idx[0]]})
        else:
            cell = _first_cell(d)
            f = None if cell is None else _Finding(cell[0], cell[1], f"{what} ({name})",
                                                   {"first": x[cell], "second": y[cell]})
        if f is not None and (best is None or f.order() < best.order()):
            best = f
    return best


def check_collector(collect_fn: Callable, env, policy=None, params=None, *,
                    batch_size: int = 16, num_steps: int | None = None,
                    seed: int = 0) -> CheckReport:
    """Check a collector with the signature of :func:`rollax.collect` against spec §2.

    ``collect_fn(env, policy, params, key, batch_size, num_steps) -> (final_state,
    trajectory)`` is called with ``jax.random.key(seed)`` (twice) and ``jax.random.key(seed +
    1)``, and compared with ``rollax.collect`` on the same inputs. ``policy`` defaults to
    uniformly random actions (:class:`RandomPolicy`); the key checks (``keys_per_env``,
    ``keys_per_step``) need a stochastic policy and count repeated action columns / rows
    against the reference's own count, so a correct collector never fails them. ``num_steps``
    defaults to ``env.horizon + 3``. Check names: :data:`COLLECTOR_CHECKS`.

    Example::

        policy = rollax.BernoulliPolicy(3)
        report = check_collector(my_collect, rollax.make("corridor"), policy, policy.init(),
                                 batch_size=16, num_steps=10)
        report.raise_if_failed()
    """
    _check_count("batch_size", batch_size)
    if num_steps is None:
        num_steps = _default_steps(env)[0]
    _check_count("num_steps", num_steps)
    if policy is None:
        policy = RandomPolicy.for_space(env.action_space)
        params = policy.init()
    name = getattr(collect_fn, "__qualname__", None) or repr(collect_fn)
    results = _collector_results(collect_fn, env, policy, params, int(batch_size),
                                 int(num_steps), seed)
    return CheckReport(f"check_collector({name}, {_describe(env)})", results,
                       {"batch_size": int(batch_size), "num_steps": int(num_steps),
                        "seed": seed})

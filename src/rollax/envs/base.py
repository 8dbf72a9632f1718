"""The functional environment interface and its spaces.

An environment is a small immutable object (a frozen dataclass) holding static settings; all
of its behaviour is pure functions over a pytree state, so it can be used under ``jit``,
``vmap`` and ``lax.scan``:

- ``reset(key) -> state`` for one environment (``vmap`` adds the batch);
- ``step(state, action) -> (next_state, reward, terminated, truncated)`` for a deterministic
  environment, ``step(state, action, key)`` for one whose transitions are random
  (``stochastic = True``); an environment writes only the task's ``transition`` and inherits
  ``step``, which adds the ending rules (:class:`Environment`; ``docs/contract.md §1``);
- ``observation(state)``: what a policy sees;
- ``done(state)``: whether the episode has already ended (the live mask is ``~done`` of the
  state *before* a step);
- optionally ``action_mask(state)``: the legal actions of a state, a bool array laid out for
  the action space (:mod:`rollax.envs.masks`); without it every action is legal.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

State = Any


@dataclasses.dataclass(frozen=True)
class Discrete:
    """``n`` actions or observations ``0 .. n-1`` of integer ``dtype``, scalar shape."""

    n: int
    dtype: Any = jnp.int32
    shape: tuple[int, ...] = ()

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.bool_(False)
        return jnp.all((x >= 0) & (x < self.n))


@dataclasses.dataclass(frozen=True)
class Box:
    """Real vectors of ``shape`` with elementwise bounds ``low <= x <= high``."""

    low: Any
    high: Any
    shape: tuple[int, ...]
    dtype: Any = jnp.float32

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape:
            return jnp.bool_(False)
        low = np.broadcast_to(np.asarray(self.low), self.shape)
        high = np.broadcast_to(np.asarray(self.high), self.shape)
        return jnp.all((x >= low) & (x <= high))


def _counts(name: str, values) -> tuple[int, ...]:
    """``values`` as a non-empty tuple of positive Python ints (``ValueError`` naming ``name``
    otherwise)."""
    array = np.asarray(values)
    if (array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer)
            or np.any(array < 1)):
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, "
                         f"got {values!r}")
    return tuple(int(v) for v in array)


@dataclasses.dataclass(frozen=True)
class MultiDiscrete:
    """Integer vectors ``x`` of shape ``(len(nvec),)``, one choice per component:
    ``0 <= x[i] < nvec[i]`` (``dtype`` int32). ``nvec`` is stored as a tuple of ints (a list or
    a 1-D integer array is converted), so the space is hashable."""

    nvec: tuple[int, ...]
    dtype: Any = jnp.int32

    def __post_init__(self) -> None:
        object.__setattr__(self, "nvec", _counts("nvec", self.nvec))

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.nvec),)

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.bool_(False)
        return jnp.all((x >= 0) & (x < np.asarray(self.nvec, np.int32)))


@dataclasses.dataclass(frozen=True)
class MultiBinary:
    """Vectors of ``n`` bits: integer ``dtype`` (int32), shape ``(n,)``, each value 0 or 1;
    as a :class:`MultiDiscrete` its ``nvec`` is ``(2,) * n``."""

    n: int
    dtype: Any = jnp.int32

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", _counts("n", (self.n,))[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,)

    @property
    def nvec(self) -> tuple[int, ...]:
        """Two values per component: ``(2,) * n``."""
        return (2,) * self.n

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.bool_(False)
        return jnp.all((x == 0) | (x == 1))


@dataclasses.dataclass(frozen=True, eq=False)
class Dict:
    """Named spaces: an observation is a ``dict`` with exactly these keys, each value in its
    space (which may itself be a :class:`Dict` or :class:`Tuple`). ``spaces`` is a mapping
    ``name -> space`` (or a sequence of ``(name, space)`` pairs), stored sorted by name: the
    order in which ``jax.tree.leaves`` lists a dict's values, so :func:`space_leaves` and the
    leaves of an observation line up. Observations only (actions are one array)."""

    spaces: Any

    def __post_init__(self) -> None:
        items = dict(self.spaces.items() if isinstance(self.spaces, Mapping) else self.spaces)
        if not items or not all(isinstance(k, str) for k in items):
            raise ValueError(f"Dict needs a non-empty mapping of names (str) to spaces, got "
                             f"{self.spaces!r}")
        object.__setattr__(self, "spaces", {k: items[k] for k in sorted(items)})

    def __getitem__(self, name: str) -> Any:
        return self.spaces[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dict) and self.spaces == other.spaces

    def __hash__(self) -> int:
        return hash(tuple(self.spaces.items()))

    def contains(self, x) -> jax.Array:
        if not isinstance(x, Mapping) or set(x) != set(self.spaces):
            return jnp.bool_(False)
        return jnp.all(jnp.stack([jnp.asarray(s.contains(x[k]), bool)
                                  for k, s in self.spaces.items()]))


@dataclasses.dataclass(frozen=True)
class Tuple:
    """Spaces in order: an observation is a ``tuple`` of ``len(spaces)`` values, each in its
    space (nestable). Observations only (actions are one array)."""

    spaces: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "spaces", tuple(self.spaces))
        if not self.spaces:
            raise ValueError("Tuple needs at least one space")

    def __getitem__(self, index: int) -> Any:
        return self.spaces[index]

    def __len__(self) -> int:
        return len(self.spaces)

    def contains(self, x) -> jax.Array:
        if not isinstance(x, (tuple, list)) or len(x) != len(self.spaces):
            return jnp.bool_(False)
        return jnp.all(jnp.stack([jnp.asarray(s.contains(v), bool)
                                  for s, v in zip(self.spaces, x)]))


Space = Discrete | Box | MultiDiscrete | MultiBinary
"""The spaces of one array (every action space; an observation's leaves)."""

ObservationSpace = Space | Dict | Tuple
"""An observation's space: one array's, or a :class:`Dict` / :class:`Tuple` of them, nested."""


def is_structured(space: Any) -> bool:
    """Whether ``space`` is a :class:`Dict` or :class:`Tuple` (an observation of several
    arrays)."""
    return isinstance(space, (Dict, Tuple))


def space_leaves(space: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(path, leaf space)`` of every array of an observation of ``space``, in the order of
    ``jax.tree.leaves(observation)``; the path as ``jax.tree_util.keystr`` writes it
    (``['image']``, ``[0]``, ``['pos'][1]``; ``""`` for a space of one array)."""
    if isinstance(space, Dict):
        return [leaf for k, s in space.spaces.items()
                for leaf in space_leaves(s, f"{prefix}[{k!r}]")]
    if isinstance(space, Tuple):
        return [leaf for i, s in enumerate(space.spaces)
                for leaf in space_leaves(s, f"{prefix}[{i}]")]
    return [(prefix, space)]


def mismatch_words(what: str, path: str = "") -> str:
    """How every check says that an observation (``what``: ``"start observation"``,
    ``"observation after a step"``) does not have its space's shape and dtype: the whole
    observation, or its leaf ``path`` (``['row']``) for a ``Dict`` / ``Tuple`` space. The same
    words for a JAX environment (``check_env``'s ``reset_output`` / ``step_output``) and a
    host one (:mod:`rollax.envs.host`)."""
    if path:
        return f"{what} leaf {path} does not match its space"
    return f"{what} does not match observation_space"


def space_tree(space: Any, leaf: Callable[[Any], Any]) -> Any:
    """An observation-shaped pytree: ``leaf(s)`` for each leaf space ``s`` of ``space``, inside
    the dicts and tuples of its :class:`Dict` and :class:`Tuple` nodes."""
    if isinstance(space, Dict):
        return {k: space_tree(s, leaf) for k, s in space.spaces.items()}
    if isinstance(space, Tuple):
        return tuple(space_tree(s, leaf) for s in space.spaces)
    return leaf(space)


class Environment(abc.ABC):
    """Base class of functional environments (subclasses are frozen dataclasses).

    A subclass writes the task's dynamics as :meth:`transition` and inherits :meth:`step`, which
    owns how episodes end (``docs/contract.md §1``), so that no environment restates it:

    - The state is a ``NamedTuple`` with (besides the task's own fields) ``elapsed``, int32, the
      live steps taken so far, and ``done``, bool, whether the episode has ended.
    - On a live state (``done`` false) ``step`` adds 1 to ``elapsed``. ``terminated`` is the
      task's own end as ``transition`` reports it; ``truncated`` is true when the new
      ``elapsed`` is at least ``horizon`` and the step did not terminate (ending on the last
      allowed step counts as terminated only). The new ``done`` is the old one or either event.
    - Both are events, true only on the step where they happen. A finished state absorbs:
      stepping it returns every leaf unchanged, reward 0 and both events false.
    - The reward is float32 (0 when not live), the events are bool scalars.

    The transition contract: ``transition(state, action, key) -> (next_state, reward,
    terminated)`` gives the task's next state (the ``elapsed`` and ``done`` it returns are
    ignored), the reward of that step and whether it reaches a terminal state (a bool scalar;
    ``step`` reads another dtype as ``!= 0`` and ``check_env`` fails it). It is traced for
    finished states too and its result discarded there, so it must be a pure, branch-free
    function of its arguments; ``key`` is the transition key (``None`` when not
    ``stochastic``). ``step`` casts each leaf of ``next_state`` back to the dtype of the same
    leaf of ``state``, so weakly typed leaves keep scan carries stable.
    """

    stochastic: ClassVar[bool] = False
    """True when ``step`` takes a key (random transitions)."""

    horizon: int
    """Live steps after which an episode is truncated."""

    @abc.abstractmethod
    def reset(self, key: jax.Array) -> State:
        """One environment's start state from its own reset key."""

    def transition(self, state: State, action: jax.Array, key: jax.Array | None
                   ) -> tuple[State, jax.Array, jax.Array]:
        """``(next_state, reward, terminated)`` of the task from a live ``state`` (contract in
        the class docstring). Required unless a subclass overrides :meth:`step` itself, as a
        wrapper around another environment does (gymnax's ``step_env``/``step`` split)."""
        raise NotImplementedError(f"{type(self).__name__} defines neither transition nor step")

    def step(self, state: State, action: jax.Array, key: jax.Array | None = None):
        """``(next_state, reward, terminated, truncated)`` for one environment: ``transition``
        with the ending rules of the class docstring applied."""
        if self.stochastic and key is None:
            raise ValueError(
                f"{type(self).__name__} is stochastic: step(state, action, key) needs a key"
            )
        live = ~state.done
        moved, reward, ends = self.transition(state, action, key)
        ends = jnp.asarray(ends).astype(bool)  # check_env's step_output fails a non-bool
        elapsed = state.elapsed + 1
        terminated = live & ends
        truncated = live & ~ends & (elapsed >= self.horizon)
        reward = jnp.where(live, reward, 0.0).astype(jnp.float32)
        moved = moved._replace(elapsed=elapsed, done=state.done)
        next_state = jax.tree.map(
            lambda new, old: jnp.where(live, new, old).astype(old.dtype), moved, state
        )
        next_state = next_state._replace(done=state.done | terminated | truncated)
        return next_state, reward, terminated, truncated

    @abc.abstractmethod
    def observation(self, state: State) -> Any:
        """The observation a policy sees in ``state``: one array, or a pytree (dicts and
        tuples) of arrays under a :class:`Dict` / :class:`Tuple` ``observation_space``."""

    def done(self, state: State) -> jax.Array:
        """Whether the episode ended before ``state`` (terminated or truncated)."""
        return state.done

    @property
    @abc.abstractmethod
    def observation_space(self) -> ObservationSpace: ...

    @property
    @abc.abstractmethod
    def action_space(self) -> Space: ...


def start_counters() -> tuple[jax.Array, jax.Array]:
    """The ending fields of a start state, ``(elapsed, done) = (0, False)`` (int32, bool): a
    ``reset`` fills the state's last two fields with them."""
    return jnp.zeros((), jnp.int32), jnp.zeros((), bool)


def step_with_key(env: Environment, state: State, action: jax.Array, key: jax.Array | None = None):
    """``env.step`` for any environment: ``key`` (the transition key) reaches a stochastic
    environment only; a deterministic one is stepped without it. Returns ``(next_state, reward,
    terminated, truncated)``."""
    if env.stochastic:
        return env.step(state, action, key)
    return env.step(state, action)

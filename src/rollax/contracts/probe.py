"""How the checker drives an environment: uniformly random actions (:class:`RandomPolicy`),
the fixed probe actions tried on every state, the default number of steps, and what it cannot
drive (an unhashable environment, a space that is not a ``Discrete``, ``Box``,
``MultiDiscrete`` or ``MultiBinary``, or for observations a ``Dict`` or ``Tuple`` of them)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.distributions import MASK_LOGIT
from rollax.envs.base import (
    Box,
    Discrete,
    MultiBinary,
    MultiDiscrete,
    is_structured,
    space_leaves,
    space_tree,
)
from rollax.envs.masks import action_mask, mask_problem

EXTRA_STEPS = 3
"""``num_steps`` defaults to ``env.horizon + EXTRA_STEPS``: every episode ends and a few
absorbing steps follow."""

MAX_DEFAULT_STEPS = 1024
"""The most steps ``num_steps`` defaults to: the trace keeps every visited state, so a long
horizon (a continuing task's ``horizon=10**9``) would need memory in proportion; past it the
checks run on the first ``MAX_DEFAULT_STEPS`` steps and ``episodes_end`` warns about the
episodes still running (a larger ``num_steps`` may be given)."""

FALLBACK_STEPS = 64
"""``num_steps`` for an environment without a ``horizon``."""


@dataclasses.dataclass(frozen=True)
class RandomPolicy:
    """Uniformly random actions from an action space, with the rollax policy interface
    (``sample(params, observation, key) -> (action, log_prob)``; ``params`` is ignored).

    ``Discrete``: uniform over ``0 .. n-1`` (a 32-bit draw modulo ``n``, like ``randint``).
    ``MultiDiscrete`` and ``MultiBinary`` (``nvec = (2,) * n``): each component ``i`` uniform
    over ``0 .. nvec[i]-1`` the same way, one 32-bit draw per component.
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
    nvec: tuple[int, ...] = ()

    @classmethod
    def for_space(cls, space: Any) -> RandomPolicy:
        """The uniform policy of a ``Discrete``, ``Box``, ``MultiDiscrete`` or ``MultiBinary``
        space."""
        shape = tuple(int(d) for d in space.shape)
        dtype = np.dtype(space.dtype).name
        if isinstance(space, (MultiDiscrete, MultiBinary)):
            return cls("multi", shape, dtype, nvec=tuple(int(n) for n in space.nvec))
        if isinstance(space, Discrete) or hasattr(space, "n"):
            return cls("discrete", shape, dtype, n=int(space.n))
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).ravel()
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).ravel()
        return cls("box", shape, dtype, low=tuple(float(v) for v in low),
                   high=tuple(float(v) for v in high))

    def init(self) -> None:
        """No parameters (None)."""

    def _bounds(self) -> tuple[np.ndarray, ...]:
        low = np.asarray(self.low, np.float64).reshape(self.shape)
        high = np.asarray(self.high, np.float64).reshape(self.shape)
        width = high - low
        bounded = np.isfinite(low) & np.isfinite(high) & (np.abs(width) < np.finfo(np.float32).max)
        only_low = np.isfinite(low) & ~bounded & ~np.isfinite(high)
        only_high = np.isfinite(high) & ~bounded & ~np.isfinite(low)

        def safe(x: np.ndarray) -> np.ndarray:
            return np.where(np.isfinite(x), x, 0.0).astype(np.float32)

        return (safe(low), safe(high), np.where(bounded, width, 1.0).astype(np.float32),
                bounded, only_low, only_high)

    def _legal_logits(self, mask: Any) -> jax.Array:
        """Logits uniform over the legal actions of ``mask`` (``MASK_LOGIT`` elsewhere): the
        mask's own shape, padding entries of a multi space excluded."""
        mask = jnp.asarray(mask).astype(bool)
        if self.kind == "multi":
            width = max(self.nvec)
            valid = np.arange(width)[None, :] < np.asarray(self.nvec)[:, None]
            mask = mask & valid
        return jnp.where(mask, 0.0, MASK_LOGIT)

    def sample(self, params: Any, observation: Any, key: jax.Array,
               mask: Any = None) -> tuple[jax.Array, jax.Array]:
        """``(action, log_prob)``: one uniformly random action; with an action ``mask``
        (:mod:`rollax.envs.masks`), one uniformly random legal action (uniform over the legal
        values of each component)."""
        if mask is not None:
            action = jax.random.categorical(key, self._legal_logits(mask))
            action = action.astype(jnp.dtype(self.dtype)).reshape(self.shape)
            return action, self.log_prob(params, observation, action, mask)
        if self.kind == "discrete":
            # one 32-bit draw reduced modulo n: uniform up to a bias below n / 2**32 (as
            # close to uniform as jax.random.randint, and much cheaper to compile)
            bits = jax.random.bits(key, self.shape, jnp.uint32)
            action = (bits % jnp.uint32(self.n)).astype(jnp.dtype(self.dtype))
            return action, self.log_prob(params, observation, action)
        if self.kind == "multi":
            bits = jax.random.bits(key, self.shape, jnp.uint32)
            action = (bits % np.asarray(self.nvec, np.uint32)).astype(jnp.dtype(self.dtype))
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

    def log_prob(self, params: Any, observation: Any, action: jax.Array,
                 mask: Any = None) -> jax.Array:
        """The log-density (log-probability) of ``action`` (under ``mask``, when given)."""
        if mask is not None:
            log_p = jax.nn.log_softmax(self._legal_logits(mask))
            index = jnp.asarray(action, jnp.int32).reshape(log_p.shape[:-1] + (1,))
            return jnp.sum(jnp.take_along_axis(log_p, index, axis=-1)).astype(jnp.float32)
        if self.kind == "discrete":
            return jnp.float32(-math.log(self.n))
        if self.kind == "multi":
            return jnp.float32(-sum(math.log(n) for n in self.nvec))
        low, high, width, bounded, only_low, only_high = self._bounds()
        x = jnp.asarray(action, jnp.float32)
        gauss = -0.5 * math.log(2 * math.pi)
        half = jnp.where(only_low, x - low, high - x)
        per = jnp.where(bounded, -jnp.log(width),
                        jnp.where(only_low | only_high, math.log(2.0) + gauss - 0.5 * half**2,
                                  gauss - 0.5 * x**2))
        return jnp.sum(per).astype(jnp.float32)


def usable_mask(env: Any, state: Any) -> Any:
    """``env``'s action mask of ``state`` when it fits the action space (bool, the layout of
    :func:`rollax.envs.masks.mask_shape`), else None: the checker drives an environment with a
    misshapen mask unmasked, and the ``action_mask_shape`` check reports the mask."""
    mask = action_mask(env, state)
    return None if mask is None or mask_problem(env, mask, "") is not None else mask


def sample_action(policy: Any, params: Any, env: Any, state: Any, key: jax.Array) -> Any:
    """``policy``'s action in ``state`` (given its mask when the environment has a usable
    one)."""
    mask = usable_mask(env, state)
    given = () if mask is None else (mask,)
    return policy.sample(params, env.observation(state), key, *given)[0]


def probe_actions(space: Any) -> np.ndarray:
    """A few fixed actions of ``space``, shape ``(K,) + space.shape``: for ``Discrete`` the
    first, last, second and second-to-last; for ``MultiDiscrete`` and ``MultiBinary`` the same
    per component (each clipped into its range, repeats dropped) and an alternating corner; for
    ``Box`` the lower and upper corners, the centre and an alternating corner (an infinite
    bound replaced by a finite neighbour)."""
    shape, dtype = tuple(space.shape), np.dtype(space.dtype)
    if isinstance(space, (MultiDiscrete, MultiBinary)):
        top = np.asarray(space.nvec, np.int64) - 1
        rows = [np.zeros_like(top), top, np.minimum(1, top), np.maximum(top - 1, 0),
                np.where(np.arange(top.size) % 2 == 0, 0, top)]
        unique = list(dict.fromkeys(tuple(int(v) for v in row) for row in rows))
        return np.asarray(unique, dtype).reshape((len(unique), *shape))
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


@dataclasses.dataclass
class Setup:
    """What a check run drives: ``env`` with ``policy`` / ``params``, ``batch_size``
    environments for ``num_steps`` steps, keys from ``seed``."""

    env: Any
    policy: Any
    params: Any
    batch_size: int
    num_steps: int
    seed: int

    @property
    def settings(self) -> dict:
        """The report's settings: ``batch_size``, ``num_steps``, ``seed``."""
        return {"batch_size": self.batch_size, "num_steps": self.num_steps, "seed": self.seed}


def default_steps(env: Any) -> tuple[int, bool]:
    """``(num_steps, from_horizon)``: ``env.horizon + EXTRA_STEPS`` up to
    ``MAX_DEFAULT_STEPS``, or ``FALLBACK_STEPS`` (and False) for an environment without a
    positive integer ``horizon``."""
    horizon = getattr(env, "horizon", None)
    if isinstance(horizon, (int, np.integer)) and not isinstance(horizon, bool) and horizon > 0:
        return min(int(horizon) + EXTRA_STEPS, MAX_DEFAULT_STEPS), True
    return FALLBACK_STEPS, False


SUPPORTED_SPACES = ("the supported spaces are rollax.Discrete, rollax.Box, rollax.MultiDiscrete "
                    "and rollax.MultiBinary, and for observations rollax.Dict and rollax.Tuple "
                    "of them (an action is one array; wrap a plain dict or tuple of spaces in "
                    "rollax.Dict or rollax.Tuple)")
"""What a refused space or observation is told."""


def first_line(err: BaseException) -> str:
    """``"TypeError: <the first line of its message>"``."""
    text = str(err).strip().partition("\n")[0]
    return f"{type(err).__name__}: {text}"


def unhashable(env: Any, name: str) -> str | None:
    """The one-line reason why ``env`` cannot be a static argument of ``jit`` (as
    :func:`rollax.collect` and the trainers take it), or None when it is hashable."""
    try:
        hash(env)
    except Exception as err:  # a non-frozen dataclass, or a list among a frozen one's fields
        return (f"environment {name!r} is not hashable ({first_line(err)}): environments must "
                f"be hashable: use @dataclasses.dataclass(frozen=True) with hashable fields "
                f"(tuples, not lists or arrays)")
    return None


def settable_attribute(env: Any) -> str | None:
    """The name of an attribute of ``env`` that can be set (each one tried by setting it to
    the value it holds, which changes nothing), or None when every attribute refuses, as a
    frozen dataclass's do (an object with no attributes of its own has none to set)."""
    names = list(getattr(env, "__dict__", {}))
    for cls in type(env).__mro__:  # the attributes of classes with __slots__
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    for name in dict.fromkeys(names):
        if name.startswith("__") or not hasattr(env, name):
            continue
        try:
            setattr(env, name, getattr(env, name))
        except Exception:  # FrozenInstanceError, AttributeError: this one cannot be set
            continue
        return name
    return None


def mutable(env: Any, name: str) -> str | None:
    """The one-line reason why ``env`` must not be used: one of its attributes can be set
    (a plain class setting its attributes in ``__init__``, a dataclass that is not frozen);
    ``jit`` keeps a compiled program per environment, so a change would go unseen. None for
    an immutable environment."""
    attribute = settable_attribute(env)
    if attribute is None:
        return None
    return (f"environment {name!r} is mutable (its attribute {attribute!r} can be set): "
            f"environments must be immutable: use @dataclasses.dataclass(frozen=True) with "
            f"hashable fields (tuples, not lists or arrays)")


def _space_kind(space: Any, observation: bool = False) -> str | None:
    """What ``space`` is when rollax cannot drive it (``"a dict"``), None for a ``Discrete``,
    ``Box``, ``MultiDiscrete`` or ``MultiBinary`` (or a space with the attributes of the first
    two: ``n``, or ``low`` and ``high``, with a tuple ``shape``, a ``dtype`` and
    ``contains``), and with ``observation`` for a ``Dict`` or ``Tuple`` of those."""
    if isinstance(space, (Discrete, Box, MultiDiscrete, MultiBinary)):
        return None
    if is_structured(space):
        if not observation:
            return f"a rollax.{type(space).__name__} (an action is one array)"
        for path, leaf in space_leaves(space):
            kind = _space_kind(leaf)
            if kind is not None:
                return f"a rollax.{type(space).__name__} whose leaf {path} is {kind}"
        return None
    if isinstance(space, Mapping):
        return "a dict"
    kind = hasattr(space, "n") or (hasattr(space, "low") and hasattr(space, "high"))
    usable = isinstance(getattr(space, "shape", None), tuple) and hasattr(space, "dtype")
    if kind and usable and hasattr(space, "contains"):
        return None
    return f"a {type(space).__name__}"


def unsupported_space(env: Any, name: str) -> str | None:
    """The one-line reason why rollax cannot drive ``env``'s ``observation_space`` or
    ``action_space`` (a plain dict, a ``Dict`` action, ...), or None."""
    for which in ("observation_space", "action_space"):
        kind = _space_kind(getattr(env, which), which == "observation_space")
        if kind is not None:
            return f"environment {name!r}: its {which} is {kind}; {SUPPORTED_SPACES}"
    return None


def leaf_paths(tree: Any) -> str:
    """The paths of a pytree's leaves, ``['cue'], ['grid']`` (``jax.tree_util.keystr``)."""
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    return ", ".join(paths) or "none"


def unsupported_observation(observation: Any, space: Any, name: str) -> str | None:
    """The one-line reason why an observation (its abstract value) does not have the layout of
    ``space`` (one array for a space of one array, the same dict keys and tuple lengths for a
    ``Dict`` or ``Tuple``), or None."""
    if is_structured(space):
        want = space_tree(space, lambda s: 0)
        if jax.tree.structure(observation) == jax.tree.structure(want):
            return None
        return (f"environment {name!r}: observation(state) returns the leaves "
                f"{leaf_paths(observation)}, but its observation_space has "
                f"{leaf_paths(want)}")
    leaves = jax.tree.leaves(observation)
    if len(leaves) == 1 and leaves[0] is observation:
        return None
    kind = "a dict" if isinstance(observation, Mapping) else f"a {type(observation).__name__}"
    return (f"environment {name!r}: observation(state) returns {kind}, not one array; "
            f"an observation of several arrays needs a rollax.Dict or rollax.Tuple "
            f"observation_space")


def describe(env: Any) -> str:
    """A short name for ``env`` in a report's subject (at most 80 characters)."""
    text = repr(env)
    if len(text) <= 80:
        return text
    name, horizon = getattr(env, "name", None), getattr(env, "horizon", None)
    if isinstance(name, str):
        text = f"{type(env).__name__}({name!r}, horizon={horizon})"
    return text if len(text) <= 80 else text[:77] + "..."

"""Action masks: which actions of a state are legal (``docs/environments.md``, "Action masks").

An environment may define ``action_mask(state) -> bool array``; without it (or when it returns
``None``) every action is legal. The mask's layout follows the action space
(:func:`mask_shape`):

- ``Discrete(n)``: ``(n,)``, ``mask[a]`` whether action ``a`` is legal;
- ``MultiDiscrete(nvec)``: ``(K, max(nvec))``, ``mask[k, v]`` whether component ``k`` may take
  value ``v``; the padding entries ``v >= nvec[k]`` must be False (they are ignored);
- ``MultiBinary(n)``: ``(n, 2)``, ``mask[i, v]`` whether bit ``i`` may take value ``v`` (the
  layout of ``MultiDiscrete((2,) * n)``);
- ``Box``: no mask (refused, :func:`mask_problem`).

An action is legal when every component's value is (:func:`is_legal`); a live state must have
at least one legal action: a legal value for every component (:func:`has_legal`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Discrete, MultiBinary, MultiDiscrete

__all__ = ["action_mask", "has_action_mask", "has_legal", "is_legal", "mask_problem",
           "mask_shape"]


def has_action_mask(env: Any) -> bool:
    """Whether ``env`` defines ``action_mask`` (a callable attribute)."""
    return callable(getattr(env, "action_mask", None))


def action_mask(env: Any, state: Any) -> Any:
    """``env.action_mask(state)`` as the environment returns it, or None when ``env`` has no
    mask (every action legal)."""
    if not has_action_mask(env):
        return None
    return env.action_mask(state)


def mask_shape(space: Any) -> tuple[int, ...] | None:
    """The shape of an action mask for ``space`` (module docstring), or None for a space that
    takes no mask (``Box``)."""
    if isinstance(space, (MultiDiscrete, MultiBinary)):
        return (len(space.nvec), max(space.nvec))
    if isinstance(space, Discrete):
        return (int(space.n),)
    return None


def _valid(space: Any) -> np.ndarray:
    """The non-padding entries of a multi space's ``(K, max(nvec))`` mask."""
    nvec = np.asarray(space.nvec)
    return np.arange(max(space.nvec))[None, :] < nvec[:, None]


def is_legal(space: Any, mask: Any, action: Any) -> jax.Array:
    """Whether ``action`` (one action, or a batch ``(..., *space.shape)``) is legal under
    ``mask`` (``(..., *mask_shape(space))``, broadcast to the actions' batch); an action out of
    the space's range is not."""
    action = jnp.asarray(action).astype(jnp.int32)
    mask = jnp.asarray(mask).astype(bool)
    lead = action.shape[:action.ndim - len(tuple(space.shape))]
    mask = jnp.broadcast_to(mask, lead + mask.shape[mask.ndim - len(mask_shape(space) or ()):])
    if isinstance(space, (MultiDiscrete, MultiBinary)):
        width = max(space.nvec)
        nvec = np.asarray(space.nvec, np.int32).reshape((1,) * (action.ndim - 1) + (-1,))
        inside = (action >= 0) & (action < nvec)
        picked = jnp.take_along_axis(mask, jnp.clip(action, 0, width - 1)[..., None],
                                     axis=-1)[..., 0]
        return jnp.all(inside & picked, axis=-1)
    inside = (action >= 0) & (action < mask.shape[-1])
    picked = jnp.take_along_axis(mask, jnp.clip(action, 0, mask.shape[-1] - 1)[..., None],
                                 axis=-1)[..., 0]
    return inside & picked


def has_legal(space: Any, mask: Any) -> jax.Array:
    """Whether ``mask`` (``(..., *mask_shape(space))``) allows at least one action: a legal
    value for every component (padding entries do not count)."""
    mask = jnp.asarray(mask).astype(bool)
    if isinstance(space, (MultiDiscrete, MultiBinary)):
        valid = jnp.broadcast_to(_valid(space), mask.shape)
        return jnp.all(jnp.any(mask & valid, axis=-1), axis=-1)
    return jnp.any(mask, axis=-1)


def _type(x: Any) -> str:
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        return type(x).__name__
    return f"{np.dtype(x.dtype)}{list(x.shape)}"


def mask_problem(env: Any, mask: Any, name: str) -> str | None:
    """The one-line reason why ``mask`` (an ``action_mask(state)`` of ``env``, or its abstract
    value) does not fit ``env``'s action space, or None: masks are defined for ``Discrete``,
    ``MultiDiscrete`` and ``MultiBinary`` actions only, and must be one bool array of
    :func:`mask_shape`."""
    if mask is None:
        return None
    space = env.action_space
    want = mask_shape(space)
    if want is None:
        return (f"environment {name!r} defines action_mask, but its action space is "
                f"{type(space).__name__}: action masks need a Discrete, MultiDiscrete or "
                f"MultiBinary action space")
    shape = getattr(mask, "shape", None)
    dtype = getattr(mask, "dtype", None)
    if shape is None or dtype is None or tuple(shape) != want or np.dtype(dtype) != np.bool_:
        return (f"environment {name!r}: action_mask(state) is {_type(mask)}, the action space "
                f"{type(space).__name__} needs bool{list(want)}")
    return None

"""Checked mode: runtime checks with ``jax.experimental.checkify`` that stop a run on garbage.

Inside an algorithm built with ``checked=True`` these checks are staged into the compiled
update; the experiment runner functionalises them (``checkify.checkify``) and raises after the
chunk in which the first one failed, with a message that names what failed, where (update,
time step, environment index) and the offending value. Each check takes ``update_number``, the
number of the update it checks (``state.updates + 1``: 1 for the first), which its message
names.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from rollax.envs.base import Discrete, MultiBinary, MultiDiscrete
from rollax.envs.masks import has_legal, is_legal


def _first_index(bad: jax.Array):
    """Flat index of the first True in ``bad`` (0 when none)."""
    return jnp.argmax(bad.reshape(-1))


def check_observations(observation, update_number, reward=None) -> None:
    """Every observation of a ``(T, B, ...)`` batch is finite (every leaf of a pytree
    observation), and with ``reward`` ``(T, B)`` every reward. The first non-finite output is
    named: the first cell (step, then environment) holding one, and in that cell the
    observation (leaf by leaf, as ``observation['row']``) before the reward, which the step
    gave after it."""
    outputs = []
    for path, x in jax.tree_util.tree_flatten_with_path(observation)[0]:
        if jnp.issubdtype(x.dtype, jnp.inexact):  # an integer leaf is always finite
            outputs.append((f"observation{jax.tree_util.keystr(path)}",
                            x.reshape(x.shape[:2] + (-1,)).astype(jnp.float32)))
    if reward is not None:
        outputs.append(("reward", reward.reshape(reward.shape[:2] + (1,)).astype(jnp.float32)))
    if not outputs:
        return
    bad = jnp.stack([~jnp.all(jnp.isfinite(x), axis=-1) for _, x in outputs])  # (K, T, B)
    cell = jnp.any(bad, axis=0)
    i = _first_index(cell)
    t, b = i // cell.shape[1], i % cell.shape[1]
    first = jnp.argmax(bad[:, t, b])  # the first output of that cell that is not finite
    for k, (name, x) in enumerate(outputs):
        value = x[t, b] if name != "reward" else x[t, b, 0]
        checkify.check(~(jnp.any(cell) & (first == k)),
                       f"checked mode: non-finite {name} at update {{u}}, step {{t}}, env {{b}}: "
                       "{v}", u=update_number, t=t, b=b, v=value)


def check_actions(action: jax.Array, space, update_number) -> None:
    """Discrete actions lie in ``[0, n)``, each component ``i`` of a ``MultiDiscrete`` one in
    ``[0, nvec[i])`` (of a ``MultiBinary`` one in ``{0, 1}``); continuous ones are finite.
    ``action`` is ``(T, B, ...)``."""
    if isinstance(space, Discrete):
        bad = (action < 0) | (action >= space.n)
        what = f"action out of range [0, {space.n})"
    elif isinstance(space, (MultiDiscrete, MultiBinary)):
        nvec = np.asarray(space.nvec, np.int32).reshape((1,) * (action.ndim - 1) + (-1,))
        bad = jnp.any((action < 0) | (action >= nvec), axis=-1)
        what = (f"action out of range (component i in [0, nvec[i]), nvec "
                f"{list(space.nvec)})")
    else:
        flat = action.reshape(action.shape[:2] + (-1,))
        bad = ~jnp.all(jnp.isfinite(flat), axis=-1)
        what = "non-finite action"
    bad = bad.reshape(bad.shape[:2])
    i = _first_index(bad)
    t, b = i // bad.shape[1], i % bad.shape[1]
    checkify.check(~jnp.any(bad), f"checked mode: {what} at update {{u}}, step {{t}}, env {{b}}: "
                   "{v}", u=update_number, t=t, b=b, v=action[t, b])


def check_finite(name: str, tree, update_number, where: str = "") -> None:
    """Every leaf of ``tree`` (parameters, loss, gradients) is finite."""
    leaves = [jnp.asarray(x, jnp.float32).reshape(-1)
              for x in jax.tree_util.tree_leaves(tree)]
    flat = jnp.concatenate(leaves) if leaves else jnp.zeros(0)
    bad = ~jnp.isfinite(flat)
    value = flat[_first_index(bad)] if flat.size else jnp.float32(0)
    checkify.check(~jnp.any(bad),
                   f"checked mode: non-finite {name} at update {{u}}{where}: {{v}} "
                   f"({{n}} of {flat.size} values)", u=update_number, v=value, n=jnp.sum(bad))


def check_legal(action: jax.Array, mask: jax.Array, active: jax.Array, space,
                update_number) -> None:
    """Every active action of a ``(T, B)`` batch is legal under its stored action mask (a
    state with no legal action excepted)."""
    bad = active & has_legal(space, mask) & ~is_legal(space, mask, action)
    i = _first_index(bad)
    t, b = i // bad.shape[1], i % bad.shape[1]
    checkify.check(~jnp.any(bad), "checked mode: illegal action (its action_mask forbids it) "
                   "at update {u}, step {t}, env {b}: {v}", u=update_number, t=t, b=b,
                   v=action[t, b])


def check_collected(traj, action_space, update_number) -> None:
    """A collected ``(T, B)`` batch's observations and rewards finite (the first non-finite
    one named: :func:`check_observations`) and its actions valid (:func:`check_actions`), and
    legal under the stored action masks, for an environment with masks
    (:func:`check_legal`)."""
    check_observations(traj.observation, update_number, traj.reward)
    check_actions(traj.action, action_space, update_number)
    mask = getattr(traj, "action_mask", None)
    if mask is not None:
        check_legal(traj.action, mask, traj.active, action_space, update_number)


def check_step(update_number, loss, gradient, parameters) -> None:
    """One gradient step's loss, gradient and new parameters finite (:func:`check_finite`, in
    that order)."""
    check_finite("loss", loss, update_number)
    check_finite("gradient", gradient, update_number)
    check_finite("parameters", parameters, update_number)


def functionalize(fn):
    """``checkify`` for the user checks staged by the functions above."""
    return checkify.checkify(fn, errors=checkify.user_checks)

"""Using a trained policy: :func:`load_run` reads a run folder's latest checkpoint into a
:class:`LoadedPolicy`, whose :meth:`LoadedPolicy.act` picks an action for one observation.

Built from the pieces ``rollax train --resume`` and ``rollax eval`` use: the run's
``config.json`` (:func:`rollax.run.training.read_run`), the built algorithm (which knows its
environment, its policy and the parameters that policy takes, observation statistics
included), and the checkpoint loaded onto the state of every lane. Nothing here knows an
algorithm by name.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Environment, is_structured, space_leaves, space_tree
from rollax.recurrent import is_recurrent
from rollax.run.training import load_latest

__all__ = ["LoadedPolicy", "load_run"]

_SPIN_S = 2e-4
"""How long :meth:`LoadedPolicy.act` polls for its result before it sleeps until it is ready."""


def _awaited(actions):
    """``actions`` once computed (returned as they are while traced).

    JAX hands a CPU program of over 1,000 flops (a 64-64 MLP has ~9,000) to a worker thread
    and returns at once; a caller that then blocks on the result sleeps and is woken again,
    which costs more than a small network (a single CartPole observation: ~70 µs a call
    blocking, ~37 µs polling, on this project's 2-core machine). So the result is polled for
    up to :data:`_SPIN_S`, then waited for as usual (a large batch)."""
    if not hasattr(actions, "is_ready"):  # a tracer (act under jit or vmap)
        return actions
    end = time.perf_counter() + _SPIN_S
    while not actions.is_ready():
        if time.perf_counter() > end:
            return actions.block_until_ready()
    return actions


def _on_host(obs) -> bool:
    """Whether ``obs`` holds no JAX array (NumPy arrays or scalars, Python numbers or lists):
    then :meth:`LoadedPolicy.act` and :meth:`LoadedPolicy.step` return NumPy actions."""
    if isinstance(obs, np.ndarray):  # the common case, without walking a tree
        return True
    return not any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(obs))


def _numpy(actions, dtype):
    """Computed ``actions`` as NumPy, of ``dtype`` (the action space's): a NumPy scalar for one
    action of scalar shape (as Gymnasium's ``Discrete.sample()`` gives), else a writable array
    of its own; tracers (acting under ``jit``) are returned as they are."""
    if not hasattr(actions, "is_ready"):
        return actions
    array = np.array(actions, dtype=dtype)
    return array[()] if array.ndim == 0 else array


@dataclasses.dataclass(frozen=True, eq=False)
class LoadedPolicy:
    """The policy of every lane of a run's latest checkpoint."""

    env: Environment
    """The environment the run trained on (built from its config.json)."""
    policy: Any
    """The acting policy (``sample``, ``log_prob``, ``greedy``; a
    :class:`rollax.recurrent.RecurrentPolicy` for a recurrent network)."""
    params: Any
    """The parameters ``policy`` takes, with a leading lane axis ``(lanes, ...)`` on every
    leaf (observation statistics included for a run that normalised observations; the reward
    statistics of ``normalize_rewards`` are not: acting does not read them)."""
    lanes: tuple[dict, ...]
    """Each lane's label: its seed and swept values (``{"seed": 0}`` for a plain run)."""
    updates: int
    """The number of updates done at the checkpoint."""
    path: Path
    """The run folder."""

    def lane_params(self, lane: int | jax.Array = 0):
        """The parameters of one lane (as ``policy`` takes them)."""
        self._check_lane(lane)
        return jax.tree_util.tree_map(lambda x: x[lane], self.params)

    def act(self, obs, key: jax.Array | None = None, lane: int | jax.Array = 0, mask=None,
            clip: bool = False) -> Any:
        """The action for one observation of shape ``env.observation_space.shape`` (``S``; for a
        ``Dict`` / ``Tuple`` space, its dicts and tuples of leaves, each leaf of its shape), or
        the actions for a batch of shape ``(..., *S)`` (any leading axes; a numeric list or
        NumPy array is converted with ``jnp.asarray``): the policy's mode (``policy.greedy``)
        without a ``key``, a sample (``policy.sample(params, obs, key)[0]``) with one, each
        observation of a batch with its own key of ``jax.random.split(key, n)`` (``n``
        observations, flattened in C order). Returns actions of shape ``(..., *A)``
        (``env.action_space.shape``). ``ValueError`` naming the expected shape for anything
        else. NumPy in, NumPy out: for an observation holding no JAX array (NumPy, Python
        numbers or lists, as Gymnasium gives them) the actions are NumPy, of the action space's
        dtype (a NumPy scalar for one ``Discrete`` action, as ``Discrete.sample()`` gives; a
        writable array otherwise), so Gymnasium's ``env.step`` takes them; a JAX observation
        gives a JAX array, and under ``jit`` the result stays traced. ``mask``: the states'
        action masks for an environment with ``action_mask``, one per observation
        (``(..., *mask shape)``), so the actions are legal ones. ``clip``: a ``Box`` action
        clipped to the space's bounds (as Stable-Baselines3's ``predict`` does; off by default,
        so the action is the policy's own, as training sampled it).

        Compiled: the policy runs as one compiled program per lane and kind of call (one
        observation or a batch of a shape, with or without a key or a mask), its parameters
        constants of the program, built at its first call and reused. Pure: works under
        ``jit`` (a traced ``lane`` too), and ``vmap`` over observations (and keys)."""
        if self._recurrent:
            raise ValueError("this run's policy is recurrent (it remembers earlier "
                             "observations): act with loaded.initial_carry() and "
                             "loaded.step(carry, obs)")
        self._check_lane(lane)
        host = _on_host(obs)
        if self._structured:
            obs, lead = self._tree_observations(obs)
        else:
            obs, lead = self._observations(obs)
        if mask is not None and lead:
            mask = jnp.reshape(jnp.asarray(mask), (math.prod(lead),
                                                   *jnp.shape(mask)[len(lead):]))
        if isinstance(lane, (int, np.integer)):
            actions = _awaited(self._lane_act(int(lane))(obs, key, mask, bool(lead),
                                                         bool(clip)))
        else:  # a traced lane (act under jit or vmap): every lane's parameters go in
            leaves, _ = self._flat_params
            actions = self._compiled_act(leaves, lane, obs, key, mask, bool(lead), bool(clip))
        if host:  # NumPy in, NumPy out (a reshape of a NumPy array costs no JAX dispatch)
            actions = _numpy(actions, self._action_dtype)
        return actions.reshape(*lead, *actions.shape[1:]) if lead else actions

    @functools.cache  # noqa: B019  (one per lane, kept with the policy)
    def _lane_act(self, lane: int) -> Callable:
        """:meth:`act`'s compiled call for lane ``lane``, its parameters constants of the
        program: a call then passes the observation alone (each array argument costs time at
        every call; for a small network, more than the network)."""
        params = self._constant_params(lane)

        def act(obs, key, mask, batched: bool, clip: bool):
            return self._act_params(params, obs, key, mask, batched, clip)

        return jax.jit(act, static_argnums=(3, 4))

    def _constant_params(self, lane: int):
        """Lane ``lane``'s parameters as concrete arrays (constants of a compiled call), even
        when first asked for inside a trace."""
        leaves, treedef = self._flat_params
        with jax.ensure_compile_time_eval():
            return jax.tree.unflatten(treedef, [x[lane] for x in leaves])

    @functools.cached_property
    def _flat_params(self) -> tuple[list[jax.Array], Any]:
        """``params`` as its list of leaves and its tree structure: the compiled call takes the
        list (flattening a policy's modules at every call cost more than the call itself)."""
        return jax.tree.flatten(self.params)

    @functools.cached_property
    def _structured(self) -> bool:
        return is_structured(self.env.observation_space)

    @functools.cached_property
    def _recurrent(self) -> bool:
        return is_recurrent(self.policy)

    @functools.cached_property
    def _action_dtype(self) -> np.dtype:
        return np.dtype(self.env.action_space.dtype)  # type: ignore[union-attr]

    @functools.cached_property
    def _obs_shape(self) -> tuple[int, ...]:
        return tuple(self.env.observation_space.shape)  # type: ignore[union-attr]

    @functools.cached_property
    def _compiled_act(self) -> Callable:
        return jax.jit(self._act_lanes, static_argnums=(5, 6))

    def _act_lanes(self, leaves, lane, obs, key, mask, batched: bool, clip: bool):
        """:meth:`act` on checked observations (a batch flattened to ``(n, ...)`` when
        ``batched``) with lane ``lane`` of the parameters' ``leaves``."""
        params = jax.tree.unflatten(self._flat_params[1], [x[lane] for x in leaves])
        return self._act_params(params, obs, key, mask, batched, clip)

    def _act_params(self, params, obs, key, mask, batched: bool, clip: bool):
        """:meth:`act` with one lane's ``params``."""
        if batched:
            n = jax.tree.leaves(obs)[0].shape[0]
            keys = None if key is None else jax.random.split(key, n)
            actions = jax.vmap(self._act, in_axes=(None, 0, None if keys is None else 0, 0))(
                params, obs, keys, mask)
        else:
            actions = self._act(params, obs, key, mask)
        space = self.env.action_space
        if clip and isinstance(space, Box):
            actions = jnp.clip(actions, jnp.asarray(space.low, actions.dtype),
                               jnp.asarray(space.high, actions.dtype))
        return actions

    def _check_lane(self, lane) -> None:
        if isinstance(lane, (int, np.integer)) and not 0 <= lane < len(self.lanes):
            raise ValueError(f"lane must be in [0, {len(self.lanes)}) for the run in "
                             f"{str(self.path)!r}, got {lane}")

    def _tree_observations(self, obs) -> tuple[Any, tuple[int, ...]]:
        """A ``Dict`` / ``Tuple`` observation checked: the space's dicts and tuples, each leaf
        of its leaf space's shape ``S`` or a batch ``(..., *S)`` with the same leading axes on
        every leaf; returned with each leaf flattened to ``(n, *S)`` for a batch, and the
        leading axes (``()`` for one observation)."""
        space = self.env.observation_space
        treedef = jax.tree.structure(space_tree(space, lambda s: 0))
        if jax.tree.structure(obs) != treedef:
            raise ValueError(f"expected an observation with the leaves "
                             f"{', '.join(p for p, _ in space_leaves(space))}; got "
                             f"{type(obs).__name__} {obs!r:.60}")
        leaves = [jnp.asarray(x) for x in treedef.flatten_up_to(obs)]
        leads = set()
        for (path, leaf), x in zip(space_leaves(space), leaves):
            cut = x.ndim - len(leaf.shape)
            if cut < 0 or x.shape[cut:] != tuple(leaf.shape):
                raise ValueError(f"expected observation leaf {path} of shape "
                                 f"{tuple(leaf.shape)} or a batch of them; got {x.shape}")
            leads.add(x.shape[:cut])
        if len(leads) != 1:
            raise ValueError(f"the observation's leaves have different batch axes: "
                             f"{sorted(leads)}")
        lead = leads.pop()
        if lead:
            leaves = [x.reshape(-1, *leaf.shape)
                      for (_, leaf), x in zip(space_leaves(space), leaves)]
        return treedef.unflatten(leaves), lead

    def _act(self, params, obs: jax.Array, key: jax.Array | None, mask=None) -> jax.Array:
        given = () if mask is None else (mask,)
        if key is None:
            return self.policy.greedy(params, obs, *given)
        return self.policy.sample(params, obs, key, *given)[0]

    def _observations(self, obs) -> tuple[Any, tuple[int, ...]]:
        """``obs`` as an array (a batch flattened to ``(n, *S)``) and its leading (batch)
        axes, ``()`` for one observation; ``ValueError`` unless it is numeric and ends with the
        observation shape."""
        shape = self._obs_shape  # one array's space (not a Dict / Tuple)
        expected = (f"expected an observation of shape {shape} or a batch "
                    f"({', '.join(['...', *map(str, shape)])})")
        try:  # host values stay NumPy until the compiled call takes them (no extra dispatch)
            array = obs if isinstance(obs, jax.Array) else np.asarray(obs)
        except (TypeError, ValueError):
            array = None
        if array is None or array.dtype.kind in "OSUV":
            raise ValueError(f"{expected}; got {type(obs).__name__} {obs!r:.40}")
        if not jnp.issubdtype(array.dtype, jnp.number):
            raise ValueError(f"{expected} of numbers; got {array.dtype}")
        cut = array.ndim - len(shape)
        if cut < 0 or array.shape[cut:] != shape:
            raise ValueError(f"{expected}; got {array.shape}")
        lead = array.shape[:cut]
        return (array.reshape(-1, *shape) if lead else array), lead

    @property
    def update(self) -> int:
        """Deprecated: :attr:`updates`, the old name of the number of updates done."""
        warnings.warn("LoadedPolicy.update is deprecated: it is LoadedPolicy.updates, the "
                      "number of updates done", DeprecationWarning, stacklevel=2)
        return self.updates

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a memory (``--network gru`` or ``lstm``): then act with
        :meth:`initial_carry` and :meth:`step` instead of :meth:`act`."""
        return is_recurrent(self.policy)

    def initial_carry(self, lane: int | jax.Array = 0):
        """A recurrent policy's memory at the start of an episode."""
        return self.policy.initial_carry(self.lane_params(lane))

    def step(self, carry, obs: jax.Array, key: jax.Array | None = None,
             lane: int | jax.Array = 0):
        """A recurrent policy's ``(carry', action)`` for the next observation ``obs`` of an
        episode (mode without a ``key``, a sample with one); start each episode from
        :meth:`initial_carry`. ``vmap`` over carries and observations gives a batch.
        Compiled as :meth:`act` is: one program per lane, with or without a key. The action is
        NumPy for a NumPy observation, JAX for a JAX one (as :meth:`act`'s); the carry stays a
        JAX value either way (it only goes back into the next ``step``)."""
        self._check_lane(lane)
        host = _on_host(obs)
        if isinstance(lane, (int, np.integer)):
            carry, action = self._lane_step(int(lane))(carry, obs, key)
            action = _awaited(action)
        else:  # a traced lane
            carry, action = self._step(self.lane_params(lane), carry, obs, key)
        return carry, (_numpy(action, self._action_dtype) if host else action)

    @functools.cache  # noqa: B019  (one per lane, kept with the policy)
    def _lane_step(self, lane: int) -> Callable:
        """:meth:`step`'s compiled call for lane ``lane``, its parameters constants of the
        program (as :meth:`_lane_act`)."""
        params = self._constant_params(lane)
        return jax.jit(lambda carry, obs, key: self._step(params, carry, obs, key))

    def _step(self, params, carry, obs, key):
        if key is None:
            return self.policy.greedy(params, carry, obs)
        carry, action, _ = self.policy.sample(params, carry, obs, key)
        return carry, action


def load_run(path: str | Path) -> LoadedPolicy:
    """The policies of the run folder ``path`` at its latest checkpoint (a finished run's
    latest checkpoint is its final state). ``ValueError`` for a folder that is not a run or
    a checkpoint that does not match its config.

    Only what acting needs is kept: the checkpoint's whole state (for PPO and A2C with
    ``normalize_rewards`` also the reward statistics and each environment's running discounted
    return, ``reward_stats`` and ``discounted_return``) stays in the run folder, where
    ``rollax train --resume`` reads it (:func:`rollax.run.training.load_latest` returns it)."""
    _, algo, lanes, updates, state = load_latest(path)
    params = jax.jit(jax.vmap(algo.params))(state)
    return LoadedPolicy(algo.env, algo.policy, params, tuple(lanes.labels()), updates,
                        Path(path))

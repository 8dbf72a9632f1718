"""Many devices: the lanes and the environment batch of an experiment split over a device mesh.

An experiment on ``N`` devices runs on a two-axis :class:`jax.sharding.Mesh`::

    mesh = (lanes: L) x (envs: E),   L * E = N,
    L = gcd(N, number of lanes),  E = N / L,  which must divide the environment batch B

so ``N`` is usable exactly when it divides ``lanes x B``. Lanes are independent, so they are
split first (no communication at all between lane rows); what is left of ``N`` splits the
environment batch inside every lane. The carried state of every lane is laid out with
:class:`jax.sharding.NamedSharding`: its lane axis on ``"lanes"``, the leaves of the
environment batch (axis ``B``) also on ``"envs"``, everything else (parameters, optimiser
state, keys) replicated within a lane row. Algorithms mark their batches with
:func:`constrain_envs` (identity on one device); XLA then partitions the program (GSPMD) and
inserts the collectives itself: a mean over the batch (the loss, hence the gradient) becomes
per-device partial sums and an ``all-reduce`` over ``"envs"``.

The layout never changes what is computed, only where: results equal the one-device run up to
the order of floating-point reductions (float tolerance, not bit for bit).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rollax.keys import is_key

LANES = "lanes"
"""Mesh axis of the lanes (seeds x hyperparameter combinations)."""
ENVS = "envs"
"""Mesh axis of the environment batch within a lane."""

_ACTIVE: contextvars.ContextVar[Mesh | None] = contextvars.ContextVar("rollax_mesh",
                                                                        default=None)


def mesh_shape(devices: int, lanes: int, env_batch: int) -> tuple[int, int]:
    """``(L, E)``: lanes split ``L = gcd(devices, lanes)`` ways, the environment batch ``E =
    devices / L`` ways. Raises ``ValueError`` unless ``devices`` divides ``lanes x
    env_batch`` (exactly the counts for which some split exists)."""
    check_devices(devices, lanes, env_batch)
    split = math.gcd(devices, lanes)
    return split, devices // split


def check_devices(devices, lanes: int, env_batch: int, batch_name: str = "env batch") -> None:
    """``ValueError`` naming the setting and the allowed values unless ``devices`` is a
    positive integer dividing ``lanes x env_batch``."""
    from rollax.validate import check_count

    check_count("devices", devices)
    total = lanes * env_batch
    if total % devices:
        allowed = [d for d in range(1, total + 1) if total % d == 0]
        shown = ", ".join(map(str, allowed[:12])) + (", ..." if len(allowed) > 12 else "")
        raise ValueError(
            f"devices must divide lanes x {batch_name} = {lanes} x {env_batch} = {total} "
            f"(lanes: seeds x sweep combinations), i.e. be one of {shown}; got {devices}")


def check_available(devices: int, flag: str = "devices") -> None:
    """``ValueError`` when JAX sees fewer than ``devices`` devices (all processes)."""
    count = jax.device_count()
    if devices > count:
        platform = jax.devices()[0].platform
        hint = (" (on one host, XLA_FLAGS=--xla_force_host_platform_device_count=N gives N "
                "CPU devices)" if platform == "cpu" else "")
        raise ValueError(f"{flag} is {devices} but JAX sees only {count} {platform} "
                         f"device{'s' if count != 1 else ''}{hint}")


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def lanes_per_core(lanes: int) -> int | None:
    """On a CPU, the devices a run of ``lanes`` lanes takes when it does not say: the most
    devices, at most one a core, that each hold whole lanes (the largest divisor of ``lanes``
    not above the CPU devices JAX sees nor :func:`cores`), so the lanes run on that many cores
    at once. ``None`` (one device) when that is 1 or the devices are not CPUs."""
    devices = jax.devices()
    if devices[0].platform != "cpu":
        return None
    most = min(len(devices), cores(), lanes)
    split = max(d for d in range(1, most + 1) if lanes % d == 0)
    return split if split > 1 else None


def device_mesh(devices: int, lanes: int, env_batch: int) -> Mesh:
    """The ``("lanes", "envs")`` mesh over the first ``devices`` of :func:`jax.devices`."""
    check_devices(devices, lanes, env_batch)
    check_available(devices)
    shape = mesh_shape(devices, lanes, env_batch)
    grid = np.asarray(jax.devices()[:devices], dtype=object).reshape(shape)
    auto = jax.sharding.AxisType.Auto
    return Mesh(grid, (LANES, ENVS), axis_types=(auto, auto))


@contextlib.contextmanager
def tracing_in(mesh: Mesh | None):
    """Make ``mesh`` the one :func:`constrain_envs` lays batches out on while tracing."""
    token = _ACTIVE.set(mesh)
    try:
        yield mesh
    finally:
        _ACTIVE.reset(token)


def traced_in(mesh: Mesh | None, fn):
    """``fn`` whose tracing sees ``mesh`` (for ``jax.jit(traced_in(mesh, fn))``)."""
    if mesh is None:
        return fn

    def wrapped(*args):
        with tracing_in(mesh):
            return fn(*args)

    return wrapped


def constrain_envs(tree, axis: int = 0):
    """Lay every leaf of ``tree`` out with its axis ``axis`` (the environment batch, as seen
    by one lane) split over the mesh's ``"envs"`` axis. The identity outside a sharded
    experiment. Inside the Runner's ``vmap`` over lanes the lane axis is added on ``"lanes"``.
    """
    mesh = _ACTIVE.get()
    if mesh is None:
        return tree

    def one(x):
        if x.ndim <= axis:
            return x
        spec = P(*([None] * axis), ENVS)
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map(one, tree)


def lane_specs(state, env_fields: tuple[str, ...]):
    """Per-lane :class:`PartitionSpec` tree of ``state`` (no lane axis): leaves of the
    ``env_fields`` (the algorithm's ``env_batch_fields``) on ``P("envs")``, the rest
    replicated ``P()``."""
    fields = getattr(state, "_fields", None)
    if fields is None:
        return jax.tree_util.tree_map(lambda x: P(), state)
    parts = []
    for name in fields:
        spec = P(ENVS) if name in env_fields else P()
        parts.append(jax.tree_util.tree_map(lambda x, s=spec: s if len(x.shape) else P(),
                                            getattr(state, name)))
    return type(state)(*parts)


def with_lane_axis(spec: P) -> P:
    """``spec`` of a per-lane leaf -> the spec of the stacked ``(lanes, ...)`` leaf."""
    return P(LANES, *spec)


def shardings(mesh: Mesh, specs):
    """NamedShardings of the stacked (lanes, ...) tree for per-lane ``specs``."""
    return jax.tree_util.tree_map(lambda s: NamedSharding(mesh, with_lane_axis(s)), specs,
                                  is_leaf=lambda s: isinstance(s, P))


def constrain(tree, specs, mesh: Mesh):
    """``with_sharding_constraint`` of a per-lane tree (inside the lanes ``vmap``)."""
    return jax.tree_util.tree_map(
        lambda x, s: jax.lax.with_sharding_constraint(x, NamedSharding(mesh, s)), tree, specs,
        is_leaf=lambda s: isinstance(s, P))


def place(tree, shardings_tree):
    """Put a host (or single-device) tree on the mesh (also across processes)."""
    def one(x, sharding):
        if is_key(x):
            impl = jax.random.key_impl(x)
            data = np.asarray(jax.random.key_data(x))
            spec = P(*sharding.spec, *([None] * (data.ndim - x.ndim)))
            placed = one(data, NamedSharding(sharding.mesh, spec))
            return jax.random.wrap_key_data(placed, impl=impl)
        if jax.process_count() == 1:
            return jax.device_put(x, sharding)
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree_util.tree_map(one, tree, shardings_tree)


def to_host(tree):
    """``jax.device_get`` that also works on arrays spread over several processes (each
    process receives the whole array)."""
    leaves = jax.tree_util.tree_leaves(tree)
    if all(getattr(x, "is_fully_addressable", True) for x in leaves):
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    def one(x):
        if getattr(x, "is_fully_addressable", True):
            return jax.device_get(x)
        if is_key(x):
            data = multihost_utils.process_allgather(jax.random.key_data(x), tiled=True)
            # jax.random.wrap_key_data takes any uint32 array; its stub says jax.Array
            return jax.random.wrap_key_data(np.asarray(data), impl=jax.random.key_impl(x))  # pyright: ignore[reportArgumentType]
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    return jax.tree_util.tree_map(one, tree)

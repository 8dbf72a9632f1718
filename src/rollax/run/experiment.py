"""Experiments: many lanes (seeds x hyperparameter combinations) in one compiled program,
run as a Python loop over compiled chunks of updates, with metrics moved to the host after
every chunk, checkpoints, resume and summaries.

Lane ``i`` trains with root key ``jax.random.key(seed + k)`` (``k`` its seed index) and its own
numeric hyperparameters; all lanes are one ``vmap``. A chunk applies up to ``chunk_size``
updates to every lane and is compiled once: the last, shorter chunk reuses it, skipping its
surplus steps with a ``lax.cond`` on an unbatched counter (host environments and checked mode:
a loop of a traced, unbatched length, which runs no surplus step at all). Chunking never
changes results.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rollax import sharding
from rollax.algos.base import Algorithm
from rollax.envs.host import is_host
from rollax.keys import DEFAULT_KEY_IMPL, root_key
from rollax.run.progress import due


@dataclasses.dataclass(frozen=True)
class Lanes:
    """The lanes of an experiment: one per (hyperparameter combination, seed)."""

    seeds: tuple[int, ...]
    """The seed of each lane (root key ``jax.random.key(seed)``)."""
    values: tuple[dict, ...]
    """The swept hyperparameter values of each lane (empty dicts without a sweep)."""
    impl: str = DEFAULT_KEY_IMPL
    """The root keys' implementation (:data:`rollax.keys.KEY_IMPLS`)."""

    def __len__(self) -> int:
        return len(self.seeds)

    def keys(self) -> jax.Array:
        return jnp.stack([root_key(s, self.impl) for s in self.seeds])

    def hyperparams(self, default):
        """The stacked (lanes,) hyperparameters: the defaults with each lane's swept values."""
        rows = [default._replace(**v) for v in self.values]
        return jax.tree_util.tree_map(lambda *x: jnp.asarray(x, jnp.float32), *rows)

    def labels(self) -> list[dict]:
        return [{"seed": s, **v} for s, v in zip(self.seeds, self.values)]


def parse_sweep(specs, hyperparams, distinct: bool = True) -> dict[str, list[float]]:
    """``("lr=1e-3,3e-4", ...)`` -> ``{"lr": [1e-3, 3e-4]}``, names checked against the
    algorithm's numeric hyperparameters; ``distinct``: a name's values may not repeat (a
    paired sweep's may: two trials can share a value)."""
    import difflib

    sweep: dict[str, list[float]] = {}
    valid = hyperparams._fields
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ValueError(f"sweep must look like name=v1,v2 (e.g. lr=1e-3,3e-4), got {spec!r}")
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"sweep: {name!r} is not a numeric hyperparameter{hint} "
                             f"(sweepable: {', '.join(valid)})")
        if name in sweep:
            raise ValueError(f"sweep: {name!r} given twice")
        try:
            sweep[name] = [float(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"sweep: values of {name!r} must be numbers, got {values!r}") from None
        if distinct and len(set(sweep[name])) != len(sweep[name]):
            raise ValueError(f"sweep: values of {name!r} repeat: {values!r}")
    return sweep


def make_lanes(seed: int, seeds: int, sweep: Mapping[str, Sequence[float]],
               paired: bool = False, impl: str = DEFAULT_KEY_IMPL) -> Lanes:
    """Every combination of the swept values (``itertools.product``, the first name varying
    slowest) x ``seeds`` seeds, seeds innermost; ``paired``: the ``i``-th values of every
    name together make combination ``i`` instead (``zip``: the lists are equally long), as
    ``rollax tune`` runs its trials; ``impl``: the root keys' implementation."""
    together = zip(*sweep.values(), strict=True) if paired else itertools.product(*sweep.values())
    combos = [dict(zip(sweep, vals)) for vals in together] or [{}]
    lane_seeds, values = [], []
    for combo in combos:
        for k in range(seeds):
            lane_seeds.append(seed + k)
            values.append(combo)
    return Lanes(tuple(lane_seeds), tuple(values), impl)


def one_lane(fn: Callable, in_axes: int | tuple | None = 0) -> Callable:
    """``jax.vmap(fn, in_axes)`` over a lane axis of size 1, without the ``vmap``: lane 0 of
    each mapped argument in, a lane axis of 1 added to every output. The same values; XLA on the
    CPU runs the unbatched program faster (one PPO update on MinAtar Breakout: ~20 % for the
    MLP, ~9 % for the CNN; benchmarks/NOTES.md)."""

    def call(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        lane = [x if axis is None else jax.tree_util.tree_map(lambda leaf: leaf[0], x)
                for x, axis in zip(args, axes, strict=True)]
        return jax.tree_util.tree_map(lambda leaf: leaf[None], fn(*lane))

    return call


def lanes_apart(fn: Callable, in_axes: int | tuple | None, mesh: Mesh) -> Callable:
    """``jax.vmap(fn, in_axes)`` over lanes laid out on ``mesh``'s ``"lanes"`` axis, computed
    as one program per device (``shard_map``) that runs its lanes one after another
    (``lax.map`` of :func:`one_lane`, unbatched): each lane's values are those of ``fn`` on
    that lane alone."""
    def per_device(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        count = next(jax.tree_util.tree_leaves(x)[0].shape[0]
                     for x, axis in zip(args, axes, strict=True) if axis is not None)
        single = one_lane(fn, in_axes)
        if count == 1:
            return single(*args)

        def lane(i):
            take = [x if axis is None else jax.tree_util.tree_map(
                lambda leaf: jax.lax.dynamic_slice_in_dim(leaf, i, 1), x)
                    for x, axis in zip(args, axes, strict=True)]
            return jax.tree_util.tree_map(lambda leaf: leaf[0], single(*take))

        return jax.lax.map(lane, jnp.arange(count))

    def call(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        specs = tuple(P() if axis is None else P(sharding.LANES) for axis in axes)
        return jax.shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=P(sharding.LANES),
                             check_vma=False)(*args)

    return call


class CheckFailed(ValueError):
    """A runtime check of checked mode failed (the run stops; earlier checkpoints stay)."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """How an experiment's lanes run, chosen once (:meth:`choose`), one of four ways:

    - one lane on one device: its program unbatched (:func:`one_lane`);
    - several lanes on one device: one ``vmap`` over them;
    - lanes and each lane's environment batch split over ``mesh`` (:mod:`rollax.sharding`):
      the ``vmap`` partitioned by XLA, the carried state kept in its layout (:meth:`keep`:
      the state's ``fields`` of the environment batch on ``"envs"``, the rest replicated);
    - ``apart``: CPU devices that each hold whole lanes run them as separate programs, one
      lane after another (:func:`lanes_apart`): each lane is then the single-seed run bit for
      bit, and the cores run at the rate of as many processes (a ``vmap`` over a CPU
      device's lanes is no faster than one lane after another for small networks)."""

    lanes: int
    mesh: Mesh | None = None
    fields: tuple[str, ...] = ()
    """The state fields batched over environments (the algorithm's ``env_batch_fields``)."""
    apart: bool = False

    @classmethod
    def choose(cls, algo: Algorithm, lanes: int, devices: int | None, stepwise: bool) -> Layout:
        """The layout of ``lanes`` lanes of ``algo`` on ``devices`` devices (``None``: one);
        ``stepwise``: chunks that loop exactly their updates, which never run apart."""
        batch_name, env_batch = algo.env_batch
        if devices is not None:
            sharding.check_devices(devices, lanes, env_batch, batch_name)
        if devices is None or devices == 1:
            return cls(lanes)
        mesh = sharding.device_mesh(devices, lanes, env_batch)
        apart = (mesh.shape[sharding.ENVS] == 1 and not stepwise
                 and mesh.devices.flat[0].platform == "cpu")
        return cls(lanes, mesh, algo.env_batch_fields, apart)

    def vmap(self, fn: Callable, in_axes: int | tuple | None = 0) -> Callable:
        """``jax.vmap(fn, in_axes)`` over the lanes, as this layout runs them."""
        if self.apart:
            return lanes_apart(fn, in_axes, cast(Mesh, self.mesh))
        if self.mesh is None and self.lanes == 1:
            return one_lane(fn, in_axes)
        return jax.vmap(fn, in_axes=in_axes,
                        spmd_axis_name=None if self.mesh is None else sharding.LANES)

    def jit(self, fn: Callable, out_shardings=None) -> Callable:
        """``jax.jit(fn)``, traced on the mesh (not a body of lanes apart: its arrays are
        local), its outputs laid out as ``out_shardings`` on a mesh."""
        traced = sharding.traced_in(None if self.apart else self.mesh, fn)
        if self.mesh is None or out_shardings is None:
            return jax.jit(traced)
        return jax.jit(traced, out_shardings=out_shardings)

    def keep(self, state):
        """A lane's state (inside the lanes ``vmap``) constrained to its layout on the mesh."""
        if self.mesh is None or self.apart:
            return state
        return sharding.constrain(state, sharding.lane_specs(state, self.fields), self.mesh)

    def state_shardings(self, lane_state):
        """The shardings of the stacked state, for one lane's state (or its shapes); ``None``
        on one device."""
        if self.mesh is None:
            return None
        return sharding.shardings(self.mesh, sharding.lane_specs(lane_state, self.fields))

    def by_lane(self):
        """The sharding of a ``(lanes, ...)`` array split by lane; ``None`` on one device."""
        return None if self.mesh is None else NamedSharding(self.mesh, P(sharding.LANES))

    def place(self, tree, shardings=None):
        """``tree``, from the host, laid out as ``shardings`` (default: every leaf by lane)."""
        if self.mesh is None:
            return tree
        if shardings is None:
            shardings = jax.tree_util.tree_map(lambda _: self.by_lane(), tree)
        return sharding.place(tree, shardings)


class Runner:
    """Compiled pieces of an experiment over ``lanes``: ``init``, ``chunk`` (compiled once for
    ``chunk_size`` updates) and ``evaluate``, all vmapped over lanes as their :class:`Layout`
    runs them.

    ``devices=N`` (``N > 1``) splits the lanes and each lane's environment batch over the
    first ``N`` devices (:mod:`rollax.sharding`): ``mesh`` is the ``("lanes", "envs")`` mesh,
    the carried state keeps ``state_shardings`` from chunk to chunk, and results equal the
    one-device run to float tolerance. ``devices=None`` or ``1``: one device, as before.
    ``checked``: ``algo`` was built with checked mode's runtime checks staged (they are
    functionalised here, and a failed one raises :class:`CheckFailed`)."""

    def __init__(self, algo: Algorithm, lanes: Lanes, chunk_size: int,
                 devices: int | None = None, checked: bool = False):
        self.algo, self.lanes, self.chunk_size = algo, lanes, chunk_size
        self.checked = checked
        self.devices = 1 if devices is None else devices
        self.stepwise = checked or is_host(algo.env)
        """Chunks that run exactly ``n`` updates (a loop of ``n`` steps, not ``chunk_size``
        steps with the rest skipped): a host environment's calls and checked mode's checks
        run for the updates asked alone."""
        self.layout = layout = Layout.choose(algo, len(lanes), devices, self.stepwise)
        hp, keys = lanes.hyperparams(algo.hyperparams), lanes.keys()
        one_hp = jax.tree_util.tree_map(lambda x: x[0], hp)
        one_state = jax.eval_shape(algo.init, keys[0], one_hp)
        self.state_shardings = layout.state_shardings(one_state)
        self.hp, self.keys = layout.place(hp), layout.place(keys)
        self.init = layout.jit(layout.vmap(lambda k, h: layout.keep(algo.init(k, h))),
                               self.state_shardings)
        self.evaluate = layout.jit(layout.vmap(algo.evaluate))
        self.chunk = self._chunk(one_state, one_hp)

    @property
    def mesh(self) -> Mesh | None:
        """The ``("lanes", "envs")`` device mesh, or ``None`` on one device."""
        return self.layout.mesh

    @property
    def lanes_apart(self) -> bool:
        """Whether the lanes run apart (:class:`Layout`)."""
        return self.layout.apart

    def _chunk(self, one_state, one_hp) -> Callable:
        """The compiled chunk ``(state, hp, n) -> (state, metrics (lanes, chunk_size))``."""
        from rollax.guards import functionalize

        # one trace of the update serves both the metrics' shapes and the chunk: the chunk's
        # call of the jitted update reuses the trace made here (same per-lane shapes; lanes
        # run apart trace it again, inside shard_map's own context)
        update = jax.jit(self.algo.update)
        if self.checked:  # its staged checks trace only functionalised
            shapes = jax.eval_shape(
                lambda s: functionalize(self.algo.update)(s, one_hp)[1][1], one_state)
        else:
            shapes = jax.eval_shape(lambda s: update(s, one_hp)[1], one_state)
        if self.stepwise:
            return self._stepwise_chunk(update, shapes)
        return self._chunk_with_skips(update, shapes)

    def _stepwise_chunk(self, update: Callable, shapes) -> Callable:
        """Checkify cannot see through the skip-``cond`` of :meth:`_chunk_with_skips`, nor can
        ``vmap`` take a ``cond`` around a host environment's calls ("IO effect not supported
        in vmap-of-cond"), so these loop exactly ``n`` times, ``n`` traced and unbatched (a
        ``while`` under ``vmap``): one program for every length, the last, shorter chunk
        included, and no surplus step (no host call, no check) runs."""
        from rollax.guards import functionalize

        layout, size, checked = self.layout, self.chunk_size, self.checked
        step = self.algo.update if checked else update

        def stepwise_chunk(state, hp, n):
            def body(i, carry):
                s, out = carry
                s, m = step(s, hp)
                out = jax.tree_util.tree_map(lambda o, x: o.at[i].set(x), out, m)
                return layout.keep(s), out

            out = jax.tree_util.tree_map(
                lambda m: jnp.zeros((size, *m.shape), m.dtype), shapes)
            return jax.lax.fori_loop(0, n, body, (state, out))

        def batched(state, hp, n):
            lanes = layout.vmap(lambda s, h: stepwise_chunk(s, h, n))
            return (functionalize(lanes) if checked else lanes)(state, hp)

        return layout.jit(batched)

    def _chunk_with_skips(self, update: Callable, shapes) -> Callable:
        """``chunk_size`` steps under one ``lax.scan``, those past ``n`` skipped by a
        ``lax.cond``. The state goes back laid out as it came in: left to itself XLA lays an
        output out its own way (an axis of one device, an empty leaf: replicated), and the
        next chunk, taking the state laid out otherwise, would compile the program a second
        time."""
        layout, size = self.layout, self.chunk_size

        def chunk(state, hp, n):
            skip = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

            def body(s, i):
                s, m = jax.lax.cond(i < n, lambda s: update(s, hp), lambda s: (s, skip), s)
                return layout.keep(s), m

            return jax.lax.scan(body, state, jnp.arange(size))

        return layout.jit(layout.vmap(chunk, in_axes=(0, 0, None)),
                          (self.state_shardings, layout.by_lane()))

    def initial_state(self):
        return self.init(self.keys, self.hp)

    def state_shapes(self):
        """The shapes, dtypes and layouts of :meth:`initial_state`'s arrays, computing none."""
        shapes = jax.eval_shape(self.initial_state)
        if self.mesh is None:
            return shapes
        return jax.tree.map(lambda s, where: jax.ShapeDtypeStruct(s.shape, s.dtype,
                                                                  sharding=where),
                            shapes, self.state_shardings)

    def place(self, state):
        """Lay a state read from the host (a checkpoint) out like the chunks expect it."""
        return self.layout.place(state, self.state_shardings)

    def to_host(self, tree):
        """The arrays of ``tree`` as NumPy arrays (gathered across processes if needed)."""
        return sharding.to_host(tree)

    def length(self, n: int):
        """A chunk's length as :attr:`chunk` takes it: a traced int32, so one program serves
        every length (compiled ahead of time, the run never compiles it again)."""
        return jnp.int32(n)

    def run_chunk(self, state, n: int):
        """Apply ``n <= chunk_size`` updates; metrics come back on the host, ``(lanes, n)``."""
        return self.finish(self.start(state, n), n)

    def start(self, state, n: int):
        """Start ``n <= chunk_size`` updates and return at once (JAX dispatches the chunk
        asynchronously): :meth:`finish` waits for its metrics."""
        return self.chunk(state, self.hp, self.length(n))

    def finish(self, started, n: int):
        """``(state, host metrics (lanes, n))`` of a chunk :meth:`start` began (a failed
        check of checked mode raises :class:`CheckFailed`)."""
        if self.checked:
            error, started = started
            message = error.get()
            if message is not None:
                raise CheckFailed(message.splitlines()[0].replace(" (`check` failed)", ""))
        state, metrics = started
        metrics = jax.tree_util.tree_map(lambda x: np.asarray(x)[:, :n], self.to_host(metrics))
        return state, metrics

    def final_params(self, state):
        return jax.vmap(self.algo.params)(state)


def params_sha256(params) -> str:
    """SHA-256 over the raw bytes of every parameter leaf (in tree order)."""
    digest = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(jax.device_get(params)):
        arr = np.ascontiguousarray(np.asarray(leaf))
        digest.update(str(arr.dtype).encode() + str(arr.shape).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def lane_params_sha256(params, lanes: int) -> list[str]:
    """:func:`params_sha256` of each lane's parameters (leading lane axis)."""
    return [params_sha256(jax.tree_util.tree_map(lambda x, i=i: x[i], params))
            for i in range(lanes)]


def jsonable(x):
    """A NumPy scalar as a JSON value: int, float, or None for NaN and infinities."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return int(x)
    x = float(x)
    return x if np.isfinite(x) else None


def metrics_rows(metrics, labels: list[dict], updates: int):
    """One JSON-able dict per (lane, update) from host metrics ``(lanes, n)`` of the ``n``
    updates after the first ``updates``: key ``"update"``, ``updates + 1`` to ``updates + n``."""
    fields = metrics._asdict() if hasattr(metrics, "_asdict") else metrics
    n = next(iter(fields.values())).shape[1]
    for j in range(n):
        for lane, label in enumerate(labels):
            yield {**label, "update": updates + j + 1,
                   **{k: jsonable(v[lane, j]) for k, v in fields.items()}}


class Interrupt:
    """Turns SIGINT (Ctrl-C) into a flag the chunk loop checks between chunks."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        self._previous = None
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # ignored by whoever started us
            return self
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: no handler
            pass
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def run_loop(runner: Runner, state, updates: int, on_chunk: Callable,
             checkpoint_every: int, save: Callable, interrupt: Interrupt | None = None,
             between: Callable | None = None):
    """Run from ``state``, after ``updates`` updates, to the end in chunks; after each chunk call
    ``on_chunk(metrics, updates_before, updates_done, state)`` (the updates done before the
    chunk and after it); ``save(updates_done, state)`` when a checkpoint is due, at the end, and
    when interrupted. ``between(metrics, updates_done, state) -> state``, where given, is called
    after each chunk but the last, before its checkpoint, and the next chunk starts from the
    state it returns (population-based training's exploit step, :mod:`rollax.run.pbt`).
    Returns ``(state, updates_done, interrupted)``.

    The next chunk starts before the host reads this one's metrics, writes its rows and
    checkpoints (JAX runs it meanwhile; the chunk reads the state without consuming it), so the
    device does not wait for the host between chunks. Not in checked mode, whose checks stop
    the run at the chunk that failed, nor for a host environment, whose steps are the host's
    own work, nor with ``between``, whose state the next chunk needs. The values are the same
    either way; a chunk started when the run then stops (an interrupt, a failed step of the
    host) is dropped."""
    total = runner.algo.num_updates
    done = updates
    last_saved = updates
    ahead = not (runner.checked or runner.stepwise or between is not None)
    started = None
    while done < total:
        n = min(runner.chunk_size, total - done)
        state, metrics = runner.finish(started if started is not None else
                                       runner.start(state, n), n)
        started = None
        if ahead and done + n < total:
            started = runner.start(state, min(runner.chunk_size, total - done - n))
        on_chunk(metrics, done, done + n, state)
        done += n
        if between is not None and done < total:
            state = between(metrics, done, state)
        if interrupt is not None and interrupt.requested:
            save(done, state)
            return state, done, True
        if due(checkpoint_every, last_saved, done, total):
            save(done, state)
            last_saved = done
    return state, done, False

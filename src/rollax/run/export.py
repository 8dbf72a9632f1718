"""Shipping a policy: :func:`export_policy` writes the policy of a run's lane as a file that
acts without rollax, in one of two formats:

- ``stablehlo``: a serialized ``jax.export`` artifact (``.jax``), loaded with JAX alone
  (``jax.export.deserialize(data).call(obs)``), for the CPU, CUDA GPUs and TPUs;
- ``onnx``: an ONNX model (``.onnx``) written by jax2onnx, run by onnxruntime or any ONNX
  runtime (``pip install 'rollax[onnx]'``).

The function written takes a batch (any size ``B``) and gives the actions ``(B, *A)`` (int32
for discrete kinds, float32 for a ``Box``), the network's parameters and its observation
statistics (a run that normalised observations) folded in as constants. Its inputs, in order:

- ``carry`` (a recurrent policy only): the memory, one input per leaf ``(B, *shape)``, and the
  memory after the step is an output before the action (``next_carry``);
- ``observation``: ``(B, *S)`` (``S`` the observation space's shape, float32 for a ``Box``,
  int32 for a ``Discrete``); a ``Dict`` / ``Tuple`` observation is one input per leaf (ONNX
  names them ``observation.<key>`` / ``observation.<index>`` along the leaf's path, in
  :func:`rollax.envs.base.space_leaves` order; the ``jax.export`` artifact takes the
  observation's dicts and tuples as they are);
- ``action_mask`` (an environment with action masks only): bool ``(B, *mask shape)``, the
  actions are legal ones (:mod:`rollax.envs.masks`);
- ``noise`` (``sample=True`` only): independent uniforms on ``(0, 1)``, ``(B, *N)``, from which
  the action is drawn (:meth:`rollax.distributions.Categorical.from_uniform`); without it
  the action is the policy's mode (greedy).

A JSON file beside it (``<out>.json``) records the run, lane, the number of updates done (key
``update``), and every input's and output's name, shape and dtype. Both are written whole to
hidden temporary files beside them and renamed into place together once complete
(:func:`rollax.run.files.staged_files`): a failure (a full disk) names the file and leaves
neither, and older ones as they were.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, is_structured, space_tree
from rollax.envs.masks import has_action_mask, mask_shape
from rollax.run.files import staged_files, writing

__all__ = ["FORMATS", "export_policy", "policy_batch"]

FORMATS = {"stablehlo": ".jax", "onnx": ".onnx"}
"""The export formats and the suffix of each one's file."""

INPUT, OUTPUT = "observation", "action"
"""The names of the exported function's observation input and action output (ONNX's too)."""
CARRY, NEXT_CARRY, MASK, NOISE = "carry", "next_carry", "action_mask", "noise"
"""The names of the recurrent memory's inputs and outputs, the action mask and the noise."""


def policy_batch(loaded, lane: int, sample: bool = False) -> Callable:
    """The policy of ``loaded``'s lane ``lane`` on a batch, its parameters closed over
    (constants of whatever compiles it): ``f(inputs) -> outputs`` with ``inputs`` the tuple
    ``([carry], observation, [action_mask], [noise])`` and ``outputs`` ``([next carry],
    action)`` (module docstring; the bracketed ones where they apply), each batched ``(B,
    ...)``. Greedy: the policy's mode; ``sample``: the action drawn from ``noise``."""
    params = loaded.lane_params(lane)
    policy = loaded.policy
    recurrent, masked = loaded.recurrent, has_action_mask(loaded.env)

    def one(*inputs):
        inputs = list(inputs)
        carry = inputs.pop(0) if recurrent else None
        observation = inputs.pop(0)
        mask = inputs.pop(0) if masked else None
        given = () if mask is None else (mask,)
        if not sample:
            if recurrent:
                return policy.greedy(params, carry, observation, *given)
            return (policy.greedy(params, observation, *given),)
        if recurrent:
            carry, features = policy.step(params, carry, observation)
            dist = policy.distribution(params, features)
        else:
            dist = policy.distribution(params, observation)
        action = (dist if mask is None else dist.masked(mask)).from_uniform(inputs.pop(0))
        return (carry, action) if recurrent else (action,)

    return lambda inputs: jax.vmap(one)(*inputs)


@dataclasses.dataclass(frozen=True)
class _Leaf:
    """One input array's shape (without the batch axis) and dtype: a leaf of the pytrees."""

    shape: tuple[int, ...]
    dtype: Any


def _leaf_spec(space) -> _Leaf:
    """One array's shape and the dtype it is exported with: int32 for a ``Discrete``, float32
    for a ``Box``, the space's own (integer) dtype otherwise."""
    if isinstance(space, Discrete):
        return _Leaf((), jnp.int32)
    dtype = jnp.float32 if isinstance(space, Box) else jnp.dtype(space.dtype)
    return _Leaf(tuple(int(n) for n in space.shape), dtype)


def _noise_shape(loaded, lane: int) -> tuple[int, ...]:
    """The shape of one observation's noise: the entries of its action distribution."""
    params, policy, env = loaded.lane_params(lane), loaded.policy, loaded.env
    observation = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype),
                               space_tree(env.observation_space, _leaf_spec))

    def dist(observation):
        if loaded.recurrent:
            carry = policy.initial_carry(params)
            return policy.distribution(params, policy.step(params, carry, observation)[1])
        return policy.distribution(params, observation)

    return tuple(jax.eval_shape(dist, observation).noise_shape)


def _signature(loaded, lane: int, sample: bool) -> list[tuple[str, Any]]:
    """The exported function's inputs, in order: ``(name, spec)`` with ``spec`` one
    observation's pytree of :class:`_Leaf` (leaves of a ``Dict`` / ``Tuple``; a carry's
    leaves), without the batch axis."""
    env = loaded.env
    out: list[tuple[str, Any]] = []
    if loaded.recurrent:
        carry = loaded.initial_carry(lane)
        out.append((CARRY, jax.tree.map(lambda x: _Leaf(tuple(x.shape), x.dtype), carry)))
    out.append((INPUT, space_tree(env.observation_space, _leaf_spec)))
    if has_action_mask(env):
        out.append((MASK, _Leaf(tuple(mask_shape(env.action_space) or ()), jnp.bool_)))
    if sample:
        out.append((NOISE, _Leaf(_noise_shape(loaded, lane), jnp.float32)))
    return out


def _batched(signature, batch) -> tuple:
    """The inputs' ``jax.ShapeDtypeStruct`` pytrees with the batch axes ``batch`` in front."""
    return tuple(jax.tree.map(lambda s: jax.ShapeDtypeStruct((*batch, *s.shape), s.dtype), spec)
                 for _, spec in signature)


def _leaf_names(name: str, tree) -> list[str]:
    """``name`` for a single array; ``name.<key or index>...`` along each leaf's path."""
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    if len(paths) == 1 and not paths[0][0]:
        return [name]
    return [".".join([name, *(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)])
            for path, _ in paths]


def _described(names: list[str], structs) -> list[dict]:
    return [{"name": name, "shape": ["B", *s.shape[1:]], "dtype": np.dtype(s.dtype).name}
            for name, s in zip(names, jax.tree.leaves(structs))]


def _check(loaded, fmt: str, path: Path, sample: bool) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if path.suffix != FORMATS[fmt]:
        raise ValueError(f"out must end in {FORMATS[fmt]} for format {fmt}, got {str(path)!r}")
    if not path.parent.is_dir():
        raise ValueError(f"out: the folder {str(path.parent)!r} does not exist")
    if fmt == "onnx":
        missing = [m for m in ("jax2onnx", "onnx") if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"format onnx needs {' and '.join(missing)}: "
                             f"`pip install 'rollax[onnx]'`")
    if sample and not callable(getattr(loaded.policy, "distribution", None)):
        raise ValueError(f"sample: this run's policy ({type(loaded.policy).__name__}) has no "
                         f"action distribution to draw from; export its greedy policy")


def export_policy(run: str | Path, out: str | Path, fmt: str = "stablehlo",
                  lane: int = 0, sample: bool = False) -> dict:
    """Write the policy of lane ``lane`` of the run folder ``run`` to ``out`` in format ``fmt``
    (module docstring): its mode, or with ``sample`` an action drawn from a ``noise`` input;
    and its description to ``<out>.json``; returns the description. ``ValueError`` in one
    line, before anything is written, for a bad format, suffix, folder, lane, a missing
    extra, or ``sample`` for a policy without an action distribution."""
    from rollax.run.loaded import load_run

    path = Path(out)
    loaded = load_run(run)
    _check(loaded, fmt, path, sample)
    loaded.lane_params(lane)  # the lane checked
    act = policy_batch(loaded, lane, sample)
    signature = _signature(loaded, lane, sample)
    inputs = _batched(signature, (1,))
    outputs = jax.eval_shape(act, inputs)
    names = [n for (name, spec) in signature for n in _leaf_names(name, spec)]
    output_names = [*(_leaf_names(NEXT_CARRY, signature[0][1]) if loaded.recurrent else []),
                    OUTPUT]
    written = (_stablehlo(act, signature) if fmt == "stablehlo"
               else _onnx(act, signature, names, output_names))
    described = dict(zip((name for name, _ in signature),
                         (_described(_leaf_names(name, spec), structs)
                          for (name, spec), structs in zip(signature, inputs))))
    observation = described.pop(INPUT)
    info = {"format": fmt, "file": path.name, "run": str(run), "lane": lane,
            "lane_label": loaded.lanes[lane], "update": loaded.updates,
            "env": getattr(loaded.env, "name", None) or _env_name(run),
            "policy": "sample" if sample else "greedy",
            **({"inputs": observation} if is_structured(loaded.env.observation_space)
               else {"input": observation[0]}),
            "output": _described([OUTPUT], outputs[-1])[0]}
    if loaded.recurrent:
        carry = loaded.initial_carry(lane)
        zeros = all(not np.any(np.asarray(x)) for x in jax.tree.leaves(carry))
        info["carry"] = [{**d, "output": o, "initial": "zeros" if zeros else
                          np.asarray(x).tolist()}
                         for d, o, x in zip(described[CARRY], output_names,
                                            jax.tree.leaves(carry))]
    if MASK in described:
        info["action_mask"] = described[MASK][0]
    if sample:
        info["noise"] = {**described[NOISE][0], "law": "independent uniforms on (0, 1)"}
    described_at = Path(f"{path}.json")
    with staged_files([path, described_at]) as (staged, staged_description):
        with writing(path, staged):
            staged.write_bytes(written)
        with writing(described_at, staged_description):
            staged_description.write_text(json.dumps(info, indent=1) + "\n")
    return info


PLATFORMS = ("cpu", "cuda", "tpu")
"""Where a ``.jax`` artifact runs: it is lowered once for each (a call on any other platform is
refused by ``jax.export``)."""


def _env_name(run) -> str:
    return json.loads((Path(run) / "config.json").read_text())["config"]["env"]


def _stablehlo(act, signature) -> bytes:
    """``act`` exported for a symbolic batch size, for the CPU, CUDA GPUs and TPUs
    (:data:`PLATFORMS`), serialized: its arguments are the inputs in order (pytrees: a ``Dict``
    observation as its dict)."""
    spec = _batched(signature, jax.export.symbolic_shape("B"))
    exported = jax.export.export(jax.jit(lambda *inputs: _unwrap(act(inputs))),
                                 platforms=PLATFORMS)(*spec)
    return bytes(exported.serialize())


def _unwrap(outputs):
    """The action alone for a feed-forward policy, ``(next carry, action)`` for a recurrent one."""
    return outputs[0] if len(outputs) == 1 else outputs


def _onnx(act, signature, names: list[str], output_names: list[str]) -> bytes:
    """``act`` converted by jax2onnx for a symbolic batch size ``B``, from its batched jaxpr:
    jax2onnx 0.17 converts some ``jax.numpy`` calls whole (``jnp.argmax``: ArgMax) with the
    axis they were given before ``vmap`` batched them (measured here: the greedy action taken
    over the batch), so it is handed the program's primitives instead (``argmax`` with its
    batched axis). One input per leaf, in order; the outputs the next carry's leaves, then the
    action."""
    jax2onnx = importlib.import_module("jax2onnx")
    from jax.core import eval_jaxpr

    spec = _batched(signature, jax.export.symbolic_shape("B"))  # one scope for every input
    closed = jax.make_jaxpr(act)(spec)

    def primitives(*leaves):
        out = eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
        return out[0] if len(out) == 1 else tuple(out)

    with _untyped_shapes_unsaid():
        model = jax2onnx.to_onnx(primitives, jax.tree.leaves(spec), input_names=names,
                                 output_names=output_names)
    return model.SerializeToString()


UNTYPED_SHAPE = "The value type for shape %s is not known"
"""The start of onnx_ir's warning for an intermediate value whose shape jax2onnx records
without its element type (jax2onnx 0.17 does for the shape tensors of a reshape, as in Pgx
2048's bool planes flattened): onnx_ir then leaves that value's shape out of the model's
``value_info``, optional annotations that runtimes infer again, so the model is whole."""


class _DropUntypedShape(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(UNTYPED_SHAPE)


@contextlib.contextmanager
def _untyped_shapes_unsaid() -> Iterator[None]:
    """Within the block, drop onnx_ir's :data:`UNTYPED_SHAPE` warning (that message of its
    ``onnx_ir.serde`` logger only; everything else it says is still printed)."""
    logger, dropped = logging.getLogger("onnx_ir.serde"), _DropUntypedShape()
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)

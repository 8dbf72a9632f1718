"""Shipping a policy: :func:`export_policy` writes the greedy policy of a run's lane as a file
that acts without rollax, in one of two formats:

- ``stablehlo``: a serialized ``jax.export`` artifact (``.jax``), loaded with JAX alone
  (``jax.export.deserialize(data).call(obs)``), for the CPU and CUDA;
- ``onnx``: an ONNX model (``.onnx``) written by jax2onnx, run by onnxruntime or any ONNX
  runtime (``pip install 'rollax[onnx]'``).

Both take a batch of observations ``(B, *S)`` (any ``B``; ``S`` the observation space's shape,
float32 for a ``Box``, int32 for a ``Discrete``) and give the greedy actions ``(B, *A)`` (int32
for discrete kinds, float32 means for a ``Box``), the network's parameters and its observation
statistics (a run that normalised observations) folded in as constants. A ``Dict`` / ``Tuple``
observation is one input per leaf (``(B, *leaf shape)``, the leaf's dtype; ONNX names them
``observation.<key>`` / ``observation.<index>`` along the leaf's path, in
:func:`rollax.envs.base.space_leaves` order; the ``jax.export`` artifact takes the
observation's dicts and tuples as they are). A JSON file beside it (``<out>.json``) records the
run, lane, update, and the inputs' and output's names, shapes and dtypes.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rollax.envs.base import Box, Discrete, is_structured, space_leaves, space_tree
from rollax.run.files import atomic_write_text

__all__ = ["FORMATS", "export_policy", "greedy_batch"]

FORMATS = {"stablehlo": ".jax", "onnx": ".onnx"}
"""The export formats and the suffix of each one's file."""

INPUT, OUTPUT = "observation", "action"
"""The names of the exported function's input and output (ONNX's too)."""


def greedy_batch(loaded, lane: int) -> Callable[[jax.Array], jax.Array]:
    """The greedy policy of ``loaded``'s lane ``lane`` on a batch ``(B, *S) -> (B, *A)``, its
    parameters closed over (constants of whatever compiles it)."""
    params = loaded.lane_params(lane)
    policy = loaded.policy

    def act(observation):
        return jax.vmap(lambda o: policy.greedy(params, o))(observation)

    return act


def _leaf_spec(space) -> tuple[tuple[int, ...], Any]:
    """One array's shape and the dtype it is exported with: int32 for a ``Discrete``, float32
    for a ``Box``, the space's own (integer) dtype otherwise."""
    if isinstance(space, Discrete):
        return (), jnp.int32
    dtype = jnp.float32 if isinstance(space, Box) else jnp.dtype(space.dtype)
    return tuple(int(n) for n in space.shape), dtype


def _batch_spec(env, batch) -> Any:
    """The exported function's input: a batch ``(*batch, *S)`` of observations (a pytree of
    leaves for a ``Dict`` / ``Tuple``)."""
    def leaf(space):
        shape, dtype = _leaf_spec(space)
        return jax.ShapeDtypeStruct((*batch, *shape), dtype)

    return space_tree(env.observation_space, leaf)


def _input_names(env) -> list[str]:
    """``observation`` for one array; ``observation.<key or index>...`` per leaf."""
    names = []
    for path, _ in space_leaves(env.observation_space):
        parts = [p.strip("'") for p in path.strip("[]").split("][") if p]
        names.append(".".join([INPUT, *parts]))
    return names


def _check(loaded, fmt: str, path: Path) -> None:
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
    if loaded.recurrent:
        raise ValueError("this run's policy is recurrent: exporting its step with the memory "
                         "as an input and an output is not written yet; export a "
                         "feed-forward run")


def export_policy(run: str | Path, out: str | Path, fmt: str = "stablehlo",
                  lane: int = 0) -> dict:
    """Write the greedy policy of lane ``lane`` of the run folder ``run`` to ``out`` in format
    ``fmt`` (module docstring), and its description to ``<out>.json``; returns the
    description. ``ValueError`` in one line, before anything is written, for a bad format,
    suffix, folder, lane, a missing extra, or a policy not exportable yet (recurrent, or a
    Dict / Tuple observation)."""
    from rollax.run.loaded import load_run

    path = Path(out)
    loaded = load_run(run)
    _check(loaded, fmt, path)
    loaded.lane_params(lane)  # the lane checked
    act = greedy_batch(loaded, lane)
    action = jax.eval_shape(act, _batch_spec(loaded.env, (1,)))
    names = _input_names(loaded.env)
    if fmt == "stablehlo":
        path.write_bytes(_stablehlo(act, loaded.env))
    else:
        _onnx(act, loaded.env, names, path)
    inputs = [{"name": name, "shape": ["B", *shape], "dtype": np.dtype(dtype).name}
              for name, (shape, dtype) in zip(names, (
                  _leaf_spec(s) for _, s in space_leaves(loaded.env.observation_space)))]
    info = {"format": fmt, "file": path.name, "run": str(run), "lane": lane,
            "lane_label": loaded.lanes[lane], "update": loaded.update,
            "env": getattr(loaded.env, "name", None) or _env_name(run),
            **({"inputs": inputs} if is_structured(loaded.env.observation_space)
               else {"input": inputs[0]}),
            "output": {"name": OUTPUT, "shape": ["B", *action.shape[1:]],
                       "dtype": np.dtype(action.dtype).name}}
    atomic_write_text(Path(f"{path}.json"), json.dumps(info, indent=1) + "\n")
    return info


def _env_name(run) -> str:
    return json.loads((Path(run) / "config.json").read_text())["config"]["env"]


def _stablehlo(act, env) -> bytes:
    """``act`` exported for a symbolic batch size, for the CPU and CUDA, serialized."""
    spec = _batch_spec(env, jax.export.symbolic_shape("B"))
    exported = jax.export.export(jax.jit(act), platforms=("cpu", "cuda"))(spec)
    return bytes(exported.serialize())


def _onnx(act, env, names: list[str], path: Path) -> None:
    """``act`` converted by jax2onnx for a symbolic batch size ``B``, from its batched jaxpr:
    jax2onnx 0.17 converts some ``jax.numpy`` calls whole (``jnp.argmax``: ArgMax) with the
    axis they were given before ``vmap`` batched them (measured here: the greedy action taken
    over the batch), so it is handed the program's primitives instead (``argmax`` with its
    batched axis)."""
    jax2onnx = importlib.import_module("jax2onnx")
    from jax.core import eval_jaxpr

    spec = _batch_spec(env, jax.export.symbolic_shape("B"))  # one scope for every input
    closed = jax.make_jaxpr(act)(spec)

    def primitives(*leaves):  # the observation's leaves, in space_leaves order
        return eval_jaxpr(closed.jaxpr, closed.consts, *leaves)[0]

    specs = jax.tree.leaves(spec)
    model = jax2onnx.to_onnx(primitives, specs, input_names=names, output_names=[OUTPUT])
    onnx = importlib.import_module("onnx")
    onnx.save_model(model, str(path))

"""Comparing pytrees of host arrays cell by cell (a cell: one index of the leading ``(T, B)`` or
``(B,)`` axes), bit for bit or up to rounding, and finding the first cell that differs."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from rollax.contracts.report import Finding
from rollax.keys import is_key


def host(tree: Any) -> Any:
    """Every leaf as a numpy array (typed keys as their key data)."""
    return jax.tree.map(lambda x: np.asarray(jax.random.key_data(x) if is_key(x) else x), tree)


def bits(x: np.ndarray) -> np.ndarray:
    """``x``'s bytes, shape ``x.shape + (itemsize,)``: equal bits <=> equal bytes."""
    x = np.asarray(x)
    return np.ascontiguousarray(x.reshape(x.shape + (1,))).view(np.uint8)


def scalar_cells(x: np.ndarray, lead: int) -> np.ndarray:
    """``x`` with everything after the first ``lead`` axes flattened into one last axis."""
    x = np.asarray(x)
    return x.reshape(x.shape[:lead] + (-1,))


def any_last(x: np.ndarray) -> np.ndarray:
    """``x.any(axis=-1)`` for an ``x`` of two or more axes, typed as the array it is."""
    return np.asarray(x.any(axis=-1))


def all_last(x: np.ndarray) -> np.ndarray:
    """``x.all(axis=-1)`` for an ``x`` of two or more axes, typed as the array it is."""
    return np.asarray(x.all(axis=-1))


def first_cell(mask: ArrayLike) -> tuple[int, int] | None:
    """(t, b) of the first True cell in row-major order, or None."""
    cells = np.argwhere(np.asarray(mask))
    return None if len(cells) == 0 else (int(cells[0][0]), int(cells[0][1]))


ULPS = 4
"""How many units in the last place two floats computed by differently batched programs may be
apart and still count as equal: XLA may round one lane of a vectorised batch differently from
another (a fused multiply-add in one lane, two roundings in another), so the same environment
at another batch index can give a float 1 ulp off."""


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise distance of two float arrays of one dtype in units in the last place of that
    dtype (0 for equal values, ``+0`` and ``-0`` included, and for two NaNs); the largest
    ``uint64`` for a NaN against a number and for an infinity against any other value."""
    a, b = np.asarray(a), np.asarray(b)
    size = a.dtype.itemsize
    signed = np.dtype(f"int{8 * size}")
    sign_bit = np.array(1, signed) << (8 * size - 1)
    ia, ib = a.view(signed), b.view(signed)
    # the magnitude bits count the representable floats up from zero; across zero the two
    # magnitudes add up
    ma = (ia & ~sign_bit).astype(np.uint64)
    mb = (ib & ~sign_bit).astype(np.uint64)
    same_sign = (ia < 0) == (ib < 0)
    apart = np.where(same_sign, np.maximum(ma, mb) - np.minimum(ma, mb), ma + mb)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    inf = np.isinf(a) | np.isinf(b)
    far = (nan_a != nan_b) | (inf & (a != b))
    apart = np.where(far, np.iinfo(np.uint64).max, apart)
    return np.where(nan_a & nan_b, np.uint64(0), apart)


def cell_mismatch(a: np.ndarray, b: np.ndarray, lead: int,
                  ulps: int = 0) -> np.ndarray | None:
    """Per-cell difference over the first ``lead`` axes; None if the shapes differ. Bit for bit,
    or with ``ulps`` floats may be that many units in the last place apart (integers, booleans
    and keys are still compared bit for bit)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if ulps and jnp.issubdtype(a.dtype, jnp.floating):
        return any_last(scalar_cells(ulps_apart(a, b) > ulps, lead))
    return any_last(scalar_cells(bits(a) != bits(b), lead))


def cell_mismatch_close(a: np.ndarray, b: np.ndarray, lead: int, rtol: float = 1e-5,
                        atol: float = 1e-6) -> np.ndarray | None:
    """Like :func:`cell_mismatch`, but floats only need to agree up to rounding (separately
    compiled programs may round the same computation differently in the last bits)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if not np.issubdtype(a.dtype, np.inexact):
        return cell_mismatch(a, b, lead)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    return ~all_last(scalar_cells(close, lead))


def trees_mismatch(a: Any, b: Any, shape: tuple[int, ...], close: bool = False) -> np.ndarray:
    """Cells (of the leading axes, ``shape``) where any leaf of ``a`` and ``b`` differs (bit
    for bit, or up to rounding with ``close``); a leaf of another shape differs everywhere."""
    compare = cell_mismatch_close if close else cell_mismatch
    diff = np.zeros(shape, bool)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        d = compare(x, y, len(shape))
        diff |= True if d is None else d
    return diff


def same_bits(a: Any, b: Any) -> jax.Array:
    """In ``jit``: every leaf of ``a`` and ``b`` equal bit for bit (same structure required)."""
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    if tree_a != tree_b:
        return jnp.bool_(False)
    same = jnp.bool_(True)
    for x, y in zip(leaves_a, leaves_b):
        x, y = jnp.asarray(x), jnp.asarray(y)
        if is_key(x) or is_key(y):
            if not (is_key(x) and is_key(y)):
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


class Mismatch(NamedTuple):
    """Where two pytrees first differ: ``kind`` is ``"structure"``, ``"shape"`` (a leaf's
    shape or dtype) or ``"value"`` (then ``cell`` indexes the leading axes of leaf ``path``)."""

    kind: str
    path: str = ""
    cell: tuple[int, ...] = ()
    first: Any = None
    second: Any = None

    def order(self) -> tuple[int, ...]:
        """Sort key: a cell of fewer leading axes (no step) first, then row-major."""
        return (-1,) * (2 - len(self.cell)) + self.cell


def first_mismatch(a: Any, b: Any, lead: int = 2, ulps: int = 0) -> Mismatch | None:
    """The first difference of two pytrees of host arrays over the first ``lead`` axes of every
    leaf (fewer for a leaf with fewer axes), bit for bit or with floats up to ``ulps`` units in
    the last place apart (:func:`cell_mismatch`); None if equal."""
    leaves_a, tree_a = jax.tree_util.tree_flatten_with_path(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten_with_path(b)
    if tree_a != tree_b:
        return Mismatch("structure")
    best = None
    for (path, x), (_, y) in zip(leaves_a, leaves_b):
        x, y = np.asarray(x), np.asarray(y)
        diff = cell_mismatch(x, y, min(lead, x.ndim), ulps)
        name = jax.tree_util.keystr(path)
        if diff is None:
            return Mismatch("shape", name)
        cells = np.argwhere(diff)
        if len(cells):
            cell = tuple(int(i) for i in cells[0])
            found = Mismatch("value", name, cell, x[cell], y[cell])
            best = found if best is None or found.order() < best.order() else best
    return best


def tree_difference(a: Any, b: Any, what: str, lead: int = 2, ulps: int = 0) -> Finding | None:
    """The first (step, env) where two pytrees of time-major (``lead`` 2) or batch (``lead``
    1) arrays differ, as a finding ``what (leaf)``; None if they are equal bit for bit (with
    ``ulps``: floats up to that many units in the last place apart)."""
    found = first_mismatch(a, b, lead, ulps)
    if found is None:
        return None
    if found.kind == "structure":
        return Finding(None, None, f"{what}: different structure", {})
    if found.kind == "shape":
        return Finding(None, None, f"{what}: {found.path} changed shape or dtype", {})
    step, env = found.order()
    values = mismatch_values(found) if found.cell else {}
    return Finding(None if step < 0 else step, None if env < 0 else env,
                   f"{what} ({found.path})", values)


def mismatch_values(found: Mismatch) -> dict:
    """The values of a mismatched cell: ``first``, ``second`` and :func:`distance`."""
    return {"first": found.first, "second": found.second,
            **distance(found.first, found.second)}


def distance(x: Any, y: Any) -> dict:
    """``{"ulps apart": n}`` for two finite float cells of one shape (floats print rounded:
    this says how far apart they are), else ``{}``."""
    x, y = np.asarray(x), np.asarray(y)
    if (x.dtype != y.dtype or x.shape != y.shape or not jnp.issubdtype(x.dtype, jnp.floating)
            or not (np.isfinite(x).all() and np.isfinite(y).all())):
        return {}
    return {"ulps apart": int(ulps_apart(x, y).max())}


def cell_values(name: str, tree: Any, cell: tuple[int, ...]) -> dict:
    """A finding's values of one cell of ``tree``: ``{name: x[cell]}`` for one array, one entry
    ``name + path`` per leaf for a pytree (``next_observation['grid']``)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {name + jax.tree_util.keystr(path): np.asarray(x)[cell] for path, x in leaves}

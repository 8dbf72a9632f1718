"""Orthogonal initialisation written in ``jnp``, with no LAPACK call.

``orthogonal(key, shape, gain)`` draws the matrix ``jax.nn.initializers.orthogonal(gain)``
draws, from the same Gaussian sample: ``Z ~ N(0, 1)`` of shape ``(max(r, c), min(r, c))``
(``r = prod(shape[:-1])`` rows, ``c = shape[-1]`` columns), ``Z = QR`` with ``R``'s diagonal
made positive (which makes ``Q`` Haar-distributed), and ``gain * Q`` (transposed when
``r < c``) reshaped to ``shape``. Only the factorisation differs: Householder reflections in
a ``fori_loop`` instead of LAPACK's ``geqrf``/``orgqr``, so the result agrees with JAX's to
float32 rounding (about 1e-6), not bit for bit. :func:`orthogonal_many` draws a whole
network's matrices at once (one Gaussian draw, one batched QR per distinct row count).

Why not LAPACK: under ``vmap`` over seeds every layer's initialisation is a batched QR, and
jaxlib 0.10.1/0.10.2 run batched LAPACK calls on the CPU thread pool in a way that deadlocks
when several are in flight at once (``benchmarks/NOTES.md``). Without a LAPACK call the
compiled programs are also smaller (no per-layer custom call and its workspace queries).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["householder_q", "orthogonal", "orthogonal_many"]

_EXACT = lax.Precision.HIGHEST  # no reduced-precision matmuls (TF32 on GPUs) in the init


def householder_q(a: jax.Array) -> jax.Array:
    """The ``Q`` of the thin QR factorisation of a tall ``(m, n)`` matrix (``m >= n``), with
    ``R``'s diagonal positive: ``a = Q R``, ``Q^T Q = I_n``.

    Step ``k`` reflects column ``k`` (rows ``k..m-1``) onto ``-sign(a_kk) ||x|| e_k`` with
    ``H_k = I - 2 v v^T``; then ``Q = H_0 ... H_{n-1} I_{m,n}``, each column scaled by the sign
    of ``R_kk`` so that the factorisation is the unique one with a positive diagonal.
    """
    m, n = a.shape
    if m < n:
        raise ValueError(f"householder_q needs a tall matrix (rows >= columns), got {a.shape}")
    rows = jnp.arange(m)

    def reflect(k, carry):
        r, reflectors, signs = carry
        x = r[:, k] * (rows >= k).astype(a.dtype)     # column k, rows k..m-1
        norm = jnp.sqrt(jnp.dot(x, x, precision=_EXACT))
        s = jnp.where(x[k] >= 0, 1.0, -1.0).astype(a.dtype)
        v = x.at[k].add(s * norm)                       # x - R_kk e_k, with R_kk = -s ||x||
        v_norm = jnp.sqrt(jnp.dot(v, v, precision=_EXACT))
        v = v / jnp.maximum(v_norm, jnp.finfo(a.dtype).tiny)  # v = 0 stays 0 (a zero column)
        r = r - 2.0 * jnp.outer(v, jnp.dot(v, r, precision=_EXACT))
        return r, reflectors.at[:, k].set(v), signs.at[k].set(-s)

    init = (a, jnp.zeros((m, n), a.dtype), jnp.zeros((n,), a.dtype))
    _, reflectors, signs = lax.fori_loop(0, n, reflect, init)

    def apply(i, q):
        v = reflectors[:, n - 1 - i]
        return q - 2.0 * jnp.outer(v, jnp.dot(v, q, precision=_EXACT))

    q = lax.fori_loop(0, n, apply, jnp.eye(m, n, dtype=a.dtype))
    return q * signs[None, :]


def _tall(shape: tuple[int, ...]) -> tuple[int, int, bool]:
    """``(m, n, transposed)``: the tall ``(m, n)`` matrix whose ``Q`` gives ``shape`` (rows:
    every axis but the last, as ``jax.nn.initializers.orthogonal``'s ``column_axis=-1``)."""
    if len(shape) < 2:
        raise ValueError(f"orthogonal needs a shape of at least 2 dimensions, got {shape}")
    n_cols = shape[-1]
    n_rows = math.prod(shape) // n_cols
    return max(n_rows, n_cols), min(n_rows, n_cols), n_rows < n_cols


def orthogonal(key: jax.Array, shape: tuple[int, ...], gain: float = 1.0,
               dtype=jnp.float32) -> jax.Array:
    """``gain`` times a Haar-random matrix with orthonormal rows or columns (whichever are
    fewer), reshaped to ``shape``; the same draw as ``jax.nn.initializers.orthogonal(gain)``
    with its default ``column_axis=-1``, up to float32 rounding.

    >>> import jax, jax.numpy as jnp
    >>> w = orthogonal(jax.random.key(0), (3, 5), gain=2.0)
    >>> bool(jnp.allclose(w @ w.T, 4.0 * jnp.eye(3), atol=1e-5))
    True
    """
    m, n, transposed = _tall(shape)
    q = householder_q(jax.random.normal(key, (m, n), dtype))
    return jnp.asarray(gain, dtype) * (q.T if transposed else q).reshape(shape)


def orthogonal_many(key: jax.Array, shapes: Sequence[tuple[int, ...]],
                    gains: Sequence[float], dtype=jnp.float32) -> list[jax.Array]:
    """A whole network's orthogonal weights with one random draw and one compiled QR per
    distinct tall row count: ``[gain_i * Q_i reshaped to shape_i]``, each ``Q_i`` distributed
    as :func:`orthogonal`'s.

    Draw: ``z = normal(key, (sum_i m_i n_i,))``; matrix ``i`` is the next ``m_i n_i`` entries
    in the order given, reshaped to its tall ``(m_i, n_i)``. Matrices with the same ``m`` are
    zero-padded on the right to the widest ``n`` and factorised together under ``vmap``; a zero
    column after the real ones gets the identity reflection, so padding leaves the first ``n_i``
    columns of ``Q`` as they are.

    >>> import jax, jax.numpy as jnp
    >>> w1, w2 = orthogonal_many(jax.random.key(0), [(8, 3), (2, 8)], [1.0, 0.5])
    >>> [w1.shape, w2.shape], bool(jnp.allclose(w2 @ w2.T, 0.25 * jnp.eye(2), atol=1e-6))
    ([(8, 3), (2, 8)], True)
    """
    if len(shapes) != len(gains):
        raise ValueError(f"orthogonal_many: {len(shapes)} shapes but {len(gains)} gains")
    return _orthogonal_many(key, tuple(tuple(int(d) for d in s) for s in shapes),
                            tuple(float(g) for g in gains), dtype)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _orthogonal_many(key: jax.Array, shapes: tuple[tuple[int, ...], ...],
                     gains: tuple[float, ...], dtype) -> list[jax.Array]:
    """:func:`orthogonal_many`, compiled once per network shape. Called outside ``jit``
    (``net.init(key)`` at the prompt) the QR loops would otherwise be traced and compiled
    afresh on every call (seconds each); inside a compiled program the call is inlined."""
    talls = [_tall(tuple(shape)) for shape in shapes]
    sizes = [m * n for m, n, _ in talls]
    flat = jax.random.normal(key, (sum(sizes),), dtype)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    draws = [flat[s:s + m * n].reshape(m, n) for s, (m, n, _) in zip(starts, talls)]
    qs: list[Any] = [None] * len(shapes)
    for m in sorted({m for m, _, _ in talls}):
        group = [i for i, (rows, _, _) in enumerate(talls) if rows == m]
        width = max(talls[i][1] for i in group)
        padded = jnp.stack([jnp.pad(draws[i], ((0, 0), (0, width - talls[i][1])))
                            for i in group])
        q = jax.vmap(householder_q)(padded)
        for j, i in enumerate(group):
            qs[i] = q[j, :, :talls[i][1]]
    return [jnp.asarray(gain, dtype) * (q.T if transposed else q).reshape(shape)
            for q, (_, _, transposed), shape, gain in zip(qs, talls, shapes, gains)]

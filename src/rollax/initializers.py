"""Orthogonal initialisation written in ``jnp``, with no LAPACK call.

``orthogonal(key, shape, gain)`` draws the matrix ``jax.nn.initializers.orthogonal(gain)``
draws, from the same Gaussian sample: ``Z ~ N(0, 1)`` of shape ``(max(r, c), min(r, c))``
(``r = shape[0]``, ``c = prod(shape[1:])``), ``Z = QR`` with ``R``'s diagonal made positive
(which makes ``Q`` Haar-distributed), and ``gain * Q`` (transposed when ``r < c``) reshaped
to ``shape``. Only the factorisation differs: Householder reflections in a ``fori_loop``
instead of LAPACK's ``geqrf``/``orgqr``, so the result agrees with JAX's to float32 rounding
(about 1e-6), not bit for bit.

Why not LAPACK: under ``vmap`` over seeds every layer's initialisation is a batched QR, and
jaxlib 0.10.1/0.10.2 run batched LAPACK calls on the CPU thread pool in a way that deadlocks
when several are in flight at once (``benchmarks/NOTES.md``). Without a LAPACK call the
compiled programs are also smaller (no per-layer custom call and its workspace queries).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["householder_q", "orthogonal"]

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
        x = jnp.where(rows >= k, r[:, k], 0.0)
        norm = jnp.sqrt(jnp.dot(x, x, precision=_EXACT))
        s = jnp.where(x[k] >= 0, 1.0, -1.0).astype(a.dtype)
        v = x.at[k].add(s * norm)                       # x - R_kk e_k, with R_kk = -s ||x||
        v_norm = jnp.sqrt(jnp.dot(v, v, precision=_EXACT))
        v = jnp.where(v_norm > 0, v / jnp.where(v_norm > 0, v_norm, 1.0), 0.0)
        r = r - 2.0 * jnp.outer(v, jnp.dot(v, r, precision=_EXACT))
        return r, reflectors.at[:, k].set(v), signs.at[k].set(-s)

    init = (a, jnp.zeros((m, n), a.dtype), jnp.zeros((n,), a.dtype))
    _, reflectors, signs = lax.fori_loop(0, n, reflect, init)

    def apply(i, q):
        v = reflectors[:, n - 1 - i]
        return q - 2.0 * jnp.outer(v, jnp.dot(v, q, precision=_EXACT))

    q = lax.fori_loop(0, n, apply, jnp.eye(m, n, dtype=a.dtype))
    return q * signs[None, :]


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
    if len(shape) < 2:
        raise ValueError(f"orthogonal needs a shape of at least 2 dimensions, got {shape}")
    n_cols = shape[-1]
    n_rows = math.prod(shape) // n_cols
    z = jax.random.normal(key, (max(n_rows, n_cols), min(n_rows, n_cols)), dtype)
    q = householder_q(z)
    if n_rows < n_cols:
        q = q.T
    return jnp.asarray(gain, dtype) * q.reshape(shape)

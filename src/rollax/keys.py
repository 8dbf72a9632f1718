"""Typed PRNG keys (``jax.random.key``): the one test of whether a value is one, the key
implementations a run may choose, how one key makes many (:func:`children`), and a function's
abstract result with the implementation of each key in it (:func:`eval_shape`).

A typed key array's dtype is a key dtype (``key<fry>``, ...), not its ``uint32`` data: the
host stores, gathers and compares its data (``jax.random.key_data``), and wraps it back
(``jax.random.wrap_key_data``)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

KEY_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
"""JAX's key implementations a run's root keys may use (``--key-impl``). ``threefry2x32``
(the default) gives the same numbers on every platform and under ``vmap``; ``rbg`` and
``unsafe_rbg`` draw bits with the backend's own generator, faster on a TPU, and give the same
numbers for the same command on the same platform and JAX version only (``docs/contract.md``
§2)."""
DEFAULT_KEY_IMPL = KEY_IMPLS[0]


def root_key(seed: int, impl: str = DEFAULT_KEY_IMPL) -> jax.Array:
    """``jax.random.key(seed, impl=impl)``, the root key of a lane seeded ``seed``."""
    return jax.random.key(seed, impl=impl)


def is_key(x: Any) -> bool:
    """Whether ``x`` (an array, a tracer, an abstract value, a ``jax.ShapeDtypeStruct``) has
    a typed key's dtype; ``False`` for anything without a dtype and for raw ``uint32`` key
    data."""
    dtype = getattr(x, "dtype", None)
    # jax.dtypes re-exports issubdtype without "as": pyright takes it as private
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)  # pyright: ignore[reportPrivateImportUsage]


class AbstractValue(NamedTuple):
    """What :func:`eval_shape` returns."""

    value: Any
    """``jax.eval_shape``'s pytree of ``jax.ShapeDtypeStruct``."""
    key_impls: dict[int, Any]
    """For each leaf of ``value`` that is a typed key, by its position among the leaves: its
    implementation (``jax.random.key_impl`` takes no abstract value)."""


def eval_shape(fn: Any, *args: Any) -> AbstractValue:
    """``jax.eval_shape(fn, *args)`` (one trace, nothing compiled or run), with the
    implementation of each typed key in the result, read off while tracing."""
    impls: dict[int, Any] = {}

    def traced(*inner: Any) -> Any:
        out = fn(*inner)
        impls.update({i: jax.random.key_impl(x)
                      for i, x in enumerate(jax.tree.leaves(out)) if is_key(x)})
        return out

    return AbstractValue(jax.eval_shape(traced, *args), impls)


GENERATOR_IMPLS = ("rbg", "unsafe_rbg")
"""The implementations whose bits come from the backend's generator (XLA's
``RngBitGenerator``): :func:`children` draws their children's key data as bits."""


def children(key: jax.Array, num: int) -> jax.Array:
    """``num`` keys from one: ``split(key, num)`` for threefry; for :data:`GENERATOR_IMPLS`
    the ``(num, 4)`` key data drawn from ``key``'s generator in one call and wrapped
    (``bits(key, (num, 4))``). ``rbg``'s own ``split`` is ``2 num`` threefry hashes, which on
    a TPU cost far more than the bits the children then draw (``benchmarks/TPU.md``, ninth
    pass); ``unsafe_rbg``'s draws ten times the bits and keeps every tenth row. Either way
    ``key`` is consumed once and its children are distinct keys of its implementation."""
    impl = str(jax.random.key_impl(key))
    if impl not in GENERATOR_IMPLS:
        return jax.random.split(key, num)
    data = jax.random.bits(key, (num, *jax.random.key_data(key).shape), jnp.uint32)
    return jax.random.wrap_key_data(data, impl=impl)

"""Typed PRNG keys (``jax.random.key``): the one test of whether a value is one, and the key
implementations a run may choose.

A typed key array's dtype is a key dtype (``key<fry>``, ...), not its ``uint32`` data: the
host stores, gathers and compares its data (``jax.random.key_data``), and wraps it back
(``jax.random.wrap_key_data``)."""

from __future__ import annotations

from typing import Any

import jax

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

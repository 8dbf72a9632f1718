"""Typed PRNG keys (``jax.random.key``): the one test of whether a value is one.

A typed key array's dtype is a key dtype (``key<fry>``, ...), not its ``uint32`` data: the
host stores, gathers and compares its data (``jax.random.key_data``), and wraps it back
(``jax.random.wrap_key_data``)."""

from __future__ import annotations

from typing import Any

import jax


def is_key(x: Any) -> bool:
    """Whether ``x`` (an array, a tracer, an abstract value, a ``jax.ShapeDtypeStruct``) has
    a typed key's dtype; ``False`` for anything without a dtype and for raw ``uint32`` key
    data."""
    dtype = getattr(x, "dtype", None)
    # jax.dtypes re-exports issubdtype without "as": pyright takes it as private
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)  # pyright: ignore[reportPrivateImportUsage]

"""The shared actor-critic experience's batch plumbing: rows taken in one gather per element
width are the leaves' own rows, bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rollax.algos.experience import Batch, shuffled_cells, take_rows


def _tree(n: int):
    k1, k2 = jax.random.split(jax.random.key(3))
    return {
        "obs": {"pixels": jnp.arange(n * 6, dtype=jnp.uint8).reshape(n, 2, 3),
                "vector": jax.random.normal(k1, (n, 4))},
        "action": jnp.arange(n, dtype=jnp.int32) - n // 2,
        "mask": jax.random.bernoulli(k2, 0.5, (n, 3)),
        "count": jnp.arange(n, dtype=jnp.uint32) * 7,
        # values a float copy must not change: NaN, infinities, -0.0 and a denormal
        "odd": jnp.array([np.nan, -np.inf, np.inf, -0.0, 1e-45, 2.5] * (n // 6 + 1),
                         jnp.float32)[:n],
        "wide": jnp.arange(n, dtype=jnp.float16),
    }


def _same_bits(got, want) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()


def test_take_rows_is_each_leafs_own_rows_bit_for_bit():
    tree = _tree(12)
    index = jnp.array([11, 0, 5, 5, 3, 7, 2])
    want = jax.tree.map(lambda x: np.asarray(x)[np.asarray(index)], tree)
    _same_bits(jax.jit(take_rows)(tree, index), want)


def test_take_rows_under_vmap_takes_each_lanes_own_rows():
    tree = jax.tree.map(lambda x: jnp.stack([x, x[::-1]]), _tree(6))
    index = jnp.array([[5, 4, 0], [1, 1, 2]])
    want = jax.tree.map(
        lambda x: np.stack([np.asarray(x)[b][np.asarray(index)[b]] for b in range(2)]), tree)
    _same_bits(jax.jit(jax.vmap(take_rows))(tree, index), want)


def test_shuffled_cells_is_the_permutation_of_every_field_split_into_rows():
    t = _tree(12)
    flat = Batch(observation=t["obs"], action=t["action"], log_prob=t["odd"],
                 advantage=t["obs"]["vector"][:, 0], target=t["wide"],
                 value=t["count"], action_mask=t["mask"], live=t["mask"][:, 0])
    key = jax.random.key(5)
    perm = np.asarray(jax.random.permutation(key, 12))
    want = jax.tree.map(lambda x: np.asarray(x)[perm].reshape((3, 4) + x.shape[1:]), flat)
    _same_bits(shuffled_cells(flat, key, 3), want)

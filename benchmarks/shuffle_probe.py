"""One epoch's shuffle of a CartPole PPO batch (256 cells) under ``vmap`` over K seeds, piece by
piece, ms per call (median of 10 after a warm-up):

    python benchmarks/shuffle_probe.py [K]          (default 1024)

``permutation`` (``jax.random.permutation`` alone); the gather of a ``(256, 4)`` field by a
given permutation as ``x[p]``, as ``jnp.take`` and as one gather of all K lanes' rows flattened;
the field sorted by random keys (no gather); gathers of ``(256,)``, ``(256, 9)`` and
``(256, 64)`` rows (does the time follow the rows or the bytes?); and the one-hot matrix
product ``one_hot(p) @ x`` (exact only at full float32 precision and for finite values).
"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import jax.numpy as jnp

N = 256


def timed(fn, *args) -> float:
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(10):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    keys = jax.vmap(jax.random.key)(jnp.arange(k))
    x = jnp.ones((k, N, 4)) * jnp.arange(N)[None, :, None]
    perm = jax.vmap(lambda key: jax.random.permutation(key, N))(keys)

    def by_sort(key, x):
        bits = jax.random.bits(key, (N,), jnp.uint32)
        keyed = jnp.broadcast_to(bits[:, None], x.shape)
        return jax.lax.sort((keyed, x), dimension=0, num_keys=1)[1]

    def flat_gather(x, p):
        rows = (p + N * jnp.arange(k)[:, None]).ravel()
        return x.reshape(k * N, -1)[rows].reshape(x.shape)

    gather = jax.vmap(lambda x, p: x[p])
    rows = {
        "permutation": timed(jax.vmap(lambda key: jax.random.permutation(key, N)), keys),
        "gather": timed(gather, x, perm),
        "take": timed(jax.vmap(lambda x, p: jnp.take(x, p, axis=0)), x, perm),
        "flat gather": timed(flat_gather, x, perm),
        "sort field": timed(jax.vmap(by_sort), keys, x),
        "gather (256,)": timed(gather, jnp.ones((k, N)), perm),
        "gather (256, 9)": timed(gather, jnp.ones((k, N, 9)), perm),
        "gather (256, 64)": timed(gather, jnp.ones((k, N, 64)), perm),
        "one-hot matmul": timed(jax.vmap(lambda x, p: jax.nn.one_hot(p, N) @ x), x, perm),
    }
    dev = jax.devices()[0]
    print(f"{k} seeds on {dev.platform} ({getattr(dev, 'device_kind', '')}) | "
          + " | ".join(f"{name} {ms:.3f}" for name, ms in rows.items()), flush=True)


if __name__ == "__main__":
    main()

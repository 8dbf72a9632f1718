"""Jumanji's own auto-reset loop for ``benchmarks/suites/run.py jumanji``: ``VmapWrapper`` over
``AutoResetWrapper`` (Jumanji resets a finished environment inside ``step`` with the key held in
its state), uniform random actions over the action spec."""

from __future__ import annotations

import jax
import jax.numpy as jnp

IDS = ("Snake-v1", "Game2048-v1")


def native(env_id: str, batch: int, steps: int):
    import jumanji
    from jumanji.wrappers import AutoResetWrapper, VmapWrapper

    env = VmapWrapper(AutoResetWrapper(
        jumanji.make(env_id)))  # pyright: ignore[reportPrivateImportUsage]
    n = int(env.action_spec.num_values)

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        state, _ = env.reset(jax.random.key_data(jax.random.split(init_key, batch)))

        def body(carry, action_key):
            state, total = carry
            actions = jax.random.randint(action_key, (batch,), 0, n)
            state, timestep = env.step(state, actions)
            return (state, total + timestep.reward.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)),
                                     jax.random.split(key, steps))
        return total

    return run

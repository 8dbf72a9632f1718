"""MuJoCo Playground's own auto-reset loop for ``benchmarks/suites/run.py playground``:
``wrapper.wrap_for_brax_training`` (vmap, Brax's ``EpisodeWrapper`` with the config's
``episode_length``, ``BraxAutoResetWrapper`` back to the cached first state), MJX in JAX
(``impl="jax"``, as the adapter's default)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

IDS = ("CartpoleBalance",)


def native(env_id: str, batch: int, steps: int):
    from mujoco_playground import registry, wrapper

    raw = registry.load(env_id, registry.get_default_config(env_id), {"impl": "jax"})
    length: Any = raw._config.episode_length
    env = wrapper.wrap_for_brax_training(raw, episode_length=int(length))
    size = raw.action_size

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        state = env.reset(jax.random.key_data(jax.random.split(init_key, batch)))

        def body(carry, step_key):
            state, total = carry
            actions = jax.random.uniform(step_key, (batch, size), minval=-1.0, maxval=1.0)
            state = env.step(state, actions)
            return (state, total + state.reward.sum()), None

        (state, total), _ = jax.lax.scan(body, (state, jnp.float32(0)),
                                         jax.random.split(key, steps))
        # the final observations join the result: with a constant reward (inverted_pendulum's
        # 1.0) XLA would otherwise drop the physics altogether
        return total + 0.0 * state.obs.sum()

    return run

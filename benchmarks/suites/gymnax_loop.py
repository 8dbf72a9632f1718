"""gymnax's own auto-reset loop for ``benchmarks/suites/run.py gymnax``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

IDS = ("CartPole-v1",)


def native(env_id: str, batch: int, steps: int):
    import gymnax

    env, params = gymnax.make(env_id)
    space = env.action_space(params)

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        _, state = jax.vmap(env.reset, (0, None))(jax.random.split(init_key, batch), params)

        def body(carry, step_key):
            state, total = carry
            action_key, env_key = jax.random.split(step_key)
            actions = jax.vmap(space.sample)(jax.random.split(action_key, batch))
            _, state, reward, *_ = jax.vmap(env.step, (0, 0, 0, None))(
                jax.random.split(env_key, batch), state, actions, params)
            return (state, total + reward.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)), jax.random.split(key, steps))
        return total

    return run

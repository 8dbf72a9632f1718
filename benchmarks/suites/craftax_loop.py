"""Craftax's own auto-reset loop (``auto_reset=True``) for ``benchmarks/suites/run.py craftax``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

IDS = ("Craftax-Classic-Symbolic-v1",)


def native(env_id: str, batch: int, steps: int):
    from craftax.craftax_env import make_craftax_env_from_name

    env: Any = make_craftax_env_from_name(env_id, auto_reset=True)
    params = env.default_params
    num_actions = env.action_space(params).n

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        _, state = jax.vmap(env.reset, (0, None))(jax.random.split(init_key, batch), params)

        def body(carry, step_key):
            state, total = carry
            action_key, env_key = jax.random.split(step_key)
            actions = jax.random.randint(action_key, (batch,), 0, num_actions)
            _, state, reward, *_ = jax.vmap(env.step, (0, 0, 0, None))(
                jax.random.split(env_key, batch), state, actions, params)
            return (state, total + reward.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)), jax.random.split(key, steps))
        return total

    return run

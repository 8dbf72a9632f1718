"""Brax's own auto-reset loop for ``benchmarks/suites/run.py brax``: ``training.wrap`` (vmap,
``EpisodeWrapper`` with ``episode_length=1000``, ``AutoResetWrapper`` back to the cached first
state), as Brax's trainers step it."""

from __future__ import annotations

import jax
import jax.numpy as jnp

IDS = ("inverted_pendulum",)


def native(env_id: str, batch: int, steps: int):
    from brax import envs
    from brax.envs.wrappers import training

    env = training.wrap(envs.get_environment(env_id), episode_length=1000)
    size = env.action_size

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

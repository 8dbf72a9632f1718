"""Pgx's own auto-reset loop for ``benchmarks/suites/run.py pgx``: ``pgx.experimental.
auto_reset(env.step, env.init)`` (a finished game is replaced by ``init`` of a fresh key right
after its last step), uniform random legal actions (``pgx.experimental.act_randomly``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

IDS = ("minatar-breakout", "minatar-asterix", "minatar-freeway", "minatar-seaquest",
       "minatar-space_invaders")


def native(env_id: str, batch: int, steps: int):
    import pgx
    from pgx.experimental import act_randomly, auto_reset

    env = pgx.make(env_id)
    step = jax.vmap(auto_reset(env.step, env.init))

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        state = jax.vmap(env.init)(jax.random.split(init_key, batch))

        def body(carry, step_key):
            state, total = carry
            action_key, env_key = jax.random.split(step_key)
            actions = act_randomly(action_key, state.legal_action_mask)
            state = step(state, actions, jax.random.split(env_key, batch))
            return (state, total + state.rewards.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)), jax.random.split(key, steps))
        return total

    return run

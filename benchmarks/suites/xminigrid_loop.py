"""xminigrid's own auto-reset loop for ``benchmarks/suites/run.py xminigrid``: its
``GymAutoResetWrapper`` (reset inside ``step`` when a timestep is LAST, from the state's own
key), vmapped, uniform random actions."""

from __future__ import annotations

import jax
import jax.numpy as jnp

IDS = ("MiniGrid-Empty-8x8", "MiniGrid-DoorKey-8x8")


def native(env_id: str, batch: int, steps: int):
    import xminigrid
    from xminigrid.wrappers import GymAutoResetWrapper

    env, params = xminigrid.make(env_id)
    env = GymAutoResetWrapper(env)
    num_actions = env.num_actions(params)
    step = jax.vmap(env.step, (None, 0, 0))

    @jax.jit
    def run(key):
        init_key, key = jax.random.split(key)
        timestep = jax.vmap(env.reset, (None, 0))(params, jax.random.split(init_key, batch))

        def body(carry, step_key):
            timestep, total = carry
            actions = jax.random.randint(step_key, (batch,), 0, num_actions)
            timestep = step(params, timestep, actions)
            return (timestep, total + timestep.reward.sum()), None

        (_, total), _ = jax.lax.scan(body, (timestep, jnp.float32(0)),
                                     jax.random.split(key, steps))
        return total

    return run

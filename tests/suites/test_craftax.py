"""The Craftax adapter: step-by-step agreement with Craftax's own raw ``step_env``, the split of
its ``done`` into terminated/truncated, the contract checker and a tiny training run.

Needs ``pip install rollax[craftax]``; the main test suite skips this folder. Craftax compiles
slowly on CPU (tens of seconds a function), so every compiled function is built once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from rollax.envs.suites.craftax import CraftaxEnv, CraftaxState, make_craftax

pytest.importorskip("craftax")

CLASSIC = "Craftax-Classic-Symbolic-v1"
LIMIT = 100  # Craftax's own max_timesteps, shortened so that truncations happen in the test
BATCH, STEPS = 16, 300
HUNGRY = (0, 1, 2, 3, 4, 5)  # start starving (food = drink = 0) with 1-3 health
COINCIDE = 6  # dies on the very step the time limit is reached
LAST_STEP = 7  # only the time limit is reached on its first step
EARLY = 8  # dies on its first step, one step before the time limit


def _craft(inner: Any, index: jax.Array):
    """Start states of the first episode: a few near death, some near the time limit (the
    same for Craftax and the adapter). Starving with ``player_recover = -15`` loses one
    health on the next step whatever the action (one action can restore food or drink, not
    both, and recovery needs both)."""
    hungry = jnp.asarray(jnp.isin(index, jnp.array(HUNGRY)))
    doomed = jnp.asarray((index == COINCIDE) | (index == EARLY))
    starve = hungry | doomed
    health: Any = jnp.where(doomed, 1, inner.player_health)
    health = jnp.where(hungry, 1 + jnp.remainder(index, 3), health)
    recover: Any = jnp.where(hungry, 0.0, inner.player_recover)
    recover = jnp.where(doomed, -15.0, recover)
    timestep: Any = jnp.where(index == EARLY, LIMIT - 2, 0)
    timestep = jnp.where((index == COINCIDE) | (index == LAST_STEP), LIMIT - 1, timestep)
    food: Any = jnp.where(starve, 0, inner.player_food)
    drink: Any = jnp.where(starve, 0, inner.player_drink)
    return inner.replace(
        player_food=food.astype(jnp.asarray(inner.player_food).dtype),
        player_drink=drink.astype(jnp.asarray(inner.player_drink).dtype),
        player_health=health.astype(jnp.asarray(inner.player_health).dtype),
        player_recover=recover.astype(jnp.asarray(inner.player_recover).dtype),
        timestep=timestep.astype(jnp.asarray(inner.timestep).dtype),
    )


def _strong(tree):
    """Every leaf as an array of its own dtype without weak typing: Classic's world generator
    returns a few Python scalars (e.g. ``timestep=0``), which would change type in a scan carry
    (the adapter's reset does the same; values are unchanged)."""
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.asarray(x).dtype), tree)


@pytest.fixture(scope="module")
def lockstep():
    """Craftax's ``step_env`` (no auto-reset) and the adapter's ``step``, same keys and random
    actions, ``BATCH`` environments for ``STEPS`` steps; each side starts a new episode (same
    reset key) on the step after its previous one ended. One jitted function."""
    from craftax.craftax_classic.constants import BlockType

    LAVA = BlockType.LAVA.value
    env = make_craftax(CLASSIC, max_timesteps=LIMIT)
    craftax_env, params = env.craftax_env, env.craftax_params

    def start(key, index):
        _, inner = craftax_env.reset_env(key, params)
        inner = _craft(_strong(inner), index)
        ours = env.reset(key)
        crafted = _craft(ours.inner, index)
        ours = ours._replace(inner=crafted, obs=craftax_env.get_obs(crafted),
                             elapsed=crafted.timestep.astype(jnp.int32))
        return ours, (craftax_env.get_obs(inner), inner, jnp.bool_(False))

    def body(carry, key):
        ours, (r_obs, r_inner, r_ended) = carry
        reset_key, action_key, step_key = jax.random.split(key, 3)
        fresh = env.reset(reset_key)
        ours = jax.tree.map(lambda a, b: jnp.where(ours.done, a, b), fresh, ours)
        f_obs, f_inner = craftax_env.reset_env(reset_key, params)
        r_obs, r_inner = jax.tree.map(lambda a, b: jnp.where(r_ended, a, b).astype(b.dtype),
                                      (f_obs, f_inner), (r_obs, r_inner))
        before = dict(obs=env.observation(ours), r_obs=r_obs.reshape(-1))
        action = jax.random.randint(action_key, (), 0, env.action_space.n)
        nxt, reward, terminated, truncated = env.step(ours, action, step_key)
        r_obs, r_inner, r_reward, r_done, info = craftax_env.step_env(step_key, r_inner,
                                                                      action, params)
        pos = r_inner.player_position
        out = dict(before, after=env.observation(nxt), r_after=r_obs.reshape(-1),
                   reward=reward, r_reward=r_reward, terminated=terminated,
                   truncated=truncated, r_done=r_done, r_discount=info["discount"],
                   r_timestep=r_inner.timestep, elapsed=nxt.elapsed,
                   r_health=r_inner.player_health, r_lava=r_inner.map[pos[0], pos[1]] == LAVA)
        return (nxt, (r_obs, r_inner, r_done)), out

    def run(key, index):
        init_key, run_key = jax.random.split(key)
        carry = start(init_key, index)
        return jax.lax.scan(body, carry, jax.random.split(run_key, STEPS))[1]

    keys = jax.random.split(jax.random.key(11), BATCH)
    out = jax.jit(jax.vmap(run))(keys, jnp.arange(BATCH))
    return env, jax.tree.map(np.asarray, out)


def test_steps_match_craftax(lockstep):
    env, out = lockstep
    assert isinstance(env, CraftaxEnv) and env.horizon == LIMIT
    # observations (before and after every step, resets included) and rewards bit-identical
    np.testing.assert_array_equal(out["obs"], out["r_obs"])
    np.testing.assert_array_equal(out["after"], out["r_after"])
    np.testing.assert_array_equal(out["reward"], out["r_reward"].astype(np.float32))
    # episodes end on the same steps, and Craftax's `done` is split by its own state
    terminated, truncated, done = out["terminated"], out["truncated"], out["r_done"]
    np.testing.assert_array_equal(terminated | truncated, done)
    assert not np.any(terminated & truncated)
    np.testing.assert_array_equal(out["r_discount"], np.where(done, 0.0, 1.0))
    died = (out["r_health"] <= 0) | out["r_lava"]
    np.testing.assert_array_equal(terminated, done & died)
    np.testing.assert_array_equal(truncated, done & ~died & (out["r_timestep"] >= LIMIT))
    np.testing.assert_array_equal(out["elapsed"], out["r_timestep"])  # the same step counter
    # the crafted first episodes
    first_end = (terminated | truncated).argmax(axis=1)
    assert first_end[COINCIDE] == 0 and terminated[COINCIDE, 0]  # death wins over the limit
    assert out["r_timestep"][COINCIDE, 0] == LIMIT and not truncated[COINCIDE, 0]
    assert first_end[LAST_STEP] == 0 and truncated[LAST_STEP, 0]
    assert first_end[EARLY] == 0 and terminated[EARLY, 0] and out["r_timestep"][EARLY, 0] < LIMIT
    n_term, n_trunc = int(terminated.sum()), int(truncated.sum())
    natural = terminated.copy()
    natural[list(HUNGRY)] = False  # starving from the start
    natural[:, 0] = False  # COINCIDE and EARLY
    print(f"\ncraftax:{CLASSIC} max_timesteps={LIMIT}: {BATCH} x {STEPS} steps, "
          f"{n_term + n_trunc} episode ends: {n_term} terminated, {n_trunc} truncated; "
          f"terminations of uncrafted episodes: {int(natural.sum())} "
          f"({int((natural & out['r_lava']).sum())} in lava)")
    assert n_term >= 3 and n_trunc >= BATCH


def test_default_horizon_and_options():
    env = make_craftax(CLASSIC)
    assert env == rollax.make(f"craftax:{CLASSIC}")
    assert env.horizon == 10000 == env.craftax_params.max_timesteps
    assert env.observation_space.shape == (1345,) and env.raw_observation_shape == (1345,)
    assert env.action_space == rollax.Discrete(17)
    assert env == CraftaxEnv(CLASSIC, 10000)
    assert env != rollax.make(f"craftax:{CLASSIC}", max_timesteps=LIMIT)
    assert hash(env) == hash(rollax.make(f"craftax:{CLASSIC}"))
    full = make_craftax("Craftax-Symbolic-v1")
    assert full.horizon == 100000 and full.action_space == rollax.Discrete(43)
    assert full.observation_space.shape == (8268,)
    pixels = make_craftax("Craftax-Classic-Pixels-v1", horizon=50)
    assert pixels.raw_observation_shape == (63, 63, 3) and pixels.horizon == 50
    assert pixels.observation_space.shape == (63 * 63 * 3,)
    with pytest.raises(ValueError, match="did you mean craftax:Craftax-Classic-Symbolic-v1"):
        rollax.make("craftax:Craftax-Classic-Symbolic")
    with pytest.raises(ValueError, match="no EnvParams field"):
        rollax.make(f"craftax:{CLASSIC}", nonsense=1)
    with pytest.raises(ValueError, match="positive integer"):
        rollax.make(f"craftax:{CLASSIC}", horizon=0)
    assert f"craftax:{CLASSIC}" in rollax.envs.suites.suite_ids()


def test_state_is_rollax_shaped():
    assert CraftaxState._fields[-2:] == ("elapsed", "done")


def test_check_env():
    report = rollax.check_env(rollax.make(f"craftax:{CLASSIC}", max_timesteps=LIMIT))
    print(report)
    assert report.ok, str(report)
    # Craftax's own world generation reuses a key (world_gen.py): a warning, not rollax's
    assert [r.name for r in report.warnings] == ["key_used_once"], str(report)
    assert "world_gen.py" in report["key_used_once"].message


def test_cli_train(tmp_path):
    code = rollax.cli.main(["train", "--env", f"craftax:{CLASSIC}", "--horizon", "64",
                            "--total-steps", "512", "--num-envs", "8", "--num-steps", "32",
                            "--out", str(tmp_path / "run")])
    assert code == 0


# Bit-identity with the suite's own step and documentation output are claims about the program
# rollax compiles (tests/conftest.py): compiled with the defaults, not the session's cheap ones.
pytestmark = pytest.mark.optimized


@pytest.mark.parametrize("name", ["Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1"])
def test_render_draws_with_craftaxs_own_pixel_renderer(tmp_path, capsys, name):
    """A state is drawn by Craftax's ``make_craftax_pixel_renderer`` (16 pixels a block): the
    picture of rollax's reset state equals the one Craftax's renderer makes of Craftax's own
    reset state for the same key (its ``state_rng`` wrapped back from the stored data); `rollax
    render` writes a GIF of a random episode whose first and last pictures differ (Classic
    only: the command's path is the same for both, and compiling full Craftax's episode
    program for it took ~45 s of this test)."""
    import importlib
    import json

    from helpers import gif_ends, run
    from rollax.envs.frames import frame_renderer

    env = rollax.make(f"craftax:{name}")
    draw = frame_renderer(env)
    picture = draw(jax.device_get(jax.jit(env.reset)(jax.random.key(0))))  # op by op: 17 s
    _, theirs = env.craftax_env.reset_env(jax.random.key(0), env.craftax_params)
    module = importlib.import_module("craftax.craftax_classic.renderer" if "Classic" in name
                                     else "craftax.craftax.renderer")
    # compiled, as rollax's is (op by op, full Craftax's renderer took 186 s of this test)
    want = np.asarray(jax.jit(module.make_craftax_pixel_renderer(16))(theirs))
    assert picture.dtype == np.uint8 and picture.shape == want.shape
    np.testing.assert_array_equal(picture, np.clip(np.rint(want), 0, 255).astype(np.uint8))
    if "Classic" not in name:
        return
    code, out, err = run(capsys, "render", f"craftax:{name}", "--out", tmp_path / "c.gif",
                         "--max-steps", "12", "--json")
    assert code == 0, err
    frames, first, last = gif_ends(tmp_path / "c.gif")
    assert frames == json.loads(out)["frames"] == 13
    assert not np.array_equal(first, last)

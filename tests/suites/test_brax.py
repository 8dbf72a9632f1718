"""The Brax and MuJoCo Playground adapters (``brax:<name>``, ``playground:<Name>``): bit-identical
agreement with each suite's raw step, the contract checker and a tiny training run.

Needs ``pip install rollax[brax,playground]`` (skipped otherwise). Compiling MJX on the CPU is
slow (tens of seconds per program), so one environment per prefix, each program built once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")
pytest.importorskip("mujoco_playground")

import rollax
import rollax.cli
from rollax.envs.base import Box

BATCH, STEPS = 16, 300
# (name, horizon, rate of NaN actions). inverted_pendulum falls under random actions (its own
# termination) and a horizon of 12 truncates the episodes that last. Playground's
# CartpoleBalance terminates only when the simulation blows up (NaN in qpos/qvel): a NaN action
# is the way to make that happen on purpose.
CASES = {
    "brax:inverted_pendulum": (12, 0.0),
    "playground:CartpoleBalance": (100, 0.004),
}


@pytest.fixture(scope="module", autouse=True)
def _suite_rank_promotion():
    """MJX broadcasts ranks implicitly; rollax's conftest makes that an error for its own code."""
    with jax.numpy_rank_promotion("allow"):
        yield


def _where(mask, new, old):
    def pick(x, y):
        m = jnp.reshape(mask, mask.shape + (1,) * (x.ndim - mask.ndim))
        return jnp.where(m, x, y)

    return jax.tree.map(pick, new, old)


def _lockstep(env, nan_rate):
    """Jitted ``key -> dict of (T, B, ...)``: rollax's adapted environment and the suite's raw
    environment, each run on its own from the same reset keys with the same actions; an ended
    episode is reset on both sides with the same fresh key. The reference counts its own steps
    and calls a step at the horizon a truncation unless the suite's ``done`` fired."""
    raw, horizon, size = env.suite_env, env.horizon, env.action_space.shape[0]

    def run(key):
        start, loop = jax.random.split(key)
        keys = jax.random.split(start, BATCH)
        ours = jax.vmap(env.reset)(keys)
        theirs = jax.vmap(raw.reset)(jax.random.key_data(keys))

        def body(carry, key):
            ours, theirs, count = carry
            action_key, nan_key, reset_key = jax.random.split(key, 3)
            actions = jax.random.uniform(action_key, (BATCH, size), minval=-1.0, maxval=1.0)
            blow_up = jax.random.bernoulli(nan_key, nan_rate, (BATCH, 1))
            actions = jnp.where(blow_up, jnp.nan, actions)
            nxt, reward, terminated, truncated = jax.vmap(env.step)(ours, actions)
            ref = jax.vmap(raw.step)(theirs, actions)
            count = count + 1
            ref_terminated = ref.done != 0
            ref_truncated = ~ref_terminated & (count >= horizon)
            out = dict(obs=jax.vmap(env.observation)(nxt), reward=reward,
                       terminated=terminated, truncated=truncated,
                       ref_obs=ref.obs, ref_reward=jnp.asarray(ref.reward, jnp.float32),
                       ref_terminated=ref_terminated, ref_truncated=ref_truncated)
            fresh = jax.random.split(reset_key, BATCH)
            ours = _where(terminated | truncated, jax.vmap(env.reset)(fresh), nxt)
            ref_end = ref_terminated | ref_truncated
            theirs = _where(ref_end, jax.vmap(raw.reset)(jax.random.key_data(fresh)), ref)
            return (ours, theirs, jnp.where(ref_end, 0, count)), out

        carry = (ours, theirs, jnp.zeros(BATCH, jnp.int32))
        return jax.lax.scan(body, carry, jax.random.split(loop, STEPS))[1]

    return jax.jit(run)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    name = request.param
    horizon, nan_rate = CASES[name]
    env = rollax.make(name, horizon=horizon)
    out = jax.device_get(_lockstep(env, nan_rate)(jax.random.key(0)))
    return name, env, out


def test_adapted_step_equals_raw_step(case):
    name, env, out = case
    np.testing.assert_array_equal(out["obs"], np.reshape(out["ref_obs"], out["obs"].shape))
    np.testing.assert_array_equal(out["reward"], out["ref_reward"])
    np.testing.assert_array_equal(out["terminated"], out["ref_terminated"])
    np.testing.assert_array_equal(out["truncated"], out["ref_truncated"])
    assert not np.any(out["terminated"] & out["truncated"])
    terminated, truncated = int(out["terminated"].sum()), int(out["truncated"].sum())
    print(f"\n{name}: {BATCH} x {STEPS} steps (horizon {env.horizon}), "
          f"{terminated} terminated, {truncated} truncated")
    assert terminated > 0 and truncated > 0


def test_ids_spaces_and_errors():
    from rollax.envs.suites import brax, playground

    assert "inverted_pendulum" in brax.ids() and "fast" not in brax.ids()
    assert "CartpoleBalance" in playground.ids()
    env = rollax.make("brax:inverted_pendulum")
    assert env.horizon == 1000 and env.observation_space.shape == (4,)
    space = env.action_space
    assert isinstance(space, Box) and space.shape == (1,) and float(space.high[0]) == 1.0
    assert env == rollax.make("brax:inverted_pendulum") and hash(env) == hash(
        rollax.make("brax:inverted_pendulum"))
    with pytest.raises(ValueError, match="did you mean brax:inverted_pendulum"):
        rollax.make("brax:inverted_pendulm")
    with pytest.raises(ValueError, match="did you mean playground:CartpoleBalance"):
        rollax.make("playground:CartpoleBalanc")


def test_playground_episode_length_is_the_default_horizon():
    from rollax.envs.suites.playground import make_playground

    env = make_playground("CartpoleBalance", episode_length=250)
    assert env.horizon == 250 and dict(env.env_kwargs) == {"episode_length": 250, "impl": "jax"}
    assert env == rollax.make("playground:CartpoleBalance", episode_length=250, impl="jax")


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_env(name):
    # a short horizon keeps the checker's horizon + 3 steps (and its compile) small
    report = rollax.check_env(rollax.make(name, horizon=CASES[name][0]))
    assert report.ok, str(report)
    if name == "playground:CartpoleBalance":  # Playground's own reset reuses its key
        assert [r.name for r in report.warnings] == ["key_used_once"], str(report)
        assert "cartpole.py" in report["key_used_once"].message


@pytest.mark.parametrize("name", sorted(CASES))
def test_train_tiny(name, tmp_path):
    args = ["train", "--env", name, "--horizon", "50", "--total-steps", "256",
            "--num-envs", "8", "--num-steps", "16", "--minibatches", "2",
            "--out", str(tmp_path / "run")]
    assert rollax.cli.main(args) == 0


# Bit-identity with the suite's own step and documentation output are claims about the program
# rollax compiles (tests/conftest.py): compiled with the defaults, not the session's cheap ones.
pytestmark = pytest.mark.optimized


def drawn_like_the_suite(env_id: str, theirs, out, steps: int, capsys) -> None:
    """The picture of ``env_id``'s reset state is the suite's own (``theirs(env, state)``,
    240x320), and ``rollax render`` of a random episode writes a GIF whose first and last
    pictures differ."""
    from helpers import gif_ends, run
    from rollax.envs.frames import frame_renderer

    env = rollax.make(env_id)
    state = jax.device_get(env.reset(jax.random.key(0)))
    mine = frame_renderer(env)(state)
    assert mine.shape == (240, 320, 3) and mine.std() > 0
    np.testing.assert_array_equal(mine, theirs(env, state))
    code, _, err = run(capsys, "render", env_id, "--out", out, "--max-steps", str(steps),
                       "--json")
    assert code == 0, err
    _, first, last = gif_ends(out)
    assert not np.array_equal(first, last)


def test_render_draws_brax_with_mujocos_renderer(tmp_path, capsys):
    """`rollax render brax:inverted_pendulum`: a random policy's episode drawn by MuJoCo's
    offscreen renderer (EGL on this headless machine) as a GIF; the pole moves, so the first
    and last pictures differ; the picture of a state is MuJoCo's of the same positions drawn
    by Brax's own brax.io.image.render_array."""
    from brax.io import image

    drawn_like_the_suite(
        "brax:inverted_pendulum",
        lambda env, state: image.render_array(env.suite_env.sys, state.inner.pipeline_state,
                                              240, 320),
        tmp_path / "p.gif", 40, capsys)


def test_render_draws_playground_like_its_own_render_array(tmp_path, capsys):
    """`rollax render playground:CartpoleBalance`: the picture of a state is the one
    Playground's own ``render_array`` draws of it (the same MJX data through MuJoCo's
    offscreen renderer, 240x320); a random episode's GIF moves."""
    from mujoco_playground._src.mjx_env import render_array

    drawn_like_the_suite(
        "playground:CartpoleBalance",
        lambda env, state: render_array(env.suite_env.mj_model, state.inner, 240, 320),
        tmp_path / "c.gif", 30, capsys)

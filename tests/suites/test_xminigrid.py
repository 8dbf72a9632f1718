"""The XLand-MiniGrid adapter (``rollax.make("xminigrid:<id>")``): step-by-step agreement with
xminigrid's own raw ``step``, the contract checker, a tiny training run and the error messages.

Needs ``pip install rollax[xminigrid]``; run explicitly: ``python -m pytest
tests/suites/test_xminigrid.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from rollax.envs.suites import xminigrid as xminigrid_suite

xminigrid = pytest.importorskip("xminigrid")
from xminigrid.types import StepType  # noqa: E402

BATCH, STEPS = 32, 300
CASES = {
    # default max_steps = 100: a random walk reaches the goal in some episodes, not in others
    "MiniGrid-Empty-5x5": {},
    # xminigrid's own limit shortened (250 -> 40) through its option: many truncations
    "MiniGrid-DoorKey-5x5": {"max_steps": 40},
    # max_steps 320: the corridor's two ends end most episodes (reward 0 at the wrong one)
    "MiniGrid-MemoryS8": {},
}


def _where(mask, new, old):
    return jax.tree.map(
        lambda n, o: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (n.ndim - 1)), n, o),
        new, old)


def _lockstep(name: str, options: dict):
    """A jitted ``key -> dict of (T, B, ...)``: rollax's adapter and xminigrid's raw ``step``
    side by side from the same reset keys, fed the same random actions; each side starts a
    new episode (both from the same fresh key) when its own signal says the episode ended."""
    env = rollax.make(f"xminigrid:{name}", **options)
    ref, params = xminigrid.make(name, **options)
    assert env.horizon == params.max_steps
    batch_reset = jax.vmap(env.reset)
    ref_reset = jax.vmap(ref.reset, (None, 0))
    ref_step = jax.vmap(ref.step, (None, 0, 0))

    def body(carry, key):
        ours, theirs = carry
        action_key, reset_key = jax.random.split(key)
        actions = jax.random.randint(action_key, (BATCH,), 0, env.action_space.n)
        nxt, reward, terminated, truncated = jax.vmap(env.step)(ours, actions)
        t = ref_step(params, theirs, actions)
        out = dict(observation=jax.vmap(env.observation)(nxt), raw=nxt.obs, reward=reward,
                   terminated=terminated, truncated=truncated, t_obs=t.observation,
                   t_reward=t.reward, t_last=t.step_type == StepType.LAST,
                   t_discount=t.discount, elapsed=nxt.elapsed, t_step=t.state.step_num)
        keys = jax.random.split(reset_key, BATCH)
        ours = _where(nxt.done, batch_reset(keys), nxt)
        theirs = _where(t.step_type == StepType.LAST, ref_reset(params, keys), t)
        return (ours, theirs), out

    @jax.jit
    def run(key):
        reset_key, run_key = jax.random.split(key)
        keys = jax.random.split(reset_key, BATCH)
        ours, theirs = batch_reset(keys), ref_reset(params, keys)
        start = (ours.obs, theirs.observation)
        _, out = jax.lax.scan(body, (ours, theirs), jax.random.split(run_key, STEPS))
        return start, out

    return run


COUNTS: dict[str, tuple[int, int]] = {}


@pytest.mark.parametrize("name", list(CASES))
def test_bit_identical_to_xminigrid_step(name):
    start, out = jax.device_get(_lockstep(name, CASES[name])(jax.random.key(0)))
    np.testing.assert_array_equal(start[0], start[1])
    np.testing.assert_array_equal(out["raw"], out["t_obs"])
    flat = out["t_obs"].reshape(STEPS, BATCH, -1).astype(np.float32)
    np.testing.assert_array_equal(out["observation"], flat)
    assert out["observation"].dtype == np.float32
    np.testing.assert_array_equal(out["reward"], out["t_reward"].astype(np.float32))
    last, discount = out["t_last"], out["t_discount"]
    np.testing.assert_array_equal(out["terminated"], last & (discount == 0))
    np.testing.assert_array_equal(out["truncated"], last & (discount == 1))
    np.testing.assert_array_equal(out["elapsed"], out["t_step"])
    assert not (out["terminated"] & out["truncated"]).any()
    terminated, truncated = int(out["terminated"].sum()), int(out["truncated"].sum())
    COUNTS[name] = (terminated, truncated)
    print(f"\n{name} {CASES[name]}: {BATCH} envs x {STEPS} steps, {terminated} terminated, "
          f"{truncated} truncated, {int((out['reward'] > 0).sum())} rewarded")
    assert terminated + truncated > 0
    if name == "MiniGrid-Empty-5x5":  # both kinds of ending in one task
        assert terminated > 0 and truncated > 0
    if name == "MiniGrid-DoorKey-5x5":
        assert truncated > 0
    if name == "MiniGrid-MemoryS8":
        assert terminated > 0


def test_shorter_horizon_truncates_where_xminigrid_goes_on():
    env = rollax.make("xminigrid:MiniGrid-Empty-5x5", horizon=3)
    ref, params = xminigrid.make("MiniGrid-Empty-5x5")

    @jax.jit
    def three_turns(key):  # turning right never reaches the goal: xminigrid says MID
        state, timestep = env.reset(key), ref.reset(params, key)
        events = []
        for _ in range(3):
            state, _, terminated, truncated = env.step(state, jnp.int32(1))
            timestep = ref.step(params, timestep, jnp.int32(1))
            events.append((terminated, truncated))
        return events, state.done, timestep.step_type

    events, done, step_type = jax.device_get(three_turns(jax.random.key(1)))
    assert [tuple(map(bool, e)) for e in events] == [(False, False)] * 2 + [(False, True)]
    assert bool(done) and int(step_type) == int(StepType.MID)


def test_check_env_ok():
    report = rollax.check_env(rollax.make("xminigrid:MiniGrid-Empty-5x5"))
    assert report.ok, report


def test_train_tiny(tmp_path):
    code = rollax.cli.main(["train", "--env", "xminigrid:MiniGrid-Empty-5x5",
                            "--total-steps", "1024", "--num-envs", "8", "--num-steps", "64",
                            "--out", str(tmp_path / "run")])
    assert code == 0


def test_every_minigrid_id_builds_with_flat_spaces():
    names = xminigrid_suite.ids()
    assert names and all(n.startswith("MiniGrid-") for n in names)
    assert len(names) == sum(n.startswith("MiniGrid-")
                             for n in xminigrid.registered_environments())
    for name in names:
        env = rollax.make(f"xminigrid:{name}")
        _, params = xminigrid.make(name)
        view = params.view_size
        assert env.raw_observation_shape == (view, view, 2)
        assert env.observation_space.shape == (2 * view * view,)
        assert env.action_space == rollax.envs.base.Discrete(6)
        assert env.horizon == params.max_steps and not env.stochastic
    assert f"xminigrid:{names[0]}" in rollax.envs.suites.suite_ids()


def test_same_settings_same_env():
    a = rollax.make("xminigrid:MiniGrid-DoorKey-5x5", max_steps=40)
    b = rollax.make("xminigrid:MiniGrid-DoorKey-5x5", max_steps=40, horizon=40)
    assert a == b and hash(a) == hash(b)
    assert a != rollax.make("xminigrid:MiniGrid-DoorKey-5x5")


@pytest.mark.parametrize(("name", "options", "match"), [
    ("XLand-MiniGrid-R1-9x9", {}, "download.*offline"),
    ("MiniGrid-Empty5x5", {}, "did you mean xminigrid:MiniGrid-Empty-5x5"),
    ("MiniGrid-Empty-5x5", {"horizon": 101}, r"exceeds xminigrid's max_steps 100.*max_steps=101"),
    ("MiniGrid-Empty-5x5", {"horizon": 0}, "positive integer"),
    ("MiniGrid-Empty-5x5", {"size": 3}, "does not accept"),
    ("MiniGrid-Empty-5x5", {"max_steps": [1]}, "hashable"),
])
def test_errors(name, options, match):
    with pytest.raises(ValueError, match=match):
        rollax.make(f"xminigrid:{name}", **options)


# Bit-identity with the suite's own step and documentation output are claims about the program
# rollax compiles (tests/conftest.py): compiled with the defaults, not the session's cheap ones.
pytestmark = pytest.mark.optimized


def test_render_draws_with_xminigrids_own_renderer(tmp_path, capsys):
    """A state is drawn by xminigrid's RGB renderer (the whole grid, the agent's view
    highlighted, 32 pixels a tile): the picture of rollax's reset state equals xminigrid's
    ``env.render`` of its own reset timestep for the same key; `rollax render` writes an MP4 of
    a random episode whose first and last pictures differ."""
    import json

    import imageio.v3 as iio

    from helpers import run
    from rollax.envs.frames import frame_renderer

    env = rollax.make("xminigrid:MiniGrid-Empty-8x8")
    picture = frame_renderer(env)(jax.device_get(env.reset(jax.random.key(0))))
    theirs, params = xminigrid.make("MiniGrid-Empty-8x8")
    params = params.replace(render_mode="rgb_array")
    want = theirs.render(params, theirs.reset(params, jax.random.key(0)))
    assert picture.shape == (256, 256, 3) and picture.dtype == np.uint8
    np.testing.assert_array_equal(picture, want)
    code, out, err = run(capsys, "render", "xminigrid:MiniGrid-Empty-8x8", "--out",
                         tmp_path / "x.mp4", "--max-steps", "12", "--json")
    assert code == 0, err
    frames = iio.imread(tmp_path / "x.mp4")
    assert len(frames) == json.loads(out)["frames"]
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).max() > 64

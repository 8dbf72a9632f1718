"""The JAX classic-control tasks against Gymnasium's own implementations, step by step.

Every comparison resets Gymnasium's ``.state`` to ours (as float64) before each step, so the
float32 / float64 difference of a single step is all that is measured and nothing accumulates.
"""

from __future__ import annotations

import types

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.envs import Acrobot, CartPole, MountainCar, Pendulum

NAMES = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1")
CLASSES = {
    "CartPole-v1": CartPole,
    "Acrobot-v1": Acrobot,
    "MountainCar-v0": MountainCar,
    "Pendulum-v1": Pendulum,
}
HORIZONS = {"CartPole-v1": 500, "Acrobot-v1": 500, "MountainCar-v0": 200, "Pendulum-v1": 200}
# One float32 step against one float64 step of the same dynamics: the worst errors seen are a
# few 1e-7 (Acrobot's RK4 included), so 1e-5 leaves an order of magnitude of slack.
RTOL = ATOL = 1e-5
# Indices of state variables that are angles wrapped into [-pi, pi] (compared modulo 2 pi: a
# value within rounding of +-pi may land on either side of the cut in float32 vs float64).
WRAPPED = {"Acrobot-v1": (0, 1)}


def _make(name: str, **kwargs):
    env = rollax.make(name, **kwargs)

    def step_obs(state, action):
        next_state, reward, terminated, truncated = env.step(state, action)
        return next_state, env.observation(next_state), reward, terminated, truncated

    return types.SimpleNamespace(
        name=name,
        env=env,
        reset=jax.jit(env.reset),
        step=jax.jit(env.step),
        step_obs=jax.jit(step_obs),
        observation=jax.jit(env.observation),
    )


@pytest.fixture(scope="module")
def jitted():
    """One jitted step / reset per environment (default horizon), compiled once per module."""
    return {name: _make(name) for name in NAMES}


def _physics(state) -> np.ndarray:
    """The physics variables of a state (everything but ``elapsed`` and ``done``), float64."""
    assert state._fields[-2:] == ("elapsed", "done")
    return np.array([np.asarray(x) for x in state[:-2]], np.float64)


def _our_action(name: str, action):
    if name == "Pendulum-v1":
        return jnp.asarray(action, jnp.float32)
    return jnp.int32(action)


def _gym_action(name: str, action):
    if name == "Pendulum-v1":
        return np.asarray(action, np.float32)
    return int(action)


def _policy(name: str, phys: np.ndarray, rng: np.random.Generator):
    """Random actions; Acrobot and MountainCar pump energy so that episodes do terminate."""
    if name == "CartPole-v1":
        return int(rng.integers(2))
    if name == "Acrobot-v1":
        # Torque along joint 2's velocity (with 10% random actions) reaches the goal in about
        # 70-140 steps; pushing along joint 1's velocity instead never does.
        return (2 if phys[3] > 0 else 0) if rng.random() < 0.9 else int(rng.integers(3))
    if name == "MountainCar-v0":
        return (2 if phys[1] > 0 else 0) if rng.random() < 0.9 else int(rng.integers(3))
    # Pendulum: torques beyond +-2 too, so clipping is exercised.
    return rng.uniform(-3.0, 3.0, size=(1,)).astype(np.float32)


def _assert_physics_close(name: str, ours: np.ndarray, theirs: np.ndarray, where: str):
    ours = ours.copy()
    for i in WRAPPED.get(name, ()):
        ours[i] = theirs[i] + (ours[i] - theirs[i] + np.pi) % (2 * np.pi) - np.pi
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=where)


def _compare_step(name: str, ctx, gym_env, state, action, where: str):
    """One step of ours and of Gymnasium's from ``state``; returns our outputs."""
    gym_env.state = _physics(state)
    gym_obs, gym_reward, gym_terminated, gym_truncated, _ = gym_env.step(_gym_action(name, action))
    next_state, obs, reward, terminated, truncated = jax.device_get(
        ctx.step_obs(state, _our_action(name, action))
    )
    _assert_physics_close(name, _physics(next_state), np.asarray(gym_env.state, np.float64), where)
    np.testing.assert_allclose(obs, gym_obs, rtol=RTOL, atol=ATOL, err_msg=where)
    assert obs.dtype == np.float32 and obs.shape == gym_obs.shape, where
    assert reward.dtype == np.float32, where
    np.testing.assert_allclose(reward, gym_reward, rtol=RTOL, atol=ATOL, err_msg=where)
    assert bool(terminated) == gym_terminated, where
    assert not gym_truncated  # the unwrapped environments never truncate
    return next_state, obs, reward, terminated, truncated


EPISODES = {"CartPole-v1": 10, "Acrobot-v1": 3, "MountainCar-v0": 3, "Pendulum-v1": 2}


@pytest.mark.parametrize("name", NAMES)
def test_matches_gymnasium_step_by_step(jitted, name):
    ctx = jitted[name]
    horizon = ctx.env.horizon
    assert horizon == HORIZONS[name]
    gym_env = gymnasium.make(name).unwrapped
    rng = np.random.default_rng(0)
    endings = []
    for episode in range(EPISODES[name]):
        gym_env.reset(seed=episode)  # clears Gymnasium's per-episode bookkeeping
        state = ctx.reset(jax.random.key(episode))
        for t in range(horizon):
            action = _policy(name, _physics(state), rng)
            where = f"{name} episode {episode} step {t} action {action}"
            state, _, _, terminated, truncated = _compare_step(
                name, ctx, gym_env, state, action, where
            )
            assert int(state.elapsed) == t + 1, where
            assert bool(truncated) == (not terminated and t + 1 == horizon), where
            assert bool(state.done) == bool(terminated or truncated), where
            if state.done:
                endings.append("terminated" if terminated else "truncated")
                break
    assert len(endings) == EPISODES[name]
    if name == "Pendulum-v1":
        assert endings == ["truncated"] * EPISODES[name]
    else:  # every episode reached a terminal state, so the terminal step was compared too
        assert endings == ["terminated"] * EPISODES[name]


EDGE_CASES = {
    # (physics state, action): states at the rarely visited branches of each step
    "CartPole-v1": [
        ([2.39, 1.0, 0.0, 0.0], 1),  # leaves the track to the right
        ([-2.39, -1.0, 0.0, 0.0], 0),  # ... to the left
        ([0.0, 0.0, 0.2, 1.0], 1),  # pole falls past +12 degrees
        ([0.0, 0.0, -0.2, -1.0], 0),
        ([0.0, 0.0, 0.2, -1.0], 0),  # near the limit but coming back
    ],
    "Acrobot-v1": [
        ([np.pi - 0.01, 0.0, 3.0, 0.0], 2),  # theta1 wraps past +pi
        ([-np.pi + 0.01, 0.0, -3.0, 0.0], 0),  # ... past -pi
        ([0.0, np.pi - 0.05, 0.0, 20.0], 2),  # theta2 wraps; fast joint 2
        ([0.0, 0.0, 4 * np.pi, 9 * np.pi], 2),  # both velocities at their bounds
        ([0.0, 0.0, -4 * np.pi, -9 * np.pi], 0),
        ([np.pi - 0.2, 0.0, 0.5, 0.0], 1),  # swung up: terminal, reward 0
    ],
    "MountainCar-v0": [
        ([-1.19, -0.05], 0),  # hits the left wall: velocity is zeroed
        ([-1.2, 0.0], 0),  # pushing into the wall
        ([0.49, 0.03], 2),  # reaches the goal
        ([0.55, -0.01], 0),  # past the goal position but moving left: not terminal
        ([0.59, 0.07], 2),  # clipped at the right end and at max speed
        ([-0.5, -0.07], 0),  # clipped at -max speed
    ],
    "Pendulum-v1": [
        ([0.1, 7.9], np.array([2.0], np.float32)),  # speed clipped at +8
        ([-0.1, -7.9], np.array([-2.0], np.float32)),
        ([7.0, 1.0], np.array([0.5], np.float32)),  # unwrapped angle: cost normalizes it
        ([-10.0, -1.0], np.array([-0.5], np.float32)),
        ([np.pi, 0.0], np.array([0.0], np.float32)),
    ],
}


@pytest.mark.parametrize("name", NAMES)
def test_edge_cases_match_gymnasium(jitted, name):
    ctx = jitted[name]
    gym_env = gymnasium.make(name).unwrapped
    cls = type(ctx.env.reset(jax.random.key(0)))
    for i, (phys, action) in enumerate(EDGE_CASES[name]):
        gym_env.reset(seed=0)
        state = cls(*[jnp.float32(x) for x in phys], jnp.int32(0), jnp.bool_(False))
        _compare_step(name, ctx, gym_env, state, action, f"{name} edge case {i}")


def test_edge_cases_reach_their_branches(jitted):
    """The edge cases above do exercise what they claim (terminal, wall, clipping)."""

    def run(name, i):
        phys, action = EDGE_CASES[name][i]
        ctx = jitted[name]
        cls = type(ctx.env.reset(jax.random.key(0)))
        state = cls(*[jnp.float32(x) for x in phys], jnp.int32(0), jnp.bool_(False))
        return jax.device_get(ctx.step(state, _our_action(name, action)))

    assert [bool(run("CartPole-v1", i)[2]) for i in range(5)] == [True] * 4 + [False]
    s, r, term, _ = run("Acrobot-v1", 0)
    assert -np.pi <= s.theta1 < 0  # wrapped
    s, r, term, _ = run("Acrobot-v1", 3)
    assert s.dtheta1 == np.float32(4 * np.pi) and s.dtheta2 == np.float32(9 * np.pi)
    s, r, term, _ = run("Acrobot-v1", 5)
    assert term and r == 0.0
    s, r, term, _ = run("MountainCar-v0", 0)
    assert s.position == np.float32(-1.2) and s.velocity == 0.0
    s, r, term, _ = run("MountainCar-v0", 2)
    assert term and r == -1.0
    s, r, term, _ = run("MountainCar-v0", 3)
    assert not term
    s, r, term, _ = run("Pendulum-v1", 0)
    assert s.theta_dot == 8.0


@pytest.mark.parametrize("name", NAMES)
def test_truncation_matches_time_limit(name):
    """horizon=10 against Gymnasium's TimeLimit(10): truncated on the 10th live step only."""
    horizon = 10
    ctx = _make(name, horizon=horizon)
    gym_env = gymnasium.make(name, max_episode_steps=horizon)
    rng = np.random.default_rng(1)
    for episode in range(3):
        gym_env.reset(seed=episode)
        state = ctx.reset(jax.random.key(100 + episode))
        for t in range(horizon):
            # alternating pushes keep CartPole up for 10 steps; the others need > 10 steps
            action = t % 2 if name == "CartPole-v1" else _policy(name, _physics(state), rng)
            gym_env.unwrapped.state = _physics(state)
            _, gym_reward, gym_terminated, gym_truncated, _ = gym_env.step(
                _gym_action(name, action)
            )
            state, reward, terminated, truncated = jax.device_get(
                ctx.step(state, _our_action(name, action))
            )
            np.testing.assert_allclose(reward, gym_reward, rtol=RTOL, atol=ATOL)
            assert not gym_terminated and not terminated
            assert bool(truncated) == gym_truncated == (t == horizon - 1)
            assert bool(state.done) == (t == horizon - 1)
        # ours is done now and absorbs
        again, reward, terminated, truncated = jax.device_get(
            ctx.step(state, _our_action(name, _policy(name, _physics(state), rng)))
        )
        jax.tree.map(np.testing.assert_array_equal, again, state)
        assert reward == 0.0 and not terminated and not truncated


def test_terminating_on_the_last_step_is_not_truncated():
    """Convention: a step that both terminates and reaches the horizon is terminated only.

    (Gymnasium's TimeLimit reports both flags there; our events are exclusive, the terminal
    state has no future reward to bootstrap.)
    """
    env = CartPole(horizon=1)
    state = env.reset(jax.random.key(0))._replace(
        theta=jnp.float32(0.2), theta_dot=jnp.float32(1.0)
    )
    state, reward, terminated, truncated = env.step(state, jnp.int32(1))
    assert bool(terminated) and not bool(truncated) and bool(state.done) and reward == 1.0

    gym_env = gymnasium.make("CartPole-v1", max_episode_steps=1)
    gym_env.reset(seed=0)
    gym_env.unwrapped.state = np.array([0.0, 0.0, 0.2, 1.0])
    _, _, gym_terminated, gym_truncated, _ = gym_env.step(1)
    assert gym_terminated and gym_truncated


RESET_RANGES = {
    # Gymnasium's reset: each physics variable uniform on [low, high)
    "CartPole-v1": [(-0.05, 0.05)] * 4,
    "Acrobot-v1": [(-0.1, 0.1)] * 4,
    "MountainCar-v0": [(-0.6, -0.4), (0.0, 0.0)],
    "Pendulum-v1": [(-np.pi, np.pi), (-1.0, 1.0)],
}


@pytest.mark.parametrize("name", NAMES)
def test_reset_distribution(jitted, name):
    n = 4096
    states = jax.device_get(jax.vmap(jitted[name].reset)(jax.random.split(jax.random.key(7), n)))
    for field, (low, high) in zip(states._fields, RESET_RANGES[name]):
        x = getattr(states, field)
        assert x.dtype == np.float32 and x.shape == (n,), field
        if low == high:
            assert np.all(x == low), field
            continue
        width = high - low
        assert np.all(x >= np.float32(low)) and np.all(x <= np.float32(high)), field
        assert x.min() < low + 0.01 * width and x.max() > high - 0.01 * width, field
        # uniform: mean and fraction in the lower half (sd ~ 0.0045 width and ~0.008)
        assert abs(x.mean() - (low + high) / 2) < 0.03 * width, field
        assert abs(np.mean(x < (low + high) / 2) - 0.5) < 0.04, field
    assert states.elapsed.dtype == np.int32 and np.all(states.elapsed == 0)
    assert states.done.dtype == np.bool_ and not np.any(states.done)
    # different keys give different starts
    assert len(np.unique(getattr(states, states._fields[0]))) > n // 2


def _random_actions(name: str, key, shape):
    if name == "Pendulum-v1":
        return jax.random.uniform(key, (*shape, 1), jnp.float32, -3.0, 3.0)
    return jax.random.randint(key, shape, 0, _num_actions(name)).astype(jnp.int32)


def _num_actions(name: str) -> int:
    return {"CartPole-v1": 2, "Acrobot-v1": 3, "MountainCar-v0": 3}[name]


@pytest.mark.parametrize("name", NAMES)
def test_absorbing_after_done_under_vmap(name):
    env = rollax.make(name, horizon=3)
    batch = 8
    keys = jax.random.split(jax.random.key(3), 1 + batch)
    states = jax.vmap(env.reset)(keys[1:])
    step = jax.jit(jax.vmap(env.step))
    for t in range(3):
        states, *_ = step(states, _random_actions(name, jax.random.fold_in(keys[0], t), (batch,)))
    assert bool(jnp.all(states.done))
    for t in range(3, 6):
        actions = _random_actions(name, jax.random.fold_in(keys[0], t), (batch,))
        again, reward, terminated, truncated = jax.device_get(step(states, actions))
        jax.tree.map(np.testing.assert_array_equal, again, jax.device_get(states))
        assert np.all(reward == 0.0) and not np.any(terminated) and not np.any(truncated)
        assert reward.dtype == np.float32 and terminated.dtype == truncated.dtype == np.bool_


@pytest.mark.parametrize("name", NAMES)
def test_done_state_absorbs_every_action(jitted, name):
    ctx = jitted[name]
    state = ctx.reset(jax.random.key(0))._replace(done=jnp.bool_(True))
    actions = (
        [np.array([a], np.float32) for a in (-5.0, 0.0, 1.5)]
        if name == "Pendulum-v1"
        else range(ctx.env.action_space.n)
    )
    for action in actions:
        again, reward, terminated, truncated = jax.device_get(
            ctx.step(state, _our_action(name, action))
        )
        jax.tree.map(np.testing.assert_array_equal, again, jax.device_get(state))
        assert reward == 0.0 and not terminated and not truncated


@pytest.mark.parametrize("name", NAMES)
def test_jit_and_eager_agree(jitted, name):
    """From the same state, eager and jitted steps agree: events and counters exactly, floats
    to a few ulps (XLA's fused float32 code may round ``sin``/``cos`` and multiply-adds
    differently from op-by-op execution, ~1e-7 relative)."""
    ctx = jitted[name]
    env = ctx.env
    rng = np.random.default_rng(2)
    state = env.reset(jax.random.key(5))
    for _ in range(30):
        action = _our_action(name, _policy(name, _physics(state), rng))
        eager_out = jax.device_get(env.step(state, action))
        jit_out = jax.device_get(ctx.step(state, action))
        for a, b in zip(jax.tree.leaves(eager_out), jax.tree.leaves(jit_out)):
            assert a.dtype == b.dtype and a.shape == b.shape
            if a.dtype == np.float32:
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
            else:
                np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(
            env.observation(eager_out[0]), ctx.observation(jit_out[0]), rtol=1e-6, atol=1e-6
        )
        state = eager_out[0]
        if state.done:
            break


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_spaces_match_gymnasium_and_contain_observations(name):
    env = rollax.make(name)
    gym_env = gymnasium.make(name).unwrapped
    obs_space, gym_obs_space = env.observation_space, gym_env.observation_space
    assert isinstance(obs_space, rollax.Box) and obs_space.dtype == jnp.float32
    assert obs_space.shape == gym_obs_space.shape
    np.testing.assert_array_equal(
        np.broadcast_to(obs_space.low, obs_space.shape), gym_obs_space.low
    )
    np.testing.assert_array_equal(
        np.broadcast_to(obs_space.high, obs_space.shape), gym_obs_space.high
    )
    if name == "Pendulum-v1":
        space = env.action_space
        assert isinstance(space, rollax.Box) and space.shape == (1,)
        np.testing.assert_array_equal(np.broadcast_to(space.low, (1,)), gym_env.action_space.low)
        np.testing.assert_array_equal(np.broadcast_to(space.high, (1,)), gym_env.action_space.high)
    else:
        assert isinstance(env.action_space, rollax.Discrete)
        assert env.action_space.n == gym_env.action_space.n

    # a batch of random rollouts (finished rows absorb): every observation is in the space
    batch, steps = 32, 250

    @jax.jit
    def rollout(key):
        reset_key, action_key = jax.random.split(key)
        states = jax.vmap(env.reset)(jax.random.split(reset_key, batch))

        def body(states, key):
            actions = _random_actions(name, key, (batch,))
            states, *_ = jax.vmap(env.step)(states, actions)
            return states, jax.vmap(env.observation)(states)

        first = jax.vmap(env.observation)(states)
        _, obs = jax.lax.scan(body, states, jax.random.split(action_key, steps))
        return first, obs

    first, obs = rollout(jax.random.key(11))
    obs = jnp.concatenate([first[None], obs]).reshape(-1, *obs_space.shape)
    assert obs.dtype == jnp.float32
    assert bool(jnp.all(jax.vmap(obs_space.contains)(obs)))
    if name != "Pendulum-v1":
        actions = _random_actions(name, jax.random.key(0), (16,))
        assert bool(jnp.all(jax.vmap(env.action_space.contains)(actions)))


def test_pendulum_clips_torque_like_gymnasium(jitted):
    ctx = jitted["Pendulum-v1"]
    gym_env = gymnasium.make("Pendulum-v1").unwrapped
    gym_env.reset(seed=0)
    state = ctx.reset(jax.random.key(1))
    outputs = {}
    for torque in (-100.0, -2.5, -2.0, -1.0, 0.0, 1.0, 2.0, 2.5, 100.0):
        action = np.array([torque], np.float32)
        outputs[torque] = _compare_step(
            "Pendulum-v1", ctx, gym_env, state, action, f"torque {torque}"
        )
    for beyond, limit in ((-100.0, -2.0), (-2.5, -2.0), (2.5, 2.0), (100.0, 2.0)):
        jax.tree.map(np.testing.assert_array_equal, outputs[beyond], outputs[limit])
    assert outputs[2.0][2] != outputs[1.0][2]  # the torque cost and the push do depend on u
    with pytest.raises(ValueError, match="shape"):
        ctx.env.step(state, jnp.float32(1.0))


def test_registry_and_horizon_validation():
    assert set(NAMES) <= set(rollax.registered())
    for name in NAMES:
        env = rollax.make(name)
        assert isinstance(env, CLASSES[name]) and env.horizon == HORIZONS[name]
        assert not env.stochastic
        assert rollax.make(name, horizon=7).horizon == 7
        assert rollax.make(name, horizon=None).horizon == HORIZONS[name]
        for bad in (0, -1, 2.5, True, "10"):
            with pytest.raises(ValueError, match="horizon"):
                rollax.make(name, horizon=bad)
    assert rollax.make("Pendulum-v1", g=9.81).g == 9.81
    assert Pendulum().g == 10.0

"""The gymnax adapter: step-by-step agreement with gymnax itself, the event and absorbing
contracts, both collectors, a short PPO run and the error messages.

gymnax is an optional dependency (``pip install rollax[gymnax]``; CI installs it): without it
only the "not installed" message is checked.
"""

from __future__ import annotations

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.collect import collect_autoreset, reset_batch
from rollax.envs.suites.gymnax import GymnaxEnv


def test_missing_gymnax_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnax", None)  # `import gymnax` now raises ImportError
    with pytest.raises(ValueError, match=r"pip install rollax\[gymnax\]"):
        rollax.make("gymnax:Catch-bsuite")


gymnax = pytest.importorskip("gymnax")

COMPARED = ("CartPole-v1", "Catch-bsuite", "Acrobot-v1", "MountainCar-v0")


def _tree_equal(a, b) -> jax.Array:
    leaves = jax.tree.leaves(jax.tree.map(lambda x, y: jnp.all(x == y), a, b))
    return jnp.all(jnp.stack(leaves))


@functools.cache
def _lockstep(name: str, num_steps: int):
    """A jitted ``keys (B,) -> dict of (B, T, ...)``: the adapter runs its episodes, and at every
    step gymnax itself is stepped from the adapter's inner state with the same action and key:
    its public ``step`` (auto-reset, time limit), its raw ``step_env`` with the default params,
    and ``step_env`` with ``max_steps_in_episode=1`` (a time limit folded into its ``done``
    would show there). Stepping gymnax from our state each time keeps the comparison one step
    deep, so rounding differences of separately compiled code cannot accumulate (Acrobot's RK4
    amplifies an ulp quickly)."""
    env = rollax.make(f"gymnax:{name}")
    genv, params = env.gymnax_env, env.gymnax_params
    one_step_limit = params.replace(max_steps_in_episode=1)

    def episode(key):
        reset_key, run_key = jax.random.split(key)
        ours = env.reset(reset_key)

        def body(ours, key):
            action_key, step_key = jax.random.split(key)
            action = jax.random.randint(action_key, (), 0, env.action_space.n)
            inner_key = jax.random.split(step_key)[0]  # the key gymnax's `step` gives step_env
            nxt, reward, terminated, truncated = env.step(ours, action, inner_key)
            _, _, g_reward, g_term, g_trunc, info = genv.step(step_key, ours.inner, action,
                                                              params)
            r_obs, r_state, r_reward, r_term, _ = genv.step_env(inner_key, ours.inner, action,
                                                                params)
            r_term_limited = genv.step_env(inner_key, ours.inner, action, one_step_limit)[3]
            out = dict(
                live=~ours.done, obs=nxt.obs, observation=env.observation(nxt), reward=reward,
                terminated=terminated, truncated=truncated, elapsed=nxt.elapsed,
                time=nxt.inner.time, done=nxt.done, unchanged=_tree_equal(nxt, ours),
                g_obs=info["final_observation"], g_reward=g_reward, g_term=g_term,
                g_trunc=g_trunc, r_obs=r_obs, r_reward=r_reward, r_term=r_term,
                r_term_limited=r_term_limited, is_terminal=genv.is_terminal(r_state, params),
            )
            return nxt, out

        _, out = jax.lax.scan(body, ours, jax.random.split(run_key, num_steps))
        start = dict(obs=ours.obs, g_obs=genv.reset(reset_key, params)[0])
        return out, start

    return env, jax.jit(jax.vmap(episode))


@pytest.mark.slow
@pytest.mark.parametrize("name", COMPARED)
def test_steps_match_gymnax(name):
    horizon = rollax.make(f"gymnax:{name}").horizon  # default: gymnax's own time limit
    num_steps = horizon + 2  # every episode ends (terminated or truncated), then absorbs
    env, run = _lockstep(name, num_steps)
    assert horizon == int(env.gymnax_params.max_steps_in_episode)
    out, start = jax.tree.map(np.asarray, run(jax.random.split(jax.random.key(7), 4)))

    np.testing.assert_array_equal(start["obs"], start["g_obs"])  # same reset
    live = out["live"]
    # live steps: observations, rewards and terminations are gymnax's own (up to the rounding
    # of separately fused float32 code)
    for theirs in ("g_obs", "r_obs"):
        np.testing.assert_allclose(out["obs"][live], out[theirs][live], rtol=1e-6, atol=1e-6)
    for theirs in ("g_reward", "r_reward"):
        np.testing.assert_array_equal(out["reward"][live], out[theirs][live].astype(np.float32))
    for theirs in ("g_term", "r_term", "is_terminal", "r_term_limited"):
        np.testing.assert_array_equal(out["terminated"][live], out[theirs][live], err_msg=theirs)
    # truncated = gymnax's time-limit flag on a step that did not terminate
    np.testing.assert_array_equal(
        out["truncated"][live], out["g_trunc"][live] & ~out["g_term"][live]
    )
    steps = np.arange(1, num_steps + 1)
    np.testing.assert_array_equal(out["elapsed"][live], np.broadcast_to(steps, live.shape)[live])
    np.testing.assert_array_equal(out["elapsed"][live], out["time"][live])
    # truncation fires exactly when elapsed reaches the horizon
    np.testing.assert_array_equal(
        out["truncated"], live & ~out["terminated"] & (out["elapsed"] == horizon)
    )
    # one ending per episode, after which the state absorbs: unchanged, reward 0, no events
    ended = out["terminated"] | out["truncated"]
    np.testing.assert_array_equal(ended.sum(axis=1), 1)
    end = ended.argmax(axis=1)
    np.testing.assert_array_equal(live, np.arange(num_steps)[None, :] <= end[:, None])
    assert np.all(out["unchanged"][~live])
    assert np.all(out["reward"][~live] == 0)
    assert not np.any(ended[~live])
    final = out["observation"][np.arange(len(end)), end]
    np.testing.assert_array_equal(out["observation"][~live],
                                  np.repeat(final, num_steps - 1 - end, axis=0))
    assert out["observation"].dtype == np.float32
    assert out["observation"].shape[2:] == env.observation_space.shape
    if name == "Catch-bsuite":  # the ball always lands after 9 steps
        np.testing.assert_array_equal(end, 8)
        assert np.all(out["terminated"].any(axis=1))
    if name == "MountainCar-v0":  # random actions never reach the flag: all truncated at 200
        np.testing.assert_array_equal(out["truncated"].any(axis=1), True)
        np.testing.assert_array_equal(end, horizon - 1)


@pytest.mark.parametrize(
    "name, horizon, terminated",
    [
        ("MountainCar-v0", 7, False),  # cut by our time limit
        ("Catch-bsuite", 8, False),  # cut one step before the ball lands
        ("Catch-bsuite", 9, True),  # lands on the last allowed step: terminated, not truncated
    ],
)
def test_custom_horizon(name, horizon, terminated):
    env = rollax.make(f"gymnax:{name}", horizon=horizon)
    assert env.horizon == horizon
    genv = env.gymnax_env
    params = env.gymnax_params.replace(max_steps_in_episode=horizon)

    @jax.jit
    def run(key):
        state = env.reset(key)
        _, g_state = genv.reset(key, params)

        def body(carry, key):
            state, g_state = carry
            nxt, reward, term, trunc = env.step(state, 1, jax.random.split(key)[0])
            _, g_next, _, g_term, g_trunc, _ = genv.step(key, g_state, 1, params)
            return (nxt, g_next), (term, trunc, g_term, g_trunc, nxt.done, reward)

        return jax.lax.scan(body, (state, g_state), jax.random.split(key, horizon + 3))[1]

    term, trunc, g_term, g_trunc, done, reward = map(np.asarray, run(jax.random.key(3)))
    last = horizon - 1
    expected = np.arange(horizon + 3) == last
    np.testing.assert_array_equal(term, expected if terminated else False)
    np.testing.assert_array_equal(trunc, False if terminated else expected)
    np.testing.assert_array_equal(done, np.arange(horizon + 3) >= last)
    np.testing.assert_array_equal(reward[last + 1:], 0)
    # gymnax with the same limit reports the same ending (both flags when it terminates)
    assert g_term[last] == terminated and g_trunc[last]
    assert not np.any(g_term[:last] | g_trunc[:last])


def test_absorbing_after_done():
    env = rollax.make("gymnax:Catch-bsuite")
    step = jax.jit(env.step)
    state = env.reset(jax.random.key(0))
    for t in range(9):
        state, *_ = step(state, 1, jax.random.key(100 + t))
    assert bool(state.done)
    for action in range(3):
        nxt, reward, term, trunc = step(state, action, jax.random.key(action))
        assert bool(_tree_equal(nxt, state))
        assert float(reward) == 0.0 and not bool(term) and not bool(trunc)
        np.testing.assert_array_equal(env.observation(nxt), env.observation(state))
    with pytest.raises(ValueError, match="needs a key"):
        env.step(state, 0)


def test_spaces_and_observation_flattening():
    catch = rollax.make("gymnax:Catch-bsuite")
    assert catch.stochastic
    assert catch.raw_observation_shape == (10, 5)
    assert catch.observation_space.shape == (50,)
    assert catch.action_space == rollax.Discrete(3)
    state = catch.reset(jax.random.key(0))
    obs = catch.observation(state)
    assert obs.shape == (50,) and obs.dtype == jnp.float32
    np.testing.assert_array_equal(obs, np.asarray(state.obs).reshape(-1))
    assert bool(catch.observation_space.contains(obs))
    cartpole = rollax.make("gymnax:CartPole-v1")
    assert cartpole.observation_space.shape == (4,) and cartpole.horizon == 500
    pendulum = rollax.make("gymnax:Pendulum-v1")
    assert isinstance(pendulum.action_space, rollax.Box)
    assert pendulum.action_space.shape == (1,)
    np.testing.assert_array_equal(pendulum.action_space.high, [2.0])


def test_equal_adapters_share_compiled_functions():
    a, b = rollax.make("gymnax:Catch-bsuite"), rollax.make("gymnax:Catch-bsuite")
    assert a is not b and a == b and hash(a) == hash(b)
    assert a == GymnaxEnv("Catch-bsuite", 1000)
    assert a != rollax.make("gymnax:Catch-bsuite", horizon=20)
    assert a != rollax.make("gymnax:Catch-bsuite", rows=8)
    traces = []

    @functools.partial(jax.jit, static_argnums=0)
    def reset(env, key):
        traces.append(env)
        return env.reset(key)

    reset(a, jax.random.key(0))
    reset(b, jax.random.key(1))
    assert len(traces) == 1


def _network(env):
    config = rollax.algos.ppo.PPOConfig()
    net = rollax.algos.ppo.make_network(env, config)
    return net, net.init(jax.random.key(1))


@pytest.mark.slow
@pytest.mark.parametrize("horizon", [None, 7])
def test_absorbing_collector(horizon):
    env = rollax.make("gymnax:Catch-bsuite", horizon=horizon)
    net, params = _network(env)
    num_steps = 12  # >= every episode's length (9, or 7 when truncated)
    _, traj = rollax.collect(env, net, params, jax.random.key(2), 16, num_steps)
    traj = jax.tree.map(np.asarray, traj)
    assert traj.observation.shape == (num_steps, 16, 50)
    ended = traj.terminated | traj.truncated
    np.testing.assert_array_equal(ended.sum(axis=0), 1)  # exactly one ending per episode
    last = 8 if horizon is None else horizon - 1
    np.testing.assert_array_equal(ended[last], True)
    np.testing.assert_array_equal(traj.truncated.any(), horizon is not None)
    np.testing.assert_array_equal(
        traj.active, np.broadcast_to((np.arange(num_steps) <= last)[:, None], (num_steps, 16)))
    assert np.all(traj.reward[~traj.active] == 0)
    returns = traj.reward.sum(axis=0)
    assert set(np.unique(returns)) <= ({-1.0, 1.0} if horizon is None else {0.0})


def test_autoreset_collector():
    env = rollax.make("gymnax:Catch-bsuite")
    net, params = _network(env)
    state = reset_batch(env, jax.random.key(3), 8)
    num_steps = 30
    _, traj = collect_autoreset(env, net, params, state, jax.random.key(4), num_steps)
    traj = jax.tree.map(np.asarray, traj)
    assert np.all(traj.active)
    ends = np.arange(num_steps) % 9 == 8  # every Catch episode lasts 9 steps
    np.testing.assert_array_equal(traj.terminated, np.broadcast_to(ends[:, None], (30, 8)))
    assert not traj.truncated.any()
    np.testing.assert_array_equal(traj.reward != 0, traj.terminated)  # +-1 only on landing
    boards = traj.next_observation.reshape(num_steps, 8, 10, 5)
    assert np.all(boards[ends][:, :, 9].sum(axis=-1) >= 1)  # true final obs: ball on the bottom
    starts = traj.observation[1:][ends[:-1]].reshape(-1, 10, 5)
    assert np.all(starts[:, 0].sum(axis=-1) == 1) and np.all(starts[:, 9, 2] == 1)  # fresh
    cont = ~ends[:-1]
    np.testing.assert_array_equal(traj.next_observation[:-1][cont], traj.observation[1:][cont])


@pytest.mark.slow
def test_ppo_runs_on_catch():
    config = rollax.algos.ppo.PPOConfig(env="gymnax:Catch-bsuite", total_steps=4096,
                                        num_envs=8, num_steps=64, eval_episodes=8)
    result = rollax.make_train(config)(jax.random.key(0))
    for field, value in result.metrics._asdict().items():
        assert np.all(np.isfinite(np.asarray(value))), field
    assert -1.0 <= float(result.eval_return) <= 1.0


def test_bad_names_and_options():
    with pytest.raises(ValueError, match=r"did you mean gymnax:Catch-bsuite"):
        rollax.make("gymnax:Catch-bsuit")
    with pytest.raises(ValueError, match="unknown gymnax environment ''"):
        rollax.make("gymnax:")
    with pytest.raises(ValueError, match="does not accept"):
        rollax.make("gymnax:Catch-bsuite", nonsense=1)
    with pytest.raises(ValueError, match="positive integer"):
        rollax.make("gymnax:Catch-bsuite", horizon=0)
    with pytest.raises(ValueError, match="suites as <suite>:<id>: gymnax"):
        rollax.make("Catch-bsuite")
    with pytest.raises(ValueError, match="reserved"):
        rollax.register("gymnax:Mine", lambda: None)


def test_rollax_cartpole_matches_gymnax_cartpole():
    """From the same physical state and action, one step of rollax's CartPole (checked against
    Gymnasium elsewhere) and one of gymnax's agree."""
    ours, theirs = rollax.make("CartPole-v1"), rollax.make("gymnax:CartPole-v1")
    genv, params = theirs.gymnax_env, theirs.gymnax_params
    scale = jnp.array([2.4, 2.0, 0.2, 2.0])  # live states: |x| < 2.4, |theta| < 12 degrees

    @jax.jit
    def one(key):
        state_key, action_key = jax.random.split(key)
        x, x_dot, theta, theta_dot = jax.random.uniform(state_key, (4,), minval=-1) * scale
        action = jax.random.randint(action_key, (), 0, 2)
        g_state = genv.reset_env(key, params)[1].replace(
            x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot)
        g_obs, _, g_reward, g_term, _ = genv.step_env(key, g_state, action, params)
        state = rollax.envs.CartPoleState(x, x_dot, theta, theta_dot, jnp.int32(0),
                                          jnp.bool_(False))
        nxt, reward, term, _ = ours.step(state, action)
        return ours.observation(nxt), reward, term, g_obs, g_reward, g_term

    obs, reward, term, g_obs, g_reward, g_term = map(
        np.asarray, jax.vmap(one)(jax.random.split(jax.random.key(5), 4096)))
    np.testing.assert_allclose(obs, g_obs, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(reward, g_reward)
    np.testing.assert_array_equal(term, g_term)
    assert 0 < term.sum() < len(term)  # both outcomes were exercised

"""Absorbing collector contracts (docs/contract.md §2) against hand-built and plain-loop
expectations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rollax
from helpers import TracedPolicy, f32_atol, f32_rtol
from rollax.envs.corridor import Corridor

POLICY = rollax.BernoulliPolicy(3)
FIELDS = tuple(f for f in rollax.Trajectory._fields
               if f not in ("action_mask", "turns", "agent_rewards"))
"""The fields every trajectory has (``action_mask`` is None without masks)."""


def corridor_collect(theta, key, batch_size, num_steps, horizon=8):
    env = Corridor(horizon=horizon)
    return rollax.collect(env, POLICY, jnp.asarray(theta, jnp.float32), key, batch_size, num_steps)


def reference_rollout(theta, key, batch_size, num_steps, horizon=8):
    """Plain Python loops over (t, b), the key ownership of docs/contract.md §2 spelled out
    split by split."""
    reset_key, action_key = jax.random.split(key)
    reset_keys = jax.random.split(reset_key, batch_size)
    step_keys = jax.random.split(action_key, num_steps)
    pos = [int(jax.random.randint(k, (), 0, 2)) for k in reset_keys]
    elapsed, done = [0] * batch_size, [False] * batch_size
    out = {f: np.zeros((num_steps, batch_size)) for f in ("observation", "action", "reward",
                                                          "active", "terminated", "truncated")}
    for t in range(num_steps):
        env_keys = jax.random.split(step_keys[t], batch_size)
        for b in range(batch_size):
            p = jax.nn.sigmoid(jnp.float32(theta[min(pos[b], 2)]))
            a = int(jax.random.bernoulli(env_keys[b], p))
            out["observation"][t, b], out["action"][t, b] = pos[b], a
            out["active"][t, b] = not done[b]
            if done[b]:
                continue
            pos[b] = min(max(pos[b] + (1 if a == 1 else -1), 0), 3)
            elapsed[b] += 1
            term = pos[b] == 3
            trunc = not term and elapsed[b] >= horizon
            out["reward"][t, b] = 1.0 if term else -0.01
            out["terminated"][t, b], out["truncated"][t, b] = term, trunc
            done[b] = term or trunc
    return out


@pytest.mark.slow
@pytest.mark.parametrize("jit", [True, False])
def test_key_ownership_matches_plain_loop(jit):
    theta = np.array([0.3, -0.2, 0.7])
    key = jax.random.key(7)
    if jit:
        _, traj = corridor_collect(theta, key, 5, 10)
    else:
        with jax.disable_jit():
            _, traj = corridor_collect(theta, key, 5, 10)
    ref = reference_rollout(theta, key, 5, 10)
    for name, expected in ref.items():
        np.testing.assert_allclose(np.asarray(getattr(traj, name), np.float64), expected,
                                   atol=1e-7, err_msg=name)


@pytest.mark.slow
def test_collection_keys_are_the_spec_splits():
    key = jax.random.key(3)
    reset_keys, action_keys, transition_keys = rollax.collection_keys(key, 4, 6)
    reset_key, action_key = jax.random.split(key)
    assert transition_keys is None and action_keys.shape == (6, 4)
    assert (jax.random.key_data(reset_keys) == jax.random.key_data(
        jax.random.split(reset_key, 4))).all()
    row = jax.random.split(jax.random.split(action_key, 6)[2], 4)
    assert (jax.random.key_data(action_keys[2]) == jax.random.key_data(row)).all()
    # the explicit-key rollout and collect agree bit for bit
    env = Corridor()
    _, a = rollax.rollout(env, POLICY, POLICY.init(), reset_keys, action_keys)
    _, b = rollax.collect(env, POLICY, POLICY.init(), key, 4, 6)
    for x, y in zip(a, b):
        assert (np.asarray(x) == np.asarray(y)).all()


def test_shapes_dtypes_and_axes():
    final, traj = corridor_collect(np.zeros(3), jax.random.key(0), 6, 9)
    assert set(traj._fields) == {"observation", "action", "reward", "active", "terminated",
                                 "truncated", "log_prob", "action_mask", "turns",
                                 "agent_rewards"}
    assert traj.action_mask is None  # the corridor has no action masks
    assert traj.turns is None  # nor players (a game's: rollax.envs.players)
    assert traj.agent_rewards is None  # nor agents (a team's: rollax.envs.agents)
    for name in FIELDS:
        assert getattr(traj, name).shape == (9, 6), name
    assert traj.reward.dtype == jnp.float32 and traj.log_prob.dtype == jnp.float32
    assert traj.active.dtype == jnp.bool_ and traj.terminated.dtype == jnp.bool_
    assert traj.observation.dtype == jnp.int32 and traj.action.dtype == jnp.int32
    assert final.position.shape == (6,)
    # axis 0 sums give one return per episode, axis 1 one number per time index
    assert traj.reward.sum(axis=0).shape == (6,) and traj.reward.sum(axis=1).shape == (9,)


def test_log_prob_is_the_behaviour_log_prob():
    theta = jnp.array([0.5, -1.0, 2.0])
    _, traj = corridor_collect(theta, jax.random.key(1), 8, 8)
    logit = np.asarray(theta)[np.minimum(np.asarray(traj.observation), 2)]
    p_right = 1 / (1 + np.exp(-logit))
    expected = np.where(np.asarray(traj.action) == 1, np.log(p_right), np.log1p(-p_right))
    np.testing.assert_allclose(np.asarray(traj.log_prob), expected, rtol=f32_rtol(1e-5),
                               atol=f32_atol(1e-6))


def test_replay_and_other_key():
    _, a = corridor_collect(np.zeros(3), jax.random.key(11), 64, 8)
    _, b = corridor_collect(np.zeros(3), jax.random.key(11), 64, 8)
    _, c = corridor_collect(np.zeros(3), jax.random.key(12), 64, 8)
    for name in FIELDS:
        assert (np.asarray(getattr(a, name)) == np.asarray(getattr(b, name))).all(), name
    assert (np.asarray(a.action) != np.asarray(c.action)).any()


def test_every_env_and_step_has_its_own_key():
    # with theta = 0 each action is a fair coin; shared keys would make columns or rows equal
    _, traj = corridor_collect(np.zeros(3), jax.random.key(5), 256, 8)
    actions = np.asarray(traj.action)
    assert len({tuple(col) for col in actions.T}) > 150  # 256 coins x 8: almost all distinct
    assert not all((actions[t] == actions[0]).all() for t in range(1, 8))
    assert 0.4 < actions.mean() < 0.6


def test_permuting_reset_keys_permutes_trajectories():
    env = Corridor()
    reset_keys, action_keys, _ = rollax.collection_keys(jax.random.key(9), 16, 8)
    perm = np.random.RandomState(0).permutation(16)
    _, a = rollax.rollout(env, POLICY, POLICY.init(), reset_keys, action_keys)
    _, b = rollax.rollout(env, POLICY, POLICY.init(), reset_keys[perm], action_keys[:, perm])
    for name in FIELDS:
        np.testing.assert_array_equal(np.asarray(getattr(a, name))[:, perm],
                                      np.asarray(getattr(b, name)), err_msg=name)


def test_mask_before_step_keeps_successful_action():
    _, traj = corridor_collect(np.zeros(3), jax.random.key(2), 128, 8)
    term = np.asarray(traj.terminated)
    assert term.any()
    active, reward = np.asarray(traj.active), np.asarray(traj.reward)
    assert active[term].all() and (reward[term] == 1.0).all()
    # the post-step mask (not done after the step) would drop each successful transition
    done_after = np.cumsum(term | np.asarray(traj.truncated), axis=0) > 0
    post_mask = ~done_after
    assert not post_mask[term].any()
    returns = reward.sum(axis=0)
    np.testing.assert_allclose((reward * active).sum(axis=0), returns)
    assert ((reward * post_mask).sum(axis=0) != returns)[term.any(axis=0)].all()


def test_deterministic_policy_limit():
    _, right = corridor_collect(np.full(3, 40.0), jax.random.key(4), 64, 8)
    starts = np.asarray(right.observation[0])
    lengths = np.asarray(right.active.sum(axis=0))
    np.testing.assert_array_equal(lengths, 3 - starts)  # shortest route from 0 is 3, from 1 is 2
    np.testing.assert_allclose(np.asarray(right.reward.sum(axis=0)),
                               np.where(starts == 0, 0.98, 0.99), rtol=1e-6)
    assert np.asarray(right.terminated.sum(axis=0) == 1).all()
    _, left = corridor_collect(np.full(3, -40.0), jax.random.key(4), 64, 8)
    assert np.asarray(left.truncated[7]).all() and not np.asarray(left.terminated).any()
    np.testing.assert_allclose(np.asarray(left.reward.sum(axis=0)), -0.08, rtol=1e-6)
    assert (np.asarray(left.observation[1:]) == 0).all()


def test_collect_compiles_once():
    env, params, policy = Corridor(horizon=5), jnp.zeros(3), TracedPolicy(3)
    rollax.collect(env, policy, params, jax.random.key(0), 3, 5)
    traced = len(policy.traces)
    assert traced >= 1
    rollax.collect(env, policy, params + 1.0, jax.random.key(1), 3, 5)
    assert len(policy.traces) == traced  # params and key are traced arguments: no recompile


@pytest.mark.slow
def test_collect_under_vmap_over_keys():
    keys = jax.random.split(jax.random.key(0), 3)
    env = Corridor()
    batched = jax.vmap(lambda k: rollax.collect(env, POLICY, POLICY.init(), k, 4, 8)[1])(keys)
    single = rollax.collect(env, POLICY, POLICY.init(), keys[1], 4, 8)[1]
    np.testing.assert_array_equal(np.asarray(batched.action[1]), np.asarray(single.action))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4"])
def test_bad_sizes(bad):
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        corridor_collect(np.zeros(3), jax.random.key(0), bad, 8)
    with pytest.raises(ValueError, match="num_steps must be a positive integer"):
        corridor_collect(np.zeros(3), jax.random.key(0), 4, bad)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(
    batch_size=st.integers(1, 12),
    horizon=st.integers(1, 10),
    extra_steps=st.integers(-3, 4),
    seed=st.integers(0, 2**31 - 1),
    theta=st.lists(st.floats(-3, 3), min_size=3, max_size=3),
)
def test_absorbing_invariants(batch_size, horizon, extra_steps, seed, theta):
    num_steps = max(1, horizon + extra_steps)
    _, traj = corridor_collect(theta, jax.random.key(seed), batch_size, num_steps, horizon)
    active = np.asarray(traj.active)
    term, trunc = np.asarray(traj.terminated), np.asarray(traj.truncated)
    reward, obs = np.asarray(traj.reward), np.asarray(traj.observation)
    events = term.astype(int) + trunc.astype(int)
    assert active[0].all()
    assert (np.diff(active.astype(int), axis=0) <= 0).all()          # never rises
    assert (np.diff(active.sum(axis=1)) <= 0).all()
    assert not (term & trunc).any() and not (events & ~active).any()
    assert (reward[~active] == 0).all()                               # padding carries nothing
    assert np.isin(reward[active], np.float32([-0.01, 1.0])).all()
    assert ((reward == 1.0) == term).all()
    per_episode = events.sum(axis=0)
    if num_steps >= horizon:
        assert (per_episode == 1).all()                               # exactly one ending
    else:
        assert (per_episode <= 1).all() and not trunc.any()
    lengths = active.sum(axis=0)
    ended = per_episode == 1
    assert (np.argmax(events, axis=0)[ended] + 1 == lengths[ended]).all()
    assert (lengths <= horizon).all() and ((obs >= 0) & (obs <= 3)).all()


@pytest.mark.slow
def test_unrolled_collect_gives_identical_records():
    """``unroll`` changes the compiled loop, never the records (same keys, same values)."""
    env = rollax.make("corridor")
    base = rollax.collect(env, POLICY, POLICY.init(), jax.random.key(4), 16, 8)
    for unroll in (2, 8, True):
        other = rollax.collect(env, POLICY, POLICY.init(), jax.random.key(4), 16, 8,
                               unroll=unroll)
        for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(other)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="unroll must be a positive integer"):
        rollax.collect(env, POLICY, POLICY.init(), jax.random.key(4), 16, 8, unroll=0)


def _cartpole():
    env = rollax.make("CartPole-v1", horizon=100)
    policy = rollax.MLPActorCritic(observation_size=4, num_actions=2, hidden=(8,))
    return env, policy, policy.init(jax.random.key(0))


def _corridor():
    policy = rollax.BernoulliPolicy(3)
    return rollax.make("corridor"), policy, policy.init()


@pytest.mark.parametrize("build", [_cartpole, _corridor], ids=["cartpole", "corridor"])
def test_rollout_live_stops_when_every_episode_has_ended(build):
    """``rollout_live``: the rows it runs equal ``rollout``'s bit for bit (every field), it
    stops once every episode has ended (the chunks after the longest episode's are zeros),
    and a T that is not a multiple of its chunk is handled (100 steps, chunks of 16)."""
    from rollax.collect import collection_keys, rollout, rollout_live

    env, policy, params = build()
    reset, action, transition = collection_keys(jax.random.key(1), 6, 100, env.stochastic)
    _, whole = jax.jit(lambda: rollout(env, policy, params, reset, action, transition))()
    live = jax.jit(lambda: rollout_live(env, policy, params, reset, action, transition,
                                        rows=16))()
    longest = int(np.max(np.sum(np.asarray(whole.active), axis=0)))
    assert longest < 100  # every episode ended early
    ran = -(-longest // 16) * 16  # the chunks run: through the one where the last one ended
    for name, a, b in zip(whole._fields, whole, live):
        if a is None:
            assert b is None
            continue
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, name
        np.testing.assert_array_equal(b[:ran], a[:ran], err_msg=name)
        assert not np.any(b[ran:]), name  # never run: zeros

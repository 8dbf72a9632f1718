"""The auto-reset collector: same-step resets, fresh starts, true final observations, keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import TracedPolicy  # counts compilations through the public API
from rollax.collect import (
    AutoResetTrajectory,
    Trajectory,
    autoreset,
    collect_autoreset,
    per_env,
    reset_all,
    reset_batch,
    reset_finished,
    split_at,
)

POLICY = rollax.BernoulliPolicy(3)


def reference_autoreset(theta, init_key, key, B, T, horizon):
    """Plain loops: the corridor with same-step resets and the documented key ownership."""
    env = rollax.make("corridor", horizon=horizon)
    starts = [env.reset(k) for k in jax.random.split(init_key, B)]
    pos = [int(s.position) for s in starts]
    elapsed = [0] * B
    reset_key, action_key = jax.random.split(key)
    reset_steps, action_steps = jax.random.split(reset_key, T), jax.random.split(action_key, T)
    rows = {f: np.zeros((T, B)) for f in ("observation", "action", "reward", "terminated",
                                          "truncated", "next_observation")}
    for t in range(T):
        akeys = jax.random.split(action_steps[t], B)
        rkeys = jax.random.split(reset_steps[t], B)
        for b in range(B):
            p = jax.nn.sigmoid(jnp.float32(theta[min(pos[b], 2)]))
            a = int(jax.random.bernoulli(akeys[b], p))
            rows["observation"][t, b], rows["action"][t, b] = pos[b], a
            pos[b] = min(max(pos[b] + (1 if a else -1), 0), 3)
            elapsed[b] += 1
            term = pos[b] == 3
            trunc = not term and elapsed[b] >= horizon
            rows["reward"][t, b] = 1.0 if term else -0.01
            rows["terminated"][t, b], rows["truncated"][t, b] = term, trunc
            rows["next_observation"][t, b] = pos[b]
            if term or trunc:
                pos[b], elapsed[b] = int(jax.random.randint(rkeys[b], (), 0, 2)), 0
    return rows


def test_same_step_reset_and_keys_match_plain_loop():
    theta = np.array([0.2, -0.3, 0.4])
    init_key, key = jax.random.key(0), jax.random.key(1)
    env = rollax.make("corridor", horizon=4)
    state = reset_batch(env, init_key, 3)
    _, traj = collect_autoreset(env, POLICY, jnp.asarray(theta, jnp.float32), state, key, 12)
    ref = reference_autoreset(theta, init_key, key, 3, 12, 4)
    for name, expected in ref.items():
        np.testing.assert_allclose(np.asarray(getattr(traj, name), np.float64), expected,
                                   atol=1e-7, err_msg=name)
    assert np.asarray(traj.active).all()
    done = np.asarray(traj.terminated | traj.truncated)
    assert done.sum() >= 6  # several episodes ended inside the rollout


@pytest.fixture(scope="module")
def cartpole_rollout():
    env = rollax.make("CartPole-v1", horizon=30)
    net = rollax.algos.ppo.make_network(env, rollax.algos.ppo.PPOConfig())
    params = net.init(jax.random.key(0))
    state = reset_batch(env, jax.random.key(1), 16)
    final, traj = collect_autoreset(env, net, params, state, jax.random.key(2), 80)
    return env, traj, final


@pytest.mark.slow
def test_final_observation_kept_and_fresh_resets(cartpole_rollout):
    env, traj, _ = cartpole_rollout
    obs, nxt = np.asarray(traj.observation), np.asarray(traj.next_observation)
    term, trunc = np.asarray(traj.terminated), np.asarray(traj.truncated)
    done = term | trunc
    assert term.any() and trunc.any()
    # within an episode the next observation is the following row's observation
    np.testing.assert_array_equal(nxt[:-1][~done[:-1]], obs[1:][~done[:-1]])
    # a terminated episode's final observation is outside the pole/cart limits
    final = nxt[term]
    assert ((np.abs(final[:, 0]) > 2.4) | (np.abs(final[:, 2]) > 12 * 2 * np.pi / 360)).all()
    # after an ending the next row starts a fresh episode drawn with its own reset key
    reset_key, _ = jax.random.split(jax.random.key(2))
    reset_steps = jax.random.split(reset_key, 80)
    starts = []
    for t, b in zip(*np.nonzero(done[:-1])):
        fresh = env.reset(jax.random.split(reset_steps[t], 16)[b])
        np.testing.assert_allclose(obs[t + 1, b], np.asarray(env.observation(fresh)), rtol=1e-6)
        assert (np.abs(obs[t + 1, b]) <= 0.05).all()
        starts.append(tuple(obs[t + 1, b]))
    assert len(set(starts)) == len(starts)  # never a cached start state


def test_truncation_after_horizon_steps(cartpole_rollout):
    _, traj, final = cartpole_rollout
    done = np.asarray(traj.terminated | traj.truncated)
    trunc = np.asarray(traj.truncated)
    for b in range(done.shape[1]):
        ends = np.nonzero(done[:, b])[0]
        starts = np.concatenate([[-1], ends[:-1]])
        for start, end in zip(starts, ends):
            if trunc[end, b] and start >= 0:  # episodes that began inside the rollout
                assert end - start == 30
    assert (np.asarray(final.elapsed) < 30).all() and not np.asarray(final.done).any()


def test_replay_and_compile_once():
    env = rollax.make("corridor", horizon=4)
    state = reset_batch(env, jax.random.key(0), 5)
    policy = TracedPolicy(3)
    a = collect_autoreset(env, policy, jnp.zeros(3), state, jax.random.key(3), 7)[1]
    traced = len(policy.traces)
    assert traced >= 1
    b = collect_autoreset(env, policy, jnp.ones(3), state, jax.random.key(3), 7)[1]
    c = collect_autoreset(env, policy, jnp.zeros(3), state, jax.random.key(3), 7)[1]
    assert len(policy.traces) == traced  # params and key are traced arguments: no recompile
    for x, y in zip(a, c):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert (np.asarray(a.action) != np.asarray(b.action)).any()


@pytest.mark.slow
@pytest.mark.parametrize("path", [autoreset, reset_finished, reset_all])
@pytest.mark.parametrize("batch", [8, 64, 256])
def test_autoreset_resets_exactly_the_finished_lanes(batch, path):
    """Every path of ``autoreset`` (the CPU's: nothing finished, few finished: compacted, many
    finished: full select; the accelerators': always the full select) gives the plain-loop
    answer: env b becomes reset(split(key, B)[b]) if done."""
    env = rollax.make("CartPole-v1")
    state = reset_batch(env, jax.random.key(0), batch)
    state = state._replace(x=state.x + 1.0, elapsed=state.elapsed + 7)  # differ from a start
    key = jax.random.key(5)
    keys = jax.random.split(key, batch)
    fn = jax.jit(lambda d, s, k: path(env, d, s, k))
    rng = np.random.default_rng(batch)
    for count in (0, 1, batch // 16, batch // 16 + 1, batch):
        done = np.zeros(batch, bool)
        done[rng.choice(batch, count, replace=False)] = True
        got = fn(jnp.asarray(done), state, key)
        for b in range(batch):
            want = env.reset(keys[b]) if done[b] else jax.tree.map(lambda x, b=b: x[b], state)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g[b]), np.asarray(w))
    # under vmap (every branch runs) the answer is the same
    dones = jnp.asarray(rng.random((2, batch)) < 0.05)
    both = jax.vmap(fn, (0, None, None))(dones, state, key)
    for i in range(2):
        one = fn(dones[i], state, key)
        for a, b in zip(both, one):
            np.testing.assert_array_equal(np.asarray(a[i]), np.asarray(b))


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_split_at_equals_per_env_then_index(impl):
    key = jax.random.key(7, impl=impl)
    index = jnp.array([0, 3, 999, 17, 17])
    # one program: with the rbg implementations a TPU's generator may lay its bits out
    # differently from one program to the next (JAX promises them per program only)
    both = jax.jit(lambda k, i: (per_env(k, 1000)[i], split_at(k, 1000, i)))(key, index)
    want, got = (jax.random.key_data(k) for k in both)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_per_env_keys_are_distinct_keys_of_the_implementation(impl):
    """threefry: exactly ``split``; the generator implementations: the key data are the bits
    ``key`` draws for shape ``(B, 4)``, all distinct, and the children's own draws differ."""
    key = jax.random.key(3, impl=impl)
    keys = jax.jit(lambda k: per_env(k, 512))(key)
    assert str(jax.random.key_impl(keys)) == impl and keys.shape == (512,)
    data = np.asarray(jax.random.key_data(keys))
    if impl == "threefry2x32":
        np.testing.assert_array_equal(data, np.asarray(jax.random.key_data(
            jax.random.split(key, 512))))
    else:
        bits = jax.random.bits(key, (512, 4), jnp.uint32)
        np.testing.assert_array_equal(data, np.asarray(bits))
    assert len({row.tobytes() for row in data}) == 512
    draws = np.asarray([jax.random.bits(k, (4,), jnp.uint32) for k in keys[:64]])
    assert len({row.tobytes() for row in draws}) == 64


def test_autoreset_trajectory_is_the_trajectory_plus_next_observation(cartpole_rollout):
    _, traj, _ = cartpole_rollout
    assert isinstance(traj, AutoResetTrajectory)
    assert traj._fields == Trajectory._fields + ("next_observation",)
    head = Trajectory(*traj[:-1])
    rebuilt = AutoResetTrajectory(*head, traj.next_observation)
    for x, y in zip(jax.tree.leaves(traj), jax.tree.leaves(rebuilt)):
        assert x is y
    cut = jax.tree.map(lambda x: x[:2], traj)._replace(reward=jnp.zeros((2, 16)))
    assert isinstance(cut, AutoResetTrajectory) and cut.next_observation.shape[:2] == (2, 16)
    assert (np.asarray(cut.reward) == 0).all()


def test_autoreset_skips_work_on_the_cpu_and_branches_nowhere_else():
    """On a CPU the compiled reset keeps its conditional (nothing is reset when nothing
    finished); the accelerators' path has none (their conditionals wait on the host)."""
    env = rollax.make("CartPole-v1")
    state = reset_batch(env, jax.random.key(0), 8)
    done = jnp.zeros(8, bool)

    def compiled(path):
        fn = jax.jit(lambda d, s, k: path(env, d, s, k))
        return fn.lower(done, state, jax.random.key(1)).compile().as_text()

    on_cpu = jax.default_backend() == "cpu"
    assert ("conditional(" in compiled(autoreset)) == on_cpu
    assert "conditional(" not in compiled(reset_all)

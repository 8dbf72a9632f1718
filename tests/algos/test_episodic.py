"""The whole-episode algorithms (REINFORCE and group-relative PPO for neural policies): the
grouped collector, the objective's normalisations, the baselines and the first gradient of
each, against plain-loop references."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.algos import episodic, grpo, optim, reinforce
from rollax.algos.base import make_train
from rollax.collect import collect, collect_groups
from rollax.contracts import check_collector
from rollax.envs.cartpole import CartPole
from rollax.losses import normalized_sum
from rollax.returns import group_mean, group_standardize

ENV = "CartPole-v1"
HORIZON = 12
LONG = 30
"""The gradient tests' horizon: long enough that episodes end at different steps (returns 22,
15, 14 | 14, 16, 12), so every baseline and advantage is non-zero somewhere."""


@pytest.fixture(scope="module")
def parts():
    config = reinforce.ReinforceConfig(env=ENV, horizon=LONG, batch_size=6, group_size=3,
                                       hidden=(8,))
    return episodic.make_parts(config, False, None)[1]


@pytest.fixture(scope="module")
def batch(parts):
    params = parts.net.init(jax.random.key(0))
    traj = parts.collect(params, jax.random.key(1))
    returns = np.asarray(traj.reward).sum(0).reshape(2, 3)
    assert np.all(returns.std(axis=1) > 0)  # each group's episodes differ: the tests can fail
    return params, traj


# --- the grouped collector --------------------------------------------------------------------

@pytest.mark.optimized
@pytest.mark.slow
def test_groups_of_one_are_the_absorbing_collector():
    env = rollax.make(ENV, horizon=HORIZON)
    net = rollax.MLPActorCritic(observation_size=4, num_actions=2, hidden=(8,))
    params = net.init(jax.random.key(0))
    _, grouped = collect_groups(env, net, params, jax.random.key(3), 5, 1, HORIZON)
    _, plain = collect(env, net, params, jax.random.key(3), 5, HORIZON)
    for a, b in zip(grouped, plain, strict=True):
        np.testing.assert_array_equal(a, b)
    report = check_collector(lambda e, p, q, k, b, t: collect_groups(e, p, q, k, b, 1, t), env,
                             net, params, batch_size=8)
    assert report.ok, report


def test_a_group_shares_its_start_state_and_nothing_else(batch):
    _, traj = batch
    first = np.asarray(traj.observation[0])  # (B, 4): episodes 0-2 are group 0, 3-5 group 1
    np.testing.assert_array_equal(first[0], first[1])
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(first[3], first[5])
    assert not np.array_equal(first[0], first[3])
    actions = np.asarray(traj.action)
    assert not np.array_equal(actions[:, 0], actions[:, 1])  # own action keys


def test_group_sizes_are_checked():
    env = rollax.make(ENV, horizon=HORIZON)
    net = rollax.MLPActorCritic(observation_size=4, num_actions=2, hidden=(8,))
    with pytest.raises(ValueError, match="group_size must be a positive integer"):
        collect_groups(env, net, net.init(jax.random.key(0)), jax.random.key(0), 2, 0, 5)


# --- group statistics -------------------------------------------------------------------------

def test_group_means_and_leave_one_out_by_hand():
    x = jnp.array([1.0, 2.0, 6.0, 10.0, 20.0, 30.0])
    np.testing.assert_allclose(group_mean(x, 3), [3, 3, 3, 20, 20, 20])
    np.testing.assert_allclose(group_mean(x, 3, leave_one_out=True),
                               [4, 3.5, 1.5, 25, 20, 15])


def test_group_advantages_by_hand():
    returns = jnp.array([1.0, 3.0, 5.0, 5.0])
    np.testing.assert_allclose(grpo.group_advantages(returns, 2, False), [-1, 1, 0, 0])
    np.testing.assert_allclose(grpo.group_advantages(returns, 2, True), [-1, 1, 0, 0],
                               atol=1e-6)
    spread = jnp.array([0.0, 4.0, 10.0, 30.0])  # std 2 and 10: both groups scaled to +-1
    np.testing.assert_allclose(grpo.group_advantages(spread, 2, True), [-1, 1, -1, 1],
                               atol=1e-6)


def test_group_standardize_is_numpys_population_std_plus_1e_8():
    x = np.random.default_rng(0).normal(size=(3, 12)).astype(np.float32)  # (T, B), G = 4
    grouped = x.astype(np.float64).reshape(3, 3, 4)
    want = (grouped - grouped.mean(-1, keepdims=True)) / (grouped.std(-1, keepdims=True)
                                                          + 1e-8)  # NumPy: ddof 0
    got = group_standardize(jnp.asarray(x), 4)
    np.testing.assert_allclose(got, want.reshape(3, 12), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(group_standardize(jnp.array([1.0, 2.0, 6.0]), 3),
                               np.array([-2.0, -1.0, 3.0]) / np.sqrt(14 / 3), rtol=1e-6)


def test_grpo_scale_by_std_computes_the_floats_it_trained_with_before():
    """``--scale-by-std`` goes through :func:`group_standardize` now; its floats are those of
    GRPO's own formula before (bit for bit), so trained runs do not change."""
    def before(returns, group_size):
        advantage = returns - group_mean(returns, group_size)
        std = jnp.sqrt(group_mean(advantage ** 2, group_size))
        return advantage / (std + 1e-8)

    returns = jax.random.normal(jax.random.key(3), (64,)) * 40 + 100
    for fn in (lambda r: r, jax.jit):
        np.testing.assert_array_equal(
            fn(lambda r: grpo.group_advantages(r, 8, True))(returns),
            fn(lambda r: before(r, 8))(returns))


# --- replay and first gradients against plain loops ---------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("network", ["mlp", "gru"])
def test_replay_gives_the_stored_log_probs_back(network):
    config = reinforce.ReinforceConfig(env=ENV, horizon=HORIZON, batch_size=4, hidden=(8, 8),
                                       network=network, memory_size=8)
    parts = episodic.make_parts(config, False, None)[1]
    params = parts.net.init(jax.random.key(0))
    traj = parts.collect(params, jax.random.key(1))
    out = episodic.replay(parts, params, traj)
    live = np.asarray(traj.active)
    np.testing.assert_allclose(np.asarray(out.log_prob)[live], np.asarray(traj.log_prob)[live],
                               atol=1e-6)


def _loop_gradient(parts, params, traj, advantage, scale):
    """``scale * sum over live cells of A[t, b] grad log pi(a | s)``, one cell at a time."""
    total = jax.tree_util.tree_map(jnp.zeros_like, params)
    cell_grad = jax.jit(jax.grad(parts.net.log_prob))  # one program for every cell
    T, B = traj.reward.shape
    for b in range(B):
        for t in range(T):
            if not bool(traj.active[t, b]):
                continue
            grad = cell_grad(params, traj.observation[t, b], traj.action[t, b])
            total = jax.tree_util.tree_map(
                lambda acc, g, t=t, b=b: acc + scale * float(advantage[t, b]) * g, total, grad)
    return total


def _close(tree_a, tree_b):
    for a, b in zip(jax.tree_util.tree_leaves(tree_a), jax.tree_util.tree_leaves(tree_b),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)


def _numpy_reward_to_go(reward, gamma):
    out = np.zeros_like(reward)
    running = np.zeros(reward.shape[1])
    for t in reversed(range(len(reward))):
        running = reward[t] + gamma * running
        out[t] = running
    return out


@pytest.mark.slow
@pytest.mark.parametrize("baseline", ["none", "loo"])
def test_reinforce_gradient_is_the_score_function_sum(parts, batch, baseline):
    params, traj = batch
    gamma = 0.9
    reward = np.asarray(traj.reward)
    G = _numpy_reward_to_go(reward, gamma) * np.asarray(traj.active)
    if baseline == "loo":  # the mean of the group's other two episodes, same time step
        groups = G.reshape(len(G), 2, 3)
        b = (groups.sum(-1, keepdims=True) - groups) / 2
        A = (G - b.reshape(G.shape)) * np.asarray(traj.active)  # live cells only
    else:
        A = G
    config = dataclasses.replace(parts.config, baseline=baseline)
    setup = dataclasses.replace(parts, config=config)
    returns = jnp.asarray(G)
    np.testing.assert_allclose(
        reinforce.advantages(returns, jnp.zeros_like(returns), traj.active, baseline, 3) *
        traj.active, A, atol=1e-5)

    def policy_loss(p):
        out = episodic.replay(setup, p, traj)
        adv = reinforce.advantages(returns, out.value, traj.active, baseline, 3)
        return -normalized_sum(out.log_prob * jax.lax.stop_gradient(adv), traj.active, 3)

    _close(jax.jit(jax.grad(policy_loss))(params),
           _loop_gradient(parts, params, traj, A, -1 / 6))


def test_grpo_first_gradient_is_the_group_relative_score_sum(parts, batch):
    params, traj = batch
    returns = np.asarray(traj.reward).sum(0)
    A = returns - returns.reshape(2, 3).mean(1).repeat(3)
    config = grpo.GRPOConfig(env=ENV, horizon=LONG, batch_size=6, group_size=3, hidden=(8,))
    setup = episodic.make_parts(config, False, None)[1]
    advantage = jnp.broadcast_to(grpo.group_advantages(jnp.asarray(returns), 3, False),
                                 traj.reward.shape)

    def objective(p):  # the clipped objective at ratio 1, per episode
        out = episodic.replay(setup, p, traj)
        ratio = jnp.exp(out.log_prob - traj.log_prob)
        return normalized_sum(rollax.ppo_clip_objective(ratio, advantage, 0.2), traj.active,
                              3)

    expected = _loop_gradient(setup, params, traj, np.broadcast_to(A, traj.reward.shape), 1 / 6)
    _close(jax.jit(jax.grad(objective))(params), expected)


# --- validation -------------------------------------------------------------------------------

@pytest.mark.parametrize("config, message", [
    (reinforce.ReinforceConfig(baseline="mean"),  # pyright: ignore[reportArgumentType]
     "baseline must be one of none, value, loo"),
    (reinforce.ReinforceConfig(baseline="loo"), "group_size must be at least 2 for baseline loo"),
    (reinforce.ReinforceConfig(batch_size=10, group_size=4), "group_size must divide batch_size"),
    (reinforce.ReinforceConfig(gamma=0.0), r"gamma must be a number in \(0, 1\]"),
    (reinforce.ReinforceConfig(env="corridor", network="cnn"),
     "network cnn needs an image observation leaf"),
    (reinforce.ReinforceConfig(network="cnn"), "network cnn needs image observations"),
    (grpo.GRPOConfig(group_size=1, batch_size=4), "group_size must be at least 2"),
    (grpo.GRPOConfig(normalization="token"),  # pyright: ignore[reportArgumentType]
     "normalization must be one of episode, step"),
    (grpo.GRPOConfig(clip_eps=1.0), r"clip_eps must be a number in \(0, 1\)"),
    (grpo.GRPOConfig(epochs=0), "epochs must be a positive integer"),
    (grpo.GRPOConfig(kl_coef=-1.0), r"kl_coef must be a number in \[0, inf\)"),
])
def test_bad_settings_are_refused_before_compiling(config, message):
    with pytest.raises(ValueError, match=message):
        rollax.algos.registry.build(config)


# --- learning ---------------------------------------------------------------------------------

@pytest.mark.optimized  # the presets' budgets: 10 s and 13 s compiled so, 13 s and 18 s cheaply
@pytest.mark.slow
@pytest.mark.parametrize("spec", [reinforce.SPEC, grpo.SPEC], ids=lambda s: s.name)
def test_the_cartpole_preset_learns(spec):
    config = spec.config(ENV)
    result = make_train(spec.build(config))(jax.random.key(0))
    assert float(result.eval_return) >= 450


@pytest.mark.slow  # compiles the Nature CNN's gradient twice (~2 s here)
@pytest.mark.parametrize("chunk", [3, 10**6], ids=["chunks-with-remainder", "one-call"])
def test_replay_reads_a_nature_batch_in_chunks_like_cell_by_cell(monkeypatch, chunk):
    """``replay`` of a (T, B) batch with the Nature CNN reads ``cells_per_call`` cells at a
    time (``read_cells``): the log-probs, entropies and values of every cell, and their
    gradient, equal the network read cell by cell."""
    import types

    from rollax.collect import Trajectory
    from rollax.nets.cnn import NatureCNNActorCritic

    net = NatureCNNActorCritic(image_shape=(36, 37, 2), num_actions=3, hidden=(8,),
                               input_scale=1 / 255)
    params = jax.jit(net.init)(jax.random.key(0))
    T, B = 4, 3
    obs = jax.random.uniform(jax.random.key(1), (T, B, net.observation_size), maxval=255.0)
    action = (jnp.arange(T * B) % 3).reshape(T, B)
    zeros = jnp.zeros((T, B))
    traj = Trajectory(obs, action, zeros, zeros == 0, zeros > 0, zeros > 0, zeros, None)
    parts = types.SimpleNamespace(recurrent=False, net=net)
    monkeypatch.setattr(NatureCNNActorCritic, "cells_per_call", chunk)

    def total(out):
        return jnp.sum(out.log_prob + out.entropy + out.value)

    got_out = jax.jit(lambda p: episodic.replay(parts, p, traj))(params)
    g_got = jax.jit(jax.grad(lambda p: total(episodic.replay(parts, p, traj))))(params)

    def cell(p, o, a):
        dist, value = net.distribution_value(p, o)
        return dist.log_prob(a), dist.entropy(), value

    cells = jax.vmap(jax.vmap(cell, (None, 0, 0)), (None, 0, 0))
    want = jax.jit(cells)(params, obs, action)  # one program, not one per operation
    for a, b in zip((got_out.log_prob, got_out.entropy, got_out.value), want):
        assert a.shape == (T, B)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    g_want = jax.jit(jax.grad(lambda p: jnp.sum(sum(cells(p, obs, action)))))(params)
    for a, b in zip(jax.tree.leaves(g_got), jax.tree.leaves(g_want)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("baseline", "group_size", "normalize"),
                         [("value", 1, False), ("none", 1, True), ("loo", 4, False)])
def test_reinforce_reads_only_live_chunks_and_updates_as_the_whole_batch(
        monkeypatch, baseline, group_size, normalize):
    """REINFORCE on short CartPole episodes (horizon 200, most of the batch padding): the
    update that reads only the chunks holding a live cell gives the parameters, loss and
    metrics of the one reading all T x B cells, to float tolerance (only the sums' order
    differs), for each baseline; and it does read fewer chunks than the batch has."""
    config = reinforce.ReinforceConfig(env="CartPole-v1", horizon=200, batch_size=8,
                                       group_size=group_size, baseline=baseline,
                                       normalize_advantages=normalize, hidden=(16,),
                                       ent_coef=0.01)
    algo = reinforce.SPEC.build(config)
    hp = algo.hyperparams
    state = algo.init(jax.random.key(0), hp)

    def run(skip):  # a fresh function each time, so each is traced with its setting
        monkeypatch.setattr(episodic, "SKIP_PADDING", skip)
        return jax.jit(lambda s, h: algo.update(s, h))(state, hp)

    (mine, m1), (whole, m2) = run(True), run(False)
    for a, b in zip(jax.tree.leaves(mine.params), jax.tree.leaves(whole.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(m1, m2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert float(m1.episode_length) < 60  # an untrained policy's episodes: short
    parts = episodic.make_parts(config, False, None)[1]
    traj = parts.collect(state.params, jax.random.split(state.key)[1])
    assert int(episodic.live_chunks(traj)) * episodic.ROWS_PER_CHUNK < 200


@pytest.mark.parametrize(("normalization", "scale_by_std", "kl_coef"),
                         [("episode", False, 0.0), ("step", True, 0.5), ("group", False, 0.1)])
def test_grpo_reads_only_live_chunks_and_updates_as_the_whole_batch(
        monkeypatch, normalization, scale_by_std, kl_coef):
    """GRPO on short CartPole episodes (horizon 200, most of the batch padding), two updates
    so the k3 penalty sees parameters away from the reference: the epochs' gradients summed
    over the chunks holding a live cell give the parameters and metrics of the whole-batch
    epochs, to float tolerance, for each normalisation."""
    config = grpo.GRPOConfig(env="CartPole-v1", horizon=200, batch_size=8, group_size=4,
                             epochs=3, hidden=(16,), ent_coef=0.01, lr=1e-2,
                             normalization=normalization, scale_by_std=scale_by_std,
                             kl_coef=kl_coef)
    algo = grpo.SPEC.build(config)
    hp = algo.hyperparams
    state = algo.init(jax.random.key(1), hp)

    def run(skip):  # a fresh function each time, so each is traced with its setting
        monkeypatch.setattr(episodic, "SKIP_PADDING", skip)
        step = jax.jit(lambda s, h: algo.update(s, h))
        first, _ = step(state, hp)
        return step(first, hp)

    (mine, m1), (whole, m2) = run(True), run(False)
    for a, b in zip(jax.tree.leaves(mine.params), jax.tree.leaves(whole.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    for name, a, b in zip(m1._fields, m1, m2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=name)
    assert float(m1.kl_to_reference) > 0  # the second update starts away from the reference
    assert float(m1.episode_length) < 60  # an untrained policy's episodes: short


# --- what an update steps and reads: the live chunks only -------------------------------------

@dataclasses.dataclass(frozen=True)
class _CountedCartPole(CartPole):
    """CartPole whose transitions count themselves (one per environment per step, dead ones
    included: a step the collector takes)."""

    def transition(self, state, action, key):
        jax.debug.callback(lambda e: _COUNTS.__setitem__("steps", _COUNTS["steps"] + e.size),
                           state.elapsed)
        return super().transition(state, action, key)


_COUNTS = {"steps": 0, "rows": 0}


@pytest.mark.parametrize(("spec", "config", "passes"), [
    (reinforce.SPEC, reinforce.ReinforceConfig(batch_size=8, hidden=(16,)),
     dict(live=2, whole=1)),  # a forward pass, then the gradient | one gradient with its aux
    (grpo.SPEC, grpo.GRPOConfig(batch_size=8, group_size=4, epochs=2, hidden=(16,)),
     dict(live=2 + 3, whole=2 + 2)),  # each epoch, the reference, the first epoch's metrics
], ids=["reinforce", "grpo"])  # and the final ratios | each epoch, the reference, the final
def test_an_update_steps_and_reads_only_the_live_chunks(monkeypatch, spec, config, passes):
    """An untrained policy's CartPole batch at the task's horizon (500 steps; its episodes end
    within the first chunk): one update of REINFORCE or GRPO steps the environments only for
    the chunks of time steps that hold a live cell and reads the network only on those rows,
    once per pass; reading the whole batch (``SKIP_PADDING`` off) steps and reads all ``T``
    rows. A GRPO that collected or replayed the padding fails the first half."""
    original = episodic.replay

    def replay(parts, params, traj):
        jax.debug.callback(lambda r: _COUNTS.__setitem__("rows", _COUNTS["rows"] + r.shape[0]),
                           traj.reward)
        return original(parts, params, traj)

    monkeypatch.setattr(episodic, "replay", replay)
    env = _CountedCartPole(horizon=500)
    T, B = env.horizon, config.batch_size
    for skip in (True, False):
        monkeypatch.setattr(episodic, "SKIP_PADDING", skip)
        algo = spec.build(config, env=env)
        state = algo.init(jax.random.key(0), algo.hyperparams)
        update = jax.jit(algo.update)
        jax.block_until_ready(update(state, algo.hyperparams))  # compiled
        _COUNTS.update(steps=0, rows=0)
        _, metrics = jax.block_until_ready(update(state, algo.hyperparams))
        counted = dict(_COUNTS)
        assert float(metrics.episode_length) < 30  # most of the T x B batch is padding
        if skip:
            parts = episodic.make_parts(config, False, env)[1]
            _, traj = jax.jit(lambda s, p=parts: episodic.collect_batch(p, s))(state)
            rows = int(episodic.live_chunks(traj)) * episodic.ROWS_PER_CHUNK
            assert rows < T
            assert counted == dict(steps=rows * B, rows=passes["live"] * rows)
        else:
            assert counted == dict(steps=T * B, rows=passes["whole"] * T)


def test_grpo_update_is_a_loop_over_the_live_steps():
    """One GRPO update on the live path, on a batch whose episodes end early (horizon 200,
    episodes of 8 to 30 steps): its first-epoch objective is a NumPy sum over the live steps,
    ``(1/B) sum_i A_i len_i`` at ratio 1, and its first gradient's norm that of a cell-by-cell
    loop of ``-(1/B) A_i grad log pi`` over the live cells only."""
    config = grpo.GRPOConfig(env=ENV, horizon=200, batch_size=6, group_size=3, epochs=1,
                             hidden=(8,))
    algo = grpo.SPEC.build(config)
    state = jax.jit(algo.init)(jax.random.key(2), algo.hyperparams)
    _, metrics = jax.jit(algo.update)(state, algo.hyperparams)
    parts = episodic.make_parts(config, False, None)[1]
    _, traj = jax.jit(lambda s: episodic.collect_batch(parts, s))(state)
    live = np.asarray(traj.active)
    assert live.sum(0).max() < episodic.ROWS_PER_CHUNK < 200  # one live chunk, the rest padding
    returns = np.asarray(traj.reward, np.float64).sum(0)
    A = returns - returns.reshape(2, 3).mean(1).repeat(3)
    assert np.all(A.reshape(2, 3).std(1) > 0)
    np.testing.assert_allclose(float(metrics.policy_loss), -(A * live.sum(0)).sum() / 6,
                               rtol=1e-5)
    grads = _loop_gradient(parts, state.params, traj, np.broadcast_to(A, live.shape), -1 / 6)
    np.testing.assert_allclose(float(metrics.grad_norm), float(optim.actor_norm(grads)),
                               rtol=1e-4)

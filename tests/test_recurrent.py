"""Recurrent policies: the GRU/LSTM actor-critic, memory carried and reset by both collectors,
replay of stored rollouts, recurrent PPO (ratio 1 on replay, minibatches split environments),
and the recurrent contract checks with planted bugs."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from custom_envs import combo, masked_guess
from helpers import f32_atol, f32_rtol
from rollax.algos import experience, ppo
from rollax.collect import AutoResetTrajectory, collect_autoreset_recurrent, reset_batch
from rollax.contracts import RECURRENT_CHECKS, CountingPolicy, check_recurrent
from rollax.envs.base import step_with_key
from rollax.envs.masks import has_action_mask, is_legal
from rollax.nets import RecurrentActorCritic, actor_critic
from rollax.recurrent import (
    episode_starts,
    initial_carries,
    replay_log_prob,
    reset_where,
    unroll,
)

ENV = rollax.make("CartPole-v1", horizon=20)
SMALL = dict(observation_size=4, num_actions=2, embed_size=16, memory_size=8, hidden=(16,))


def plain_step(net, params, carry, obs):
    """One GRU step written out in NumPy from the equations (a reference for ``net.step``)."""
    cell = params.cell
    x = np.maximum(np.asarray(params.embed.weight) @ obs + np.asarray(params.embed.bias), 0)
    w_ih, w_hh = np.asarray(cell.weight_ih), np.asarray(cell.weight_hh)
    b, b_n, H = np.asarray(cell.bias), np.asarray(cell.bias_n), net.memory_size
    gi, gh = w_ih @ x + b, w_hh @ carry
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    r, z = sigmoid(gi[:H] + gh[:H]), sigmoid(gi[H:2 * H] + gh[H:2 * H])
    n = np.tanh(gi[2 * H:] + r * (gh[2 * H:] + b_n))
    return (1 - z) * n + z * carry


@pytest.fixture(scope="module")
def gru():
    net = RecurrentActorCritic(**SMALL, activation="relu")
    return net, net.init(jax.random.key(0))


@pytest.fixture(scope="module")
def rollouts(gru):
    """Two auto-reset rollouts in a row: (carry0, traj0, carry1, traj1, carry2)."""
    net, params = gru
    state = reset_batch(ENV, jax.random.key(1), 6)
    carry0 = initial_carries(net, params, 6)
    state, carry1, traj0 = collect_autoreset_recurrent(ENV, net, params, state, carry0,
                                                       jax.random.key(2), 15)
    state, carry2, traj1 = collect_autoreset_recurrent(ENV, net, params, state, carry1,
                                                       jax.random.key(3), 15)
    return carry0, traj0, carry1, traj1, carry2


@pytest.mark.slow
def test_gru_initialisation(gru):
    net, params = gru
    assert net.initial_carry(params).shape == (8,) and not net.initial_carry(params).any()
    w = np.asarray(params.embed.weight)  # (16, 4): orthonormal columns, gain sqrt(2)
    np.testing.assert_allclose(w.T @ w, 2 * np.eye(4), atol=1e-5)
    w_hh = np.asarray(params.cell.weight_hh)  # (24, 8)
    np.testing.assert_allclose(w_hh.T @ w_hh, np.eye(8), atol=1e-5)
    for bias in (params.cell.bias, params.cell.bias_n, params.embed.bias,
                 *(layer.bias for layer in params.actor + params.critic)):
        assert not np.asarray(bias).any()
    out = np.asarray(params.actor[-1].weight)
    np.testing.assert_allclose(out @ out.T, np.eye(2), atol=1e-5)  # logits: gain 1


def test_gru_step_matches_the_equations(gru):
    net, params = gru
    carry = np.asarray(jax.random.normal(jax.random.key(4), (8,)))
    obs = np.asarray(jax.random.normal(jax.random.key(5), (4,)))
    new, features = net.step(params, jnp.asarray(carry), jnp.asarray(obs))
    np.testing.assert_allclose(np.asarray(new), plain_step(net, params, carry, obs), atol=1e-5)
    np.testing.assert_array_equal(np.asarray(new), np.asarray(features))


@pytest.mark.slow
def test_lstm_carries_h_and_c():
    net = RecurrentActorCritic(**SMALL, cell="lstm")
    params = net.init(jax.random.key(0))
    h, c = net.initial_carry(params)
    (h2, c2), features = net.step(params, (h, c), jnp.ones(4))
    assert h2.shape == c2.shape == (8,) and np.array_equal(np.asarray(h2), np.asarray(features))


@pytest.mark.slow
def test_collector_resets_exactly_the_restarted_environments(gru, rollouts):
    """Replaying each environment alone, step by step, with its own resets gives the stored
    log-probabilities: the collector reset the memory where (and only where) episodes ended."""
    net, params = gru
    carry0, traj0, *_ = rollouts
    done = np.asarray(traj0.terminated | traj0.truncated)
    assert done[:-1].any(), "the rollout should restart some episode"
    for b in range(6):
        carry = np.asarray(carry0[b])
        for t in range(15):
            obs = jnp.asarray(traj0.observation[t, b])
            new, features = net.step(params, jnp.asarray(carry), obs)
            lp = net.distribution(params, features).log_prob(traj0.action[t, b])
            np.testing.assert_allclose(float(lp), float(traj0.log_prob[t, b]), atol=1e-6)
            carry = np.zeros(8, np.float32) if done[t, b] else np.asarray(new)


def test_replay_gives_the_stored_log_probs_to_float32_rounding(gru, rollouts):
    """The replay is another compiled program than the collector's scan: XLA may fuse its
    float32 arithmetic differently (1 ulp seen on some CPUs), never by more than rounding."""
    net, params = gru
    _, _, carry1, traj1, _ = rollouts
    starts = np.asarray(episode_starts(traj1))
    assert starts.any() and not starts[0].any()
    assert np.asarray(carry1).any(), "the second rollout should start mid-episode"
    replayed = jax.jit(replay_log_prob, static_argnums=0)(net, params, carry1, traj1)
    np.testing.assert_array_max_ulp(np.asarray(replayed), np.asarray(traj1.log_prob), maxulp=4)


def test_unroll_resets_before_reading(gru):
    net, params = gru
    obs = jax.random.normal(jax.random.key(7), (3, 2, 4))
    starts = jnp.array([[False, False], [True, False], [False, False]])
    carry = jnp.ones((2, 8))
    replay = unroll(net, params, carry, obs, starts)
    fresh, _ = net.step(params, net.initial_carry(params), obs[1, 0])
    np.testing.assert_allclose(np.asarray(replay.carry[1, 0]), np.asarray(fresh), atol=1e-6)
    moved, _ = net.step(params, replay.carry[0, 1], obs[1, 1])
    np.testing.assert_allclose(np.asarray(replay.carry[1, 1]), np.asarray(moved), atol=1e-6)


def test_absorbing_collector_freezes_the_memory():
    policy = CountingPolicy(2)
    _, traj = rollax.collect(ENV, policy, None, jax.random.key(0), 8, 25)
    length = np.asarray(traj.active).sum(axis=0)
    assert (length < 25).all()
    # the count read at step t is min(t, L) + 1: the padding reads the memory of the end
    counts = np.minimum(np.arange(25)[:, None], length[None]) + 1
    logits = 0.01 * counts[..., None] * np.arange(2)
    expected = np.take_along_axis(
        logits, np.asarray(traj.action)[..., None], -1)[..., 0] - np.log(np.exp(logits).sum(-1))
    np.testing.assert_allclose(np.asarray(traj.log_prob), expected, rtol=f32_rtol(1e-6),
                               atol=f32_atol(1e-7))


# --- the recurrent contract checks, and the bugs they must catch ----------------------------


def masks_of(env, state):
    """The batch's action masks, or None for an environment without masks."""
    return jax.vmap(env.action_mask)(state) if has_action_mask(env) else None


def given(mask) -> tuple:
    """The policy's extra argument: the mask, when there is one."""
    return () if mask is None else (mask,)


def loop_collector(bug: str | None = None):
    """An independent auto-reset collector written as a Python loop (sampling under the action
    masks and storing them, for an environment with masks), with a planted bug: ``"carried"``
    never resets the memory, ``"late"`` resets it one step after the restart."""

    def collect_fn(env, policy, params, state, carry, key, num_steps):
        batch = carry.shape[0]
        initial, pending, rows = policy.initial_carry(params), jnp.zeros(batch, bool), []
        step = jax.vmap(lambda s, a, k: step_with_key(env, s, a, k))
        for step_key in jax.random.split(key, num_steps):
            action_key, reset_key, env_key = jax.random.split(step_key, 3)
            obs, mask = jax.vmap(env.observation)(state), masks_of(env, state)
            new, action, log_prob = jax.vmap(policy.sample, (None, 0, 0, 0) + (0,) * len(
                given(mask)))(params, carry, obs, jax.random.split(action_key, batch),
                              *given(mask))
            state, reward, term, trunc = step(state, action, jax.random.split(env_key, batch))
            done = term | trunc
            final = jax.vmap(env.observation)(state)
            fresh = jax.vmap(env.reset)(jax.random.split(reset_key, batch))
            state = reset_where(done, fresh, state)
            carry = {None: reset_where(done, initial, new), "carried": new,
                     "late": reset_where(pending, initial, new)}[bug]
            pending = done
            rows.append(AutoResetTrajectory(obs, action, reward, jnp.ones(batch, bool), term,
                                            trunc, log_prob, mask, turns=None, agent_rewards=None,
                                            next_observation=final))
        return state, carry, jax.tree.map(lambda *x: jnp.stack(x), *rows)

    return collect_fn


def replay_without_resets(policy, params, carry, traj):
    return unroll(policy, params, carry, traj.observation, jnp.zeros_like(traj.terminated),
                  traj.action, traj.action_mask).log_prob


def replay_from_zeros(policy, params, carry, traj):
    return replay_log_prob(policy, params, initial_carries(policy, params, carry.shape[0]), traj)


def moving_absorbing(env, policy, params, key, batch_size, num_steps):
    """An absorbing collector whose memory keeps moving on padding cells."""
    state = jax.vmap(env.reset)(jax.random.split(key, batch_size))
    carry, rows = initial_carries(policy, params, batch_size), []
    step = jax.vmap(lambda s, a, k: step_with_key(env, s, a, k))
    for step_key in jax.random.split(jax.random.fold_in(key, 1), num_steps):
        action_key, env_key = jax.random.split(step_key)
        obs, active = jax.vmap(env.observation)(state), ~jax.vmap(env.done)(state)
        mask = masks_of(env, state)
        carry, action, log_prob = jax.vmap(policy.sample, (None, 0, 0, 0) + (0,) * len(
            given(mask)))(params, carry, obs, jax.random.split(action_key, batch_size),
                          *given(mask))
        state, reward, term, trunc = step(state, action, jax.random.split(env_key, batch_size))
        rows.append(rollax.Trajectory(obs, action, reward, active, term, trunc, log_prob,
                                      mask))
    return state, jax.tree.map(lambda *x: jnp.stack(x), *rows)


def test_rollax_passes_every_recurrent_check():
    report = check_recurrent(ENV)
    assert report.ok, report
    assert report.names == RECURRENT_CHECKS
    assert all(r.status == "passed" for r in report), report


@pytest.mark.slow
def test_an_independent_loop_collector_passes():
    report = check_recurrent(ENV, loop_collector())
    assert report.ok, report


@pytest.mark.parametrize("kwargs, check, message", [
    (dict(collect_fn=loop_collector("carried")), "memory_reset_on_restart",
     "memory carried across an auto-reset"),
    (dict(collect_fn=loop_collector("late")), "memory_reset_on_restart",
     "memory reset one step late"),
    (dict(replay_fn=replay_without_resets), "replay_resets_at_starts",
     "replay does not reset the memory where an episode restarted"),
    (dict(replay_fn=replay_from_zeros), "replay_from_stored_carry",
     "replay does not start from the stored carry"),
    (dict(absorbing_fn=moving_absorbing), "memory_frozen_when_absorbed",
     "memory moved after the episode ended"),
], ids=["carried-across-reset", "reset-one-step-late", "replay-without-resets",
        "replay-from-zeros", "absorbing-not-frozen"])
@pytest.mark.slow
def test_planted_recurrent_bugs_are_caught(kwargs, check, message):
    report = check_recurrent(ENV, **kwargs)
    result = report[check]
    assert result.failed and result.message.startswith(message), report
    assert result.step is not None and result.env is not None
    failed = {r.name for r in report if r.failed}
    if "replay_fn" in kwargs or "absorbing_fn" in kwargs:
        assert failed == {check}, report  # a replay or absorbing bug blames nothing else


def test_planted_late_reset_names_the_first_cell_of_the_new_episode():
    report = check_recurrent(ENV, loop_collector("late"), num_steps=11)
    result = report["memory_reset_on_restart"]
    ok = check_recurrent(ENV, loop_collector(), num_steps=11)
    assert ok.ok
    assert result.values["expected"] == 0 and result.values["observations remembered"] > 0


# --- masked environments: tests/custom_envs/combo.py (Dict observation, MultiDiscrete action,
# action mask) and tests/custom_envs/masked_guess.py ------------------------------------------


def test_counting_policy_acts_under_the_mask():
    """The probe on MultiDiscrete((2, 4)) at count c, with ``a[0]`` free and ``a[1]`` in
    ``{2, 3}``: log p((1, 3)) = [s - log(1 + e^s)] + [3s - log(e^{2s} + e^{3s})], s = 0.01 c."""
    policy = CountingPolicy.for_space(rollax.MultiDiscrete((2, 4)))
    mask = jnp.array([[True, True, False, False], [False, False, True, True]])
    for count in (0.0, 4.0, 9.0):
        carry, action, log_prob = policy.sample(None, jnp.float32(count), None,
                                                jax.random.key(int(count)), mask)
        assert int(carry) == count + 1 and int(action[1]) in (2, 3)
        s = 0.01 * (count + 1)
        want = (s * action[0] - np.log(1 + np.exp(s))
                + s * action[1] - np.log(np.exp(2 * s) + np.exp(3 * s)))
        assert float(log_prob) == pytest.approx(float(want), rel=1e-5, abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("make_env", [combo.make, masked_guess.discrete, masked_guess.multi_binary],
                         ids=["combo", "masked-discrete", "masked-multi-binary"])
def test_masked_environments_pass_every_recurrent_check(make_env):
    """The probe acts under the masks and its memory is read under the stored ones: rollax's
    collectors and replay pass every check, none skipped (each task leaves some component two
    legal values)."""
    report = check_recurrent(make_env())
    assert report.ok, report
    assert all(r.status == "passed" for r in report), report


@pytest.mark.slow
@pytest.mark.parametrize("kwargs, check, message", [
    (dict(collect_fn=loop_collector()), None, None),
    (dict(collect_fn=loop_collector("carried")), "memory_reset_on_restart",
     "memory carried across an auto-reset"),
    (dict(collect_fn=loop_collector("late")), "memory_reset_on_restart",
     "memory reset one step late"),
    (dict(replay_fn=replay_without_resets), "replay_resets_at_starts",
     "replay does not reset the memory where an episode restarted"),
    (dict(replay_fn=replay_from_zeros), "replay_from_stored_carry",
     "replay does not start from the stored carry"),
    (dict(absorbing_fn=moving_absorbing), "memory_frozen_when_absorbed",
     "memory moved after the episode ended"),
], ids=["independent-loop", "carried-across-reset", "reset-one-step-late",
        "replay-without-resets", "replay-from-zeros", "absorbing-not-frozen"])
def test_planted_recurrent_bugs_are_caught_on_the_combo_task(kwargs, check, message):
    report = check_recurrent(combo.make(), **kwargs)
    if check is None:
        assert report.ok, report
        return
    result = report[check]
    assert result.failed and result.message.startswith(message), report
    if "collect_fn" not in kwargs:
        assert {r.name for r in report if r.failed} == {check}, report  # blames nothing else


def test_a_gru_on_the_combo_task_collects_legal_actions_and_replays_them_under_the_masks():
    """A GRU actor-critic reading the Dict observation through its encoder: the auto-reset
    collector stores the masks and samples legal actions only; the replay from the stored
    carry gives the stored log-probabilities back under the stored masks (and other ones
    without them: the masks matter)."""
    env = combo.make()
    net = actor_critic(env, "gru", (16,), "tanh", 0.0, 8)
    params = net.init(jax.random.key(0))
    state = reset_batch(env, jax.random.key(1), 6)
    carry0 = initial_carries(net, params, 6)
    state, carry1, traj0 = collect_autoreset_recurrent(env, net, params, state, carry0,
                                                       jax.random.key(2), 7)
    _, _, traj1 = collect_autoreset_recurrent(env, net, params, state, carry1,
                                              jax.random.key(3), 7)
    for carry, traj in ((carry0, traj0), (carry1, traj1)):
        assert traj.action_mask.shape == (7, 6, 2, 4)
        assert bool(is_legal(env.action_space, traj.action_mask, traj.action).all())
        replayed = replay_log_prob(net, params, carry, traj)
        np.testing.assert_allclose(np.asarray(replayed), np.asarray(traj.log_prob), rtol=0,
                                   atol=1e-5)
        unmasked = replay_log_prob(net, params, carry, traj._replace(action_mask=None))
        assert np.abs(np.asarray(unmasked) - np.asarray(traj.log_prob)).min() > 0.1


def test_check_recurrent_refuses_continuous_actions():
    with pytest.raises(ValueError, match=r"^check_recurrent needs a Discrete, MultiDiscrete or "
                                         r"MultiBinary action space, got "):
        check_recurrent(rollax.make("Pendulum-v1"))


# --- recurrent PPO ---------------------------------------------------------------------------


def tiny(network="gru", **kw):
    base = dict(env="CartPole-v1", network=network, total_steps=4 * 32 * 2, num_steps=32,
                hidden=(16, 16), memory_size=8, eval_episodes=4)
    return ppo.PPOConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def ratio_one():
    config = tiny(epochs=1, minibatches=1)
    return jax.jit(jax.vmap(rollax.make_train(config)))(
        jnp.stack([jax.random.key(0), jax.random.key(1)]))


@pytest.mark.slow
def test_replayed_update_has_ratio_one(ratio_one):
    """One epoch, one minibatch: the update replays the rollout with the collecting parameters,
    so every recomputed log-probability equals the stored one: ratio 1 to float32 rounding
    (bit for bit on jax 0.9.2; one ulp off on 0.10.2, whose XLA fuses the two programs
    differently). A replay that misses a reset or a carry is off by far more."""
    m = ratio_one.metrics
    assert np.abs(np.asarray(m.ratio_min) - 1).max() <= 2e-7
    assert np.abs(np.asarray(m.ratio_max) - 1).max() <= 2e-7
    assert np.abs(np.asarray(m.approx_kl)).max() <= 1e-8
    assert np.all(np.asarray(m.clip_fraction) == 0)
    assert np.isfinite(np.asarray(ratio_one.eval_return)).all()


@pytest.mark.slow
def test_lstm_update_replays_to_float_rounding():
    config = tiny("lstm", epochs=1, minibatches=1)
    m = jax.jit(rollax.make_train(config))(jax.random.key(0)).metrics
    assert np.abs(np.asarray(m.ratio_min) - 1).max() <= 2e-7
    assert np.abs(np.asarray(m.ratio_max) - 1).max() <= 2e-7


def test_minibatches_split_environments_and_keep_sequences_whole():
    T, B = 5, 6
    cell = jnp.arange(T * B, dtype=jnp.float32).reshape(T, B)  # value 6 t + b
    data = experience.Sequences(jnp.arange(B, dtype=jnp.float32) * 100, cell,
                             jnp.zeros((T, B), bool), cell, cell, cell, cell, cell)
    split = experience.sequence_minibatches(data, jax.random.key(0), 3)
    assert split.observation.shape == (3, T, 2) and split.carry.shape == (3, 2)
    envs = np.asarray(split.carry) / 100  # the environment each column holds
    assert sorted(envs.ravel().tolist()) == list(range(B))
    for m in range(3):
        for j in range(2):  # column j of minibatch m is env b's whole sequence, in time order
            b = int(envs[m, j])
            np.testing.assert_array_equal(np.asarray(split.observation[m, :, j]),
                                          6 * np.arange(T) + b)


def test_recurrent_ppo_checks_its_settings():
    with pytest.raises(ValueError, match="minibatches must divide num_envs = 4 for network gru"):
        ppo.validate(tiny(minibatches=8))
    with pytest.raises(ValueError, match="memory_size"):
        ppo.validate(tiny(memory_size=0))
    with pytest.raises(ValueError,
                       match="network must be one of auto, mlp, cnn, nature, spatial, gru, lstm"):
        ppo.validate(tiny(network="rnn"))  # type: ignore[arg-type]


@pytest.mark.slow
def test_recurrent_ppo_compiles_once_and_normalises():
    train = jax.jit(rollax.make_train(tiny(normalize_observations=True)))
    out = train(jax.random.key(0))
    train(jax.random.key(1))
    assert train._cache_size() == 1
    assert np.isfinite(np.asarray(out.metrics.value_loss)).all()


@pytest.mark.integration
def test_cli_trains_and_loads_a_gru_run(tmp_path):
    out = tmp_path / "gru"
    cmd = [sys.executable, "-m", "rollax.cli", "train", "--env", "CartPole-v1", "--network", "gru",
           "--total-steps", "1024", "--json", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "config.json").read_text())["config"]["network"] == "gru"
    loaded = rollax.load_run(out)
    assert loaded.recurrent
    carry = loaded.initial_carry()
    obs = loaded.env.observation(loaded.env.reset(jax.random.key(0)))
    carry, action = loaded.step(carry, obs)
    assert carry.shape == (128,) and int(action) in (0, 1)
    with pytest.raises(ValueError, match="recurrent"):
        loaded.act(obs)

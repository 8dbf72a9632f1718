"""A league in Pgx's two-player games (``opponents pool``, ``docs/contract.md §8``): the
opponent's moves acted by a snapshot of the pool (a scripted one, detectable) and weighing
nothing in the loss, the pool's ring of snapshots, a run resumed bit for bit, the refusals, and
a learning check.

Needs ``pip install rollax[pgx]``; the main test suite skips this folder.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from helpers import train_refused
from rollax.algos import a2c, ppo
from rollax.algos.base import hyperparams_of
from rollax.collect import League, collect_league, draw_matches, reset_batch

pgx = pytest.importorskip("pgx")


@dataclasses.dataclass(frozen=True)
class Scripted:
    """Plays the first legal cell of ``params``, an order of the 9 cells."""

    def sample(self, params, observation, key, mask):
        return params[jnp.argmax(mask[params])].astype(jnp.int32), jnp.zeros((), jnp.float32)


LOWEST = jnp.arange(9)
"""The learner's order: the lowest free cell."""
HIGHEST = jnp.arange(9)[::-1]
"""The snapshot's order: the highest free cell."""


def test_the_opponent_moves_are_the_snapshots_and_the_learner_its_own_seat():
    env = rollax.make("pgx:tic_tac_toe")
    B, T = 16, 24
    state = reset_batch(env, jax.random.key(0), B)
    league = draw_matches(jax.random.key(1), B, 1)
    pool = HIGHEST[None]  # one snapshot
    _, after, traj = collect_league(env, Scripted(), LOWEST, pool, state, league,
                                    jax.random.key(2), T)
    mask, action = np.asarray(traj.action_mask), np.asarray(traj.action)
    lowest = np.argmax(mask, axis=-1)
    highest = 8 - np.argmax(mask[..., ::-1], axis=-1)
    learner = np.asarray(traj.turns.learner)
    assert learner.any() and (~learner).any()
    np.testing.assert_array_equal(action[learner], lowest[learner])
    np.testing.assert_array_equal(action[~learner], highest[~learner])
    # the learner plays its drawn seat for the whole episode; a new one at each reset
    seat = np.asarray(league.seat)
    player = np.asarray(traj.turns.player)
    done = np.asarray(traj.terminated | traj.truncated)
    for b in range(B):
        t_end = np.argmax(done[:, b]) if done[:, b].any() else T
        np.testing.assert_array_equal(learner[:t_end + 1, b], player[:t_end + 1, b] == seat[b])
    assert done.any() and after.seat.shape == (B,)


def test_the_draws_are_uniform_over_seats_and_snapshots():
    league = draw_matches(jax.random.key(0), 12_000, 3)
    counts = np.bincount(np.asarray(league.seat) * 3 + np.asarray(league.opponent),
                         minlength=6)
    np.testing.assert_allclose(counts / 12_000, 1 / 6, atol=0.015)


def _parts(module=ppo, **settings):
    config_type = ppo.PPOConfig if module is ppo else a2c.A2CConfig
    defaults = dict(env="pgx:tic_tac_toe", total_steps=2048, num_envs=8, num_steps=16,
                    network="mlp", hidden=(16,), eval_episodes=2, opponents="pool", pool_size=3,
                    pool_every=2)
    config = config_type(**{**defaults, **settings})
    return module.make_parts(module.resolve(config), rollax.make("pgx:tic_tac_toe"))


@pytest.mark.parametrize("module", [ppo, a2c])
def test_no_opponent_cell_weighs_in_the_loss(module):
    parts = _parts(module)
    hp = hyperparams_of(parts.config)
    experience = parts.experience
    state = parts.init(jax.random.key(0), hp)
    collected = experience.collect(state, jax.random.key(1))
    batch = experience.batch(state, collected, experience.advantages(state, collected, hp))
    live = np.asarray(batch.live)
    np.testing.assert_array_equal(live, np.asarray(collected.traj.turns.learner).reshape(-1))
    assert 0 < live.sum() < live.size

    def garbled(field, value):
        return jnp.where(batch.live, getattr(batch, field), value)

    other = batch._replace(advantage=garbled("advantage", 1e3), target=garbled("target", -1e3),
                           log_prob=garbled("log_prob", -20.0), value=garbled("value", 7.0),
                           observation=jnp.where(batch.live[:, None], batch.observation, 1.0),
                           action=jnp.where(batch.live, batch.action, 0))

    def loss(data):
        return jax.value_and_grad(lambda p: parts.loss(p, data, hp)[0])(state.params)

    (a, grads_a), (b, grads_b) = loss(batch), loss(other)
    assert float(a) == float(b)
    for x, y in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b), strict=True):
        np.testing.assert_array_equal(x, y)
    # by self-play every cell weighs: no mask, no pool
    selfplay = _parts(module, opponents="self")
    state = selfplay.init(jax.random.key(0), hp)
    collected = selfplay.experience.collect(state, jax.random.key(1))
    assert collected.traj.turns.learner is None and state.pool is None
    assert selfplay.experience.batch(state, collected, selfplay.experience.advantages(
        state, collected, hp)).live is None


def test_the_pool_replaces_its_oldest_snapshot_every_pool_every_updates():
    parts = _parts(ppo, anneal_lr=False)
    hp = hyperparams_of(parts.config)
    state = parts.init(jax.random.key(0), hp)
    first = state.params
    pool = lambda s: jax.tree.leaves(s.pool)  # noqa: E731
    for leaf, p in zip(pool(state), jax.tree.leaves(first), strict=True):  # K copies of it
        np.testing.assert_array_equal(leaf, np.broadcast_to(p, leaf.shape))
    update = jax.jit(parts.update)
    seen = [first]
    for _ in range(6):
        state, _ = update(state, hp)
        seen.append(state.params)
    # updates 2, 4, 6 were snapshots into slots 0, 1, 2; the ring's next is slot 0 again
    assert int(state.pool_next) == 0
    for slot, n in enumerate((2, 4, 6)):
        for leaf, p in zip(pool(state), jax.tree.leaves(seen[n]), strict=True):
            np.testing.assert_array_equal(leaf[slot], p)
    state, _ = update(state, hp)  # update 7: no snapshot
    state, _ = update(state, hp)  # update 8 replaces the oldest, update 2's
    assert int(state.pool_next) == 1
    for leaf, p in zip(pool(state), jax.tree.leaves(state.params), strict=True):
        np.testing.assert_array_equal(leaf[0], p)


ARGV = ["--env", "pgx:tic_tac_toe", "--network", "mlp", "--hidden", "16", "--num-envs", "4",
        "--num-steps", "16", "--epochs", "1", "--minibatches", "2", "--no-anneal-lr",
        "--eval-episodes", "2", "--chunk-size", "1", "--checkpoint-every", "1",
        "--opponents", "pool", "--pool-size", "2", "--pool-every", "1"]


@pytest.mark.slow
def test_a_league_run_resumes_bit_identical(capsys, tmp_path):
    from helpers import checkpoint_digests, run_metrics, train_json
    from rollax.run.training import load_latest

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train_json(capsys, *ARGV, "--total-steps", "256", "--out", whole)
    train_json(capsys, *ARGV, "--total-steps", "128", "--out", cut)
    train_json(capsys, "--resume", cut, "--total-steps", "256")
    assert run_metrics(cut) == run_metrics(whole) and len(run_metrics(whole)) == 5
    last = "checkpoints/update-0000004/state.npz"
    assert checkpoint_digests(cut)[last] == checkpoint_digests(whole)[last]
    stored, _, _, updates, state = load_latest(whole)
    assert stored.config.opponents == "pool" and stored.config.pool_size == 2
    assert updates == 4 and int(state.pool_next[0]) == 0  # 4 snapshots into a ring of 2
    assert isinstance(state.league, League) and state.league.seat.shape == (1, 4)


@pytest.mark.parametrize("argv,words", [
    (["--env", "CartPole-v1", "--opponents", "pool"], "opponents pool is refused"),
    (["--env", "pgx:tic_tac_toe", "--opponents", "pool", "--pool-size", "0"], "pool_size"),
    (["--env", "pgx:tic_tac_toe", "--opponents", "pool", "--pool-every", "0"], "pool_every"),
])
def test_refusals_are_one_line_and_exit_2(argv, words, tmp_path, capsys):
    train_refused(capsys, tmp_path, argv, words)

"""The Pgx adapter (``pgx:<id>``): step-for-step agreement with Pgx's own ``step``, the ending
split (Freeway's fixed end a truncation), Pgx's absorbing terminal states, the contract checker,
a tiny training run and the error messages.

Needs ``pip install rollax[pgx]``; the main test suite skips this folder.
"""

from __future__ import annotations

import functools
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
import rollax.cli
from rollax.envs.suites.pgx import SINGLE_PLAYER, TWO_PLAYER, PgxEnv


def test_missing_pgx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pgx", None)  # `import pgx` now raises ImportError
    with pytest.raises(ValueError, match=r"pip install rollax\[pgx\]"):
        rollax.make("pgx:minatar-breakout")


pgx = pytest.importorskip("pgx")

BATCH, STEPS = 32, 300
LOCKSTEP = {  # game: (horizon, batch, steps); horizons short enough to see truncations
    "minatar-breakout": (10, BATCH, STEPS),
    "minatar-asterix": (60, BATCH, STEPS),
    "minatar-seaquest": (25, BATCH, STEPS),
    "minatar-space_invaders": (60, BATCH, STEPS),
    "2048": (150, BATCH, STEPS),
    "minatar-freeway": (None, 8, 2510),  # its own 2501-step end, past which Pgx absorbs
}


@functools.cache
def _lockstep(name: str, horizon: int | None, batch: int, steps: int):
    """Pgx's own ``step`` (a separately made ``pgx.make(name)``, no auto-reset) and the adapter
    run side by side from the same reset keys, with the same random legal actions and step
    keys; returns numpy arrays (T, B, ...) of both."""
    env, ref_env = rollax.make(f"pgx:{name}", horizon=horizon), pgx.make(name)

    @jax.jit
    def run(key):
        reset_key, run_key = jax.random.split(key)
        keys = jax.random.split(reset_key, batch)
        ref, ours = jax.vmap(ref_env.init)(keys), jax.vmap(env.reset)(keys)

        def body(carry, key):
            ref, ours = carry
            action_key, step_key = jax.random.split(key)
            logits = jnp.log(ref.legal_action_mask.astype(jnp.float32))
            actions = jax.random.categorical(action_key, logits).astype(jnp.int32)
            step_keys = jax.random.split(step_key, batch)
            ref = jax.vmap(ref_env.step)(ref, actions, step_keys)
            ours, reward, terminated, truncated = jax.vmap(env.step)(ours, actions, step_keys)
            return (ref, ours), {
                "ref_obs": ref.observation.reshape(batch, -1).astype(jnp.float32),
                "ref_reward": ref.rewards[:, 0], "ref_terminated": ref.terminated,
                "ref_truncated": ref.truncated, "obs": jax.vmap(env.observation)(ours),
                "reward": reward, "terminated": terminated, "truncated": truncated}

        start = (ref.observation.reshape(batch, -1).astype(jnp.float32),
                 jax.vmap(env.observation)(ours))
        _, out = jax.lax.scan(body, (ref, ours), jax.random.split(run_key, steps))
        return start, out

    start, out = run(jax.random.key(7))
    return env, jax.tree.map(np.asarray, start), jax.tree.map(np.asarray, out)


def _expected(out, horizon: int, pgx_end_terminates: bool):
    """What rollax must give, derived from Pgx's trajectory: Pgx's up to each env's end (its
    first terminal step, or the horizon), then the final observation, reward 0, no events."""
    steps = out["ref_terminated"].shape[0]
    ever = out["ref_terminated"].any(axis=0)
    ref_end = np.where(ever, out["ref_terminated"].argmax(axis=0), steps)
    end = np.minimum(ref_end, horizon - 1)
    terminated_end = (ref_end == end) & pgx_end_terminates
    t = np.arange(steps)[:, None]
    at_end = t == end[None, :]
    clipped = np.minimum(t, end[None, :])
    return ref_end, {
        "obs": np.take_along_axis(out["ref_obs"], clipped[:, :, None], axis=0),
        "reward": np.where(t <= end[None, :], out["ref_reward"], 0.0).astype(np.float32),
        "terminated": at_end & terminated_end[None, :],
        "truncated": at_end & ~terminated_end[None, :]}


@pytest.mark.parametrize("name", list(LOCKSTEP))
def test_steps_match_pgx(name):
    horizon, batch, steps = LOCKSTEP[name]
    env, (ref_start, start), out = _lockstep(name, horizon, batch, steps)
    np.testing.assert_array_equal(start, ref_start)
    freeway = name == "minatar-freeway"
    ref_end, expected = _expected(out, env.horizon, pgx_end_terminates=not freeway)
    for field, value in expected.items():
        np.testing.assert_array_equal(out[field], value, err_msg=field)
    assert not out["ref_truncated"].any()  # no Pgx game sets it
    # Pgx's terminal states absorb: after its end, the same observation and reward 0
    for i in np.flatnonzero(ref_end < steps):
        np.testing.assert_array_equal(out["ref_obs"][ref_end[i]:, i],
                                      np.broadcast_to(out["ref_obs"][ref_end[i], i],
                                                      out["ref_obs"][ref_end[i]:, i].shape))
        assert not out["ref_reward"][ref_end[i] + 1:, i].any()
    n_term, n_trunc = int(out["terminated"].sum()), int(out["truncated"].sum())
    print(f"\npgx:{name} lockstep {batch} x {steps} steps (horizon {env.horizon}): "
          f"{n_term} terminated, {n_trunc} truncated, {int((out['reward'] != 0).sum())} "
          f"nonzero rewards")
    assert n_term + n_trunc == batch
    if freeway:  # Pgx ends Freeway after exactly 2501 steps, rollax calls it a truncation
        assert (ref_end == 2500).all() and n_term == 0
    else:
        assert n_term > 0 and n_trunc > 0


def test_pgx_terminal_state_absorbs():
    env = pgx.make("minatar-breakout")
    state, key = env.init(jax.random.key(0)), jax.random.key(1)
    step = jax.jit(env.step)
    while not bool(state.terminated):
        key, sub = jax.random.split(key)
        state = step(state, jnp.int32(0), sub)
    after = step(state, jnp.int32(1), jax.random.key(2))
    assert not np.asarray(after.rewards).any()
    for a, b in zip(jax.tree.leaves(state.replace(rewards=after.rewards)),
                    jax.tree.leaves(after)):
        np.testing.assert_array_equal(a, b)


def test_spaces_mask_and_options():
    env = rollax.make("pgx:minatar-seaquest")
    assert env.observation_space.shape == (1000,) and env.raw_observation_shape == (10, 10, 10)
    assert env.action_space.n == 6 and env.horizon == 10_000 and env.stochastic
    full = rollax.make("pgx:minatar-breakout", use_minimal_action_set=False)
    assert full.action_space.n == 6 and full.pgx_env.use_minimal_action_set is False
    same = (rollax.make("pgx:minatar-breakout", sticky_action_prob=0.0),
            rollax.make("pgx:minatar-breakout", sticky_action_prob=0.0))
    assert same[0] == same[1] and hash(same[0]) == hash(same[1])
    assert same[0].pgx_env.sticky_action_prob == 0.0
    game = rollax.make("pgx:2048")
    state = game.reset(jax.random.key(3))
    np.testing.assert_array_equal(game.action_mask(state), state.inner.legal_action_mask)
    assert game.action_mask(state).dtype == jnp.bool_ and game.action_mask(state).shape == (4,)
    assert rollax.make("pgx:minatar-freeway", horizon=100).horizon == 100
    assert set(rollax.envs.suites.pgx.ids()) == {
        "2048", "minatar-asterix", "minatar-breakout", "minatar-freeway", "minatar-seaquest",
        "minatar-space_invaders", *TWO_PLAYER}


def test_refuses_games_of_more_than_two_players_and_bad_options():
    refused = [n for n in pgx.available_envs() if n not in SINGLE_PLAYER + TWO_PLAYER]
    assert refused == ["sparrow_mahjong"]
    with pytest.raises(ValueError, match=r"^pgx:sparrow_mahjong is a 3-player game: rollax's "
                                         r"self-play takes two-player zero-sum games only") as info:
        rollax.make("pgx:sparrow_mahjong")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="did you mean pgx:minatar-breakout"):
        rollax.make("pgx:minatar-breakou")
    with pytest.raises(ValueError, match="does not accept"):
        rollax.make("pgx:minatar-breakout", nonsense=1)
    with pytest.raises(ValueError, match="at most 2501"):
        rollax.make("pgx:minatar-freeway", horizon=2502)
    with pytest.raises(ValueError, match="positive integer"):
        rollax.make("pgx:minatar-breakout", horizon=0)
    assert isinstance(rollax.make("pgx:minatar-breakout"), PgxEnv)


def test_check_env_ok():
    report = rollax.check_env(rollax.make("pgx:minatar-breakout"))
    assert report.ok, report


@pytest.mark.slow
@pytest.mark.optimized  # 16 x 1,024 steps of Seaquest: 26 s compiled as rollax does, 98 s cheaply
@pytest.mark.parametrize("name", SINGLE_PLAYER)
def test_check_env_every_single_player_game(name, capsys):
    """``rollax check-env pgx:<id>`` (the CLI, default settings), which checks the mask's shape,
    a legal action in every live state and legal sampled actions: 10-45 s each on 2 cores."""
    code = rollax.cli.main(["check-env", f"pgx:{name}"])
    assert code == 0, capsys.readouterr().out


def test_2048_mask_is_pgx_legal_action_mask():
    """Along random legal play, ``action_mask`` is Pgx's ``legal_action_mask`` (2048 has
    illegal moves: some state forbids one) and a MinAtar mask is all true."""
    env, ref = rollax.make("pgx:2048"), pgx.make("2048")

    @jax.jit
    def run(key):
        def body(carry, key):
            ours, theirs = carry
            action_key, step_key = jax.random.split(key)
            mask = env.action_mask(ours)
            logits = jnp.where(theirs.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(action_key, logits).astype(jnp.int32)
            ours, *_ = env.step(ours, action, step_key)
            theirs = ref.step(theirs, action, step_key)
            return (ours, theirs), (mask, carry[1].legal_action_mask, carry[1].terminated)

        start = (env.reset(key), ref.init(key))
        return jax.lax.scan(body, start, jax.random.split(key, 200))[1]

    masks, legal, terminated = jax.device_get(run(jax.random.key(4)))
    live = np.cumsum(terminated) == 0
    np.testing.assert_array_equal(masks[live], legal[live])
    assert masks.dtype == np.bool_ and (~masks[live]).any()
    breakout = rollax.make("pgx:minatar-breakout")
    assert breakout.action_mask(breakout.reset(jax.random.key(0))).all()


@pytest.mark.slow
def test_cli_train_2048_masked(tmp_path):
    code = rollax.cli.main(["train", "--env", "pgx:2048", "--algo", "ppo", "--horizon", "200",
                            "--total-steps", "1024", "--num-envs", "8", "--num-steps", "64",
                            "--out", str(tmp_path / "run")])
    assert code == 0


def test_cli_train_runs(tmp_path):
    code = rollax.cli.main(["train", "--env", "pgx:minatar-breakout", "--total-steps", "1024",
                            "--num-envs", "8", "--num-steps", "64", "--out", str(tmp_path / "run")])
    assert code == 0


def test_2048_is_drawn_by_pgx_own_svg(capsys, tmp_path):
    # Pgx's picture of the board (its SVG, rasterised): a tile's fill darkens with its
    # exponent, empty cells share one light fill; each cell's fill (read off its upper-left
    # corner, clear of the number) is checked against the board Pgx holds
    pytest.importorskip("cairosvg")
    from helpers import gif_ends, run
    from rollax.envs.frames import frame_renderer

    env = rollax.make("pgx:2048")
    state, key = env.reset(jax.random.key(3)), jax.random.key(9)
    for action in [0, 1, 2, 3, 0, 1, 2, 3]:
        key, sub = jax.random.split(key)
        state, *_ = env.step(state, jnp.int32(action), sub)
    state = jax.device_get(state)
    picture = frame_renderer(env)(state)
    assert picture.shape == (250, 250, 3) and picture.dtype == np.uint8
    board = np.asarray(state.inner._board).reshape(4, 4)
    assert len(set(board.ravel().tolist()) - {0}) >= 3
    fill = np.array([[picture[35 + 50 * r, 35 + 50 * c, 0] for c in range(4)]
                     for r in range(4)], int)
    empty = fill[board == 0]
    assert (empty == empty[0]).all()
    for value in set(board.ravel().tolist()) - {0}:
        assert len(set(fill[board == value].tolist())) == 1
    order = sorted(set(board.ravel().tolist()))
    brightness = [fill[board == value][0] for value in order]
    assert brightness == sorted(brightness, reverse=True) and len(set(brightness)) == len(order)
    code, out, err = run(capsys, "render", "pgx:2048", "--out", tmp_path / "g.gif",
                         "--max-steps", "20", "--json")
    assert code == 0, err
    frames, first, last = gif_ends(tmp_path / "g.gif")
    assert frames == json.loads(out)["frames"] and first.shape == (250 + 18, 250, 3)
    assert not np.array_equal(first[:250], last[:250])

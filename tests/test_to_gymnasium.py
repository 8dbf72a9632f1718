"""``rollax.to_gymnasium``: Gymnasium's checker, bit-for-bit agreement with rollax's own step
under the documented key chain, same-step auto-reset of the vector environment, bad input."""

from __future__ import annotations

import functools
import importlib.util
import warnings

import gymnasium as gym
import jax
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import batch_space

import rollax
from rollax import gymnasium_export
from rollax.envs.base import step_with_key

IDS = ["CartPole-v1", "FrozenLake-v1", "Pendulum-v1"]


def _warnings_of(check, env) -> set[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(env)
    return {str(w.message) for w in caught}


def _actions(space: gym.Space, count: int, seed: int = 0) -> list:
    space.seed(seed)
    return [space.sample() for _ in range(count)]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes_with_no_warning_gymnasiums_own_env_lacks(env_id):
    ours = _warnings_of(lambda e: check_env(e, skip_render_check=True),
                        rollax.to_gymnasium(env_id))
    theirs = _warnings_of(lambda e: check_env(e, skip_render_check=True),
                          gym.make(env_id).unwrapped)
    assert ours <= theirs  # e.g. CartPole's infinite bounds, Pendulum's torque range


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_match_gymnasiums_own(env_id):
    ours, theirs = rollax.to_gymnasium(env_id), gym.make(env_id).unwrapped
    assert ours.observation_space == theirs.observation_space
    assert ours.action_space == theirs.action_space
    assert ours.observation_space.dtype == theirs.observation_space.dtype
    assert ours.action_space.dtype == theirs.action_space.dtype
    obs, info = ours.reset(seed=0)
    assert info == {}
    if env_id == "FrozenLake-v1":
        assert type(obs) is np.int64
    else:
        assert obs.dtype == np.float32 and obs.shape == ours.observation_space.shape


def _compiled(env):
    """rollax's own reset, step and observation, each jitted alone (eager float32 arithmetic
    may round differently from any compiled program, by an ulp)."""
    return (jax.jit(env.reset), jax.jit(functools.partial(step_with_key, env)),
            jax.jit(env.observation))


def _by_hand_one(env, seed, episodes):
    """rollax's own step under the documented chain: ``key, k = split(key)`` per reset and per
    step. ``episodes``: one list of actions per reset; returns one row list each."""
    reset, step, observation = _compiled(env)
    key = jax.random.key(seed)
    out = []
    for actions in episodes:
        key, reset_key = jax.random.split(key)
        state = reset(reset_key)
        rows = [(np.asarray(observation(state)), 0.0, False, False)]
        for action in actions:
            key, transition_key = jax.random.split(key)
            action = np.asarray(action, np.dtype(env.action_space.dtype))
            state, reward, term, trunc = step(state, action, transition_key)
            rows.append((np.asarray(observation(state)), float(reward), bool(term),
                         bool(trunc)))
        out.append(rows)
    return out


def _run_one(genv, seed, episodes):
    out = []
    for i, actions in enumerate(episodes):
        obs, _ = genv.reset(seed=seed) if i == 0 else genv.reset()
        rows = [(np.asarray(obs), 0.0, False, False)]
        rows += [(np.asarray(o), r, te, tr) for o, r, te, tr, _ in map(genv.step, actions)]
        out.append(rows)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_single_env_reproduces_rollax_step_bit_for_bit(env_id):
    genv = rollax.to_gymnasium(env_id, horizon=20)
    episodes = [_actions(genv.action_space, 25, s) for s in (1, 2)]  # past the horizon: absorbs
    expected = _by_hand_one(rollax.make(env_id, horizon=20), 5, episodes)
    got = _run_one(genv, 5, episodes)
    for exp_rows, got_rows in zip(expected, got):
        for (eo, er, ete, etr), (go, gr, gte, gtr) in zip(exp_rows, got_rows):
            np.testing.assert_array_equal(go, eo.astype(go.dtype))
            assert (gr, gte, gtr) == (er, ete, etr)
    assert any(row[2] or row[3] for rows in got for row in rows)  # an episode ended
    replay = _run_one(genv, 5, episodes)  # reset(seed=5) restarts the chain
    assert all(np.array_equal(a[0], b[0]) and a[1:] == b[1:]
               for x, y in zip(replay, got) for a, b in zip(x, y))


def test_single_step_compiled_once_whatever_the_action_type():
    genv = rollax.to_gymnasium("CartPole-v1", horizon=123)
    genv.reset(seed=0)
    genv.step(0)
    size = gymnasium_export._step_one._cache_size()
    for action in (1, np.int64(0), np.int32(1), np.array(0), np.uint8(1)):
        genv.step(action)
    assert gymnasium_export._step_one._cache_size() == size


def _by_hand_many(env, num_envs, seed, actions):
    """The vector chain by hand, one environment at a time: ``(obs, final_obs or None, reward,
    terminated, truncated)`` per step, each ``(N, ...)``."""
    reset, step, observation = _compiled(env)
    key = jax.random.key(seed)
    key, reset_key = jax.random.split(key)
    states = [reset(k) for k in jax.random.split(reset_key, num_envs)]
    rows = []
    for batch in actions:
        key, step_key = jax.random.split(key)
        reset_key, transition_key = jax.random.split(step_key)
        resets, transitions = (jax.random.split(k, num_envs) for k in (reset_key, transition_key))
        row = []
        for b in range(num_envs):
            action = np.asarray(batch[b], np.dtype(env.action_space.dtype))
            state, reward, term, trunc = step(states[b], action, transitions[b])
            final = np.asarray(observation(state)) if term or trunc else None
            states[b] = reset(resets[b]) if term or trunc else state
            row.append((np.asarray(observation(states[b])), final, float(reward),
                        bool(term), bool(trunc)))
        rows.append(row)
    return rows


# A step restarts its finished environments one program call each or all in one call
# (gymnasium_export.restart); each test below runs both ways, whatever the episodes' ends.
RESTART_PATHS = pytest.mark.parametrize("one_at_a_time", [0, 99], ids=["all-at-once", "one-each"])


@pytest.mark.slow
@RESTART_PATHS
@pytest.mark.parametrize(("env_id", "horizon"), [("CartPole-v1", 12), ("FrozenLake-v1", 4)])
def test_vector_env_is_rollax_step_with_same_step_autoreset(env_id, horizon, one_at_a_time,
                                                            monkeypatch):
    monkeypatch.setattr(gymnasium_export, "RESTART_ONE_AT_A_TIME", one_at_a_time)
    num_envs, steps = 3, 13
    venv = rollax.to_gymnasium(env_id, num_envs=num_envs, seed=0, horizon=horizon)
    actions = _actions(venv.action_space, steps, 4)
    expected = _by_hand_many(rollax.make(env_id, horizon=horizon), num_envs, 9, actions)
    venv.reset(seed=9)
    ended = truncated = 0
    for batch, row in zip(actions, expected):
        obs, reward, term, trunc, info = venv.step(batch)
        done = term | trunc
        assert reward.dtype == np.float64 and term.dtype == trunc.dtype == np.bool_
        assert not np.any(term & trunc)
        assert info.keys() == ({"final_obs", "_final_obs", "final_info", "_final_info"}
                               if done.any() else set())
        for b, (e_obs, e_final, e_reward, e_term, e_trunc) in enumerate(row):
            np.testing.assert_array_equal(obs[b], e_obs)  # a reset observation after an end
            assert (reward[b], term[b], trunc[b]) == (e_reward, e_term, e_trunc)
            if done[b]:
                assert info["_final_obs"][b] and info["_final_info"][b]
                np.testing.assert_array_equal(info["final_obs"][b], e_final)
            elif done.any():
                assert info["final_obs"][b] is None and not info["_final_obs"][b]
        ended, truncated = ended + int(done.sum()), truncated + int(trunc.sum())
    assert ended >= num_envs  # every environment ended at least once (horizon or goal/hole)
    if env_id == "CartPole-v1":  # random pushes keep the pole up for 12 steps: time limit
        assert truncated


def test_vector_env_keeps_terminated_and_truncated_apart():
    venv = rollax.to_gymnasium("CartPole-v1", num_envs=4, horizon=12)
    venv.reset(seed=0)
    push = np.ones(4, np.int64)  # always right: the pole falls within about 10 steps
    events = [venv.step(push)[2:] for _ in range(12)]
    term = np.array([e[0] for e in events])
    first = term.argmax(axis=0)
    assert term.any(axis=0).all() and not np.array([e[1] for e in events])[:first.min()].any()
    final = events[first[0]][2]["final_obs"][0]
    assert abs(final[2]) > 12 * 2 * np.pi / 360 or abs(final[0]) > 2.4  # a terminal state


@pytest.mark.slow
def test_vector_env_declares_gymnasiums_attributes_and_matches_sync_vector_env_layout():
    venv = rollax.to_gymnasium("FrozenLake-v1", num_envs=4, horizon=2)
    assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert venv.num_envs == 4
    single = rollax.to_gymnasium("FrozenLake-v1")
    assert venv.single_observation_space == single.observation_space
    assert venv.single_action_space == single.action_space
    assert venv.observation_space == batch_space(single.observation_space, 4)
    assert venv.action_space == batch_space(single.action_space, 4)
    sync = SyncVectorEnv([lambda: rollax.to_gymnasium("FrozenLake-v1", horizon=2)] * 4,
                         autoreset_mode=AutoresetMode.SAME_STEP)
    (ours, _), (theirs, _) = venv.reset(seed=0), sync.reset(seed=0)
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    action = np.zeros(4, np.int64)  # left: never the goal within 2 steps; truncated at step 2
    for _ in range(2):
        ours, theirs = venv.step(action), sync.step(action)
    for a, b in zip(ours[:4], theirs[:4]):
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
    assert ours[4].keys() == theirs[4].keys()
    for key in ("_final_obs", "_final_info"):
        np.testing.assert_array_equal(ours[4][key], theirs[4][key])
    assert ours[4]["final_info"] == theirs[4]["final_info"] == {}
    assert {type(x) for x in ours[4]["final_obs"]} == {type(x) for x in theirs[4]["final_obs"]}


def test_vector_env_same_seed_same_trajectory():
    def run(venv, seed):
        obs, _ = venv.reset(seed=seed)
        rows = [obs]
        for batch in _actions(venv.action_space, 30, 1):
            obs, reward, term, trunc, _ = venv.step(batch)
            rows += [obs, reward, term, trunc]
        return rows

    a = rollax.to_gymnasium("FrozenLake-v1", num_envs=3, horizon=4)
    first, again = run(a, 3), run(a, 3)
    other = run(rollax.to_gymnasium("FrozenLake-v1", num_envs=3, seed=99, horizon=4), 3)
    for x, y, z in zip(first, again, other):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)
    assert not all(np.array_equal(x, y) for x, y in zip(first, run(a, 4)))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: rollax.to_gymnasium("CartPole-v1", num_envs=0), "num_envs"),
    (lambda: rollax.to_gymnasium("CartPole-v1", num_envs=2.0), "num_envs"),
    (lambda: rollax.to_gymnasium("CartPole-v1", seed=-1), "seed"),
    (lambda: rollax.to_gymnasium(rollax.make("CartPole-v1"), horizon=5), "make_kwargs"),
    (lambda: rollax.to_gymnasium(3), "env_or_id"),
    (lambda: rollax.to_gymnasium("CartPole-v9"), "CartPole-v9"),
])
def test_bad_settings_raise_value_errors_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_actions_and_resets_raise_value_errors():
    genv = rollax.to_gymnasium("CartPole-v1")
    with pytest.raises(gym.error.ResetNeeded):
        genv.step(0)
    genv.reset(seed=0)
    for action, match in [(np.array([0, 1]), r"shape \(\)"), (2, r"\[0, 2\)"),
                          (0.5, "integer")]:
        with pytest.raises(ValueError, match=match):
            genv.step(action)
    with pytest.raises(ValueError, match="options"):
        genv.reset(options={"low": 0})
    pendulum = rollax.to_gymnasium("Pendulum-v1")
    pendulum.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(1,\)"):
        pendulum.step(np.zeros(2, np.float32))
    venv = rollax.to_gymnasium("CartPole-v1", num_envs=4)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        venv.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="seed must be one integer"):
        venv.reset(seed=[0, 1, 2, 3])


# --------------------------------------------------------------------------------------------
# Rendering, next-step auto-reset and Gymnasium's vector wrappers


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(render_mode="human"), r"^render_mode must be None or 'rgb_array', got 'human'$"),
    (dict(num_envs=2, render_mode="rgb_array"),
     r"^render_mode='rgb_array' applies to one environment \(num_envs=None\): record each"),
])
def test_a_render_mode_rollax_cannot_serve_is_refused_in_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rollax.to_gymnasium("corridor", **kwargs)
    assert rollax.to_gymnasium("CartPole-v1", num_envs=kwargs.get("num_envs"),
                               render_mode=None).render_mode is None


def test_an_environment_rollax_cannot_draw_is_refused_naming_those_it_can():
    with pytest.raises(ValueError, match=r"^render_mode='rgb_array': rollax cannot draw "
                                         r"'gymnax:Catch-bsuite' yet; it draws CartPole-v1, "):
        rollax.to_gymnasium("gymnax:Catch-bsuite", render_mode="rgb_array")


@pytest.mark.parametrize("num_envs", [None, 2])
def test_a_host_environment_is_refused_as_gymnasiums_own_already(num_envs):
    # gymnasium:<id> (and envpool:<id>) are Gymnasium's environments stepped from a compiled
    # program: there is no JAX environment to wrap (this once passed, then failed at reset)
    with pytest.raises(ValueError, match=r"^gymnasium:CartPole-v1 is stepped on the host: use "
                                         r"the environment itself \(gymnasium.make, "):
        rollax.to_gymnasium("gymnasium:CartPole-v1", num_envs=num_envs)
    with pytest.raises(ValueError, match=r"^gymnasium:CartPole-v1 is stepped on the host: "):
        rollax.to_gymnasium(rollax.make("gymnasium:CartPole-v1"), num_envs=num_envs)


@pytest.mark.skipif(importlib.util.find_spec("pygame") is not None,
                    reason="pygame installed (tests/extras/test_render.py draws with it)")
def test_classic_control_without_pygame_names_the_install_command():
    with pytest.raises(ValueError, match=r"^drawing 'CartPole-v1' needs pygame \(Gymnasium's "
                                         r"renderer\): `pip install 'rollax\[render\]'`$"):
        rollax.to_gymnasium("CartPole-v1", render_mode="rgb_array")


def test_rgb_array_frames_follow_the_state():
    env = rollax.to_gymnasium("corridor", render_mode="rgb_array")
    assert env.render_mode == "rgb_array"
    assert env.metadata["render_modes"] == ["rgb_array"] and env.metadata["render_fps"] == 30
    with pytest.raises(gym.error.ResetNeeded):
        env.render()
    env.reset(seed=0)
    first = env.render()
    assert first.shape == (48, 4 * 48, 3) and first.dtype == np.uint8
    blue = (first == (40, 90, 200)).all(-1)
    assert blue[:, :48].any() and not blue[:, 48:].any()  # the agent in the first cell
    env.step(1)  # right
    moved = (env.render() == (40, 90, 200)).all(-1)
    assert moved[:, 48:96].any() and not moved[:, :48].any()


@pytest.mark.parametrize("num_envs", [None, 2])
def test_render_warns_and_returns_none_as_gymnasiums_own_envs_without_a_mode(num_envs):
    env = rollax.to_gymnasium("CartPole-v1", num_envs=num_envs)
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode is None: render"):
        assert env.render() is None


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(num_envs=2, autoreset_mode=AutoresetMode.DISABLED), "autoreset_mode must be"),
    (dict(num_envs=2, autoreset_mode="Disabled"), "autoreset_mode must be"),
    (dict(num_envs=2, autoreset_mode="next-step"), "autoreset_mode must be"),
    (dict(autoreset_mode="NextStep"), "without num_envs"),
])
def test_bad_autoreset_modes_raise_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rollax.to_gymnasium("CartPole-v1", **kwargs)


def test_autoreset_mode_by_name_or_enum():
    for mode in (AutoresetMode.NEXT_STEP, "NextStep"):
        venv = rollax.to_gymnasium("CartPole-v1", num_envs=2, autoreset_mode=mode)
        assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    for mode in (None, AutoresetMode.SAME_STEP, "SameStep"):
        venv = rollax.to_gymnasium("CartPole-v1", num_envs=2, autoreset_mode=mode)
        assert venv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


def _by_hand_next_step(env, num_envs, seed, actions):
    """The next-step chain by hand, one environment at a time: ``(obs, reward, terminated,
    truncated)`` per step. An environment that ended in the previous step is restarted from
    ``env.reset(split(reset_key, N)[b])`` of this step, its action ignored, reward 0."""
    reset, step, observation = _compiled(env)
    key = jax.random.key(seed)
    key, reset_key = jax.random.split(key)
    states = [reset(k) for k in jax.random.split(reset_key, num_envs)]
    restart = [False] * num_envs
    rows = []
    for batch in actions:
        key, step_key = jax.random.split(key)
        reset_key, transition_key = jax.random.split(step_key)
        resets, transitions = (jax.random.split(k, num_envs) for k in (reset_key, transition_key))
        row = []
        for b in range(num_envs):
            if restart[b]:
                states[b] = reset(resets[b])
                reward, term, trunc = 0.0, False, False
            else:
                action = np.asarray(batch[b], np.dtype(env.action_space.dtype))
                states[b], reward, term, trunc = step(states[b], action, transitions[b])
            restart[b] = bool(term or trunc)
            row.append((np.asarray(observation(states[b])), float(reward), bool(term),
                        bool(trunc)))
        rows.append(row)
    return rows


@pytest.mark.slow
@RESTART_PATHS
@pytest.mark.parametrize(("env_id", "horizon"), [("CartPole-v1", 12), ("FrozenLake-v1", 4)])
def test_next_step_vector_env_is_rollax_step_with_next_step_autoreset(env_id, horizon,
                                                                      one_at_a_time,
                                                                      monkeypatch):
    monkeypatch.setattr(gymnasium_export, "RESTART_ONE_AT_A_TIME", one_at_a_time)
    num_envs, steps = 3, 14
    venv = rollax.to_gymnasium(env_id, num_envs=num_envs, horizon=horizon,
                               autoreset_mode=AutoresetMode.NEXT_STEP)
    actions = _actions(venv.action_space, steps, 4)
    expected = _by_hand_next_step(rollax.make(env_id, horizon=horizon), num_envs, 9, actions)
    venv.reset(seed=9)
    ended = restarted = 0
    previous_done = np.zeros(num_envs, bool)
    for batch, row in zip(actions, expected):
        obs, reward, term, trunc, info = venv.step(batch)
        assert info == {}
        assert reward.dtype == np.float64 and term.dtype == trunc.dtype == np.bool_
        for b, (e_obs, e_reward, e_term, e_trunc) in enumerate(row):
            np.testing.assert_array_equal(obs[b], e_obs)
            assert (reward[b], term[b], trunc[b]) == (e_reward, e_term, e_trunc)
        assert not np.any((term | trunc) & previous_done)  # a restart step is no event
        assert np.all(reward[previous_done] == 0)
        restarted += int(previous_done.sum())
        previous_done = term | trunc
        ended += int(previous_done.sum())
    assert ended >= num_envs and restarted >= num_envs


def test_next_step_layout_matches_sync_vector_env_next_step():
    def make():
        return rollax.to_gymnasium("FrozenLake-v1", horizon=2)

    venv = rollax.to_gymnasium("FrozenLake-v1", num_envs=4, horizon=2, autoreset_mode="NextStep")
    sync = SyncVectorEnv([make] * 4, autoreset_mode=AutoresetMode.NEXT_STEP)
    assert venv.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"]
    (ours, _), (theirs, _) = venv.reset(seed=0), sync.reset(seed=0)
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    action = np.zeros(4, np.int64)  # left: truncated at steps 2 and 5, restarted at step 3
    for t in range(5):
        ours, theirs = venv.step(action), sync.step(action)
        for a, b in zip(ours[:4], theirs[:4]):
            assert (a.dtype, a.shape) == (b.dtype, b.shape)
        for a, b in zip(ours[1:4], theirs[1:4]):  # rewards and events: the same schedule
            np.testing.assert_array_equal(a, b)
        assert ours[4] == theirs[4] == {}
        assert ours[3].all() == (t in (1, 4)) and ours[3].any() == (t in (1, 4))
        if t == 2:
            np.testing.assert_array_equal(ours[0], 0)  # FrozenLake starts in state 0


def _normalize_observation_by_hand(observations, epsilon=1e-8):
    """Gymnasium's running mean and variance (parallel Welford from count 1e-4, mean 0, var
    1), updated with each batch before it is normalised: float64 NumPy."""
    count, mean, var = 1e-4, np.zeros(observations[0].shape[1:]), np.ones(
        observations[0].shape[1:])
    out = []
    for batch in observations:
        b_mean, b_var, b_count = batch.mean(0), batch.var(0), batch.shape[0]
        delta, total = b_mean - mean, count + b_count
        mean = mean + delta * b_count / total
        var = (var * count + b_var * b_count + delta ** 2 * count * b_count / total) / total
        count = total
        out.append((batch - mean) / np.sqrt(var + epsilon))
    return out


def test_normalize_observation_on_the_next_step_vector_env():
    from gymnasium.wrappers.vector import NormalizeObservation

    def make():
        return rollax.to_gymnasium("CartPole-v1", num_envs=3, horizon=10,
                                   autoreset_mode=AutoresetMode.NEXT_STEP)

    raw, wrapped = make(), NormalizeObservation(make())
    actions = _actions(raw.action_space, 25, 2)
    seen = [raw.reset(seed=1)[0]] + [raw.step(a)[0] for a in actions]
    got = [wrapped.reset(seed=1)[0]] + [wrapped.step(a)[0] for a in actions]
    for want, have in zip(_normalize_observation_by_hand(seen), got):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)
    assert got[-1].dtype == np.float32 and np.abs(got[-1]).max() < 5


@pytest.mark.parametrize(("name", "wrap", "by_hand"), [
    ("TransformObservation", lambda e, w: w.TransformObservation(e, lambda o: 2 * o),
     lambda o: 2 * o),
    ("DtypeObservation", lambda e, w: w.DtypeObservation(e, np.float64),
     lambda o: o.astype(np.float64)),
    ("RescaleObservation", lambda e, w: w.RescaleObservation(e, np.float32(-1), np.float32(1)),
     lambda o: o / np.array([1, 1, 8], np.float32)),  # Pendulum's bounds: +-1, +-1, +-8
    ("FlattenObservation", lambda e, w: w.FlattenObservation(e), lambda o: o),
    ("VectorizeTransformObservation",
     lambda e, w: w.VectorizeTransformObservation(e, gym.wrappers.TransformObservation,
                                                  func=lambda o: o - 1, observation_space=None),
     lambda o: o - 1),
])
def test_observation_wrappers_on_the_next_step_vector_env(name, wrap, by_hand):
    from gymnasium.wrappers import vector

    def make():
        return rollax.to_gymnasium("Pendulum-v1", num_envs=2, horizon=3,
                                   autoreset_mode=AutoresetMode.NEXT_STEP)

    raw, wrapped = make(), wrap(make(), vector)
    actions = _actions(raw.action_space, 8, 1)  # two episodes end and restart
    seen = [raw.reset(seed=0)[0]] + [raw.step(a)[0] for a in actions]
    got = [wrapped.reset(seed=0)[0]] + [wrapped.step(a)[0] for a in actions]
    for o, g in zip(seen, got):
        np.testing.assert_allclose(g, by_hand(o), rtol=1e-6, atol=1e-7)
        assert wrapped.observation_space.contains(g) or "Transform" in name


def test_observation_wrappers_refuse_the_same_step_default_as_documented():
    """Gymnasium's observation wrappers transform ``obs`` but not ``info["final_obs"]``, so
    they assert next-step (or disabled) auto-reset: the documented reason to build the vector
    environment with ``autoreset_mode=NEXT_STEP`` for them."""
    from gymnasium.wrappers.vector import NormalizeObservation, TransformObservation

    for wrapper in (NormalizeObservation, lambda e: TransformObservation(e, lambda o: o)):
        with pytest.raises(AssertionError):
            wrapper(rollax.to_gymnasium("CartPole-v1", num_envs=2))


def _cartpole_episodes_by_hand(mode, num_envs, horizon, seed, actions):
    """(return, length) of every episode that ends, in order of its last step, counted from
    the vector environment's own outputs without any Gymnasium wrapper: CartPole's reward is
    1 per step, 0 on a next-step restart."""
    venv = rollax.to_gymnasium("CartPole-v1", num_envs=num_envs, horizon=horizon,
                               autoreset_mode=mode)
    venv.reset(seed=seed)
    length, restart, ended = np.zeros(num_envs, int), np.zeros(num_envs, bool), []
    for batch in actions:
        _, reward, term, trunc, _ = venv.step(batch)
        assert np.all(reward == np.where(restart, 0.0, 1.0))
        length = np.where(restart, 0, length + 1)
        done = term | trunc
        ended += [(float(length[b]), int(length[b])) for b in np.flatnonzero(done)]
        if mode == AutoresetMode.NEXT_STEP:
            restart = done
        else:
            length = np.where(done, 0, length)
    return ended


def _recorded_episodes(mode, num_envs, horizon, seed, actions):
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    env = RecordEpisodeStatistics(rollax.to_gymnasium(
        "CartPole-v1", num_envs=num_envs, horizon=horizon, autoreset_mode=mode))
    env.reset(seed=seed)
    got = []
    for batch in actions:
        *_, info = env.step(batch)
        if "episode" in info:
            got += [(float(info["episode"]["r"][b]), int(info["episode"]["l"][b]))
                    for b in np.flatnonzero(info["_episode"])]
    return got


def test_record_episode_statistics_counts_rollax_episodes_in_next_step_mode():
    num_envs, horizon = 3, 9
    actions = _actions(gym.spaces.MultiDiscrete([2] * num_envs), 30, 3)
    mode = AutoresetMode.NEXT_STEP
    expected = _cartpole_episodes_by_hand(mode, num_envs, horizon, 5, actions)
    assert _recorded_episodes(mode, num_envs, horizon, 5, actions) == expected
    assert len(expected) >= 2 * num_envs and all(n <= horizon for _, n in expected)


def test_record_episode_statistics_in_same_step_mode_is_gymnasiums_known_miscount():
    """Gymnasium 1.3's vector ``RecordEpisodeStatistics`` treats the step after an episode's
    end as a restart whatever the mode, so under same-step auto-reset (its own
    ``SyncVectorEnv``'s too) every episode after an environment's first loses its first step
    (Farama-Foundation/Gymnasium#1624): the documented reason to use next-step with it. A
    Gymnasium with the fix counts every episode right."""
    num_envs, horizon = 3, 9
    actions = _actions(gym.spaces.MultiDiscrete([2] * num_envs), 30, 3)
    mode = AutoresetMode.SAME_STEP
    expected = _cartpole_episodes_by_hand(mode, num_envs, horizon, 5, actions)
    got = _recorded_episodes(mode, num_envs, horizon, 5, actions)
    assert len(got) == len(expected) >= 2 * num_envs
    if got != expected:
        firsts = num_envs  # the horizon ends every first episode in the same step
        assert got[:firsts] == expected[:firsts]
        assert [(r + 1, n + 1) for r, n in got[firsts:]] == expected[firsts:]


@pytest.mark.optimized
def test_normalize_reward_and_action_wrappers_on_the_vector_env():
    from gymnasium.wrappers.vector import (
        ClipAction,
        ClipReward,
        NormalizeReward,
        RescaleAction,
        TransformReward,
    )

    actions = [np.full((2, 1), a, np.float32) for a in (5.0, -7.0, 0.5, 3.0)]

    def rewards(env):
        env.reset(seed=0)
        return np.array([env.step(a)[1] for a in actions])

    def pendulum(**kw):
        return rollax.to_gymnasium("Pendulum-v1", num_envs=2, **kw)

    clipped = np.clip(np.concatenate(actions), -2.0, 2.0).reshape(len(actions), 2, 1)
    by_hand = pendulum()
    by_hand.reset(seed=0)
    expected = np.array([by_hand.step(a)[1] for a in clipped])
    for mode in AUTORESET:
        np.testing.assert_array_equal(rewards(ClipAction(pendulum(autoreset_mode=mode))),
                                      expected)
        # RescaleAction maps [-1, 1] onto the torque range [-2, 2]: a / 2 is a
        rescaled = RescaleAction(pendulum(autoreset_mode=mode), np.float32(-1),
                                 np.float32(1))
        rescaled.reset(seed=0)
        np.testing.assert_allclose(
            [rescaled.step(np.clip(a, -2, 2) / 2)[1] for a in actions], expected, rtol=1e-6)
        np.testing.assert_array_equal(rewards(ClipReward(pendulum(autoreset_mode=mode), -1, 0)),
                                      np.clip(rewards(pendulum()), -1, 0))
        np.testing.assert_array_equal(
            rewards(TransformReward(pendulum(autoreset_mode=mode), lambda r: 2 * r)),
            2 * rewards(pendulum()))
        normalized = rewards(NormalizeReward(pendulum(autoreset_mode=mode)))
        raw = rewards(pendulum())
        assert np.all(np.sign(normalized) == np.sign(raw)) and not np.allclose(normalized, raw)


AUTORESET = (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP)


def test_dict_info_to_list_on_the_same_step_vector_env():
    from gymnasium.wrappers.vector import DictInfoToList

    def make():
        return rollax.to_gymnasium("FrozenLake-v1", num_envs=3, horizon=2)

    raw, wrapped = make(), DictInfoToList(make())
    raw.reset(seed=0)
    assert wrapped.reset(seed=0)[1] == [{}, {}, {}]
    for _ in range(2):  # left twice: every environment truncated at step 2
        action = np.zeros(3, np.int64)
        info, infos = raw.step(action)[4], wrapped.step(action)[4]
    assert [sorted(i) for i in infos] == [["final_info", "final_obs"]] * 3
    assert [i["final_obs"] for i in infos] == list(info["final_obs"])


@pytest.mark.parametrize("layout", ["make", "tuple_obs"])
def test_dict_and_tuple_observations_export_and_pass_gymnasiums_checker(layout):
    """A Dict / Tuple observation becomes gymnasium.spaces.Dict / Tuple of NumPy leaves
    (tests/custom_envs/lookout.py): Gymnasium's check_env passes without a warning, and the
    vector environment's observations and final observations lie in its spaces."""
    from custom_envs import lookout

    rollax_env = getattr(lookout, layout)()
    env = rollax.to_gymnasium(rollax_env)
    assert _warnings_of(lambda e: check_env(e, skip_render_check=True), env) == set()
    space = env.observation_space
    if layout == "make":
        assert isinstance(space, gym.spaces.Dict) and list(space.spaces) == ["cue", "grid",
                                                                             "reading"]
        assert space["cue"] == gym.spaces.Discrete(2)
        assert space["grid"].shape == (5, 5, 1) and space["grid"].dtype == np.float32
    else:
        assert isinstance(space, gym.spaces.Tuple) and isinstance(space[1], gym.spaces.Tuple)
    obs, _ = env.reset(seed=3)
    assert space.contains(obs)
    state = rollax_env.reset(jax.random.key(0))  # the same layout as rollax's own observation
    assert jax.tree.structure(jax.tree.map(np.asarray, rollax_env.observation(state))) == \
        jax.tree.structure(obs)
    envs = rollax.to_gymnasium(rollax_env, num_envs=3)
    obs, _ = envs.reset(seed=0)
    assert envs.observation_space.contains(obs)
    for _ in range(rollax_env.horizon):
        obs, _, _terminated, truncated, info = envs.step(envs.action_space.sample())
    assert envs.observation_space.contains(obs) and truncated.all()
    assert all(envs.single_observation_space.contains(o) for o in info["final_obs"])

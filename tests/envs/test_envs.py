"""Environment interface contracts: the corridor by hand, absorbing states, the registry."""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.envs.corridor import Corridor, CorridorState


def state(position, elapsed=0, done=False):
    return CorridorState(jnp.int32(position), jnp.int32(elapsed), jnp.bool_(done))


@pytest.mark.parametrize("variant", [lambda f: f, jax.jit], ids=["eager", "jit"])
@pytest.mark.parametrize(
    "position, elapsed, action, expected",
    [  # (next position, reward, terminated, truncated)
        (0, 0, 0, (0, -0.01, False, False)),   # clipped at 0
        (0, 0, 1, (1, -0.01, False, False)),
        (2, 3, 1, (3, 1.0, True, False)),      # reaching the goal
        (1, 7, 0, (0, -0.01, False, True)),    # the 8th live step truncates
        (2, 7, 1, (3, 1.0, True, False)),      # the goal on the last step terminates instead
    ],
)
def test_corridor_step_by_hand(variant, position, elapsed, action, expected):
    env = Corridor(horizon=8)
    nxt, reward, term, trunc = variant(env.step)(state(position, elapsed), jnp.int32(action))
    pos, r, t, tr = expected
    assert int(nxt.position) == pos and bool(term) == t and bool(trunc) == tr
    np.testing.assert_allclose(reward, r, rtol=1e-6)
    assert reward.dtype == jnp.float32
    assert int(nxt.elapsed) == elapsed + 1 and bool(nxt.done) == (t or tr)


def test_finished_states_absorb():
    env = Corridor()
    for finished in (state(3, 2, True), state(0, 8, True)):
        for action in (0, 1):
            nxt, reward, term, trunc = env.step(finished, jnp.int32(action))
            assert all(bool(jnp.all(a == b)) for a, b in zip(nxt, finished))
            assert float(reward) == 0.0 and not bool(term) and not bool(trunc)


def test_reset_is_uniform_over_zero_and_one():
    env = Corridor()
    keys = jax.random.split(jax.random.key(0), 4000)
    starts = jax.vmap(env.reset)(keys)
    expected = jax.vmap(lambda k: jax.random.randint(k, (), 0, 2))(keys)
    np.testing.assert_array_equal(starts.position, expected)
    assert abs(float(starts.position.mean()) - 0.5) < 0.03
    assert not starts.done.any() and (starts.elapsed == 0).all()


def test_spaces_and_observation():
    env = rollax.make("corridor", horizon=5)
    assert env.horizon == 5
    assert env.observation_space.n == 4 and env.action_space.n == 2
    s = env.reset(jax.random.key(1))
    assert bool(env.observation_space.contains(env.observation(s)))
    assert not bool(env.action_space.contains(jnp.int32(2)))
    assert bool(rollax.Box(-1.0, 1.0, (2,)).contains(jnp.zeros(2)))
    assert not bool(rollax.Box(-1.0, 1.0, (2,)).contains(jnp.full(2, 3.0)))
    assert not bool(rollax.Box(-1.0, 1.0, (2,)).contains(jnp.zeros(3)))  # wrong shape
    assert not bool(env.action_space.contains(jnp.float32(1.0)))        # wrong dtype


def test_registry():
    assert {"corridor", "FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4",
            "CliffWalking-v1"} <= set(rollax.registered())
    with pytest.raises(ValueError, match="did you mean FrozenLake-v1"):
        rollax.make("FrozenLake-v2")
    with pytest.raises(ValueError, match="already registered"):
        rollax.register("corridor", Corridor)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="horizon must be a positive integer"):
            rollax.make("corridor", horizon=bad)


def test_tabular_env_events_and_absorbing():
    env = rollax.make("FrozenLake-v1", is_slippery=False)
    s = env.reset(jax.random.key(0))
    assert int(s.state) == 0
    key = jax.random.key(1)
    # right, right, down, down, down, right reaches the goal (15) in 6 steps
    for t, a in enumerate([2, 2, 1, 1, 1, 2]):
        s, r, term, trunc = env.step(s, jnp.int32(a), jax.random.fold_in(key, t))
    assert int(s.state) == 15 and float(r) == 1.0 and bool(term) and not bool(trunc)
    s2, r2, term2, trunc2 = env.step(s, jnp.int32(0), key)
    assert int(s2.state) == 15 and float(r2) == 0.0 and not bool(term2) and not bool(trunc2)


class CounterState(NamedTuple):
    value: jax.Array
    elapsed: jax.Array
    done: jax.Array


@dataclasses.dataclass(frozen=True)
class Counter(rollax.Environment):
    """Written with ``transition`` only: adds the action, pays it, terminates on reaching 5."""

    horizon: int = 3

    def reset(self, key):
        return CounterState(jnp.int32(0), jnp.int32(0), jnp.bool_(False))

    def transition(self, state, action, key):
        value = state.value + action
        return state._replace(value=value), action.astype(jnp.float32), value >= 5

    def observation(self, state):
        return state.value

    observation_space = property(lambda self: rollax.Discrete(10))
    action_space = property(lambda self: rollax.Discrete(3))


@pytest.mark.parametrize("variant", [lambda f: f, jax.jit], ids=["eager", "jit"])
def test_transition_only_environment_gets_the_ending_rules(variant):
    env = Counter(horizon=3)
    step = variant(env.step)
    # actions 1, 1, 1: the third live step reaches the horizon without terminating
    rows, s = [], env.reset(None)
    for action in (1, 1, 1, 2):
        s, r, term, trunc = step(s, jnp.int32(action))
        rows.append((int(s.value), int(s.elapsed), bool(s.done), float(r), bool(term),
                     bool(trunc)))
        assert r.dtype == jnp.float32 and term.dtype == trunc.dtype == jnp.bool_
    assert rows == [(1, 1, False, 1.0, False, False),
                    (2, 2, False, 1.0, False, False),
                    (3, 3, True, 1.0, False, True),    # truncated at elapsed == horizon
                    (3, 3, True, 0.0, False, False)]   # absorbed: unchanged, no reward or event
    # 2 then 2 then 1 terminates on the last allowed step: terminated, not truncated
    s = env.reset(None)
    for action in (2, 2):
        s, *_ = step(s, jnp.int32(action))
    s, r, term, trunc = step(s, jnp.int32(1))
    assert (int(s.value), int(s.elapsed), bool(s.done)) == (5, 3, True)
    assert float(r) == 1.0 and bool(term) and not bool(trunc)
    nxt, r, term, trunc = step(s, jnp.int32(2))
    assert all(bool(a == b) for a, b in zip(nxt, s))
    assert float(r) == 0.0 and not bool(term) and not bool(trunc)


def test_stochastic_environment_needs_a_key():
    env = rollax.make("FrozenLake-v1")
    with pytest.raises(ValueError, match="needs a key"):
        env.step(env.reset(jax.random.key(0)), jnp.int32(0))

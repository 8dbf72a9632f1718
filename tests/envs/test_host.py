"""Gymnasium environments stepped on the host (``gymnasium:<id>``, rollax.envs.host), checked
against Gymnasium's own environments stepped by hand in plain Python loops."""

import dataclasses
import json

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from helpers import assert_gymnasium_rows, gymnasium_rows, run, seed_of, train_json
from rollax.collect import collect_autoreset, episode_returns, reset_batch
from rollax.contracts import HOST_CHECKS
from rollax.contracts.probe import RandomPolicy
from rollax.envs.base import space_leaves
from rollax.envs.host import HostEnvironment, HostState, is_host

B, T = 3, 40


@pytest.fixture(scope="module")
def cartpole():
    return rollax.make("gymnasium:CartPole-v1", horizon=15)


@pytest.fixture(scope="module")
def cartpole_net():
    net = rollax.MLPActorCritic(observation_size=4, num_actions=2, hidden=(8,))
    return net, net.init(jax.random.key(0))


def test_spaces_and_step_limit_come_from_gymnasium(cartpole):
    assert is_host(cartpole) and cartpole.horizon == 15
    assert cartpole.action_space == rollax.Discrete(2)
    assert cartpole.observation_space.shape == (4,)
    np.testing.assert_allclose(cartpole.observation_space.high[[0, 2]], [4.8, 0.41887903])
    assert rollax.make("gymnasium:CartPole-v1").horizon == 500
    assert rollax.make("gymnasium:CartPole-v1") is rollax.make("gymnasium:CartPole-v1")


def test_collected_rows_are_gymnasiums_with_true_final_observations(cartpole, cartpole_net):
    """Every row as Gymnasium gives it by hand: the episode's last observation where one ended
    (terminated or truncated at the horizon of 15, apart), the next row already the new
    episode's first; every cell live."""
    net, params = cartpole_net
    state = reset_batch(cartpole, jax.random.key(1), B)
    assert isinstance(state, HostState)
    state, traj = collect_autoreset(cartpole, net, params, state, jax.random.key(2), T)
    assert traj.truncated.any() and traj.terminated.any()  # both endings are covered
    assert traj.active.all() and traj.reward.dtype == jnp.float32
    assert_gymnasium_rows(traj, gymnasium_rows("CartPole-v1", seed_of(jax.random.key(1)),
                              np.asarray(traj.action), horizon=15))
    # it goes on from where it stopped
    _, more = collect_autoreset(cartpole, net, params, state, jax.random.key(3), 2)
    np.testing.assert_array_equal(more.observation[0], state.observation)


def test_box_actions_are_clipped_on_the_host_and_kept_as_sampled():
    env = rollax.make("gymnasium:Pendulum-v1")
    net = rollax.MLPActorCritic(observation_size=3, action_size=1, hidden=(8,),
                                init_log_std=1.5)
    params = net.init(jax.random.key(0))
    state = reset_batch(env, jax.random.key(4), 2)
    _, traj = collect_autoreset(env, net, params, state, jax.random.key(5), 10)
    actions = np.asarray(traj.action)
    assert np.abs(actions).max() > 2.0  # some sampled actions are outside [-2, 2]
    assert_gymnasium_rows(traj, gymnasium_rows("Pendulum-v1", seed_of(jax.random.key(4)), actions,
                              clip=(-2.0, 2.0)))


def test_lanes_under_vmap_are_pools_of_their_own(cartpole, cartpole_net):
    net, params = cartpole_net
    keys = jax.random.split(jax.random.key(6), 2)

    def lane(key):
        reset_key, collect_key = jax.random.split(key)
        state = reset_batch(cartpole, reset_key, B)
        return collect_autoreset(cartpole, net, params, state, collect_key, 12)[1]

    both = jax.jit(jax.vmap(lane))(keys)
    for i in range(2):
        alone = lane(keys[i])
        for name in ("observation", "action", "reward", "terminated", "truncated",
                     "next_observation"):  # what the environments did: exactly
            np.testing.assert_array_equal(getattr(alone, name), getattr(both, name)[i])
        # the policy's log-probabilities come from two programs (one vmapped): to rounding
        np.testing.assert_allclose(alone.log_prob, both.log_prob[i], rtol=1e-6)


def test_evaluation_sums_each_first_episode(cartpole, cartpole_net):
    """episode_returns on a host environment: its own pool, seeded from the reset stream, the
    first episode of each environment only (by hand: greedy actions of the same network)."""
    net, params = cartpole_net
    key = jax.random.key(7)
    pools = set(cartpole.pools)
    returns = episode_returns(cartpole, rollax.GreedyPolicy(net), params, key, 4, 15)
    seed = seed_of(jax.random.split(key)[0])  # the reset stream of split_key
    act = jax.jit(lambda o: rollax.GreedyPolicy(net).sample(params, o, jax.random.key(0))[0])
    expected = []
    for b in range(4):
        env = gymnasium.make("CartPole-v1", max_episode_steps=15)
        obs, total, done = env.reset(seed=seed + b)[0], 0.0, False
        while not done:
            obs, reward, term, trunc, _ = env.step(int(act(obs)))
            total, done = total + reward, term or trunc
        expected.append(total)
    np.testing.assert_array_equal(returns, expected)
    assert set(cartpole.pools) == pools  # the evaluation's pool is closed


@dataclasses.dataclass(frozen=True)
class CountingGreedy:
    """A greedy policy that counts the steps it is asked for (one host callback per call)."""

    inner: rollax.GreedyPolicy
    calls: list = dataclasses.field(default_factory=list, hash=False, compare=False)

    def sample(self, params, observation, key):
        jax.debug.callback(lambda: self.calls.append(1))
        return self.inner.sample(params, observation, key)


def test_evaluation_stops_when_its_episodes_have_ended(cartpole, cartpole_net):
    """A budget of 1,000 steps on episodes cut at 15: the loop ends with the episodes (at most
    15 policy steps per environment, not 1,000), the returns the same; lanes under ``vmap``
    each return what they return alone."""
    net, params = cartpole_net
    policy = CountingGreedy(rollax.GreedyPolicy(net))
    keys = jax.random.split(jax.random.key(9), 2)
    alone = [episode_returns(cartpole, policy, params, k, 4, 15) for k in keys]
    policy.calls.clear()
    long = episode_returns(cartpole, policy, params, keys[0], 4, 1_000)
    np.testing.assert_array_equal(long, alone[0])
    assert 0 < len(policy.calls) <= 4 * 15
    both = jax.vmap(lambda k: episode_returns(cartpole, policy, params, k, 4, 1_000))(keys)
    np.testing.assert_array_equal(both, np.stack(alone))


@pytest.mark.slow
def test_ppo_trains_from_the_command_line_with_seeds_and_resumes(capsys, tmp_path):
    """Two lanes, checkpoints, a resume that restarts the episodes in flight (fresh pools) and
    keeps every parameter: the run reaches its longer budget."""
    out = tmp_path / "run"
    first = train_json(capsys, "--env", "gymnasium:CartPole-v1", "--seeds", "2",
                       "--total-steps", "2048", "--num-envs", "4", "--num-steps", "64",
                       "--checkpoint-every", "2", "--eval-episodes", "4", "--out", out)
    assert first["env_steps"] == 2048
    again = train_json(capsys, "--resume", out, "--total-steps", "3072")
    assert again["env_steps"] == 3072
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows if r["seed"] == 0] == list(range(13))


class LosesFinalObservations(HostEnvironment):
    """A planted bug: the step hands on the new episode's first observation as the final."""

    def _step(self, packed):
        out = super()._step(packed)
        size = self._size
        out[:, size:2 * size] = out[:, :size]
        return out


class SwapsEndings(HostEnvironment):
    """A planted bug: a time-limit truncation recorded as a termination."""

    def _step(self, packed):
        out = super()._step(packed)
        out[:, -2] = np.maximum(out[:, -2], out[:, -1])
        return out


def test_check_host_env_passes_on_every_kind_of_host_environment(capsys):
    """``check_host_env`` and ``rollax check-env`` on Gymnasium's CartPole (both endings),
    Pendulum (Box actions clipped) and the Dict-observed walk: every check passes."""
    for name, horizon in (("gymnasium:CartPole-v1", 15), ("gymnasium:Pendulum-v1", 12),
                          ("custom_envs.gym_walk:make_dict", 5)):
        report = rollax.check_host_env(rollax.make(name, horizon=horizon), num_steps=30)
        assert report.ok and report.names == HOST_CHECKS, report
    code, out, _ = run(capsys, "check-env", "gymnasium:CartPole-v1", "--num-steps", "20")
    assert code == 0 and "host_rows" in out and "failed" not in out


@pytest.mark.parametrize("bug, what", [
    (LosesFinalObservations, "host_rows: failed: next_observation differs from the pool's: "
                             "step 14"),
    (SwapsEndings, "host_rows: failed: terminated differs from the pool's: step 14"),
])
def test_check_host_env_finds_planted_bugs(bug, what):
    """Each planted bug fails ``host_rows`` at the first episode cut at the horizon of 15
    (step 14), the other checks still passing."""
    env = bug.build("planted", lambda: gymnasium.make("CartPole-v1", max_episode_steps=15))
    report = rollax.check_host_env(env, batch_size=2, num_steps=20, seed=3)
    assert not report.ok
    assert [r.name for r in report.failures] == ["host_rows"]
    assert report["host_rows"].line().startswith(what)


def test_what_a_host_environment_cannot_do(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--env", "gymnasium:CartPole-v1", "--algo", "grpo",
                       "--out", tmp_path / "a")
    assert code == 2 and "is stepped on the host" in err and "with PPO or A2C" in err
    code, _, err = run(capsys, "train", "--env", "gymnasium:CartPole-v1", "--devices", "2",
                       "--out", tmp_path / "b")
    assert code == 2 and "stepped on the host" in err
    with pytest.raises(ValueError, match="did you mean gymnasium:CartPole-v1"):
        rollax.make("gymnasium:CartPole-v9")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # the absorbing collector (this once failed with an AttributeError): pointed to the
    # same-step one, which takes host environments
    env = rollax.make("gymnasium:CartPole-v1")
    policy = RandomPolicy.for_space(env.action_space)
    with pytest.raises(ValueError, match=r"^env gymnasium:CartPole-v1 is stepped on the host, "
                                         r"whose environments reset within the step that ends "
                                         r"them: collect it with collect_autoreset\("):
        rollax.collect(env, policy, None, jax.random.key(0), 4, 8)
    _, traj = rollax.collect_autoreset(env, policy, None,
                                       rollax.reset_batch(env, jax.random.key(0), 4),
                                       jax.random.key(1), 8)
    assert traj.reward.shape == (8, 4) and traj.active.all()


def _refuses_this_mujoco():
    raise ImportError("`Old-v4` is only supported on `mujoco<3`, for more information ...")


def test_an_environment_gymnasium_cannot_build_here_is_one_line(capsys, tmp_path):
    """Gymnasium refuses some registered ids at construction (Pusher-v4 on mujoco>=3, with an
    ImportError): rollax says so in one line, exit 2, nothing written."""
    gymnasium.register("RollaxOldOnly-v4", entry_point=_refuses_this_mujoco)
    try:
        with pytest.raises(ValueError, match="gymnasium:RollaxOldOnly-v4 cannot be built with "
                           "the packages installed here: `Old-v4` is only supported on"):
            rollax.make("gymnasium:RollaxOldOnly-v4")
        code, _, err = run(capsys, "train", "--env", "gymnasium:RollaxOldOnly-v4",
                           "--out", tmp_path / "run")
        assert code == 2 and len(err.strip().splitlines()) == 1 and "mujoco<3" in err
        assert not (tmp_path / "run").exists()
    finally:
        del gymnasium.registry["RollaxOldOnly-v4"]


def test_dict_and_tuple_observations_keep_their_leaves(cartpole_net):
    """Gymnasium's ``Dict``/``Tuple`` observations as rollax's (tests/custom_envs/gym_walk.py's
    DictWalk): each leaf its own space, shape and dtype; the recorded rows, next observations
    included (the true final one where an episode ended), equal Gymnasium's own environments
    stepped by hand."""
    from custom_envs.gym_walk import make_dict

    env = rollax.make("custom_envs.gym_walk:make_dict", horizon=4)
    space = env.observation_space
    assert isinstance(space, rollax.Dict) and env.raw_observation_shape is None
    assert [(path, type(s).__name__, s.shape) for path, s in space_leaves(space)] == [
        ("['row']", "Box", (7,)), ("['where'][0]", "Discrete", ()),
        ("['where'][1]", "Box", (1, 2))]
    state = reset_batch(env, jax.random.key(11), 3)
    T = 10
    actions = np.asarray(jax.random.bernoulli(jax.random.key(12), 0.7, (T, 3)), np.int32)
    rows = []
    for t in range(T):
        state, out = env.step_batch(state, jnp.asarray(actions[t]))
        rows.append(out)
    assert any(np.asarray(r.truncated).any() for r in rows)
    assert any(np.asarray(r.terminated).any() for r in rows)
    seed = seed_of(jax.random.key(11))
    for b in range(3):
        gym_env = make_dict(horizon=4)
        obs = gym_env.reset(seed=seed + b)[0]
        for t in range(T):
            nxt, reward, term, trunc, _ = gym_env.step(int(actions[t, b]))
            out = jax.tree.map(lambda x, b=b: np.asarray(x)[b], rows[t])
            np.testing.assert_array_equal(out.final_observation["row"], nxt["row"])
            assert int(out.final_observation["where"][0]) == nxt["where"][0]
            assert out.final_observation["where"][0].dtype == np.int32
            np.testing.assert_array_equal(out.final_observation["where"][1], nxt["where"][1])
            assert out.reward == np.float32(reward) and bool(out.terminated) == term
            obs = gym_env.reset()[0] if term or trunc else nxt
            np.testing.assert_array_equal(out.observation["row"], obs["row"])
            assert int(out.observation["where"][0]) == obs["where"][0]


@pytest.mark.slow
def test_a_users_gymnasium_factory_trains_from_the_command_line(capsys, tmp_path):
    """``package.module:factory`` returning a ``gymnasium.Env``: a host environment of the
    factory's environments, cut at ``--horizon`` by Gymnasium's TimeLimit; PPO finds the best
    return, 1 - 0.1 * 2 = 0.8 (tests/custom_envs/gym_walk.py)."""
    env = rollax.make("custom_envs.gym_walk:make", horizon=20)
    assert is_host(env) and env.horizon == 20 and env.action_space == rollax.Discrete(2)
    assert rollax.make("custom_envs.gym_walk:make", horizon=20) is env
    # a factory without a horizon: Gymnasium's TimeLimit cuts its episodes
    unlimited = rollax.make("custom_envs.gym_walk:make_unlimited", horizon=3)
    assert unlimited.horizon == 3
    state = reset_batch(unlimited, jax.random.key(0), 2)
    net = rollax.MLPActorCritic(observation_size=7, num_actions=2, hidden=(4,))
    _, traj = collect_autoreset(unlimited, net, net.init(jax.random.key(1)), state,
                                jax.random.key(2), 3)
    assert not traj.truncated[:2].any()
    assert (traj.truncated[2] | traj.terminated[2]).all()
    # three steps right reach the edge on the last allowed step: Gymnasium reports both
    # endings there, rollax terminated only
    state = reset_batch(unlimited, jax.random.key(3), 2)
    for _ in range(3):
        state, out = unlimited.step_batch(state, jnp.ones(2, jnp.int32))
    assert out.terminated.all() and not out.truncated.any()
    summary = train_json(capsys, "--env", "custom_envs.gym_walk:make", "--horizon", "20",
                         "--total-steps", "4096", "--num-envs", "4", "--num-steps", "32",
                         "--lr", "0.003", "--eval-episodes", "4", "--out", tmp_path / "run")
    assert summary["eval_return_mean"] == pytest.approx(0.8)


@pytest.mark.slow
def test_a_dict_observation_environment_trains_and_evaluates(capsys, tmp_path):
    """PPO from the command line on the Dict-observed walk (its leaves encoded and
    concatenated, as for a JAX environment's ``Dict``): the best return, 0.8; ``rollax eval``
    and ``load_run`` read the run back."""
    summary = train_json(capsys, "--env", "custom_envs.gym_walk:make_dict", "--horizon", "20",
                         "--total-steps", "4096", "--num-envs", "4", "--num-steps", "32",
                         "--lr", "0.003", "--eval-episodes", "4", "--out", tmp_path / "run")
    assert summary["eval_return_mean"] == pytest.approx(0.8)
    code, out, _ = run(capsys, "eval", tmp_path / "run", "--episodes", "3", "--json")
    assert code == 0 and json.loads(out)["aggregate"]["mean"] == pytest.approx(0.8)
    loaded = rollax.load_run(tmp_path / "run")
    obs = {"row": jnp.eye(7)[3], "where": (jnp.int32(3), jnp.array([[3.0, 3.0]]))}
    assert int(loaded.act(obs)) == 1  # right, toward the reward

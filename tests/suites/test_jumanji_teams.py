"""Jumanji's teams (``docs/contract.md §9``; needs ``pip install rollax[jumanji]``):
LevelBasedForaging-v0, Connector-v3 and SearchAndRescue-v0 with an agent axis. Each agent's
observation row is its own fields and the shared ones, its rewards are Jumanji's own, step for
step; ``check-env`` passes; the sampled actions honour each agent's mask; ``rollax train``
trains each with ``--seeds`` and resumes bit for bit; and PPO's team on LevelBasedForaging
collects far more food than random legal play."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jumanji = pytest.importorskip("jumanji")

import rollax  # noqa: E402
import rollax.cli  # noqa: E402
from helpers import train_json  # noqa: E402
from rollax.algos import ppo  # noqa: E402
from rollax.algos.base import make_train  # noqa: E402
from rollax.collect import collect, episode_returns  # noqa: E402
from rollax.distributions import Categorical  # noqa: E402
from rollax.envs.agents import is_team  # noqa: E402
from rollax.envs.base import Box, MultiDiscrete  # noqa: E402
from rollax.nets.team import TeamActorCritic  # noqa: E402

TEAMS = {  # id: (agents, observation, action space, horizon)
    "LevelBasedForaging-v0": (2, (2, 18), MultiDiscrete((6, 6)), 100),
    "Connector-v3": (10, (10, 105), MultiDiscrete((5,) * 10), 50),
    "SearchAndRescue-v0": (2, (2, 387), None, 400),
}


@pytest.fixture(scope="module", autouse=True)
def _suite_rank_promotion():
    """LevelBasedForaging's and SearchAndRescue's steps broadcast ranks implicitly; rollax's
    conftest makes that an error for its own code."""
    with jax.numpy_rank_promotion("allow"):
        yield


@pytest.mark.parametrize("name", list(TEAMS))
def test_the_teams_spaces(name):
    agents, observation, action, horizon = TEAMS[name]
    env = rollax.make(f"jumanji:{name}")
    assert is_team(env) and env.num_agents == agents and env.horizon == horizon
    assert env.observation_space.shape == observation
    if action is None:
        assert isinstance(env.action_space, Box) and env.action_space.shape == (2, 2)
        assert env.action_mask(env.reset(jax.random.key(0))) is None
    else:
        assert env.action_space == action
    assert not is_team(rollax.make("jumanji:Cleaner-v0"))  # a reward shared by its agents


def test_each_agent_sees_its_own_fields_then_the_shared_ones():
    lbf = rollax.make("jumanji:LevelBasedForaging-v0")
    state = lbf.reset(jax.random.key(3))
    view, mask = np.asarray(state.obs.agents_view), np.asarray(state.obs.action_mask)
    for i in range(2):
        np.testing.assert_array_equal(lbf.observation(state)[i],
                                      np.concatenate([view[i].ravel(), mask[i]]))
    connector = rollax.make("jumanji:Connector-v3")
    state = connector.reset(jax.random.key(3))
    grid, mask = np.asarray(state.obs.grid), np.asarray(state.obs.action_mask)
    for i in (0, 9):
        np.testing.assert_array_equal(connector.observation(state)[i],
                                      np.concatenate([grid.ravel(), mask[i]]))
    sar = rollax.make("jumanji:SearchAndRescue-v0")
    state = sar.reset(jax.random.key(3))
    obs = state.obs
    for i in range(2):
        np.testing.assert_array_equal(sar.observation(state)[i], np.concatenate([
            np.asarray(obs.searcher_views[i]).ravel(), [obs.targets_remaining],
            np.asarray(obs.positions[i])]))
    assert [f for f, _ in sar.observation_fields] == ["searcher_views", "targets_remaining",
                                                      "positions"]  # `step` left out


@pytest.mark.parametrize("name", ["LevelBasedForaging-v0", "SearchAndRescue-v0"])
def test_each_agents_rewards_are_jumanjis_own_step_for_step(name):
    env = rollax.make(f"jumanji:{name}")
    theirs = jumanji.make(name)
    key = jax.random.key(0)
    ours = env.reset(key)
    state, _ = theirs.reset(jax.random.key_data(key))
    step = jax.jit(env.step)
    their_step = jax.jit(theirs.step)
    for t in range(60):
        akey = jax.random.fold_in(jax.random.key(1), t)
        if isinstance(env.action_space, Box):
            action = jax.random.uniform(akey, (2, 2), minval=-1.0, maxval=1.0)
        else:
            action = Categorical(jnp.zeros((2, 6))).masked(env.action_mask(ours)).sample(akey)
        ours, reward, terminated, _ = step(ours, action)
        state, timestep = their_step(state, action)
        np.testing.assert_array_equal(env.agent_rewards(ours), timestep.reward)
        np.testing.assert_allclose(reward, np.sum(timestep.reward), rtol=1e-6)
        if bool(terminated):
            break


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    # compiled as rollax compiles it: under the session's cheap compilation a done state of
    # SearchAndRescue moved in its last bits (absorbing_state, searchers' speed at the step
    # after the truncation), which the program rollax compiles does not do
    pytest.param(n, marks=pytest.mark.optimized) if n == "SearchAndRescue-v0" else n
    for n in TEAMS])
def test_check_env(name, capsys):
    """``rollax check-env jumanji:<id>`` with its default settings (10-120 s each on 2
    cores)."""
    code = rollax.cli.main(["check-env", f"jumanji:{name}"])
    assert code == 0, capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["LevelBasedForaging-v0", "Connector-v3"])
def test_the_sampled_actions_honour_each_agents_mask(name):
    env = rollax.make(f"jumanji:{name}")
    agents, (_, size), space, _ = TEAMS[name]
    net = TeamActorCritic(num_agents=agents, observation_size=size, num_actions=space.nvec[0])
    _, traj = collect(env, net, net.init(jax.random.key(0)), jax.random.key(1), 32, env.horizon)
    picked = jnp.take_along_axis(traj.action_mask, traj.action[..., None], axis=-1)[..., 0]
    live = np.asarray(traj.active)
    assert np.asarray(picked)[live].all()
    assert traj.agent_rewards.shape == (env.horizon, 32, agents)
    assert np.asarray(traj.action_mask)[live].sum(-1).min() >= 1


@pytest.mark.slow
@pytest.mark.parametrize(("name", "settings"), [
    ("LevelBasedForaging-v0", ["--critic", "centralised"]),
    ("Connector-v3", ["--algo", "a2c"]),
    ("SearchAndRescue-v0", ["--critic", "centralised"]),
])
def test_the_cli_trains_each_team_with_seeds_and_resumes_bit_for_bit(name, settings, capsys,
                                                                     tmp_path):
    argv = ["--env", f"jumanji:{name}", *settings, "--num-envs", "4", "--num-steps", "16",
            "--no-anneal-lr", "--seeds", "2", "--eval-episodes", "2", "--eval-steps", "20"]
    cut = train_json(capsys, *argv, "--total-steps", "64", "--out", tmp_path / "cut")
    longer = train_json(capsys, "--resume", tmp_path / "cut", "--total-steps", "128")
    whole = train_json(capsys, *argv, "--total-steps", "128", "--out", tmp_path / "whole")
    assert cut["seeds"] == whole["seeds"] == [0, 1]
    assert longer["params_sha256"] == whole["params_sha256"] != cut["params_sha256"]


@dataclasses.dataclass(frozen=True)
class RandomLegal:
    """Each agent picks uniformly among its legal actions."""

    def sample(self, params, observation, key, mask):
        dist = Categorical(jnp.zeros(mask.shape)).masked(mask)
        action = dist.sample(key)
        return action, dist.log_prob(action)


@pytest.mark.slow
def test_ppo_teams_collect_far_more_food_than_random_play():
    """PPO's team (own critics) on LevelBasedForaging-v0, 196,608 steps (64 environments x 32
    steps x 96 updates, lr 1e-3, about a minute on 2 cores): the team's return (the food it
    loads, 1 when it loads all) rises from random legal play's (0.012 here) past 0.5 (0.69
    over the last ten updates, seed 0, on 6 December 2026)."""
    env = rollax.make("jumanji:LevelBasedForaging-v0")
    random = float(jnp.mean(episode_returns(env, RandomLegal(), None, jax.random.key(7), 256,
                                            env.horizon)))
    config = ppo.PPOConfig(env="jumanji:LevelBasedForaging-v0", total_steps=64 * 32 * 96,
                           num_envs=64, num_steps=32, lr=1e-3, eval_episodes=8)
    out = make_train(ppo.make_algorithm(config))(jax.random.key(0))
    returns = np.asarray(out.metrics.episode_return)
    late = returns[-10:][np.isfinite(returns[-10:])]
    assert late.size and late.mean() > max(0.5, 10 * random), (late, random)
    agents = np.asarray(out.metrics.agent_return)[-10:]
    np.testing.assert_allclose(agents[np.isfinite(agents)], late / 2, rtol=1e-5)


def test_a_start_state_is_arrays_only():
    """SearchAndRescue's own start state holds Python numbers; the adapter's holds arrays, as
    after a step (a scan that records the start state beside the stepped ones needs them)."""
    state = rollax.make("jumanji:SearchAndRescue-v0").reset(jax.random.key(0))
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(state))


@pytest.mark.slow
def test_render_draws_connectors_grid(tmp_path, capsys):
    """Connector's viewer draws the state's grid (``rollax.envs.frames.JUMANJI_VIEWED``)."""
    out = tmp_path / "connector.gif"
    code = rollax.cli.main(["render", "jumanji:Connector-v3", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    assert out.stat().st_size > 0

"""Checked mode (checkify): garbage stops the run with what, where and the value."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import pytest

import rollax
from helpers import run
from rollax import guards
from rollax.envs.base import Discrete
from rollax.envs.cartpole import CartPole


@dataclasses.dataclass(frozen=True)
class NanAfterThree(CartPole):
    """CartPole whose observation turns NaN from the fourth step of each episode."""

    def observation(self, state):
        obs = super().observation(state)
        return jnp.where(state.elapsed >= 3, jnp.nan, obs)


@pytest.fixture()
def nan_env(monkeypatch):
    """Registered for one test only (the registry is global: other tests list it)."""
    from rollax.envs import registry

    monkeypatch.setitem(registry._REGISTRY, "test-nan-observation",
                        lambda horizon=None: NanAfterThree(horizon or 50))


@pytest.mark.slow
def test_nan_observation_named_with_update_step_env(capsys, tmp_path, nan_env):
    code, out, err = run(capsys, "train", "--env", "test-nan-observation", "--checked",
                         "--total-steps", "256", "--num-envs", "4", "--num-steps", "64",
                         "--out", str(tmp_path / "r"))
    # stdout holds only the header printed before training started (its no-preset line too)
    assert code == 2 and out.startswith("ppo on test-nan-observation") and out.count("\n") == 4
    assert err.strip() == ("rollax train: error: checked mode: non-finite observation at "
                           "update 1, step 3, env 0: [nan nan nan nan]")
    assert not (tmp_path / "r" / "checkpoints").exists()  # nothing trained on garbage is kept


@pytest.mark.slow
def test_without_checked_mode_the_garbage_is_only_seen_at_the_end(capsys, tmp_path, nan_env):
    """No check stops the run: it trains to the end on NaN observations, and only then is it
    reported as diverged (exit status 3, the warning line); --checked stops it at the first."""
    code, _, err = run(capsys, "train", "--env", "test-nan-observation", "--total-steps", "256",
                       "--num-envs", "4", "--num-steps", "64", "--out", str(tmp_path / "r"))
    assert code == 3, err
    assert err.startswith("rollax train: warning: training diverged")
    assert (tmp_path / "r" / "summary.json").is_file()


@pytest.mark.slow
def test_diverging_loss_stops_the_run(capsys, tmp_path):
    code, _, err = run(capsys, "train", "--env", "CartPole-v1", "--checked", "--lr", "1e30",
                       "--total-steps", "512", "--num-envs", "4", "--num-steps", "32",
                       "--out", str(tmp_path / "r"))
    assert code == 2 and "checked mode: non-finite" in err and "at update 1" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.optimized
@pytest.mark.slow
def test_checked_mode_never_changes_results(capsys, tmp_path):
    shas = []
    for extra in ([], ["--checked"]):
        code, out, err = run(capsys, "train", "--updates", "4", "--batch-size", "32", "--json",
                             "--out", str(tmp_path / f"r{len(extra)}"), *extra)
        assert code == 0, err
        shas.append(json.loads(out)["params_sha256"])
    assert shas[0] == shas[1]


def test_action_out_of_range_and_non_finite_parameters():
    def actions(a):
        guards.check_actions(a, Discrete(2), jnp.int32(7))
        return a

    good = jnp.zeros((4, 3), jnp.int32)
    bad = good.at[2, 1].set(5).at[3, 2].set(-1)
    err, _ = guards.functionalize(actions)(good)
    assert err.get() is None
    err, _ = guards.functionalize(actions)(bad)
    assert err.get().startswith(
        "checked mode: action out of range [0, 2) at update 7, step 2, env 1: 5")

    def params(p):
        guards.check_finite("parameters", p, jnp.int32(2))
        return p

    tree = {"w": jnp.ones((2, 2)), "b": jnp.array([0.0, jnp.inf, jnp.nan])}
    err, _ = jax.jit(guards.functionalize(params))(tree)
    assert err.get().startswith("checked mode: non-finite parameters at update 2: inf (2 of 7")


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf])
def test_continuous_actions_must_be_finite(bad):
    def actions(a):
        guards.check_actions(a, rollax.Box(-2.0, 2.0, (1,)), jnp.int32(1))
        return a

    a = jnp.zeros((3, 2, 1)).at[1, 1, 0].set(bad)
    err, _ = guards.functionalize(actions)(a)
    assert "non-finite action at update 1, step 1, env 1" in err.get()


def _first_non_finite(observation, reward) -> str | None:
    def check(o, r):
        guards.check_observations(o, jnp.int32(4), r)
        return r

    err, _ = jax.jit(guards.functionalize(check))(observation, reward)
    return err.get()


def test_the_first_non_finite_environment_output_is_named():
    """A NaN reward used to pass the collected batch's checks and stop the run later as a
    non-finite loss. The first cell (step, then environment) holding a non-finite output is
    named, and in it the output: an observation leaf before the reward."""
    T, B = 5, 3
    observation = {"pos": jnp.zeros((T, B, 2)), "count": jnp.zeros((T, B), jnp.int32),
                   "seen": jnp.zeros((T, B, 1))}
    reward = jnp.zeros((T, B))
    assert _first_non_finite(observation, reward) is None
    later = {**observation, "pos": observation["pos"].at[3, 0, 1].set(jnp.nan)}
    # the reward of step 2, env 1 comes before the observation of step 3
    message = _first_non_finite(later, reward.at[2, 1].set(jnp.inf))
    assert message.startswith("checked mode: non-finite reward at update 4, step 2, env 1: inf")
    # in one cell, the observation (leaves in their order) is named before the reward
    cell = {**observation, "seen": observation["seen"].at[2, 1, 0].set(jnp.nan)}
    message = _first_non_finite(cell, reward.at[2, 1].set(jnp.nan))
    assert message.startswith("checked mode: non-finite observation['seen'] at update 4, "
                              "step 2, env 1: [nan]")
    message = _first_non_finite(later, reward)
    assert message.startswith("checked mode: non-finite observation['pos'] at update 4, step "
                              "3, env 0: [ 0. nan]")
    # one array: "observation", as before
    message = _first_non_finite(jnp.zeros((T, B, 4)).at[1, 2, 0].set(jnp.nan), reward)
    assert message.startswith("checked mode: non-finite observation at update 4, step 1, "
                              "env 2: [nan  0.  0.  0.]")


def test_a_host_environments_nan_reward_is_named_not_the_loss(capsys, tmp_path):
    """A Gymnasium environment whose reward turns NaN at each environment's third step (step
    2): --checked said 'non-finite loss at update 1'; now it names the reward, the step and
    the environment. check-env's host_rows no longer reports 'reward nan, pool's nan' (the
    row is the pool's); host_finite names it."""
    name = "custom_envs.gym_misfit:nan_reward"
    code, _, err = run(capsys, "train", "--env", name, "--checked", "--horizon", "20",
                       "--num-envs", "4", "--num-steps", "16", "--total-steps", "128",
                       "--hidden", "8", "--out", tmp_path / "run")
    assert code == 2
    assert err == ("rollax train: error: checked mode: non-finite reward at update 1, step 2, "
                   "env 0: nan\n")
    report = rollax.check_host_env(rollax.make(name), batch_size=2, num_steps=6)
    assert [r.name for r in report.failures] == ["host_finite"]
    assert report["host_finite"].message == "reward is not finite: step 2, env 0, reward nan"

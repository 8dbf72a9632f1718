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
    # stdout holds only the header printed before training started
    assert code == 2 and out.startswith("ppo on test-nan-observation") and out.count("\n") == 3
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

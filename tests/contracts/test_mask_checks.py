"""The checker on action masks: check_env's action_mask_shape, legal_action_exists and
actions_legal, check_collector's collector_actions_legal, and `rollax check-env` on the planted
bugs of tests/custom_envs/masked_guess.py (a mask of the wrong shape or dtype, a live state with
no legal action, a policy that samples an illegal action)."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from custom_envs import masked_guess
from helpers import f32_rtol, run
from rollax.contracts.probe import RandomPolicy

MASK_CHECKS = ("action_mask_shape", "legal_action_exists", "actions_legal")


@pytest.mark.slow
@pytest.mark.parametrize("make_env", [masked_guess.discrete, masked_guess.multi_discrete,
                                      masked_guess.multi_binary],
                         ids=["discrete", "multi_discrete", "multi_binary"])
def test_masked_tasks_pass_every_check(make_env):
    env = make_env()
    report = rollax.check_env(env, batch_size=8, collect_fn=rollax.collect)
    assert report.ok, str(report)
    assert all(report[name].passed for name in MASK_CHECKS)
    assert report["collector_actions_legal"].passed
    assert "legal" in report["actions_legal"].message


def test_unmasked_environments_pass_the_mask_checks():
    report = rollax.check_env(rollax.make("corridor"), batch_size=4)
    for name in MASK_CHECKS:
        assert report[name].passed and report[name].message == ("no action_mask: every action "
                                                                "legal")


@pytest.mark.slow
def test_a_mask_of_the_wrong_shape_or_dtype_fails_action_mask_shape():
    for env, got in ((masked_guess.wrong_shape(), "bool[5]"),
                     (masked_guess.int_mask(), "int32[4]")):
        report = rollax.check_env(env, batch_size=4)
        result = report["action_mask_shape"]
        assert result.failed
        assert result.message == (f"action mask of the wrong shape or dtype: action_mask "
                                  f"'{got}', expected 'bool[4]'")
        assert report["legal_action_exists"].status == "skipped"
        assert report["runs"].passed  # driven unmasked, the other checks still run


@pytest.mark.slow
def test_a_live_state_without_a_legal_action_fails_legal_action_exists():
    report = rollax.check_env(masked_guess.no_legal(), batch_size=4)
    result = report["legal_action_exists"]
    assert result.failed and result.message.startswith("a live state with no legal action: "
                                                       "step 0, env 0")
    assert result.step == 0 and result.env == 0
    assert report["action_mask_shape"].passed and report["actions_legal"].passed


@dataclasses.dataclass(frozen=True)
class IgnoresMask:
    """A policy that drops the mask it is given: it samples illegal actions."""

    inner: RandomPolicy

    def init(self):
        return None

    def sample(self, params, observation, key, mask=None):
        return self.inner.sample(params, observation, key)


def dropping_collect(env, policy, params, key, batch_size, num_steps):
    """A collector that forgets the masks it collected."""
    final, traj = rollax.collect(env, policy, params, key, batch_size, num_steps)
    return final, traj._replace(action_mask=None)


def test_check_collector_flags_illegal_actions_and_a_dropped_mask():
    env = masked_guess.discrete()
    policy = IgnoresMask(RandomPolicy.for_space(env.action_space))
    report = rollax.check_collector(rollax.collect, env, policy, None, batch_size=8,
                                    num_steps=5)
    result = report["collector_actions_legal"]
    assert result.failed and result.message.startswith("illegal action sampled: step ")
    report = rollax.check_collector(dropping_collect, env, batch_size=8, num_steps=5)
    result = report["collector_actions_legal"]
    assert result.failed and result.message.startswith("trajectory has no action_mask")
    good = rollax.check_collector(rollax.collect, env, batch_size=8, num_steps=5)
    assert good["collector_actions_legal"].passed and good["matches_reference"].passed


def test_check_env_flags_a_policy_that_samples_illegal_actions(monkeypatch):
    """The planted bug in the checker's own policy: it ignores the mask."""
    env = masked_guess.MaskedGuess(nvec=(4,), kind="discrete", horizon=3)  # its own tracer
    original = RandomPolicy.sample
    monkeypatch.setattr(RandomPolicy, "sample",
                        lambda self, params, obs, key, mask=None: original(self, params, obs,
                                                                           key))
    report = rollax.check_env(env, batch_size=8, autoreset_fn=None)
    result = report["actions_legal"]
    assert result.failed and result.message.startswith("illegal action sampled: step ")


def test_random_policy_is_uniform_over_the_legal_actions():
    space = rollax.MultiDiscrete((3, 4))
    policy = RandomPolicy.for_space(space)
    mask = jnp.array([[True, False, True, False], [False, True, True, True]])
    keys = jax.random.split(jax.random.key(0), 6000)
    actions = np.asarray(jax.vmap(lambda k: policy.sample(None, None, k, mask)[0])(keys))
    assert set(actions[:, 0]) == {0, 2} and set(actions[:, 1]) == {1, 2, 3}
    assert abs((actions[:, 0] == 0).mean() - 0.5) < 0.05
    log_p = float(policy.log_prob(None, None, jnp.array([0, 1]), mask))
    assert log_p == pytest.approx(-np.log(2) - np.log(3), rel=f32_rtol(1e-6))


# --- rollax check-env -------------------------------------------------------------------------

@pytest.mark.parametrize("factory, check, text", [
    ("wrong_shape", "action_mask_shape", "action mask of the wrong shape or dtype"),
    ("int_mask", "action_mask_shape", "action mask of the wrong shape or dtype"),
    ("no_legal", "legal_action_exists", "a live state with no legal action"),
])
def test_check_env_cli_names_the_planted_mask_bug(factory, check, text, capsys):
    code, out, err = run(capsys, "check-env", f"custom_envs.masked_guess:{factory}", "--json",
                         "--batch-size", "4")
    assert code == 1, err
    failed = {c["name"]: c["message"] for c in json.loads(out)["checks"]
              if c["status"] == "failed"}
    assert list(failed) == [check] and failed[check].startswith(text)


def test_check_env_cli_names_an_illegal_action_sampled(capsys, monkeypatch):
    original = RandomPolicy.sample
    monkeypatch.setattr(RandomPolicy, "sample",
                        lambda self, params, obs, key, mask=None: original(self, params, obs,
                                                                           key))
    code, out, err = run(capsys, "check-env", "custom_envs.masked_guess:discrete", "--json",
                         "--batch-size", "8", "--num-steps", "5")
    assert code == 1, err
    failed = {c["name"]: c["message"] for c in json.loads(out)["checks"]
              if c["status"] == "failed"}
    assert "actions_legal" in failed
    assert failed["actions_legal"].startswith("illegal action sampled")


def test_check_env_cli_passes_a_masked_task(capsys):
    code, out, err = run(capsys, "check-env", "custom_envs.masked_guess:multi_discrete",
                         "--json", "--batch-size", "4")
    assert code == 0, err
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert all(checks[name]["status"] == "passed" for name in MASK_CHECKS)


def test_checked_mode_stops_on_an_illegal_action():
    """guards.check_collected on a masked batch: an illegal active action fails, naming where;
    legal actions pass."""
    from jax.experimental import checkify

    from rollax.guards import check_collected

    env = masked_guess.discrete()
    _, traj = rollax.collect(env, IgnoresMask(RandomPolicy.for_space(env.action_space)), None,
                             jax.random.key(0), 8, 4)
    check = checkify.checkify(lambda t: check_collected(t, env.action_space, jnp.int32(1)),
                              errors=checkify.user_checks)
    error, _ = check(traj)
    assert error.get().startswith("checked mode: illegal action (its action_mask forbids it) at "
                                  "update 1, step ")
    _, good = rollax.collect(env, RandomPolicy.for_space(env.action_space), None,
                             jax.random.key(0), 8, 4)
    assert check(good)[0].get() is None

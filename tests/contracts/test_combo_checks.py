"""`rollax check-env` on tests/custom_envs/combo.py, every space at once (a Dict observation of
an image, a vector and a discrete leaf, a MultiDiscrete action, an action mask): the task
passes every check, and each planted bug (a mask of the wrong shape, a live state with no legal
action, a policy that samples an illegal action) fails the one check that names it."""

import json

import pytest

from helpers import run
from rollax.contracts.probe import RandomPolicy


def failed_checks(out: str) -> dict[str, str]:
    return {c["name"]: c["message"] for c in json.loads(out)["checks"]
            if c["status"] == "failed"}


@pytest.mark.slow
def test_check_env_cli_passes_the_combo_task(capsys):
    code, out, err = run(capsys, "check-env", "custom_envs.combo:make", "--json",
                         "--batch-size", "8")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["action_mask_shape"]["message"] == "bool[2, 4], laid out for MultiDiscrete"
    assert all(c["status"] == "passed" for c in checks.values()), checks


@pytest.mark.slow
@pytest.mark.parametrize("factory, check, text", [
    ("wrong_shape", "action_mask_shape",
     "action mask of the wrong shape or dtype: action_mask 'bool[2, 3]', expected 'bool[2, 4]'"),
    ("no_legal", "legal_action_exists", "a live state with no legal action: step "),
])
def test_check_env_cli_names_the_planted_mask_bug(factory, check, text, capsys):
    code, out, err = run(capsys, "check-env", f"custom_envs.combo:{factory}", "--json",
                         "--batch-size", "4")
    assert code == 1, err
    failed = failed_checks(out)
    assert list(failed) == [check] and failed[check].startswith(text)


@pytest.mark.slow
def test_check_env_cli_names_an_illegal_action_sampled(capsys, monkeypatch):
    """The planted bug in the checker's own policy: it drops the mask, so it samples ``a[1]``
    uniformly from all four values, two of them illegal in every state. (A batch size and a
    step count of its own: the checker's compiled rollouts are cached per environment and
    shape, and one traced before the patch would not see it.)"""
    original = RandomPolicy.sample
    monkeypatch.setattr(RandomPolicy, "sample",
                        lambda self, params, obs, key, mask=None: original(self, params, obs,
                                                                           key))
    code, out, err = run(capsys, "check-env", "custom_envs.combo:make", "--json",
                         "--batch-size", "6", "--num-steps", "5")
    assert code == 1, err
    failed = failed_checks(out)
    assert list(failed) == ["actions_legal"]
    assert failed["actions_legal"].startswith("illegal action sampled: step ")

"""A user's Gymnasium environment whose outputs do not fit its declared spaces
(tests/custom_envs/gym_misfit.py): one line naming the output, its dtype and shape and the
space's, in the words a JAX environment gets, before anything is written; a misfit that shows
only later in training ends the run in one line too."""

import dataclasses
import json

import pytest

import rollax
from helpers import run
from rollax.contracts.preflight import check_before_run, check_host_before_run
from rollax.envs.cartpole import CartPole

MISFIT = "custom_envs.gym_misfit:make"
LONG = "observation 'float32[8]', space 'float32[7]'"


def refusal(fault: str, bad_from: int = 0) -> str:
    env = rollax.make(MISFIT, fault=fault, bad_from=bad_from)
    with pytest.raises(ValueError) as raised:
        check_host_before_run(env, "mine")
    return str(raised.value)


def test_first_reset_and_step_are_held_against_the_declared_spaces():
    """The words of check_env's reset_output / step_output for a JAX environment whose
    observation has the wrong shape (the JAX one is a CartPole seeing 3 of its 4 numbers)."""
    assert refusal("long", 0) == ("environment 'mine' fails reset_output: start observation "
                                  f"does not match observation_space: {LONG}")
    assert refusal("long", 1) == ("environment 'mine' fails step_output: observation after a "
                                  f"step does not match observation_space: {LONG}")
    assert refusal("reward", 1) == ("environment 'mine' fails step_output: reward is not a "
                                    "real scalar: reward 'float64[2]'")
    assert refusal("flag", 1) == ("environment 'mine' fails step_output: terminated must be "
                                  "bool: terminated 'int64[]'")
    with pytest.raises(ValueError) as raised:
        check_host_before_run(rollax.make("custom_envs.gym_misfit:make_dict"), "mine")
    assert str(raised.value) == ("environment 'mine' fails reset_output: start observation "
                                 "leaf ['where'][1] does not match its space: observation "
                                 "'float64[1, 3]', space 'float32[1, 2]'")
    with pytest.raises(ValueError) as raised:
        check_before_run(ShortCartPole(horizon=5), "jax")
    assert str(raised.value).startswith(
        "environment 'jax' fails reset_output: start observation does not match "
        "observation_space: observation 'float32[3]', space 'float32[4]'")


@dataclasses.dataclass(frozen=True)
class ShortCartPole(CartPole):
    """A JAX environment with the same fault: 3 of its 4 numbers observed."""

    def observation(self, state):
        return super().observation(state)[:3]


@pytest.mark.parametrize("name", ["custom_envs.gym_walk:make", "custom_envs.gym_walk:make_dict",
                                  "gymnasium:CartPole-v1", "gymnasium:Pendulum-v1"])
def test_environments_that_fit_their_spaces_pass(name):
    check_host_before_run(rollax.make(name), name)  # int64 leaves into float32 fit too
    check_host_before_run(rollax.make(MISFIT, fault="ints"), MISFIT)


@pytest.mark.parametrize("command", ["train", "check-env"])
def test_a_misfit_at_the_first_step_is_one_line_before_anything_is_written(capsys, tmp_path,
                                                                           monkeypatch, command):
    """It was a traceback of 90-128 lines (a ValueError inside io_callback), and train left
    its run folder."""
    monkeypatch.chdir(tmp_path)
    name = "custom_envs.gym_misfit:long_at_step"
    argv = [name] if command == "check-env" else ["--env", name, "--out", tmp_path / "run"]
    code, out, err = run(capsys, command, *argv)
    assert (code, out) == (2, "")
    assert err == (f"rollax {command}: error: environment '{name}' fails step_output: "
                   f"observation after a step does not match observation_space: {LONG}\n")
    assert list(tmp_path.iterdir()) == []


LATER = ("environment 'custom_envs.gym_misfit:long_later' fails step_output: observation after "
         f"a step does not match observation_space: step 39, env 0, {LONG}")


def test_a_misfit_later_in_training_ends_the_run_in_one_line(capsys, tmp_path):
    """Each environment's 40th step (step 39 of its pool, update 3 at 4 x 16; evaluation's
    episodes, at most 20 steps, never reach it): exit 2 and one line, as a failed check of
    checked mode ends a run; the run folder stays as it is, nothing of the failed chunk
    written."""
    code, _, err = run(capsys, "train", "--env", "custom_envs.gym_misfit:long_later",
                         "--horizon", "20", "--num-envs", "4", "--num-steps", "16",
                         "--total-steps", "256", "--chunk-size", "1", "--checkpoint-every", "1",
                         "--hidden", "8", "--out", tmp_path / "run")
    assert code == 2 and err == f"rollax train: error: {LATER}\n", err
    rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["update"] for r in rows] == [0, 1, 2]
    assert not (tmp_path / "run" / "summary.json").exists()


def test_check_host_env_fails_its_gate_in_one_line_on_a_later_misfit():
    report = rollax.check_host_env(rollax.make("custom_envs.gym_misfit:long_later"),
                                   batch_size=2, num_steps=45)
    assert [r.name for r in report.failures] == ["host_collects"]
    assert report["host_collects"].message == LATER

"""A run whose losses or parameters stop being finite is reported as diverged: a warning line,
``diverged``/``diverged_at`` in summary.json and ``--json``, ``NaN`` in the table (``—`` stays
the mark of a number that does not exist), exit status 3; ``rollax eval`` and ``load_run``
refuse its parameters in one line naming the lane."""

import json

import numpy as np
import pytest

import rollax
from rollax.cli import main
from rollax.cli.train import DIVERGED, _cell
from rollax.run.training import diverged_at

NAN_ENV = '''
import dataclasses

import jax.numpy as jnp

from rollax.envs.cartpole import CartPole


@dataclasses.dataclass(frozen=True)
class NaNCartPole(CartPole):
    """CartPole whose reward is NaN on each episode's sixth step."""

    def transition(self, state, action, key=None):
        nxt, reward, terminated = super().transition(state, action, key)
        return nxt, jnp.where(state.elapsed == 5, jnp.nan, reward), terminated


def make(horizon=500):
    return NaNCartPole(horizon=horizon)
'''


@pytest.fixture(scope="module")
def diverged_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("nanenv")
    (base / "nanenv").mkdir()
    (base / "nanenv" / "__init__.py").write_text("")
    (base / "nanenv" / "env.py").write_text(NAN_ENV)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(base))
        out_dir = base / "run"
        code = main(["train", "--env", "nanenv.env:make", "--total-steps", "256", "--num-envs", "4",
                     "--num-steps", "32", "--minibatches", "2", "--hidden", "8",
                     "--out", str(out_dir)])
        yield code, out_dir, base


@pytest.mark.slow
def test_a_diverged_run_says_so_and_exits_3(diverged_run, capsys):
    code, out_dir, _ = diverged_run
    assert code == 3
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["diverged"] is True and summary["diverged_at"] == 1
    lane = summary["lanes"][0]
    assert lane["diverged_at"] == 1 and lane["eval_return"] is None
    assert lane["final_episode_return"] is None  # not the last finite update's
    assert summary["aggregate"][0]["eval_return"]["n"] == 0


@pytest.mark.slow
def test_diverged_report_lines(tmp_path, capsys, monkeypatch):
    base = tmp_path
    (base / "nanenv2").mkdir()
    (base / "nanenv2" / "__init__.py").write_text("")
    (base / "nanenv2" / "env.py").write_text(NAN_ENV)
    monkeypatch.syspath_prepend(str(base))
    argv = ["train", "--env", "nanenv2.env:make", "--total-steps", "128", "--num-envs", "4",
            "--num-steps", "32", "--minibatches", "2", "--hidden", "8"]
    code = main([*argv, "--out", str(base / "a")])
    out, err = capsys.readouterr()
    assert code == 3
    assert err.splitlines()[-1] == (
        "rollax train: warning: training diverged (a loss or the parameters stopped being "
        "finite): seed=0 at update 1; those lanes have no score (exit status 3)")
    assert f"│ 1      │ {DIVERGED}" in out
    assert "eval return: seed=0: diverged at update 1" in out
    code = main([*argv, "--json", "--out", str(base / "b")])
    out, err = capsys.readouterr()
    assert code == 3 and "warning: training diverged" in err
    obj = json.loads(out.splitlines()[-1])
    assert obj["diverged"] is True and obj["diverged_at"] == 1
    assert obj["eval_return"] == [None] and obj["eval_return_mean"] is None


@pytest.mark.slow
def test_eval_and_load_run_refuse_non_finite_parameters(diverged_run, capsys):
    _, out_dir, base = diverged_run
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(base))
        capsys.readouterr()
        assert main(["eval", str(out_dir)]) == 2
        _, err = capsys.readouterr()
        assert err == (f"rollax eval: error: the run in {str(out_dir)!r} diverged: lane seed=0 "
                       "has non-finite parameters at update 2; there is no policy to use\n")
        with pytest.raises(ValueError, match="lane seed=0 has non-finite parameters"):
            rollax.load_run(out_dir)


def test_diverged_at_by_hand():
    labels = [{"seed": 0}, {"seed": 1}, {"seed": 2}]
    rows = [{"seed": s, "update": 0} for s in range(3)]
    for u in (1, 2, 3, 4):
        rows += [{"seed": 0, "update": u, "policy_loss": 0.5, "episode_return": None},
                 {"seed": 1, "update": u, "policy_loss": None if u >= 3 else 0.5},
                 {"seed": 2, "update": u, "value_loss": 1.0, "policy_loss": 0.5}]
    params = {"w": np.array([[1.0, 2.0], [np.nan, 1.0], [1.0, np.inf]]),
              "n": np.array([1, 2, 3])}
    # lane 0: a missing episode return is no divergence; lane 1: its loss at update 3;
    # lane 2: finite losses, non-finite final parameters: the last update
    assert diverged_at(rows, labels, params) == [None, 3, 4]


def test_table_marks_nan_apart_from_missing():
    assert _cell(np.array([np.nan, np.nan]), diverged=False) == "—"
    assert _cell(np.array([np.nan, 1.0]), diverged=True) == DIVERGED
    assert _cell(np.array([2.0, 1.0]), diverged=True) == "1.5"
    assert _cell(np.array([np.nan, 1.0]), diverged=False) == "1"  # a lane with no episode

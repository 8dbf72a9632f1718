"""Every neural algorithm of the registry under the same checks, through the same layers (the
compiled ``train``, the runner, run folders, ``--resume``, ``load_run``): nothing is special-
cased. Each runs its tiny setting (its row of ``TINY`` in tests/helpers.py)."""


import jax
import numpy as np
import pytest

import rollax
from helpers import TINY, checkpoint_digests, flags, greedy_return, run_metrics, train_json
from rollax.algos import registry
from rollax.algos.base import make_train
from rollax.run.experiment import Runner
from rollax.run.folder import RunFolder
from rollax.run.training import read_run

COMMON = dict(horizon=20, hidden=(8, 8), eval_episodes=4)
"""Besides each algorithm's tiny settings (:data:`helpers.TINY`): a 20-step horizon, 8-unit
layers."""

NEURAL = [s for s in registry.algorithms() if s.trains.name == "neural"]


def _config(spec, **extra):
    tiny = TINY[spec.name]
    return spec.config(tiny.env, **{**COMMON, **tiny.settings, **extra})


def _algo_argv(spec, **settings) -> list[str]:
    tiny = TINY[spec.name]
    return ["--env", tiny.env, "--algo", spec.methods[0],
            *flags({**COMMON, **tiny.settings, **settings})]


@pytest.mark.slow
@pytest.mark.parametrize("spec", NEURAL, ids=lambda s: s.name)
def test_train_compiles_once_and_works_under_vmap(spec):
    train = make_train(spec.build(_config(spec)))
    one = train(jax.random.key(0))
    again = train(jax.random.key(1))
    assert train._cache_size() == 1  # a second key reuses the compiled program
    lanes = jax.vmap(train)(jax.random.split(jax.random.key(0), 2))
    assert np.isfinite(float(one.eval_return)) and np.isfinite(float(again.eval_return))
    assert np.all(np.isfinite(np.asarray(lanes.eval_return)))


def _budget_argv(spec, fraction: int) -> list[str]:
    """The flag of ``spec``'s budget at 1 / ``fraction`` of the tiny setting's."""
    name = spec.length_field
    value = TINY[spec.name].settings[name] // fraction
    return ["--" + name.replace("_", "-"), str(value)]


RESUMED = [pytest.param(s, {}, id=s.name,
                        marks=[pytest.mark.optimized] if s.name == "ppo" else [])
           for s in NEURAL] + [
    pytest.param(s, {"normalize_rewards": True}, id=f"{s.name}-normalize-rewards")
    for s in NEURAL if "normalize_rewards" in s.fields]
"""Every neural algorithm, and those with reward normalisation with it (its statistics and
running returns are part of the state a resume goes on from). PPO's row compiles as ``rollax``
compiles (``optimized``): the claim that a resume is bit-identical to the whole run, across two
differently built programs, is about the program users run. The other rows check that each
algorithm's state is whole at a checkpoint, which holds however XLA optimises, and compile
cheaply (tests/conftest.py)."""


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "extra"), RESUMED)
def test_seeds_by_sweep_resume_bit_identical_and_load_run(spec, extra, capsys, tmp_path):
    lanes = ["--seeds", "2", "--sweep", "lr=0.001,0.003", "--chunk-size", "1",
             "--checkpoint-every", "1"]
    whole = tmp_path / "whole"
    summary = train_json(capsys, *_algo_argv(spec, **extra), *lanes, "--out", whole)
    assert len(summary["lanes"]) == 4  # 2 seeds x 2 learning rates, one program
    finals = np.asarray(summary["final_episode_return"], float)
    assert finals.shape == (4,) and np.all(np.isfinite(finals))

    cut = tmp_path / "cut"
    train_json(capsys, *_algo_argv(spec, **extra), *lanes, *_budget_argv(spec, 2), "--out",
               cut)
    train_json(capsys, "--resume", cut, *_budget_argv(spec, 1))
    assert run_metrics(cut) == run_metrics(whole)
    last = sorted(p for p in checkpoint_digests(whole) if p.startswith("update-") or "/" in p)[-1]
    assert checkpoint_digests(cut)[last] == checkpoint_digests(whole)[last]

    loaded = rollax.load_run(whole)
    run = read_run(RunFolder(whole))
    algo = run.build()
    runner = Runner(algo, run.lanes(), 1)
    _, state = RunFolder(whole).load_checkpoint(runner.initial_state(), run.identity())
    first = jax.tree_util.tree_map(lambda x: x[0], state)
    env = algo.env
    expected = rollax.evaluate_policy(env, algo.policy, algo.params(first),
                                      jax.random.key(5), 8)
    assert float(greedy_return(loaded, jax.random.key(5), 8)) == pytest.approx(float(expected))


CHECKED = [pytest.param(s, id=s.name, marks=[pytest.mark.optimized] if s.name == "ppo" else [])
           for s in NEURAL]
"""Every neural algorithm; PPO's row compiles as ``rollax`` compiles (the program users run),
the others cheaply: that the staged checks take no key and change no data holds however XLA
optimises (tests/conftest.py)."""


@pytest.mark.slow
@pytest.mark.parametrize("spec", CHECKED)
def test_checked_mode_runs_and_changes_nothing(spec, capsys, tmp_path):
    plain, checked = tmp_path / "plain", tmp_path / "checked"
    train_json(capsys, *_algo_argv(spec), "--out", plain)
    train_json(capsys, *_algo_argv(spec), "--checked", "--out", checked)
    # the staged checks may change XLA's fusion: diagnostics can move in their last float32
    # bits, those of a quantity near 1 for one formed as 1 - x (explained variance)
    last_bits = 2 * float(np.finfo(np.float32).eps)
    for a, b in zip(run_metrics(plain), run_metrics(checked), strict=True):
        assert a.keys() == b.keys()
        assert a == {k: pytest.approx(v, rel=1e-6, abs=last_bits) if isinstance(v, float)
                     else v for k, v in b.items()}
    assert run_metrics(plain)[-1].get("eval_return") == run_metrics(checked)[-1].get("eval_return")

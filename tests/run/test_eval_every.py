"""--eval-every: greedy evaluation during training on keys of its own, never changing results."""

from __future__ import annotations

import contextlib
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rollax
from rollax.cli import main
from rollax.run.training import EVAL_STREAM

# every test reads two trained runs (a module fixture): a long run
pytestmark = [pytest.mark.slow, pytest.mark.optimized]

BASE = ["train", "--updates", "6", "--batch-size", "32", "--chunk-size", "2", "--json"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval-every")
    out = {}
    for name, extra in (("plain", []), ("eval", ["--eval-every", "2", "--eval-episodes", "50"])):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main([*BASE, *extra, "--out", str(root / name)]) == 0
        out[name] = (root / name, json.loads(buffer.getvalue()))
    return out


def _rows(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_results_are_bit_identical_with_and_without(runs):
    assert runs["plain"][1]["params_sha256"] == runs["eval"][1]["params_sha256"]
    plain = [{k: v for k, v in r.items() if k != "env_steps_per_second"}
             for r in _rows(runs["plain"][0])]
    evald = [{k: v for k, v in r.items() if k not in ("env_steps_per_second", "greedy_return")}
             for r in _rows(runs["eval"][0])]
    assert plain == evald


def test_greedy_return_logged_every_n_updates(runs):
    rows = _rows(runs["eval"][0])
    assert [r["update"] for r in rows if "greedy_return" in r] == [2, 4, 6]
    config = json.loads((runs["eval"][0] / "config.json").read_text())
    assert (config["eval_every"], config["eval_episodes"]) == (2, 50)


def test_greedy_return_equals_an_independent_evaluation(runs):
    folder, result = runs["eval"]
    params = jnp.asarray(result["params"][0], jnp.float32)
    env = rollax.make("corridor")
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(0), EVAL_STREAM), 6)
    expected = rollax.evaluate_policy(env, rollax.BernoulliPolicy(3), params, key, 50)
    logged = next(r["greedy_return"] for r in _rows(folder) if r["update"] == 6)
    np.testing.assert_allclose(logged, float(expected), rtol=1e-6)
    # the trained greedy policy walks right: an episode from 0 returns 0.98, from 1 0.99, so the
    # mean of 50 is 0.98 + 0.01 k / 50 for k starts at 1
    k = (logged - 0.98) * 5000
    assert 0 <= round(k) <= 50 and abs(k - round(k)) < 1e-2

"""The table of algorithms (rollax.algos.registry) and what a spec reads from its config."""

import dataclasses
import importlib

import jax
import pytest

from rollax.algos import a2c, ppo, registry, tabular
from rollax.algos.base import Report, Task, env_batch, field_with, run_length, traced
from rollax.envs.registry import make
from rollax.run.config import choose_algorithm


def test_the_table_is_built_once(monkeypatch):
    first = registry.algorithms()
    assert [s.name for s in first[:len(registry.BUILT_IN)]] == [
        importlib.import_module(m).SPEC.name for m in registry.BUILT_IN]

    def no_import(name, *args, **kwargs):
        raise AssertionError(f"imported {name} again")

    monkeypatch.setattr(importlib, "import_module", no_import)
    assert registry.algorithms() == first
    assert registry.by_name("ppo") is ppo.SPEC
    assert registry.for_config(tabular.TabularConfig()) is tabular.SPEC


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    env: str = "corridor"
    seed: int = 0
    rounds: int = run_length(3)
    width: int = env_batch(2)
    rate: float = traced(0.5)


def _toy_spec(name: str):
    return dataclasses.replace(tabular.SPEC, name=name, config_type=ToyConfig, default=False,
                               trains=Task("toy", "nothing", lambda env: False),
                               report=Report("s", "p", (), ()))


def test_a_registered_algorithm_comes_after_the_built_in_ones_and_registers_once(monkeypatch):
    monkeypatch.setattr(registry, "_TABLE", dict(registry._TABLE))
    spec = _toy_spec("toy")
    registry.register_algorithm(spec)
    registry.register_algorithm(spec)  # the same spec again: nothing happens
    assert registry.algorithms()[-1] is spec
    assert registry.offering("toy") == [spec]
    with pytest.raises(ValueError, match="'toy' is already registered"):
        registry.register_algorithm(_toy_spec("toy"))


def test_what_a_spec_reads_from_its_config():
    assert tabular.SPEC.methods == ("ppo", "reinforce")  # the config's algo Literal
    assert ppo.SPEC.methods == ("ppo",) and a2c.SPEC.methods == ("a2c",)
    assert (tabular.SPEC.length_field, ppo.SPEC.length_field, a2c.SPEC.length_field) == (
        "updates", "total_steps", "total_steps")
    assert field_with(ToyConfig, "run_length") == "rounds"
    assert field_with(ToyConfig, "env_batch") == "width"
    assert _toy_spec("toy").length_field == "rounds" and _toy_spec("toy").methods == ("toy",)


def test_a_built_algorithm_derives_its_hyperparameters_and_env_batch():
    algo = tabular.SPEC.build(tabular.TabularConfig(batch_size=16, lr=0.25))
    assert algo.env_batch == ("batch_size", 16)
    assert algo.hyperparams.lr == 0.25
    state = algo.init(jax.random.key(0), algo.hyperparams)
    assert jax.tree_util.tree_structure(algo.params(state)) == jax.tree_util.tree_structure(
        state.params)


def test_choosing_an_algorithm():
    cartpole = make("CartPole-v1")
    assert choose_algorithm(cartpole, None, "CartPole-v1") is ppo.SPEC
    assert choose_algorithm(cartpole, "a2c", "CartPole-v1") is a2c.SPEC
    assert choose_algorithm(make("corridor"), "reinforce", "corridor") is tabular.SPEC
    with pytest.raises(ValueError, match=r"^algo a2c is only available for neural tasks; "
                                         r"corridor trains with --algo ppo/reinforce$"):
        choose_algorithm(make("corridor"), "a2c", "corridor")
    with pytest.raises(ValueError, match=r"^algo must be one of .*, got 'sac'$"):
        choose_algorithm(cartpole, "sac", "CartPole-v1")

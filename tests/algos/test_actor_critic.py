"""What PPO and A2C share (rollax.algos.actor_critic): one config whose fields each declares
once, one check of them (the same one-line refusal from both), and A2C's other defaults given
without declaring the fields again (rollax.algos.base.new_defaults)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap

import pytest

import rollax
from rollax.algos import a2c, actor_critic, ppo
from rollax.algos.base import TRACED, hyperparams_type, new_defaults, traced
from rollax.cli.flags import field_docs

SHARED = [f.name for f in dataclasses.fields(actor_critic.ActorCriticConfig)]
SWITCHES = [f.name for f in dataclasses.fields(actor_critic.ActorCriticConfig)
            if f.type == "bool"]


def _declared(config_type: type) -> set[str]:
    """The fields a config class's own source declares (``name: type = ...``)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(config_type))).body[0].body  # type: ignore[attr-defined]
    return {node.target.id for node in body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def test_a2c_declares_no_field_ppo_declares():
    assert not _declared(a2c.A2CConfig) & _declared(ppo.PPOConfig)
    assert _declared(a2c.A2CConfig) == {"optimizer"}
    assert _declared(ppo.PPOConfig) == {"epochs", "minibatches", "clip_eps", "clip_value"}
    for config_type in (ppo.PPOConfig, a2c.A2CConfig):
        names = [f.name for f in dataclasses.fields(config_type)]
        assert names[:len(SHARED)] == SHARED


def test_switches_are_the_shared_booleans():
    assert SWITCHES == list(actor_critic.BOOLEANS)


@pytest.mark.parametrize("config_type", [ppo.PPOConfig, a2c.A2CConfig],
                         ids=["ppo", "a2c"])
@pytest.mark.parametrize("name", SWITCHES)
def test_a_switch_that_is_not_a_boolean_is_refused_in_one_line(config_type, name):
    config = config_type(**{name: 1})
    with pytest.raises(ValueError, match=f"^{name} must be true or false, got 1$"):
        rollax.make_train(config)


def test_ppo_refuses_a_clip_value_that_is_not_a_boolean():
    with pytest.raises(ValueError, match=r"^clip_value must be true or false, got 'yes'$"):
        ppo.validate(ppo.PPOConfig(clip_value="yes"))  # type: ignore[arg-type]


def test_a2c_takes_stable_baselines3s_defaults_where_they_differ():
    ours, theirs = a2c.A2CConfig(), ppo.PPOConfig()
    differ = {name for name in SHARED if getattr(ours, name) != getattr(theirs, name)}
    assert differ == {"num_envs", "num_steps", "lr", "anneal_lr", "gae_lambda", "ent_coef",
                      "normalize_advantages"}
    assert (ours.num_envs, ours.num_steps, ours.lr, ours.gae_lambda) == (8, 5, 7e-4, 1.0)
    # a default replaced keeps the field's markers, type and docstring
    fields = {f.name: f for f in dataclasses.fields(a2c.A2CConfig)}
    assert fields["lr"].metadata[TRACED] and fields["num_envs"].metadata["env_batch"]
    assert a2c.A2CHyperparams._fields == ("lr", "gamma", "gae_lambda", "vf_coef", "ent_coef",
                                          "max_grad_norm", "reward_scale")
    docs, shared = field_docs(a2c.A2CConfig), field_docs(actor_critic.ActorCriticConfig)
    assert all(docs[name] == shared[name] for name in SHARED)


def test_new_defaults_replaces_only_the_default():
    @dataclasses.dataclass(frozen=True)
    class Base:
        a: int = 1
        b: float = traced(0.5)
        c: str = "x"

    @dataclasses.dataclass(frozen=True)
    @new_defaults(b=0.25)
    class Child(Base):
        d: bool = True

    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b", "c", "d"]
    assert Child() == Child(a=1, b=0.25, c="x", d=True) and Base().b == 0.5
    assert hyperparams_type(Child)._fields == ("b",)
    with pytest.raises(TypeError, match="inherits no field e"):
        new_defaults(e=1)(Child)

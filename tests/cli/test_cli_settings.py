"""Every setting of every algorithm reaches the command line and config files, typed.

``rollax train``'s flags are built from the config dataclass of the algorithm that trains the
chosen environment: each field is a flag named after it and a key of the same name in TOML and
YAML files; the environment's preset and then the file are the defaults, flags override them;
``--help`` shows each field's docstring and its value for the chosen environment.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from types import SimpleNamespace
from typing import Literal

import pytest
import yaml

from helpers import TINY
from rollax.algos import registry
from rollax.cli import main
from rollax.cli.parse import build, parse_train
from rollax.cli.train import header, settings_line
from rollax.run.config import from_settings


def _chosen(spec) -> dict:
    """The ``algo`` setting that picks ``spec`` for its environment (none for a default)."""
    return {} if spec.default else {"algo": spec.methods[0]}


def _specs():
    return registry.algorithms()


def _other_value(value, hint):
    """A value of type ``hint`` unlike ``value`` (the field's default)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return next(a for a in args if a != value)
    if type(None) in args:  # int | None
        return 5
    if hint is bool:
        return not value
    if hint is int:
        return value + 3
    if hint is float:
        return value / 2 + 0.125
    if origin is tuple and args == (str, ...):  # env_options: see OPTIONS
        return ("dt=0.1",)
    if origin is tuple:
        return (7, 9)
    raise AssertionError(f"no test value for {hint}")


def _cases():
    for spec in _specs():
        hints = typing.get_type_hints(spec.config_type)
        for field in dataclasses.fields(spec.config_type):
            if field.name != "env":
                yield pytest.param(spec, field.name, hints[field.name],
                                   id=f"{spec.name}.{field.name}")


def test_every_registered_algorithm_has_a_tiny_row():
    """Each algorithm's row of ``TINY`` (tests/helpers.py) gives the environment it is tested
    on, here and in every other per-algorithm test."""
    assert {spec.name for spec in _specs()} <= set(TINY)


OPTIONS = {"tabular": ("FrozenLake-v1", ("is_slippery=false",))}
"""An environment with a constructor option, and that option, for ``env_options``: per
algorithm where the test point mass (``dt=0.1``) is not one it trains."""


@pytest.mark.parametrize("spec, name, hint", list(_cases()))
def test_every_config_field_is_a_flag_and_a_file_key(tmp_path, spec, name, hint):
    env = TINY[spec.name].env
    if name == "env_options":
        env = OPTIONS.get(spec.name, ("custom_envs.point_mass:make",))[0]
    default = getattr(spec.config(env), name)
    value = _other_value(default, hint)
    if name == "env_options":
        value = OPTIONS.get(spec.name, (None, value))[1]
    flag = "--" + name.replace("_", "-")
    if hint is bool:
        argv = [flag if value else "--no-" + name.replace("_", "-")]
    elif isinstance(value, tuple):
        argv = [flag, *map(str, value)]
    else:
        argv = [flag, str(value)]
    algo = [f"--{k}={v}" for k, v in _chosen(spec).items()]
    by_flag = parse_train(["train", "--env", env, *algo, *argv])
    assert getattr(by_flag.config, name) == value and by_flag.sources[name] == "flag"
    file = tmp_path / "settings.yaml"
    file.write_text(yaml.safe_dump({"env": env, **_chosen(spec),
                                    name: list(value) if isinstance(value, tuple) else value}))
    by_file = parse_train(["train", "--config", str(file)])
    assert getattr(by_file.config, name) == value and by_file.sources[name] == "file"
    assert by_file.config == by_flag.config


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(["train", *argv, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", text))


def test_help_lists_every_field_of_every_algorithm(capsys):
    text = _help(capsys)
    for spec in _specs():
        for name in spec.fields:
            assert "--" + name.replace("_", "-") in text, name
    assert "--normalize-observations" in text and "Normalise observations" in text


def test_help_shows_the_preset_of_the_chosen_environment(capsys):
    text = _help(capsys, "--env", "Acrobot-v1")
    assert re.search(r"--total-steps INT .*?\(default: 1000000\)", text)
    assert "[preset of Acrobot-v1]" in text
    assert "--normalize-observations, --no-normalize-observations" in text
    assert "(tabular tasks or --algo reinforce/grpo only)" in text
    assert "--batch-size" in text


@pytest.mark.slow
def test_the_issues_yaml_file_trains_and_config_json_shows_each_value(tmp_path, capsys):
    file = tmp_path / "cartpole.yaml"
    file.write_text("env: CartPole-v1\nlr: 3e-4\nhidden: [32, 32]\nactivation: relu\n"
                    "normalize_observations: true\nanneal_lr: false\ntotal_steps: 1.024e3\n"
                    "num_steps: 64\neval_episodes: 2\n")
    out = tmp_path / "run"
    assert main(["train", "--config", str(file), "--json", "--out", str(out)]) == 0
    capsys.readouterr()
    config = json.loads((out / "config.json").read_text())["config"]
    assert (config["lr"], config["hidden"], config["activation"]) == (3e-4, [32, 32], "relu")
    assert (config["normalize_observations"], config["anneal_lr"]) == (True, False)
    assert (config["total_steps"], config["num_steps"], config["eval_episodes"]) == (1024, 64, 2)


def test_sources_preset_file_and_flags(tmp_path):
    file = tmp_path / "acrobot.toml"
    file.write_text('env = "Acrobot-v1"\nlr = 1e-3\ntotal_steps = 4096\n')
    request = parse_train(["train", "--config", str(file), "--num-steps", "64", "--lr", "2e-3"])
    assert request.config.lr == 2e-3 and request.config.total_steps == 4096
    assert request.config.num_envs == 8  # Acrobot-v1's preset
    assert request.sources == {"num_envs": "preset", "total_steps": "file", "lr": "flag",
                               "num_steps": "flag", "env": "file", "config": "flag"}
    assert request.given == {"total_steps", "lr", "num_steps", "env", "config"}
    run, _ = build(request)
    assert settings_line(run, request.sources, request.file) == (
        f"settings: preset of Acrobot-v1: num_envs=8; from {file}: total_steps=4096; "
        "flags: num_steps=64, lr=0.002")


def test_an_environment_without_a_preset_says_so_in_one_line_of_its_header(capsys):
    """The header's own line names the missing preset and the defaults taken among the
    headline's settings (those no flag gave); the settings line then lists only the flags."""
    request = parse_train(["train", "--env", "gymnax:CartPole-v1", "--total-steps", "512"])
    run, algo = build(request)
    header(run, algo, SimpleNamespace(path="runs/x"), request.sources)
    assert capsys.readouterr().out.splitlines()[2:] == [
        "no preset for gymnax:CartPole-v1: PPO's defaults (num_envs=4, num_steps=128, "
        "epochs=4, minibatches=4, lr=0.00025)",
        "settings: flags: total_steps=512"]
    request = parse_train(["train", "--env", "gymnax:CartPole-v1", "--num-envs", "8"])
    run, algo = build(request)
    header(run, algo, SimpleNamespace(path="runs/x"), request.sources)
    assert capsys.readouterr().out.splitlines()[2] == (  # a field given is no default
        "no preset for gymnax:CartPole-v1: PPO's defaults (num_steps=128, epochs=4, "
        "minibatches=4, lr=0.00025)")
    request = parse_train(["train", "--env", "gymnasium:Acrobot-v1"])  # no Box2D needed
    run, algo = build(request)
    header(run, algo, SimpleNamespace(path="runs/x"), request.sources)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and not any("no preset" in line for line in lines)
    assert lines[2].startswith(
        "settings: preset of gymnasium:Acrobot-v1: total_steps=1000000, num_envs=16, ")


@pytest.mark.parametrize("text, message", [
    ("hidden: abc", "config '{f}': hidden must be a whole number, got 'abc'"),
    ("normalize_observations: 1", "normalize_observations must be true or false, got 1"),
    ("activation: sigmoid", "activation must be one of tanh, relu, got 'sigmoid'"),
    ("lr: fast", "lr must be a number, got 'fast'"),
    ("total_steps: 1.5e3.0", "total_steps must be a whole number"),
    ("hidden_sizes: [8]", "unknown key 'hidden_sizes'; did you mean hidden?"),
    ("updates: 3",  # a key of the file, named as such
     "config '{f}': updates only applies to tabular tasks or --algo reinforce/grpo; "
     "CartPole-v1 is neural"),
])
def test_bad_file_values_are_one_line_naming_the_key(tmp_path, capsys, text, message):
    file = tmp_path / "bad.yaml"
    file.write_text("env: CartPole-v1\n" + text + "\n")
    assert main(["train", "--config", str(file), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message.format(f=file) in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_preset_value_may_be_swept_but_a_given_one_may_not():
    request = parse_train(["train", "--env", "Pendulum-v1", "--sweep", "lr=1e-3,3e-4"])
    run, _ = build(request)
    assert run.sweep == {"lr": (1e-3, 3e-4)}
    request = parse_train(["train", "--env", "Pendulum-v1", "--lr", "1e-3", "--sweep",
                           "lr=1e-3,3e-4"])
    with pytest.raises(ValueError, match="sweep: 'lr' is also set on its own"):
        build(request)


def test_settings_in_the_library_take_the_preset_and_name_unknown_ones():
    run, _ = from_settings({"env": "Acrobot-v1", "total_steps": 2048, "hidden": (8,)})
    assert (run.config.num_envs, run.config.hidden) == (8, (8,))
    with pytest.raises(ValueError, match="unknown setting 'lrr'; did you mean lr"):
        from_settings({"env": "CartPole-v1", "lrr": 1e-3})


def test_the_command_line_and_the_library_build_the_same_run(monkeypatch):
    """One choose step (run.config.make_and_choose) and one configure step: the same
    settings give the same RunConfig through rollax train's choose, parse_train and build as
    through from_settings, and the command line builds its environment once."""
    import importlib

    run_config = importlib.import_module("rollax.run.config")
    cli_parse = importlib.import_module("rollax.cli.parse")  # rollax.cli.parse: the function
    made = []
    real = run_config.make_env

    def make_env(*args):
        made.append(args)
        return real(*args)

    for module in (run_config, cli_parse):
        monkeypatch.setattr(module, "make_env", make_env)
    by_flags, algo = build(parse_train(["train", "--env", "corridor", "--horizon", "5", "--algo",
                                        "reinforce", "--updates", "3", "--lr", "0.5",
                                        "--seeds", "2"]))
    assert made == [("corridor", 5)]
    by_library, _ = from_settings({"env": "corridor", "horizon": 5, "algo": "reinforce",
                                   "updates": 3, "lr": 0.5, "seeds": 2})
    assert by_flags == by_library
    assert (by_flags.config.horizon, by_flags.config.lr, by_flags.seeds) == (5, 0.5, 2)
    assert by_flags.spec.method(by_flags.config) == "reinforce" and algo.env.horizon == 5


def test_field_docs_read_each_class_once(monkeypatch):
    import inspect

    from rollax.cli import flags

    reads = []
    real = inspect.getsource

    def getsource(obj):
        reads.append(obj)
        return real(obj)

    monkeypatch.setattr(inspect, "getsource", getsource)
    spec = registry.by_name("ppo")
    first = flags.train_fields(spec, {}, {})
    assert flags.train_fields(spec, {}, {}) == first
    assert len(reads) == len(set(reads))  # a class's source parsed at most once

"""The suite table behind ``make("<suite>:<id>")``: names, dispatch, and the one-line error with
the install command for every suite that is not installed (the adapters' own tests, which need
the suites, are under tests/suites and run in CI's second venv)."""

from __future__ import annotations

import re

import pytest

import rollax
from rollax.cli import main
from rollax.envs import registry, suites

MISSING = [s for s in suites.SUITES.values() if not s.installed]


def test_every_suite_has_an_adapter_with_make_and_ids():
    for suite in suites.SUITES.values():
        module = suites.adapter(suite)
        assert callable(module.make) and callable(module.ids), suite
        assert re.fullmatch(r"[a-z]+", suite.prefix)


def test_split_suite_reads_only_known_prefixes():
    assert suites.split_suite("gymnax:CartPole-v1") == (suites.SUITES["gymnax"], "CartPole-v1")
    assert suites.split_suite("CartPole-v1") is None
    assert suites.split_suite("nosuch:thing") is None
    assert suites.split_suite(3) is None


def test_suite_prefixes_are_reserved():
    with pytest.raises(ValueError, match="reserved for gymnax"):
        registry.register("gymnax:Mine", lambda: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("suite", MISSING, ids=lambda s: s.prefix)
def test_a_missing_suite_names_its_install_command(suite, capsys, monkeypatch):
    install = f"`pip install rollax[{suite.extra}]`"
    with pytest.raises(ValueError, match=re.escape(install)):
        rollax.make(f"{suite.prefix}:Anything")
    assert main(["check-env", f"{suite.prefix}:Anything"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and install in err
    assert suites.adapter(suite).ids() == ()

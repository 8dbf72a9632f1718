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


def test_suite_ids_are_kept_per_version_and_listed_again_when_it_changes(tmp_path, monkeypatch):
    """``suite_ids`` lists each installed suite once and keeps the list under its version and
    adapter source: a second call reads the file (the adapter's ``ids`` is not called), the
    same ids; a file from another version is replaced; Gymnasium's ids are never kept (other
    packages extend its registry); an unreadable file is listed over."""
    import json

    pytest.importorskip("gymnax")
    from rollax.envs.suites import gymnax as gymnax_adapter

    path = tmp_path / "ids.json"
    first = suites.suite_ids(path)
    assert "gymnax:Breakout-MinAtar" in first
    kept = json.loads(path.read_text())
    (stamp,) = [k for k in kept if k.startswith("gymnax ")]
    assert stamp.split()[1] == __import__("importlib.metadata").metadata.version("gymnax")
    assert not any(k.startswith("gymnasium ") for k in kept)

    def listed():
        raise AssertionError("listed again")

    monkeypatch.setattr(gymnax_adapter, "ids", listed)
    assert suites.suite_ids(path) == first
    monkeypatch.undo()

    kept[stamp.replace("gymnax ", "gymnax 0.0.0-old ", 1)] = ["Old-v0"]
    del kept[stamp]
    path.write_text(json.dumps(kept))
    assert suites.suite_ids(path) == first
    assert not any("0.0.0-old" in k for k in json.loads(path.read_text()))
    path.write_text("{not json")
    assert suites.suite_ids(path) == first

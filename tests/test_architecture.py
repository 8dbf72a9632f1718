"""The shape docs/architecture.md promises, checked on the source so that it stays true: no
import cycle, the math modules apart from the outer ring, no module importing another's
underscored names, no branching on an algorithm's name outside ``rollax/algos/``, no
algorithm module imported by the command line or by another algorithm, and no module past ~700
lines (cohesion, not a line count, decides where a module splits; the cap only catches one that
grew unread)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rollax.algos import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "rollax"
MODULES = sorted(SRC.rglob("*.py"))
MATH = ("envs", "policies", "nets", "recurrent", "collect", "returns", "losses", "exact",
        "gradients")
OUTER = ("run", "cli")
ALGORITHM_NAMES = {name for spec in registry.algorithms() for name in (spec.name, *spec.methods)}
"""Every registered algorithm's name and the methods it offers (--algo values)."""


def _name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(name: str) -> str:
    """``rollax.envs.base`` -> ``envs``; ``rollax`` -> ``""``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``rollax`` import, at any depth (lazy ones included)."""
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rollax"):
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("rollax")]
    return out


def _resolve(module: str, names: list[str], known: set[str]) -> set[str]:
    """The rollax modules an import statement depends on."""
    deps = {f"{module}.{n}" for n in names if f"{module}.{n}" in known}
    return deps or ({module} if module in known else set())


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_past_700_lines(path):
    assert len(path.read_text().splitlines()) <= 700, f"{_name(path)} has over 700 lines"


def test_no_import_cycle():
    known = {_name(p) for p in MODULES}
    graph = {_name(p): set() for p in MODULES}
    for path in MODULES:
        for module, names in _imports(path):
            graph[_name(path)] |= _resolve(module, names, known) - {_name(path)}
    # a package's __init__ re-exporting its modules is not a cycle through them
    graph = {m: {d for d in deps if not m.startswith(d + ".") and not d.startswith(m + ".")}
             for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph[node]):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*stack, node, dep])
            if dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


@pytest.mark.parametrize("path", [p for p in MODULES if _layer(_name(p)) in MATH],
                         ids=_name)
def test_math_modules_import_no_outer_ring(path):
    for module, _ in _imports(path):
        assert _layer(module) not in OUTER, f"{_name(path)} imports {module}"


@pytest.mark.parametrize("path", [p for p in MODULES if _layer(_name(p)) == "algos"],
                         ids=_name)
def test_algorithms_import_no_outer_ring(path):
    """An algorithm is math and a compiled program: runs, folders and the CLI build on it."""
    for module, _ in _imports(path):
        assert _layer(module) not in OUTER, f"{_name(path)} imports {module}"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_underscored_names_across_modules(path):
    for module, names in _imports(path):
        private = [n for n in names if n.startswith("_") and n != "__version__"]
        assert not private, f"{_name(path)} imports {private} from {module}"


@pytest.mark.parametrize("path", [p for p in MODULES if "algos" not in p.parts], ids=_name)
def test_no_branching_on_algorithm_names_outside_algos(path):
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Compare):
            strings = {c.value for c in [node.left, *node.comparators]
                       if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            assert not strings & ALGORITHM_NAMES, (
                f"{_name(path)}:{node.lineno} compares with {strings & ALGORITHM_NAMES}")


@pytest.mark.parametrize("path", [p for p in MODULES if "algos" not in p.parts
                                  and p != SRC / "__init__.py"], ids=_name)
def test_no_module_outside_algos_names_an_algorithm(path):
    """Only the algorithms' own modules, the registry's table of module paths and the
    package's export list (``rollax.ppo``, ``rollax.a2c``, ...) spell an algorithm's name:
    every other layer learns the names from the registry."""
    names = ALGORITHM_NAMES - {"tabular"}  # also a kind of task, and a TabularEnv's name
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value not in names, f"{_name(path)}:{node.lineno} names {node.value!r}"


@pytest.mark.parametrize("path", [p for p in MODULES if "cli" in p.parts], ids=_name)
def test_the_command_line_holds_no_per_algorithm_code(path):
    """The CLI reaches algorithms through the registry only: it imports no algorithm module,
    so adding one never changes the CLI."""
    for module, names in _imports(path):
        imported = [module] + [f"{module}.{n}" for n in names]
        assert not any(m.startswith("rollax.algos.") and m.split(".")[2] not in (
            "registry", "base") for m in imported), f"{_name(path)} imports {module} {names}"


@pytest.mark.parametrize("path", [p for p in MODULES if _layer(_name(p)) == "algos"
                                  and p.stem not in ("__init__", "registry")], ids=_name)
def test_no_algorithm_imports_another(path):
    """Algorithms compose what they share from its one home (``base``, ``optim``, ``rollout``,
    ``episodic``, ``losses``, ``nets``, ...), never from another algorithm's module: renaming
    a setting of one algorithm cannot change another."""
    known = {_name(p) for p in MODULES}
    algorithms = set(registry.BUILT_IN) - {_name(path)}
    for module, names in _imports(path):
        found = _resolve(module, names, known) & algorithms
        assert not found, f"{_name(path)} imports {sorted(found)}"

"""The shape docs/architecture.md promises, checked on the source so that it stays true: no
import cycle, the math modules apart from the outer ring, no module importing another's
underscored names, no branching on an algorithm's name outside ``rollax/algos/``, no
algorithm module imported by the command line or by another algorithm, no module past ~700
lines (cohesion, not a line count, decides where a module splits; the cap only catches one that
grew unread), and the path every training run takes read in short parts.

Each rule is one test over every module; a failure lists every offender, not the first.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from rollax.algos import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "rollax"
MODULES = sorted(SRC.rglob("*.py"))
MATH = ("envs", "policies", "distributions", "nets", "recurrent", "collect", "returns", "losses",
        "exact", "gradients", "games")
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


def _offenders(found: list[str], rule: str) -> None:
    """Fail with every offender of ``rule``, one a line."""
    assert not found, f"{rule}: {len(found)} offender(s)\n" + "\n".join(found)


def test_no_module_past_700_lines():
    found = [f"{_name(p)} has {n} lines" for p in MODULES
             if (n := len(p.read_text().splitlines())) > 700]
    _offenders(found, "modules past 700 lines")


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
    cycles: list[str] = []

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append("import cycle: " + " -> ".join([*stack, node, dep]))
            elif dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    _offenders(cycles, "import cycles")


def test_math_modules_import_no_outer_ring():
    found = [f"{_name(p)} imports {module}" for p in MODULES if _layer(_name(p)) in MATH
             for module, _ in _imports(p) if _layer(module) in OUTER]
    _offenders(found, f"math modules ({', '.join(MATH)}) importing {OUTER}")


def test_algorithms_import_no_outer_ring():
    """An algorithm is math and a compiled program: runs, folders and the CLI build on it."""
    found = [f"{_name(p)} imports {module}" for p in MODULES if _layer(_name(p)) == "algos"
             for module, _ in _imports(p) if _layer(module) in OUTER]
    _offenders(found, f"algorithm modules importing {OUTER}")


def test_no_underscored_names_across_modules():
    found = [f"{_name(p)} imports {private} from {module}" for p in MODULES
             for module, names in _imports(p)
             if (private := [n for n in names if n.startswith("_") and n != "__version__"])]
    _offenders(found, "underscored names imported from another module")


def test_no_branching_on_algorithm_names_outside_algos():
    found = []
    for path in [p for p in MODULES if "algos" not in p.parts]:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Compare):
                strings = {c.value for c in [node.left, *node.comparators]
                           if isinstance(c, ast.Constant) and isinstance(c.value, str)}
                if strings & ALGORITHM_NAMES:
                    found.append(f"{_name(path)}:{node.lineno} compares with "
                                 f"{strings & ALGORITHM_NAMES}")
    _offenders(found, "comparisons with an algorithm's name outside rollax/algos/")


def test_no_module_outside_algos_names_an_algorithm():
    """Only the algorithms' own modules, the registry's table of module paths and the
    package's export list (``rollax.ppo``, ``rollax.a2c``, ...) spell an algorithm's name:
    every other layer learns the names from the registry."""
    names = ALGORITHM_NAMES - {"tabular"}  # also a kind of task, and a TabularEnv's name
    found = [f"{_name(p)}:{node.lineno} names {node.value!r}"
             for p in MODULES if "algos" not in p.parts and p != SRC / "__init__.py"
             for node in ast.walk(_tree(p))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and node.value in names]
    _offenders(found, "algorithm names spelled outside rollax/algos/")


def test_the_command_line_holds_no_per_algorithm_code():
    """The CLI reaches algorithms through the registry only: it imports no algorithm module,
    so adding one never changes the CLI."""
    found = []
    for path in [p for p in MODULES if "cli" in p.parts]:
        for module, names in _imports(path):
            imported = [module] + [f"{module}.{n}" for n in names]
            if any(m.startswith("rollax.algos.") and m.split(".")[2] not in ("registry", "base")
                   for m in imported):
                found.append(f"{_name(path)} imports {module} {names}")
    _offenders(found, "command-line modules importing an algorithm module")


def test_no_algorithm_imports_another():
    """Algorithms compose what they share from its one home (``base``, ``optim``, ``rollout``,
    ``episodic``, ``losses``, ``nets``, ...), never from another algorithm's module: renaming
    a setting of one algorithm cannot change another."""
    known = {_name(p) for p in MODULES}
    found = []
    for path in [p for p in MODULES if _layer(_name(p)) == "algos"
                 and p.stem not in ("__init__", "registry")]:
        algorithms = set(registry.BUILT_IN) - {_name(path)}
        for module, names in _imports(path):
            if hits := _resolve(module, names, known) & algorithms:
                found.append(f"{_name(path)} imports {sorted(hits)}")
    _offenders(found, "algorithm modules importing another algorithm")


def test_algorithms_hold_no_command_line_text():
    # what algos/ says at run time (messages, labels) names settings, never flags: the
    # command line and run/ word them; docstrings (bare string statements) are documentation
    flag = re.compile(r"--[a-z]")
    docstrings: set[int] = set()
    found = []
    for path in MODULES:
        if _layer(_name(path)) != "algos":
            continue
        tree = _tree(path)
        docstrings = {id(node.value) for node in ast.walk(tree)
                      if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
        found += [f"{_name(path)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings and flag.search(node.value)]
    _offenders(found, "command-line text in an algorithm module")


TRAINING_PATH = ("run/experiment.py", "run/training.py", "run/progress.py")
"""The modules every training run goes through: the lanes and their programs, the loop over
chunks and its bookkeeping."""


def test_the_training_path_reads_in_short_parts():
    """Each function of the training path fits on a screen (at most 50 lines) and keeps no
    state in an enclosing function's variables (``nonlocal``): what a chunk changes lives in
    a named type (``progress.Clock``, ``training.Recorder``)."""
    found = []
    for path in (SRC / name for name in TRAINING_PATH):
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (lines := node.end_lineno - node.lineno + 1) > 50:
                    found.append(f"{_name(path)}.{node.name}:{node.lineno} has {lines} lines")
            elif isinstance(node, ast.Nonlocal):
                found.append(f"{_name(path)}:{node.lineno} nonlocal {', '.join(node.names)}")
    _offenders(found, "long functions or nonlocal state on the training path")


def test_one_test_of_a_typed_key():
    """Whether a value is a typed PRNG key is asked of ``rollax.keys.is_key`` alone: no other
    module reads a key's dtype itself (the several copies had drifted apart: one took a
    ``jax.ShapeDtypeStruct`` for a key, another did not)."""
    found = [f"{_name(p)}:{node.lineno} reads prng_key" for p in MODULES
             if p != SRC / "keys.py" for node in ast.walk(_tree(p))
             if isinstance(node, ast.Attribute) and node.attr == "prng_key"]
    _offenders(found, "a typed key tested outside rollax.keys")


def test_distributions_sit_below_the_networks_and_the_policies():
    """The action distributions import nothing of rollax, so the networks and the policies
    both import them from below; ``rollax.nets.distributions`` re-exports them for the code
    that imports them there."""
    import rollax.distributions as base
    import rollax.nets.distributions as old

    assert _imports(SRC / "distributions.py") == []
    assert all(getattr(old, name) is getattr(base, name) for name in old.__all__)

"""Settings for the whole test session.

**One compile cache per session.** The tests compile the same programs again and again (every
``make_train`` builds a fresh closure, every ``rollax train`` in-process or in a subprocess a
fresh process-level cache). The session turns JAX's persistent compilation cache on in ONE
fresh temporary folder, created by the pytest process that starts the session (the xdist
controller, or the only process without xdist), handed to the xdist workers
(``workerinput``) and, through ``ROLLAX_COMPILE_CACHE``, to every ``rollax`` subprocess; it
is removed when the session ends. The user's ``~/.cache`` is never read or written, and no
test depends on what an earlier test compiled (a miss compiles, a hit loads the very program
a miss would compile). tests/run/test_compile_cache.py gives its subprocesses folders of their
own (and ``ROLLAX_COMPILE_CACHE=off``) to test the cache itself.

**Programs compiled with few optimisations.** Most tests are tiny programs whose compilation
costs far more than their run, so the session compiles them as JAX's
``jax_disable_most_optimizations`` does (LLVM's cheap pipeline; the same HLO), in this process
and, through ``JAX_DISABLE_MOST_OPTIMIZATIONS``, in every subprocess: about a third less time.
The results differ from the default compilation in the last bits of some floats, so a test
whose claim is about the program users run, compiled as ``rollax`` compiles it (documentation
output compared as text; results bit-identical across two differently built programs: chunk
sizes, resumes, lanes, devices) is marked ``optimized`` and compiles with the defaults. So is a
learning check whose run is long enough that the default program, compiled and run, takes less
time (measured one by one: A2C's and the episodic methods' CartPole presets); every other
learning check is faster compiled cheaply (the whole ``slow`` set took 2.1x longer optimised).
The mark goes on those tests alone, not on their modules: a test beside them about files,
refusals or which programs are lowered compiles cheaply, and so do the other rows of a claim
whose PPO row is marked (tests/algos/test_algorithms.py: each algorithm's state is whole at a
checkpoint, and its checked mode takes no key and changes no data, which hold however XLA
optimises).
"""

import contextlib
import gc
import io
import os
import shutil
import tempfile
from pathlib import Path

import jax
import pytest
from jax._src import compiler  # private: see _cheap_compile_options

from rollax.run import compile_cache

# A silent (T, B) vs (T, B, 1) broadcast is an error in the tests.
jax.config.update("jax_numpy_rank_promotion", "raise")
# The tests' claims are about the mathematics (a gradient equals its formula, two programs give
# the same numbers): float32 products are computed in float32 everywhere. The CPU does so by
# default; a TPU's default passes float32 operands through bfloat16 (relative errors ~1e-3).
jax.config.update("jax_default_matmul_precision", "highest")

_KEY = "rollax_compile_cache"
"""The session's cache folder in ``config.workerinput`` (xdist workers)."""

_folder: list[str] = []
"""The session's cache folder, once :func:`pytest_configure` has run."""

_CHEAP = "JAX_DISABLE_MOST_OPTIMIZATIONS"
"""JAX's switch, read by ``rollax`` subprocesses when they import JAX."""

_optimised: list[bool] = []
"""Whether this process compiles as ``rollax`` does now (empty before the session starts)."""

_owned = pytest.StashKey[str]()
"""The folder this process created (and removes at the end of the session)."""


def pytest_configure(config):
    # MuJoCo picks its OpenGL platform when first imported (a test module importing brax or
    # Gymnasium's MuJoCo tasks at collection, before rollax's adapter could choose EGL for a
    # machine without a display): pictures of Brax states (rollax render) need EGL here
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _KEY in workerinput:
        folder = workerinput[_KEY]  # an xdist worker: the controller's folder
    else:
        folder = tempfile.mkdtemp(prefix="rollax-tests-jax-cache-")
        config.stash[_owned] = folder
    _folder.append(folder)
    # subprocesses (`python -m rollax ...`) and in-process `rollax.cli.main` read it here
    os.environ[compile_cache.ENV_VAR] = folder
    # library calls (make_train, collect, ...) in this process use it too
    compile_cache.enable(folder)
    # XLA reads XLA_FLAGS at this process's first compilation, here, as the user set them (an
    # xdist worker inherits the controller's, which _optimise below edits for subprocesses)
    os.environ["XLA_FLAGS"] = _without_cheap_flags(os.environ.get("XLA_FLAGS", ""))
    jax.jit(lambda x: x + 1)(0).block_until_ready()
    gc.set_threshold(*_GC_THRESHOLDS)
    compiler.get_compile_options = _cheap_compile_options(compiler.get_compile_options)
    _optimise(False)


_GC_THRESHOLDS = (10_000, 20, 10)
"""Python's cyclic garbage collector runs after 10,000 net allocations (700 by default), and
the objects alive once the tests are collected are frozen out of its reach (JAX's and the
libraries' modules): tracing allocates many short-lived objects, and the collector walked them
and the whole heap again and again (about 5 % of the CPU time under ``perf``). Measured on
``tests/algos`` with ``-n 2`` (frozen once configured): 158 and 165 s by default, 150 s so
(148 and 154 s with rarer full collections). Memory is still freed by reference counts;
cycles wait a little longer."""


def pytest_collection_finish(session):
    """Every test module is imported: what is alive now stays alive, out of the collector's
    walks (:data:`_GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    """The tests marked ``optimized`` run first, in their order, then the rest. A process
    empties JAX's in-memory caches whenever it switches between compiling as ``rollax`` does
    and compiling cheaply (:func:`_optimise`), and a program used again after a switch is
    traced, lowered and read from the session's compile cache anew. In collection order the
    marked tests lie in 15 stretches among the others; ordered so, each xdist worker switches
    once (the whole suite read 1,451 programs from the cache instead of 2,579, with the same
    5,800 compiles), and the costliest tests, the executed documentation among them, start
    first rather than last."""
    items.sort(key=lambda item: item.get_closest_marker("optimized") is None)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist (controller): each worker gets the session's folder."""
    node.workerinput[_KEY] = node.config.stash[_owned]


def pytest_unconfigure(config):
    folder = config.stash.get(_owned, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _optimise(on: bool) -> None:
    """Compile as ``rollax`` does (``on``) or cheaply from now on, here and in subprocesses.
    JAX's in-memory caches do not key on the switch, so they are emptied when it flips (the
    session's compile cache on disk does)."""
    os.environ[_CHEAP] = "0" if on else "1"
    flags = _without_cheap_flags(os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = flags if on else " ".join([flags, *_CHEAP_FLAGS]).strip()
    if _optimised != [on]:
        if _optimised:
            jax.clear_caches()
        jax.config.update("jax_disable_most_optimizations", not on)
        _optimised[:] = [on]


_CHEAP_XLA = {"xla_cpu_use_fusion_emitters": False, "xla_cpu_parallel_codegen_split_count": 1}
"""XLA's CPU options of cheap compilation. ``xla_cpu_use_fusion_emitters`` off: XLA's older
code generator for fused loops, which compiles the tests' programs in about half the time of the
default (measured on tests/algos/test_algorithms.py: 104 s -> 58 s). ``split_count`` 1: LLVM
generates a program's code as one module instead of splitting it to generate the parts in
threads, which costs CPU time on a machine whose cores the two workers already keep busy
(a small PPO program's compile: 1.08-1.20 CPU s -> 0.91-0.98)."""

_CHEAP_FLAGS = tuple(f"--{name}={str(value).lower()}" for name, value in _CHEAP_XLA.items())
""":data:`_CHEAP_XLA` as ``XLA_FLAGS`` words, for subprocesses."""


def _without_cheap_flags(flags: str) -> str:
    """``XLA_FLAGS`` without the words of :data:`_CHEAP_FLAGS`."""
    return " ".join(word for word in flags.split() if word not in _CHEAP_FLAGS)


def _cheap_compile_options(get_compile_options):
    """``get_compile_options`` that adds :data:`_CHEAP_XLA` to every compilation of
    this process while it compiles cheaply. XLA reads ``XLA_FLAGS`` once per process, so this
    process cannot switch it there; JAX's per-compilation overrides (``compiler_options``,
    part of the persistent cache's key) can, and subprocesses read ``XLA_FLAGS``."""
    def patched(*args, env_options_overrides=None, **kwargs):
        if not _optimised[-1]:
            env_options_overrides = {**_CHEAP_XLA, **(env_options_overrides or {})}
        return get_compile_options(*args, env_options_overrides=env_options_overrides,
                                   **kwargs)
    return patched


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test marked ``optimized`` compiles as ``rollax`` does (the defaults), in this process
    and its subprocesses, from before its fixtures are built (a module's fixture first built
    for it compiles so too); every other test compiles with few optimisations."""
    _optimise(item.get_closest_marker("optimized") is not None)


@pytest.fixture(autouse=True)
def session_compile_cache():
    """After each test, the session's cache again (a test may turn it off, e.g. with
    ``rollax train --no-compile-cache``, or point it elsewhere)."""
    yield
    if _folder and compile_cache.current() != _folder[0]:
        compile_cache.enable(_folder[0])


TABULAR_RUN = ["train", "--json", "--updates", "4", "--batch-size", "16", "--chunk-size", "2",
               "--checkpoint-every", "2"]
"""The shared tabular run (``--out`` added): 4 tabular PPO updates on the corridor,
checkpoints at updates 2 and 4."""


@pytest.fixture(scope="session")
def tabular_run(tmp_path_factory) -> Path:
    """A finished run of :data:`TABULAR_RUN`, trained once per session (per xdist worker).
    Read-only: a test that breaks or resumes a run copies it first."""
    from rollax.cli import main

    run = tmp_path_factory.mktemp("tabular-run") / "run"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([*TABULAR_RUN, "--out", str(run)]) == 0
    return run

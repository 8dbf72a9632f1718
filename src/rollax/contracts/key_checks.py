"""The key checks of ``check_env``: which keys ``reset`` and ``step`` consume, read off their
jaxprs (traced with ``jax.make_jaxpr``, never compiled).

Every key value is an :class:`Atom`: the key argument, a key in the state, each key a
``random_split`` or ``random_fold_in`` makes, a constant key (``random_seed``, a captured
constant). A key-typed variable of the jaxpr holds an array of atoms of its shape; slicing,
reshaping and broadcasting move atoms around (broadcasting one key repeats its atom), and
``random_unwrap`` / ``random_wrap`` keep them. ``random_bits``, ``random_split`` and
``random_fold_in`` each consume every atom they are given, once; inside a ``scan`` or
``while_loop`` a key the body does not replace is consumed on every iteration. Each value
also carries whether it derives from the key argument (``KEY``) or from another argument
(``INPUT``), which tells where a ``random_bits`` draw gets its randomness.

Sub-jaxprs (``jit``, ``cond``, ``while``, ``scan``, ``custom_jvp`` / ``custom_vjp``,
``remat``, ...) are walked; an unknown primitive's key outputs are new keys (or the one key
all its key inputs share).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, NamedTuple

import jax
import numpy as np
from jax._src import source_info_util
from jax.extend import core

from rollax.contracts.env_run import EnvRun
from rollax.contracts.registry import NotRun
from rollax.contracts.report import WARNING, CheckResult, Finding, judge, outcome
from rollax.envs.base import Environment, step_with_key
from rollax.envs.suites.base import SuiteEnvironment
from rollax.keys import is_key
from rollax.validate import counted

KEY, INPUT = 1, 2
"""Dependence bits of a value: on the key argument, on another argument."""

CONSUMERS = ("random_bits", "random_split", "random_fold_in")
DRAWS = ("random_bits", "threefry2x32")
SAME_KEYS = ("random_clone", "copy", "copy_p", "device_put", "optimization_barrier")
CALL_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
MAX_ATOMS = 1 << 16
"""Larger key arrays are not followed (their keys count as new)."""


class Atom:
    """One key value; ``label`` names it in messages (identity is the object's)."""

    def __init__(self, label: str) -> None:
        self.label = label


class Val(NamedTuple):
    """What the walk knows of one jaxpr variable."""

    dep: int
    """``KEY`` / ``INPUT`` bits."""
    atoms: np.ndarray | None = None
    """For a key array (or its key data, ``data``): one atom per key; None when not a key."""
    data: bool = False


class Use(NamedTuple):
    """One consumption of a key: the primitive, where, how many times."""

    primitive: str
    where: str
    times: int = 1


@dataclasses.dataclass
class Uses:
    """What a walk saw: the uses of every atom, and every draw with its key's dependence."""

    consumed: dict = dataclasses.field(default_factory=dict)
    draws: list = dataclasses.field(default_factory=list)

    def consume(self, atoms: np.ndarray, use: Use) -> None:
        for atom in atoms.ravel():
            self.consumed.setdefault(atom, []).append(use)

    def merge(self, other: Uses, repeated: set, loop: str = "", times: int = 1) -> None:
        """Add ``other``'s uses; those of ``repeated`` atoms happen ``times`` times."""
        for atom, uses in other.consumed.items():
            if atom in repeated and times > 1:
                uses = [Use(u.primitive, f"{u.where} on every iteration of a {loop}",
                            u.times * times) for u in uses]
            self.consumed.setdefault(atom, []).extend(uses)
        self.draws += other.draws


def _new(aval: Any, label: str, dep: int) -> Val:
    """A fresh atom per key of ``aval`` (a key array), or a plain value."""
    if not is_key(aval):
        return Val(dep)
    shape = tuple(aval.shape)
    if int(np.prod(shape)) > MAX_ATOMS:
        return Val(dep)
    atoms = np.empty(shape, object)
    for index in np.ndindex(shape):
        atoms[index] = Atom(label)
    return Val(dep, atoms)


ROLLAX = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""rollax's own source folder: a key reuse in a suite's code, not in its adapter, is outside."""
_PATH = re.compile(r"[^\s:()']*[/\\]([^/\\\s:()']+\.py)")


def _where(eqn: Any) -> str:
    """``/path/to/file.py:line`` of the user code that made ``eqn`` (messages show the file's
    name only: :func:`_short`)."""
    frame = source_info_util.user_frame(eqn.source_info.traceback)
    return "?" if frame is None else f"{frame.file_name}:{frame.start_line}"


def _short(text: str) -> str:
    """``text`` with every ``/path/to/file.py`` written ``file.py``."""
    return _PATH.sub(r"\1", text)


def _moved(name: str, params: dict, ins: list[Val]) -> np.ndarray | None:
    """Atoms of a structural op's output, or None when ``name`` is not one."""
    arrays = [v.atoms for v in ins if v.atoms is not None and not v.data]
    if not arrays or len(arrays) != len([v for v in ins if v.atoms is not None]):
        return None
    a = arrays[0]
    if name == "slice":
        strides = params["strides"] or (1,) * a.ndim
        return a[tuple(slice(s, e, k) for s, e, k in
                       zip(params["start_indices"], params["limit_indices"], strides))]
    if name == "squeeze":
        return np.squeeze(a, axis=tuple(params["dimensions"]))
    if name == "reshape":
        return a.reshape(params["new_sizes"])
    if name == "transpose":
        return a.transpose(params["permutation"])
    if name == "broadcast_in_dim":
        shape = [1] * len(params["shape"])
        for i, d in enumerate(params["broadcast_dimensions"]):
            shape[d] = a.shape[i]
        return np.broadcast_to(a.reshape(shape), params["shape"])
    if name == "concatenate" and len(arrays) == len(ins):
        return np.concatenate(arrays, axis=params["dimension"])
    return None


class Walker:
    """Walks one jaxpr, recording into :class:`Uses`."""

    def walk(self, jaxpr: Any, consts: list[Val], args: list[Val], uses: Uses,
             where: str | None = None) -> list[Val]:
        """The output values of ``jaxpr`` (a ``core.Jaxpr``); ``where`` overrides the
        location of every equation (inside a ``jit``, whose jaxpr may be cached from
        another call site)."""
        env: dict = {}

        def read(v: Any) -> Val:
            if isinstance(v, core.Literal):
                return _new(v.aval, "a constant key", 0)
            return env[v]

        for var, val in zip(jaxpr.constvars, consts):
            env[var] = val
        for var, val in zip(jaxpr.invars, args):
            env[var] = val
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            outs = self.eqn(eqn, ins, uses, where or _where(eqn), where)
            for var, val in zip(eqn.outvars, outs):
                env[var] = val
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn: Any, ins: list[Val], uses: Uses, here: str,
            where: str | None) -> list[Val]:
        name, params = eqn.primitive.name, eqn.params
        dep = 0
        for v in ins:
            dep |= v.dep
        outs = [v.aval for v in eqn.outvars]
        if name in DRAWS:
            key_dep = ins[0].dep | (ins[1].dep if name == "threefry2x32" else 0)
            uses.draws.append((name, here, key_dep))
        if name in CONSUMERS and ins[0].atoms is not None and not ins[0].data:
            uses.consume(ins[0].atoms, Use(name, here))
        if name in ("random_split", "random_fold_in"):
            return [_new(outs[0], f"a key from {name} at {here}", dep)]
        if name == "random_seed":
            return [_new(outs[0], f"a key seeded at {here}", dep)]
        if name == "random_unwrap":
            return [Val(dep, ins[0].atoms, True)]
        if name == "random_wrap":
            atoms = ins[0].atoms if ins[0].data else None
            return [Val(dep, atoms) if atoms is not None else
                    _new(outs[0], f"a key wrapped at {here}", dep)]
        if name in SAME_KEYS:
            return list(ins)
        if name == "cond":
            return self.cond(params["branches"], ins, outs, uses, where, dep)
        if name == "scan":
            n = params["num_consts"]
            return self.loop(params["jaxpr"], ins[:n], ins[n:], params["num_carry"],
                             params["length"], "scan", uses, where, outs)
        if name == "while":
            c, b = params["cond_nconsts"], params["body_nconsts"]
            self.walk(params["cond_jaxpr"].jaxpr, [], ins[:c] + ins[c + b:], uses, where)
            return self.loop(params["body_jaxpr"], ins[c:c + b], ins[c + b:],
                             len(ins) - c - b, 2, "while_loop", uses, where, outs)
        for param in CALL_PARAMS:
            sub = params.get(param)
            jaxpr = getattr(sub, "jaxpr", sub)
            if (isinstance(jaxpr, core.Jaxpr) and len(jaxpr.invars) == len(ins)
                    and len(jaxpr.outvars) == len(outs)):
                consts = [Val(0, _new(v.aval, "a constant key", 0).atoms)
                          for v in jaxpr.constvars]
                return self.walk(jaxpr, consts, ins, uses, where or here)
        moved = _moved(name, params, ins)
        if moved is not None:
            return [Val(dep, moved)]
        return [self.other(aval, ins, f"the key from {name} at {here}", dep) for aval in outs]

    @staticmethod
    def other(aval: Any, ins: list[Val], label: str, dep: int) -> Val:
        """An unknown key output: the one key all key inputs hold, else new keys."""
        if not is_key(aval):
            return Val(dep)
        held = {id(a): a for v in ins if v.atoms is not None for a in v.atoms.ravel()}
        if len(held) == 1:
            return Val(dep, np.full(tuple(aval.shape), next(iter(held.values())), object))
        return _new(aval, label, dep)

    def cond(self, branches: Any, ins: list[Val], outs: list, uses: Uses, where: str | None,
             dep: int) -> list[Val]:
        """One branch runs: the uses of the branch that uses each key most."""
        results, per_branch = [], []
        for branch in branches:
            sub = Uses()
            results.append(self.walk(branch.jaxpr, [], ins[1:], sub, where))
            per_branch.append(sub)
        for atom in {a for sub in per_branch for a in sub.consumed}:
            uses.consumed.setdefault(atom, []).extend(max(
                (sub.consumed.get(atom, []) for sub in per_branch),
                key=lambda us: sum(u.times for u in us)))
        for sub in per_branch:
            uses.draws += sub.draws
        vals = []
        for i, aval in enumerate(outs):
            first = results[0][i]
            d = ins[0].dep
            for r in results:
                d |= r[i].dep
            same = first.atoms is not None and all(
                r[i].atoms is not None and r[i].atoms.shape == first.atoms.shape
                and all(a is b for a, b in zip(r[i].atoms.ravel(), first.atoms.ravel()))
                for r in results)
            vals.append(Val(d, first.atoms, first.data) if same else
                        _new(aval, "a key chosen by a cond", d))
        return vals

    def loop(self, body: Any, consts: list[Val], rest: list[Val], num_carry: int, times: int,
             kind: str, uses: Uses, where: str | None, outs: list) -> list[Val]:
        """A scan or while body: carried dependences to a fixed point, then one recorded walk;
        keys it reuses on every iteration (captured, or carried unchanged) count ``times``."""
        carry, xs = list(rest[:num_carry]), rest[num_carry:]
        xs = [Val(v.dep, None if v.atoms is None else v.atoms[0], v.data) for v in xs]
        for _ in range(3):  # the two dependence bits only grow
            out = self.walk(body.jaxpr, [], consts + carry + xs, Uses(), where)
            grown = [v._replace(dep=v.dep | o.dep) for v, o in zip(carry, out)]
            if [v.dep for v in grown] == [v.dep for v in carry]:
                break
            carry = grown
        sub = Uses()
        out = self.walk(body.jaxpr, [], consts + carry + xs, sub, where)
        kept = [c.atoms is not None and o.atoms is c.atoms for c, o in zip(carry, out)]
        repeated = {a for v in consts if v.atoms is not None for a in v.atoms.ravel()}
        repeated |= {a for v, k in zip(carry, kept) if k and v.atoms is not None
                     for a in v.atoms.ravel()}
        uses.merge(sub, repeated, kind, times)
        vals = [c if k else _new(aval, f"a key carried by a {kind}", o.dep)
                for c, k, o, aval in zip(carry, kept, out, outs)]
        return vals + [_new(aval, f"a key from a {kind}", o.dep)
                       for o, aval in zip(out[num_carry:], outs[num_carry:])]


def trace_uses(fn: Any, args: tuple, labels: tuple[str, ...], deps: tuple[int, ...]) -> Uses:
    """The uses of ``fn(*args)``'s jaxpr; argument ``i``'s keys are labelled ``labels[i]``."""
    closed = jax.make_jaxpr(fn)(*args)
    vals = []
    for arg, label, dep in zip(args, labels, deps):
        vals += [_new(leaf, label, dep) for leaf in jax.tree.leaves(arg)]
    consts = [_new(jax.typeof(c), "a constant key", 0) for c in closed.consts]
    uses = Uses()
    Walker().walk(closed.jaxpr, consts, vals, uses)
    return uses


def _subject(env: Any) -> str:
    """``transition`` when the environment writes one (and inherits ``step``), else ``step``."""
    return "transition" if type(env).step is Environment.step else "step"


def env_uses(run: EnvRun) -> dict[str, Uses]:
    """The uses of ``reset`` and of ``step`` (named after what the environment wrote)."""
    shapes, env = run.require_shapes(), run.env
    space = env.action_space
    action = jax.ShapeDtypeStruct(tuple(space.shape), space.dtype)
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
    try:
        reset = trace_uses(env.reset, (key,), ("its key",), (KEY,))
        step = trace_uses(lambda s, a, k: step_with_key(env, s, a, k),
                          (shapes.state, action, key if env.stochastic else None),
                          ("a key in its state", "a key in its action", "its key"),
                          (INPUT, INPUT, KEY))
    except Exception:  # the `runs` check reports why it does not trace
        raise NotRun from None
    return {"reset": reset, _subject(env): step}


def _uses_text(uses: list[Use]) -> str:
    return ", ".join(u.primitive + (f" x{u.times}" if u.times > 1 else "") + f" at {u.where}"
                     for u in uses)


def key_used_once(run: EnvRun) -> CheckResult:
    """No key consumed twice, in reset or in step (registered in ``env_checks``). A reuse
    wholly inside a suite's own code (an adapter passes the suite its key unchanged) is a
    warning: rollax reports it but cannot fix it."""
    findings, upstream, counts = [], [], []
    suite = isinstance(run.env, SuiteEnvironment)
    for priority, (subject, uses) in enumerate(env_uses(run).items()):
        counts.append(f"{counted(len(uses.consumed), 'key')} consumed in {subject}")
        for atom, atom_uses in uses.consumed.items():
            n = sum(u.times for u in atom_uses)
            if n > 1:
                what = _short(f"{subject}: {atom.label} is consumed by {n} random draws or "
                              f"splits ({_uses_text(atom_uses)})")
                if suite and not any(u.where.startswith(ROLLAX) for u in atom_uses):
                    upstream.append(f"{what}, in the suite's own code")
                    continue
                findings.append(Finding(None, None, f"{what}; split it and use each part once",
                                        {}, priority))
                break
    if upstream and not findings:
        return outcome(WARNING, upstream[0])
    return judge(findings, f"each key consumed at most once ({', '.join(counts)})")


def draws_from_key(run: EnvRun) -> CheckResult:
    """Randomness comes from the key argument (registered in ``env_checks``)."""
    findings, notes = [], []
    for priority, (subject, uses) in enumerate(env_uses(run).items()):
        if subject != "reset" and not run.env.stochastic:
            continue
        if not uses.draws:
            notes.append(f"{subject} draws nothing")
            continue
        if any(dep & KEY for *_, dep in uses.draws):
            notes.append(f"{subject} draws from its key")
            continue
        source = ("a constant key" if all(dep == 0 for *_, dep in uses.draws)
                  else "a key from its state or action")
        first, where, _ = uses.draws[0]
        findings.append(Finding(None, None, _short(
            f"{subject}: draws random numbers ({first} at {where}) from a key that is not its "
            f"own ({source}); use the key argument"), {}, priority))
    return judge(findings, "; ".join(notes))

"""The numba engine: each program of the IR lowered here to the text of a Python function,
compiled by numba with `@njit(fastmath=False, error_model="numpy")` (`JIT`), serial.

The lowering walks the IR as the scalar engine does and writes each of its steps as one
statement on one binary64 value: `+ - * /`, negation and `numpy.sqrt` are single IEEE
operations in source order (`abs`, `math.copysign`, comparisons and conditional
expressions for `min`, `max` and `select` are exact), so numba (LLVM without fast-math flags: no reassociation, no
contraction into fused multiply-adds, no vectorised reduction) performs exactly the
operations the declaration fixes; a `Sum` is a loop adding its terms left to right.
Every finite-or-refuse check of the scalar engine is a test in the same place and order,
which returns the check's site (its statement, what was non-finite, the loop and sum
variables bound there) and writes the variables' values: the refusal names what the scalar
engine names. `_probe` checks on the first use in a process that a multiply-add and an
ordered sum lowered this way give the sequential words, and refuses to run otherwise.

Slots live in regions (the contribution's parameters, sample and contribution; the
update's parameters, state, mean and rate), one float64 array each; a slot reference
resolves to its region when the lowering is made, or at run time for a view spanning
several. The generated module is written once under the cache directory
(alphac.resources.cache_dir, `oracle/`), named by the hash of its text, so numba's own
cache (`cache=True`) keeps the compiled code between processes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from alphac.ir.nodes import (
    Assign, Binary, Compare, Const, Let, Local, Loop, Program, Select, SlotRef, Sum, Unary,
    VectorLet, VectorLocal, statements, vector_lets)
from alphac.oracle.refusal import Site
from alphac.oracle.scalar import accumulate_refusal, statement_refusal

_LEAVES = (Const, SlotRef, Local, VectorLocal)
_BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
           # IEEE 754-2019 minimum and maximum of finite operands (-0.0 below +0.0)
           "min": "{a} if {a} < {b} or ({a} == {b} and math.copysign(1.0, {a}) < 0.0) else {b}",
           "max": "{a} if {a} > {b} or ({a} == {b} and math.copysign(1.0, {a}) > 0.0) else {b}",
           "copysign": "math.copysign({a}, {b})"}
_UNARY = {"neg": "-{a}", "sqrt": "np.sqrt({a})", "abs": "abs({a})",
          "round32": "np.float64(np.float32({a}))"}  # the binary32 nearest, widened exactly
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# serial, IEEE division (error_model numpy: x / 0 is inf or nan, never an exception), no
# fast-math; nogil, so a launcher's other threads run meanwhile
JIT = 'njit(fastmath=False, error_model="numpy", nogil=True, cache=True)'


@dataclass(frozen=True)
class CheckSite:
    """A check that can fail: its statement (the ordinal in `statements` order: programs
    equal but for spans and labels share their compiled code), what it tests, and the
    variables bound there."""

    statement: int
    what: str
    names: tuple[str, ...]


@dataclass
class _Scope:
    binds: dict  # IR variable -> (Python name, lo, hi), in the scalar engine's binds order
    lets: dict  # Let name -> Python name


class _Lowering:
    """One program as the text of `def NAME(r0, ..., fail)`, its check sites and constants."""

    def __init__(self, program: Program, regions: list[tuple[int, int]], name: str, consts: dict):
        self.program = program
        self.regions = regions
        self.name = name
        self.consts = consts  # bits -> global name, shared by every function of a module
        self.lines: list[str] = []
        self.sites: list[CheckSite] = []
        self.uid = 0
        self.stmt = -1  # the ordinal of the statement being lowered
        # vector temporaries: name -> (array name, lo), each an array allocated on entry
        self.vectors = {v.name: (f"V{j}", v.lo) for j, v in enumerate(vector_lets(program.body))}

    def new(self, stem: str = "t") -> str:
        self.uid += 1
        return f"{stem}{self.uid}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def text(self) -> str:
        args = ", ".join(f"r{j}" for j in range(len(self.regions)))
        self.lines = [f"@{JIT}", f"def {self.name}({args}, fail):"]
        for v in vector_lets(self.program.body):
            self.emit(1, f"{self.vectors[v.name][0]} = np.zeros({v.words})")
        self.block(self.program.body, 1, _Scope({}, {}))
        self.emit(1, "return 0")
        return "\n".join(self.lines) + "\n"

    # -- checks ------------------------------------------------------------------------------

    def check(self, depth: int, value: str, what: str, scope: _Scope) -> None:
        """`if value is not finite: fail[...] = bound variables; return site`."""
        names = tuple(scope.binds)
        self.sites.append(CheckSite(self.stmt, what, names))
        self.emit(depth, f"if not math.isfinite({value}):")
        for j, name in enumerate(names):
            self.emit(depth + 1, f"fail[{j}] = {scope.binds[name][0]}")
        self.emit(depth + 1, f"return {len(self.sites)}")

    # -- statements --------------------------------------------------------------------------

    def block(self, body, depth: int, scope: _Scope) -> None:
        if not body:
            self.emit(depth, "pass")
        for st in body:
            if isinstance(st, Loop):
                var = self.new("i")
                binds = dict(scope.binds)
                binds[st.var] = (var, st.lo, st.hi)
                self.emit(depth, f"for {var} in range({st.lo}, {st.hi}):")
                self.block(st.body, depth + 1, _Scope(binds, dict(scope.lets)))  # lets: per iteration
            elif isinstance(st, Let):
                self.stmt += 1
                scope.lets[st.name] = self.expr(st.value, depth, scope)
            elif isinstance(st, VectorLet):
                self.stmt += 1
                value = self.expr(st.value, depth, scope)
                array, lo = self.vectors[st.name]
                self.emit(depth, f"{array}[{scope.binds[st.var][0]} - {lo}] = {value}")
            elif isinstance(st, Assign):
                self.stmt += 1
                self.store(st.target, self.expr(st.value, depth, scope), depth, scope)
            else:
                raise TypeError(f"not a statement: {st!r}")

    # -- slots -------------------------------------------------------------------------------

    @staticmethod
    def _index_text(index, scope: _Scope) -> str:
        """An index as a Python expression of the bound variables."""
        if index.var is not None:
            return f"{scope.binds[index.var][0]} + {index.base}"
        parts = [scope.binds[v][0] if s == 1 else f"{s} * {scope.binds[v][0]}" for v, s in index.terms]
        return " + ".join(parts + [str(index.base)])

    def _where(self, index, scope: _Scope) -> tuple[str, list[tuple[int, int, int]]]:
        """The slot as a Python expression and the regions (j, start, length) it may lie in."""
        if index.constant:
            slot, lo, hi = str(index.base), index.base, index.base + 1
        else:
            ranges = {v: scope.binds[v][1:] for v in index.variables()}
            if any(vhi <= vlo for vlo, vhi in ranges.values()):  # an empty range: never executed
                return "0", [(0, 0, 0)]
            slot = self._index_text(index, scope)
            lo, hi = index.bounds(ranges)
        if lo < 0 or hi > self.program.slots:
            raise ValueError(f"slots {lo}..{hi} lie outside the program's {self.program.slots}")
        inside = [(j, a, n) for j, (a, n) in enumerate(self.regions) if a < hi and lo < a + n]
        return slot, inside

    def _select(self, index, depth: int, scope: _Scope, access) -> None:
        """Emit `access(region, offset)` for the region holding the slot (chosen at run time
        for a view spanning several)."""
        slot, inside = self._where(index, scope)
        if len(inside) == 1:
            j, a, _ = inside[0]
            self.emit(depth, access(f"r{j}", f"{slot} - {a}"))
            return
        s = self.new("s")
        self.emit(depth, f"{s} = {slot}")
        for n, (j, a, length) in enumerate(inside):
            test = "else:" if n == len(inside) - 1 else f"{'if' if n == 0 else 'elif'} {s} < {a + length}:"
            self.emit(depth, test)
            self.emit(depth + 1, access(f"r{j}", f"{s} - {a}"))

    def load(self, index, depth: int, scope: _Scope) -> str:
        t = self.new()
        self._select(index, depth, scope, lambda r, off: f"{t} = {r}[{off}]")
        return t

    def store(self, index, value: str, depth: int, scope: _Scope) -> None:
        self._select(index, depth, scope, lambda r, off: f"{r}[{off}] = {value}")

    # -- expressions -------------------------------------------------------------------------

    def const(self, bits: int) -> str:
        return self.consts.setdefault(bits, f"C{len(self.consts)}")

    def operand(self, e, depth: int, scope: _Scope, what: str) -> str:
        v = self.expr(e, depth, scope)
        if isinstance(e, _LEAVES):  # results are checked where they are made
            self.check(depth, v, what, scope)
        return v

    def expr(self, e, depth: int, scope: _Scope) -> str:
        if isinstance(e, SlotRef):
            return self.load(e.index, depth, scope)
        if isinstance(e, Const):
            return self.const(int(e.bits))
        if isinstance(e, Local):
            return scope.lets[e.name]
        if isinstance(e, VectorLocal):
            array, lo = self.vectors[e.name]
            t = self.new()
            self.emit(depth, f"{t} = {array}[{self._index_text(e.index, scope)} - {lo}]")
            return t
        if isinstance(e, Binary):
            a, b = (self.operand(x, depth, scope, f"operand of {e.op}") for x in (e.lhs, e.rhs))
            return self.result(e.op, _BINARY[e.op].format(a=a, b=b), depth, scope)
        if isinstance(e, Unary):
            a = self.operand(e.arg, depth, scope, f"operand of {e.op}")
            return self.result(e.op, _UNARY[e.op].format(a=a), depth, scope)
        if isinstance(e, Compare):
            a, b = (self.operand(x, depth, scope, f"operand of {e.op}") for x in (e.lhs, e.rhs))
            t = self.new("c")
            self.emit(depth, f"{t} = {a} {_COMPARE[e.op]} {b}")
            return t
        if isinstance(e, Select):
            c = self.expr(e.cond, depth, scope)
            a, b = (self.operand(x, depth, scope, "operand of select") for x in (e.then, e.other))
            t = self.new()
            self.emit(depth, f"{t} = {a} if {c} else {b}")
            return t
        if isinstance(e, Sum):
            return self.sum(e, depth, scope)
        raise TypeError(f"not an expression: {e!r}")

    def result(self, op: str, value: str, depth: int, scope: _Scope) -> str:
        """A new temporary holding `value` (the operation `op`), checked finite."""
        t = self.new()
        self.emit(depth, f"{t} = {value}")
        self.check(depth, t, f"result of {op}", scope)
        return t

    def sum(self, e: Sum, depth: int, scope: _Scope) -> str:
        """The ordered left fold: the first term alone, then acc + term; every term and
        partial checked, as the scalar engine does."""
        acc = self.new("acc")
        self.emit(depth, f"{acc} = 0.0")
        if e.hi <= e.lo:
            return acc
        var = self.new("j")
        binds = dict(scope.binds)
        binds[e.var] = (var, e.lo, e.hi)
        inner = _Scope(binds, scope.lets)
        self.emit(depth, f"for {var} in range({e.lo}, {e.hi}):")
        t = self.expr(e.body, depth + 1, inner)
        self.check(depth + 1, t, "term of sum", inner)
        self.emit(depth + 1, f"{acc} = {t} if {var} == {e.lo} else {acc} + {t}")
        self.check(depth + 1, acc, "partial sum", inner)
        return acc


# ----------------------------------------------------------------------------- a learner

_CONTRIBUTIONS = """
@{jit}
def contributions(params, samples, owner, accs, contrib, fail, info):
    for row in range(samples.shape[0]):
        contrib[:] = 0.0
        status = contribution({params}, {sample}, contrib, fail)
        if status != 0:
            info[0] = row
            return status
        o = owner[row]
        for j in range(contrib.shape[0]):
            c = contrib[j]
            if not math.isfinite(c):
                info[0] = row
                info[1] = j
                return -1
            r = accs[o, j] + c
            if not math.isfinite(r):
                info[0] = row
                info[1] = j
                return -2
            accs[o, j] = r
    return 0
"""

_HEADER = """# Generated by alphac.oracle.compiled from a learner's programs. Do not edit.
import math
import struct

import numpy as np
from numba import njit


def _word(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]

"""


def _writes(program: Program, lo: int, hi: int) -> bool:
    """Whether some assignment of `program` may write a slot in [lo, hi)."""
    def walk(body, ranges):
        for st in body:
            if isinstance(st, Loop):
                yield from walk(st.body, {**ranges, st.var: (st.lo, st.hi)})
            elif isinstance(st, Assign):
                a, b = st.target.bounds(ranges)
                yield a < b and a < hi and lo < b
    return any(walk(program.body, {}))


@dataclass(frozen=True)
class Compiled:
    """A learner's compiled programs and the check sites their statuses name."""

    contributions: object  # (params, samples, owner, accs, contrib, fail, info) -> status
    update: object  # (params, state, mean, rate, fail) -> status
    contribution_sites: tuple[CheckSite, ...]
    update_sites: tuple[CheckSite, ...]
    fail_words: int


def _source(lowerings: list[_Lowering], consts: dict[int, str], tail: str = "") -> str:
    bodies = [lw.text() for lw in lowerings]  # (constants are named while lowering)
    words = "".join(f"{name} = _word({bits:#x})\n" for bits, name in consts.items())
    return _HEADER + words + "\n\n" + "\n\n".join(bodies) + tail


def module_text(k: int, s: int, m: int, contribution: Program, update: Program):
    """The source of a learner's module and the check sites of its two programs."""
    consts: dict[int, str] = {}
    c = _Lowering(contribution, [(0, k), (k, s), (k + s, k)], "contribution", consts)
    u = _Lowering(update, [(0, k), (k, m), (k + m, k), (2 * k + m, 1)], "update", consts)
    # a program may write its inputs' slots; the scalar engine gives every sample fresh ones
    driver = _CONTRIBUTIONS.format(
        jit=JIT, params="params.copy()" if _writes(contribution, 0, k) else "params",
        sample="samples[row].copy()" if _writes(contribution, k, k + s) else "samples[row]")
    text = _source([c, u], consts, driver)
    return text, tuple(c.sites), tuple(u.sites)


def _load(text: str):
    """The generated module, from the cache directory (written once, under the hash of its
    text, so numba's cache applies), or from a temporary file when the cache cannot be written."""
    from alphac.resources import cache_dir

    name = "alphac_oracle_" + hashlib.sha256(text.encode()).hexdigest()[:24]
    if name in sys.modules:
        return sys.modules[name]
    directory = cache_dir() / "oracle"
    path = directory / f"{name}.py"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not path.is_file():  # never rewritten: numba's cache index records its stamp
            fd, staged = tempfile.mkstemp(prefix=name, suffix=".tmp", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(staged, path)
    except OSError:
        directory = tempfile.mkdtemp(prefix="alphac-oracle-")
        path = os.path.join(directory, f"{name}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache finds a function's globals by module name
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=16)
def compiled(k: int, s: int, m: int, contribution: Program, update: Program) -> Compiled:
    """The compiled programs of a learner (k, s, m and its two programs), once per process."""
    _probe()
    text, csites, usites = module_text(k, s, m, contribution, update)
    module = _load(text)
    return Compiled(module.contributions, module.update, csites, usites,
                    max([len(site.names) for site in csites + usites] + [1]))


# ----------------------------------------------------------------------------- running

def contributions(L, params: np.ndarray, samples: np.ndarray, owner: np.ndarray,
                  pos: np.ndarray, u: int) -> list[np.ndarray]:
    """Every owner's ordered sum of its samples' contributions (sample order, from +0.0).
    The owners' sums are independent of each other: each runs in a thread of its own (the
    compiled function releases the interpreter's lock), as many at once as there are CPUs.
    The refusal is the first in the serial order: the lowest owner's first failing sample."""
    c = compiled(L.k, L.s, L.m, L.contribution, L.update)
    owners = len(L.samples.shares)
    accs = np.zeros((owners, L.k))
    rows, p = np.ascontiguousarray(samples), np.ascontiguousarray(params)
    starts = np.concatenate([[0], np.cumsum(L.samples.shares)]).astype(np.int64)

    def one(o: int):
        fail, info = np.zeros(c.fail_words, dtype=np.int64), np.zeros(2, dtype=np.int64)
        lo, hi = int(starts[o]), int(starts[o + 1])
        status = c.contributions(p, rows[lo:hi], np.zeros(hi - lo, dtype=np.int64), accs[o:o + 1],
                                 np.zeros(L.k), fail, info)
        return status, fail, int(info[0]) + lo, int(info[1])

    workers = max(1, min(owners, os.cpu_count() or 1))
    if workers == 1:
        results = [one(o) for o in range(owners)]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers, thread_name_prefix="alphac-oracle-owner") as pool:
            results = list(pool.map(one, range(owners)))
    for status, fail, row, j in results:
        if status == 0:
            continue
        site = Site(u, "contribution", owner=int(owner[row]), sample=int(pos[row]))
        if status < 0:
            raise accumulate_refusal(site, ("contribution word", "result of add")[-status - 1], j)
        raise _refusal(L.contribution, c.contribution_sites, status, fail, site)
    return [accs[o] for o in range(owners)]


def update(L, params, state, mean_, rate: float, u: int):
    """The update program on (parameters, state, mean, rate): the next parameters and state."""
    c = compiled(L.k, L.s, L.m, L.contribution, L.update)
    p, st = np.array(params, dtype=np.float64), np.array(state, dtype=np.float64)
    fail = np.zeros(c.fail_words, dtype=np.int64)
    status = c.update(p, st, np.array(mean_, dtype=np.float64), np.array([rate]), fail)
    if status != 0:
        raise _refusal(L.update, c.update_sites, status, fail, Site(u, "update"))
    return p, st


def _refusal(program: Program, sites: tuple[CheckSite, ...], status: int, fail: np.ndarray,
             site: Site):
    """The refusal of check `status` of `program` (its own statement: label and span)."""
    check = sites[status - 1]
    binds = {name: int(fail[j]) for j, name in enumerate(check.names)}
    statement = next(st for i, st in enumerate(statements(program.body)) if i == check.statement)
    return statement_refusal(site, statement, check.what, binds)


@functools.cache
def _probe() -> None:
    """Refuse to run unless a lowered multiply-add and an ordered sum give the sequential
    words: a * b + c with a = b = 1 + 2**-30, c = -(1 + 2**-29) is 0 unfused (2**-60 fused);
    2**53, then ones, then -2**53 sums to 0 only left to right (each one is absorbed)."""
    from alphac.ir.nodes import Index
    from alphac.ir.words import to_bits as word

    n = 64
    a = 1.0 + 2.0 ** -30
    prog = Program(n + 2, (
        Assign(Index(n), Binary("add", Binary("mul", Const(word(a)), Const(word(a))),
                                Const(word(-(1.0 + 2.0 ** -29))))),
        Assign(Index(n + 1), Sum("j", 0, n, SlotRef(Index(0, "j")))),
    ))
    consts: dict[int, str] = {}
    slots = np.array([2.0 ** 53] + [1.0] * (n - 2) + [-(2.0 ** 53), 1.0, 1.0])
    status = _load(_source([_Lowering(prog, [(0, n + 2)], "probe", consts)], consts)).probe(
        slots, np.zeros(1, dtype=np.int64))
    if status != 0 or slots[n] != 0.0 or slots[n + 1] != 0.0:
        raise RuntimeError("numba's compiled code fuses a multiply-add or reassociates a sum here: "
                           f"got {slots[n]!r} and {slots[n + 1]!r}, want 0.0 and 0.0")

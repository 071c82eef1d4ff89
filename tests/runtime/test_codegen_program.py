"""Program kernels: compiled for x86-64 into a shared object, called through ctypes, and
compared bit for bit with a straightforward Python-float evaluation of the same IR."""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from llvmlite import ir

from alphac.codegen import program as prog
from alphac.codegen.program import emit_program, program_regions, statement_labels
from alphac.diagnostics import CompileError, Span
from alphac.ir import nodes as n
from alphac.ir.builders import C, S, add, div, mul, neg, sqrt, sub
from alphac.targets import compile_object, load_target
from alphac.ir.words import to_bits as _bits, to_float as _word

# ----------------------------------------------------------------------------- IR helpers


def L(name: str) -> n.Local:
    return n.Local(name)


def at(base, var=None, label="", line=1):
    return dict(target=n.Index(base, var), label=label, span=Span("gate.alpha", line, 3))


def assign(base, value, var=None, label="", line=1):
    return n.Assign(n.Index(base, var), value, Span("gate.alpha", line, 3), label)


def adam_update(k: int, b1=0.9, b2=0.999, eps=1e-8) -> n.Program:
    """Indexed Adam: params [0,k), state m [k,2k) v [2k,3k) b1^t 3k b2^t 3k+1, mean, rate."""
    m_, v_, p1, p2, g, lr = k, 2 * k, 3 * k, 3 * k + 1, 3 * k + 2, 4 * k + 2
    body = (
        assign(p1, mul(S(p1), C(b1)), label="p1", line=2),
        assign(p2, mul(S(p2), C(b2)), label="p2", line=3),
        n.Let("c1", sub(C(1.0), S(p1)), Span("gate.alpha", 4, 3)),
        n.Let("c2", sub(C(1.0), S(p2)), Span("gate.alpha", 5, 3)),
        n.Loop("i", 0, k, (
            assign(m_, add(mul(C(b1), S(m_, "i")), mul(C(1 - b1), S(g, "i"))), "i", "m[i]", 7),
            assign(v_, add(mul(C(b2), S(v_, "i")), mul(mul(C(1 - b2), S(g, "i")), S(g, "i"))),
                   "i", "v[i]", 8),
            assign(0, sub(S(0, "i"), div(mul(S(lr), div(S(m_, "i"), L("c1"))),
                                         add(sqrt(div(S(v_, "i"), L("c2"))), C(eps)))),
                   "i", "w[i]", 9),
        )),
    )
    return n.Program(4 * k + 3, body)


def lsq_contribution_slots() -> n.Program:
    """The seed's per-slot least-squares contribution: k=2, s=3 (x0, x1, y)."""
    r = sub(add(mul(S(0), S(2)), mul(S(1), S(3))), S(4))
    return n.Program(7, (assign(5, mul(r, S(2)), label="slot 5"),
                         assign(6, mul(r, S(3)), label="slot 6", line=2)))


def lsq_contribution_indexed(k: int) -> n.Program:
    """Indexed least squares: r = (sum_j w[j] x[j]) - y; c[i] = r * x[i]."""
    x, y, c = k, 2 * k, 2 * k + 1
    return n.Program(3 * k + 1, (
        n.Let("r", sub(n.Sum("j", 0, k, mul(S(0, "j"), S(x, "j"))), S(y)), Span("gate.alpha", 1, 3)),
        n.Loop("i", 0, k, (assign(c, mul(L("r"), S(x, "i")), "i", "c[i]", 2),)),
    ))


# ----------------------------------------------------------------------------- reference


class Refused(Exception):
    def __init__(self, ordinal, coord):
        self.ordinal, self.coord = ordinal, coord


def _finite(x: float) -> bool:
    return math.isfinite(x)


CMP = list(n.COMPARE_OPS)


def rand_selection(rng, sub):
    """One of the selection operations over `sub()` operands."""
    r = int(rng.integers(0, 5))
    if r == 0:
        return n.Unary("abs", sub())
    if r == 1:
        return n.Binary("copysign", sub(), sub())
    if r == 2:
        return n.Binary(["min", "max"][int(rng.integers(0, 2))], sub(), sub())
    return n.Select(n.Compare(CMP[int(rng.integers(0, len(CMP)))], sub(), sub()), sub(), sub())


def reference(program: n.Program, slots: list[float]) -> list[float]:
    """Sequential Python-float evaluation of the IR semantics (nodes.py docstring)."""
    slots = list(slots)
    counter = [0]

    def ev(e, env, vars_, where):
        if isinstance(e, n.Const):
            return _word(e.bits)
        if isinstance(e, n.SlotRef):
            return slots[e.index.base + (vars_[e.index.var] if e.index.var else 0)]
        if isinstance(e, n.Local):
            return env[e.name]
        if isinstance(e, n.Unary):
            a = ev(e.arg, env, vars_, where)
            if not _finite(a):
                raise Refused(*where)
            if e.op == "abs":  # the sign bit cleared
                r = _word(_bits(a) & ~(1 << 63))
            else:
                r = -a if e.op == "neg" else (math.sqrt(a) if a >= 0 else math.nan)
            if not _finite(r):
                raise Refused(*where)
            return r
        if isinstance(e, (n.Binary, n.Compare)):
            a = ev(e.lhs, env, vars_, where)
            b = ev(e.rhs, env, vars_, where)
            if not (_finite(a) and _finite(b)):
                raise Refused(*where)
            if isinstance(e, n.Compare):
                return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b,
                        "ne": a != b}[e.op]
            if e.op == "add":
                r = a + b
            elif e.op == "sub":
                r = a - b
            elif e.op == "mul":
                r = a * b
            elif e.op in ("min", "max"):  # ordered by value, then -0.0 below +0.0
                key = (lambda v: (v, -1 if _bits(v) >> 63 else 0))
                r = (min if e.op == "min" else max)((a, b), key=key)
            elif e.op == "copysign":
                r = _word((_bits(a) & ~(1 << 63)) | (_bits(b) & (1 << 63)))
            else:
                r = a / b if b != 0 else math.inf
            if not _finite(r):
                raise Refused(*where)
            return r
        if isinstance(e, n.Select):
            c = ev(e.cond, env, vars_, where)
            a = ev(e.then, env, vars_, where)
            b = ev(e.other, env, vars_, where)
            if not (_finite(a) and _finite(b)):
                raise Refused(*where)
            return a if c else b
        if isinstance(e, n.Sum):
            if e.hi <= e.lo:
                return 0.0
            acc = None
            for j in range(e.lo, e.hi):  # every term and every partial sum is checked
                t = ev(e.body, env, {**vars_, e.var: j}, where)
                acc = t if acc is None else acc + t
                if not (_finite(t) and _finite(acc)):
                    raise Refused(*where)
            return acc
        raise AssertionError(e)

    def run(stmts, ordinal, env, vars_, coord):
        for s in stmts:
            if isinstance(s, n.Loop):
                for i in range(s.lo, s.hi):
                    run(s.body, ordinal, dict(env), {**vars_, s.var: i}, i)
                ordinal += prog._count(s.body)
                continue
            v = ev(s.value, env, vars_, (ordinal, coord))
            if isinstance(s, n.Let):
                env[s.name] = v
            else:
                slots[s.target.base + (vars_[s.target.var] if s.target.var else 0)] = v
            ordinal += 1

    run(program.body, 1, {}, {}, -1)
    return slots


# ----------------------------------------------------------------------------- native harness


class Kernel:
    """One emitted program in a shared object, called on numpy region buffers."""

    def __init__(self, tmp_path, program: n.Program, regions, name="kern"):
        module = ir.Module(name)
        emit_program(module, program, name, regions)
        obj = tmp_path / f"{name}.o"
        obj.write_bytes(compile_object(module, "x86_64"))
        so = tmp_path / f"{name}.so"
        subprocess.run(["cc", "-shared", "-o", str(so), str(obj)], check=True)
        self.lib = ctypes.CDLL(str(so))
        self.fn = getattr(self.lib, name)
        self.fn.restype = ctypes.c_int64
        self.labels = (ctypes.c_char_p * max(1, len(statement_labels(program)))).in_dll(
            self.lib, f"{name}_labels")
        self.regions = regions

    def __call__(self, slots: np.ndarray) -> tuple[int, int, np.ndarray]:
        """Run on a copy of the slot vector (float64); returns (status, coord, slots after)."""
        bufs = [np.ascontiguousarray(slots[a:a + ln], dtype=np.float64).copy()
                for a, ln in self.regions]
        coord = ctypes.c_int64(-7)
        args = [b.ctypes.data_as(ctypes.c_void_p) for b in bufs] + [ctypes.byref(coord)]
        status = self.fn(*args)
        out = slots.copy()
        for (a, ln), b in zip(self.regions, bufs):
            out[a:a + ln] = b
        return status, coord.value, out


def bits(a) -> list[int]:
    return np.asarray(a, dtype=np.float64).view(np.uint64).tolist()


def check_against_reference(kernel: Kernel, program: n.Program, slots: np.ndarray):
    status, coord, out = kernel(slots)
    try:
        want = reference(program, slots.tolist())
    except Refused as r:
        assert (status, coord) == (r.ordinal, r.coord)
        return status
    assert status == 0
    assert bits(out) == bits(want)
    return 0


# ----------------------------------------------------------------------------- tests


def test_per_slot_lsq_contribution_bits(tmp_path):
    p = lsq_contribution_slots()
    kern = Kernel(tmp_path, p, program_regions("contribution", 2, 3, 0))
    rng = np.random.default_rng(1)
    for _ in range(300):
        slots = rng.standard_normal(7) * 10.0 ** rng.integers(-5, 6, 7)
        assert check_against_reference(kern, p, slots) == 0


def test_indexed_lsq_contribution_sum_order(tmp_path):
    k = 37
    p = lsq_contribution_indexed(k)
    kern = Kernel(tmp_path, p, program_regions("contribution", k, k + 1, 0))
    rng = np.random.default_rng(2)
    for _ in range(40):
        slots = rng.standard_normal(3 * k + 1) * 10.0 ** rng.integers(-8, 9, 3 * k + 1)
        assert check_against_reference(kern, p, slots) == 0
    # The fold is ordered: cancelling terms early gives different bits from a pairwise sum.
    slots = np.zeros(3 * k + 1)
    slots[0:3] = [1e16, 1.0, -1e16]
    slots[k:k + 3] = 1.0
    status, _, out = kern(slots)
    assert status == 0 and out[2 * k + 1] == 0.0  # ((1e16 + 1) - 1e16) == 0 in binary64


@pytest.mark.parametrize("k", [1, 5, 511, 512, 513, 1500])
def test_adam_update_bits_across_chunk_sizes(tmp_path, k):
    p = adam_update(k)
    m = 2 * k + 2
    kern = Kernel(tmp_path, p, program_regions("update", k, 0, m))
    rng = np.random.default_rng(k)
    slots = np.empty(4 * k + 3)
    slots[:k] = rng.standard_normal(k)
    slots[k:3 * k] = np.abs(rng.standard_normal(2 * k)) * 1e-3
    slots[3 * k:3 * k + 2] = [0.9 ** 3, 0.999 ** 3]
    slots[3 * k + 2:4 * k + 2] = rng.standard_normal(k)
    slots[4 * k + 2] = 1e-3
    for _ in range(3):
        status, coord, out = kern(slots)
        want = reference(p, slots.tolist())
        assert status == 0 and coord == -7
        assert bits(out) == bits(want)
        slots = out


def test_fast_and_scalar_loops_agree(tmp_path, monkeypatch):
    k = 1100
    p = adam_update(k)
    regions = program_regions("update", k, 0, 2 * k + 2)
    fast = Kernel(tmp_path, p, regions, "fast")
    monkeypatch.setattr(prog, "fast_loop_ok", lambda loop: False)
    scalar = Kernel(tmp_path, p, regions, "scalar")
    rng = np.random.default_rng(7)
    slots = rng.standard_normal(4 * k + 3)
    slots[k:3 * k] = np.abs(slots[k:3 * k])
    slots[3 * k:3 * k + 2] = [0.5, 0.25]
    a, b = fast(slots), scalar(slots)
    assert a[0] == b[0] == 0
    assert bits(a[2]) == bits(b[2])
    # a failure deep in the loop: same ordinal and coordinate from both lowerings
    slots[3 * k + 2 + 1033] = 1e300  # g[1033]^2 overflows in v[i]
    assert fast(slots)[:2] == scalar(slots)[:2] == (6, 1033)


def test_refusal_ordinal_coordinate_and_labels(tmp_path):
    k = 1300
    p = adam_update(k)
    kern = Kernel(tmp_path, p, program_regions("update", k, 0, 2 * k + 2))
    base = np.zeros(4 * k + 3)
    base[3 * k:3 * k + 2] = [0.5, 0.5]
    base[4 * k + 2] = 1e-3
    # two bad coordinates: the first in sequential order wins, whatever its statement
    slots = base.copy()
    slots[k + 900] = np.nan  # m[900]: statement 5 (m[i]) at 900
    slots[3 * k + 2 + 600] = 1e200  # g[600]^2 overflows: statement 6 (v[i]) at 600
    assert kern(slots)[:2] == (6, 600)
    assert kern.labels[6 - 1] == b"v[i] (gate.alpha:8:3)"
    slots[3 * k + 2 + 600] = 0.0
    assert kern(slots)[:2] == (5, 900)
    assert kern.labels[5 - 1] == b"m[i] (gate.alpha:7:3)"
    # a non-finite shared word refuses in its top-level statement, coordinate -1
    slots = base.copy()
    slots[3 * k] = np.inf
    assert kern(slots)[:2] == (1, -1)
    assert kern.labels[0] == b"p1 (gate.alpha:2:3)"
    # the let: 1 - p1 with p1 = 1 gives c1 = 0, and m/c1 refuses in w[i] at coordinate 0
    slots = base.copy()
    slots[3 * k] = 1.0 / 0.9
    assert kern(slots)[:2] == (7, 0)
    assert kern.labels[2] == b"let c1 (gate.alpha:4:3)"
    # a rate that makes the update overflow
    slots = base.copy()
    slots[3 * k + 2:4 * k + 2] = 1.0
    slots[4 * k + 2] = 1.7e308
    status, coord, _ = kern(slots)
    assert (status, coord) == (7, 0)


def test_nan_then_overwritten_still_refuses(tmp_path):
    # c[i] := x[i] * 1e300 overflows at i = 2, then c[i] := 1.0 overwrites it
    k = 700
    prog_ = n.Program(3 * k + 1, (
        n.Loop("i", 0, k, (
            assign(2 * k + 1, mul(S(k, "i"), C(1e300)), "i", "c[i]", 1),
            assign(2 * k + 1, add(C(0.5), C(0.5)), "i", "c[i]", 2),
        )),
        assign(2 * k + 1, mul(S(2 * k), C(1e300)), label="y", line=3),
        assign(2 * k + 1, C(0.0), label="y2", line=4),
    ))
    kern = Kernel(tmp_path, prog_, program_regions("contribution", k, k + 1, 0))
    slots = np.zeros(3 * k + 1)
    slots[k + 2] = 1e10
    assert kern(slots)[:2] == (1, 2)
    slots[k + 2] = 1.0
    status, _, out = kern(slots)
    assert status == 0 and out[2 * k + 1:].tolist() == [0.0] + [1.0] * (k - 1)
    slots[2 * k] = 1e9
    assert kern(slots)[:2] == (3, -1)


def test_nan_operand_without_arithmetic_is_copied_but_any_use_refuses(tmp_path):
    # A plain copy is no arithmetic operation; using the copied word in one refuses.
    p = n.Program(7, (assign(5, S(4), label="copy"), assign(6, neg(S(5)), label="use", line=2)))
    kern = Kernel(tmp_path, p, program_regions("contribution", 2, 3, 0))
    slots = np.zeros(7)
    slots[4] = np.nan
    assert kern(slots)[:2] == (2, -1)


def test_random_programs_match_reference(tmp_path):
    """Random expression trees over every operation, including refusals."""
    rng = np.random.default_rng(11)

    def rand_expr(depth):
        r = rng.integers(0, 12)
        if depth == 0 or r < 3:
            return S(int(rng.integers(0, 5))) if r % 2 else C(float(rng.choice(
                [rng.standard_normal(), 0.0, -0.0])))
        if r < 5:
            return n.Unary(["neg", "sqrt"][r - 3], rand_expr(depth - 1))
        if r >= 10:
            return rand_selection(rng, lambda: rand_expr(depth - 1))
        return n.Binary(["add", "sub", "mul", "div", "mul"][r - 5], rand_expr(depth - 1),
                        rand_expr(depth - 1))

    progs = []
    for t in range(12):
        stmts = tuple(assign(5 + (j % 2), rand_expr(4), label=f"s{j}", line=j + 1) for j in range(4))
        progs.append(n.Program(7, stmts))
    for t, p in enumerate(progs):
        kern = Kernel(tmp_path, p, program_regions("contribution", 2, 3, 0), f"r{t}")
        for _ in range(60):
            slots = rng.standard_normal(7) * 10.0 ** rng.integers(-200, 200, 7)
            check_against_reference(kern, p, slots)


def test_view_across_regions_and_empty_loops(tmp_path):
    # sum over the whole slot vector crosses all three contribution regions
    k, s = 3, 4
    p = n.Program(2 * k + s, (
        n.Let("t", n.Sum("j", 0, k + s, S(0, "j")), Span("gate.alpha", 1, 1)),
        n.Loop("i", 0, 0, (assign(k + s, L("t"), "i"),)),
        n.Loop("i", 0, k, (assign(k + s, add(L("t"), n.Sum("j", 0, 0, S(0, "j"))), "i"),)),
    ))
    kern = Kernel(tmp_path, p, program_regions("contribution", k, s, 0))
    slots = np.arange(2 * k + s, dtype=np.float64) + 0.25
    assert check_against_reference(kern, p, slots) == 0


def test_slot_outside_regions_is_a_located_error():
    p = n.Program(7, (n.Assign(n.Index(9), C(1.0), Span("gate.alpha", 4, 5), "slot 9"),))
    with pytest.raises(CompileError) as err:
        emit_program(ir.Module("m"), p, "bad", program_regions("contribution", 2, 3, 0))
    d = err.value.diagnostics[0]
    assert (d.code, str(d.span)) == ("program-unsupported", "gate.alpha:4:5")


@pytest.mark.parametrize("target,cpu", [("x86_64", None), ("x86_64", "skylake-avx512"),
                                        ("aarch64", None), ("aarch64", "neoverse-v1")])
def test_no_fused_multiply_add_in_adam_objects(tmp_path, target, cpu):
    objdump = {"x86_64": "objdump", "aarch64": "aarch64-linux-gnu-objdump"}[target]
    if shutil.which(objdump) is None:
        pytest.skip(f"{objdump} not installed")
    t = load_target(target)
    if cpu:  # a CPU with FMA units: the instructions exist, and still must not be chosen
        t = replace(t, cpu=cpu)
    module = ir.Module("adam")
    emit_program(module, adam_update(1000), "adam", program_regions("update", 1000, 0, 2002))
    obj = tmp_path / "adam.o"
    obj.write_bytes(compile_object(module, t))
    if cpu:  # the cpu is honoured: the code differs from the baseline build
        assert obj.read_bytes() != compile_object(module, target)
    text = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    mnemonics = [ln.split("\t")[2].split()[0] for ln in text.splitlines() if ln.count("\t") >= 2]
    assert any(("sqrt" in m) for m in mnemonics)
    fused = [m for m in mnemonics if "fma" in m or "fmadd" in m or "fmsub" in m or "fnmadd" in m
             or "fnmsub" in m or m.startswith("fmla") or m.startswith("fmls")]
    assert fused == []


# ----------------------------------------------------------------------------- the specs


def _spec_learners():
    import glob
    from pathlib import Path

    from alphac.check import load_deployment

    out = []
    for path in sorted(glob.glob(str(Path(__file__).resolve().parents[2] / "specs" / "*.alpha"))):
        try:
            out.append((Path(path).stem, load_deployment(path).learner))
        except CompileError:
            continue  # a file without a deployment (e.g. the seed's declaration)
    return out


def _enclosing_loops(p: n.Program) -> dict:
    """(line, column) of each statement -> the variables of the loops around it, outermost first."""
    out: dict = {}
    stack = [(s, []) for s in p.body]
    while stack:
        s, loops = stack.pop()
        if isinstance(s, n.Loop):
            stack.extend((b, loops + [s.var]) for b in s.body)
        else:
            out[(s.span.line, s.span.col)] = loops
    return out


def test_spec_programs_match_the_oracle_engine(tmp_path):
    """Every runnable spec's two programs, compiled, against the oracle's scalar engine: the
    same words, and for refusals the same statement and coordinate."""
    from alphac.oracle.refusal import Refusal, Site
    from alphac.oracle.scalar import run_program

    learners = _spec_learners()
    if not learners:
        pytest.skip("no runnable specs under specs/")
    module = ir.Module("specs")
    kernels = []
    for t, (stem, L) in enumerate(learners):
        for kind, p in (("contribution", L.contribution), ("update", L.update)):
            if L.independent and kind == "update":
                continue  # the empty program: an independent-state learner has no update
            # an independent-state learner's per-input program is its rule
            regions = program_regions("rule" if L.independent else kind, L.k, L.s, L.m, L.region)
            emit_program(module, p, f"k{t}_{kind}", regions)
            kernels.append((f"{stem}:{kind}", f"k{t}_{kind}", p, regions))
    obj = tmp_path / "specs.o"
    obj.write_bytes(compile_object(module, "x86_64"))
    subprocess.run(["cc", "-shared", "-o", str(tmp_path / "specs.so"), str(obj)], check=True)
    lib = ctypes.CDLL(str(tmp_path / "specs.so"))
    rng = np.random.default_rng(5)
    refusals = 0
    for what, name, p, regions in kernels:
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int64
        labels = (ctypes.c_char_p * len(statement_labels(p))).in_dll(lib, f"{name}_labels")
        for trial in range(150):
            slots = rng.standard_normal(p.slots) * 10.0 ** rng.integers(-3, 4, p.slots)
            if trial % 3 == 0:  # push toward overflow and division by zero
                slots[rng.integers(0, p.slots)] = rng.choice([1e300, -1e300, 0.0, np.nan, np.inf])
            bufs = [slots[a:a + ln].copy() for a, ln in regions]
            coord = ctypes.c_int64(-7)
            status = fn(*[b.ctypes.data_as(ctypes.c_void_p) for b in bufs], ctypes.byref(coord))
            try:
                want = run_program(p, slots.tolist(), Site(0, "update"))
            except Refusal as r:
                refusals += 1
                assert status > 0, what
                label = labels[status - 1].decode()
                assert label.split(" (")[0] == r.statement, what
                assert label.endswith(f"{os.path.basename(r.span.file)}:{r.span.line}:{r.span.col})")
                binds = dict(b.split("=") for b in r.coordinate.split(", ") if "=" in b)
                # the innermost loop around the statement (a name may also be a sum's elsewhere)
                loops = _enclosing_loops(p)[(r.span.line, r.span.col)]
                assert coord.value == (int(binds[loops[-1]]) if loops else -1), (what, r.coordinate)
                continue
            assert status == 0, (what, status, labels[status - 1])
            got = np.concatenate(bufs) if bufs else np.zeros(0)
            order = np.concatenate([np.arange(a, a + ln) for a, ln in regions])
            assert bits(got) == bits(np.asarray(want)[order]), what
    assert refusals > 20


def test_nested_loops_lets_and_sums_in_loops(tmp_path):
    """Loops the chunked lowering does not take (nested, with sums) and one it does (a let
    in the body), against the reference, including a refusal inside the inner loop."""
    k, s = 6, 5
    x, c = k, k + s
    p = n.Program(2 * k + s, (
        n.Loop("i", 0, k, (
            n.Let("t", mul(S(0, "i"), C(0.5)), Span("gate.alpha", 1, 1)),
            assign(c, add(L("t"), n.Sum("j", 0, s, div(S(x, "j"), S(0, "i")))), "i", "c[i]", 2),
        )),
        n.Loop("i", 0, k, (
            n.Loop("j", 0, 3, (assign(c, sub(S(c, "i"), mul(S(x, "j"), C(0.25))), "i", "c[i]", 4),)),
        )),
        n.Loop("i", 1, k, (
            n.Let("u", sqrt(S(0, "i")), Span("gate.alpha", 5, 1)),
            assign(c, div(S(c, "i"), L("u")), "i", "c[i]", 6),
        )),
    ))
    from alphac.codegen.program import fast_loop_ok

    assert [fast_loop_ok(st) for st in p.body] == [False, False, True]
    kern = Kernel(tmp_path, p, program_regions("contribution", k, s, 0))
    rng = np.random.default_rng(9)
    outcomes = set()
    for _ in range(200):
        slots = rng.standard_normal(2 * k + s) * 10.0 ** rng.integers(-1, 2, 2 * k + s)
        if rng.random() < 0.3:
            slots[rng.integers(0, k)] = 0.0  # a zero divisor in the first loop's sum
        outcomes.add(check_against_reference(kern, p, slots))
    assert 0 in outcomes and {2, 4} & outcomes  # successes and refusals both exercised


def test_indexed_update_code_does_not_grow_with_k():
    """A million-parameter update is a loop, not a million instructions."""
    from alphac.targets import llvm

    sizes = []
    for k in (100_000, 10_000_000):
        module = ir.Module("adam")
        emit_program(module, adam_update(k), "adam", program_regions("update", k, 0, 2 * k + 2))
        obj = llvm.compile_object(module, load_target("x86_64"))
        sizes.append(len(obj))
    assert abs(sizes[0] - sizes[1]) < 64 and max(sizes) < 8192


def test_random_indexed_loops_match_reference(tmp_path):
    """Random loop bodies taking the chunked lowering, with non-finite words, zeros and huge
    values planted at random coordinates: the same words, or the same first failing
    statement and coordinate, as the sequential reference."""
    from alphac.codegen.program import fast_loop_ok

    rng = np.random.default_rng(23)
    k, s = 1100, 1101  # sample: x[0..k) and one shared word at k + k
    x, y, c = k, 2 * k, 2 * k + 1

    def rand_expr(depth, readable):
        r = int(rng.integers(0, 12))
        if depth == 0 or r < 4:
            pick = int(rng.integers(0, 4))
            if pick == 0:
                return C(float(rng.choice([0.5, -3.0, 1e-300, 7.25])))
            if pick == 1:
                return S(y)
            return S(readable[int(rng.integers(0, len(readable)))], "i") if readable else S(x, "i")
        if r < 6:
            return n.Unary(["neg", "sqrt"][r - 4], rand_expr(depth - 1, readable))
        if r >= 10:
            return rand_selection(rng, lambda: rand_expr(depth - 1, readable))
        return n.Binary(["add", "sub", "mul", "div", "mul", "add"][r - 6],
                        rand_expr(depth - 1, readable), rand_expr(depth - 1, readable))

    outcomes = []
    for t in range(10):
        body, readable = [], [0, x]
        for j in range(int(rng.integers(2, 5))):
            if rng.random() < 0.3:
                body.append(n.Let(f"t{j}", rand_expr(3, readable), Span("gate.alpha", j + 1, 1)))
                readable_locals = body[-1].name
                body.append(assign(c, add(L(readable_locals), rand_expr(2, readable)), "i", "c[i]", j + 1))
            else:
                body.append(assign(c, rand_expr(3, readable), "i", "c[i]", j + 1))
            if c not in readable:
                readable.append(c)
        p = n.Program(3 * k + 1, (n.Loop("i", 0, k, tuple(body)),))
        assert fast_loop_ok(p.body[0])
        kern = Kernel(tmp_path, p, program_regions("contribution", k, s, 0), f"loop{t}")
        for trial in range(6):
            slots = rng.standard_normal(3 * k + 1) * 10.0 ** rng.integers(-3, 4, 3 * k + 1)
            for _ in range(int(rng.integers(0, 3))):
                slots[int(rng.integers(0, 2 * k + 1))] = rng.choice([np.nan, np.inf, 0.0, 1e308, -1e300])
            outcomes.append(check_against_reference(kern, p, slots))
    assert outcomes.count(0) >= 10 and len(outcomes) - outcomes.count(0) >= 10


def test_reads_of_old_values_decide_which_views_are_saved():
    k = 8
    i = "i"
    loop = n.Loop(i, 0, k, (
        assign(2 * k, mul(S(2 * k, i), C(10.0)), i, "c[i]", 1),      # reads old c
        assign(0, mul(S(2 * k, i), S(k, i)), i, "w[i]", 2),          # reads new c only
        assign(2 * k + 8, add(C(1.0), S(k, i)), i, "d[i]", 3),       # never read
        assign(2 * k + 8, add(S(2 * k + 8, i), C(1.0)), i, "d[i]", 4),  # after its write
    ))
    assert prog.fast_loop_ok(loop)
    assert prog._reads_old(loop, [0, 2 * k, 2 * k + 8]) == [2 * k]
    let_first = n.Loop(i, 0, k, (n.Let("t", S(0, i), Span("gate.alpha", 1, 1)),
                                 assign(0, add(L("t"), C(1.0)), i, "w[i]", 2)))
    assert prog._reads_old(let_first, [0]) == [0]


def test_fast_loop_writes_in_place_and_saves_only_old_values(tmp_path):
    # the contribution c[i] := w[i] * x[i] reads no old value: no saved words at all;
    # the update w[i] := w[i] - rate * g[i] reads old w: one saved view
    k = 1100
    contribution = n.Program(3 * k, (n.Loop("i", 0, k, (
        assign(2 * k, mul(S(0, "i"), S(k, "i")), "i", "c[i]"),)),))
    update = n.Program(2 * k + 1, (n.Loop("i", 0, k, (
        assign(0, sub(S(0, "i"), mul(S(2 * k), S(k, "i"))), "i", "w[i]"),)),))
    for p, regions, saved in ((contribution, program_regions("contribution", k, k, 0), 0),
                              (update, program_regions("update", k, 0, 0), 1)):
        module = ir.Module("m")
        emit_program(module, p, "kern", regions)
        text = str(module)
        assert text.count('alloca double, i32 512') == saved, text[:2000]
        assert "copy" not in text


def test_failure_after_an_in_place_rewrite_sees_the_old_words(tmp_path):
    # s1 rewrites c[i] from its old value; s2 fails later in the same chunk. The rerun
    # must start from the words before the chunk: c[550] * 10 is finite once, but would
    # overflow if the rewritten word were multiplied again.
    k = 1100
    body = (assign(2 * k, mul(S(2 * k, "i"), C(10.0)), "i", "c[i]", 1),
            assign(0, mul(S(2 * k, "i"), S(k, "i")), "i", "w[i]", 2))
    p = n.Program(3 * k, (n.Loop("i", 0, k, body),))
    kern = Kernel(tmp_path, p, program_regions("contribution", k, k, 0), "inplace")
    rng = np.random.default_rng(5)
    slots = rng.standard_normal(3 * k) + 3.0
    slots[2 * k + 550], slots[k + 550] = 1e307, 1.0
    check_against_reference(kern, p, slots)       # succeeds: the same words as in order
    assert kern(slots)[0] == 0
    slots[k + 700] = np.inf                       # x[700]: w[i] refuses at 700
    assert kern(slots)[:2] == (2, 700)
    assert check_against_reference(kern, p, slots) == 2
    slots[k + 700] = 1.0
    slots[2 * k + 1050] = 1e308                   # the next chunk: c[i] itself overflows
    assert kern(slots)[:2] == (1, 1050)

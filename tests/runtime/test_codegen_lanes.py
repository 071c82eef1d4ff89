"""The contribution over eight samples at once (alphac/codegen/lanes.py), compiled for x86-64
and called through ctypes, against the sequential kernels it stands for: each sample's
alphac_contribution, then alphac_local_add (alphac_local_first for a first sample), in
order. Where the sequential kernels give words, the lanes kernel gives the same bits; where
they refuse, it declines and leaves acc unchanged."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from llvmlite import ir

from alphac.codegen.arith import emit_arith
from alphac.codegen.lanes import LANES, NAME, WIDTH, emit_lanes, lanes_ok
from alphac.codegen.program import emit_program, program_regions
from alphac.diagnostics import Span
from alphac.ir import nodes as n
from alphac.plan.storage import format_of
from alphac.targets import compile_object
from spec_sweep import every_deployment
from alphac.ir.builders import mul
from test_codegen_program import assign, lsq_contribution_indexed

P = ctypes.c_void_p


class _Kernels:
    """The kernels of a learner's contribution; binary32 storage's over float32 arrays of
    whole words (two values a word, the last padded)."""

    def __init__(self, tmp_path, program: n.Program, k: int, s: int, fmt: str = "binary64"):
        module = ir.Module("lanes")
        stored = "binary32" if fmt == "binary32" else "binary64"
        emit_program(module, program, "alphac_contribution", program_regions("contribution", k, s, 0), stored)
        self.width = emit_lanes(module, program, k, s, fmt)
        emit_arith(module, stored)
        self.dtype = np.float32 if stored == "binary32" else np.float64
        self.per = 2 if stored == "binary32" else 1  # values a word
        self.words, self.row = -(-k // self.per), -(-s // self.per) * self.per
        obj, so = tmp_path / "lanes.o", tmp_path / "lanes.so"
        obj.write_bytes(compile_object(module, "x86_64"))
        subprocess.run(["cc", "-shared", "-o", str(so), str(obj)], check=True)
        self.lib = ctypes.CDLL(str(so))
        for name in ("alphac_contribution", NAME, "alphac_local_add", "alphac_local_first"):
            getattr(self.lib, name).restype = ctypes.c_int64
        assert ctypes.c_int64.in_dll(self.lib, WIDTH).value == self.width
        self.k, self.s = k, s

    def sequential(self, params, rows, acc, first: bool):
        """The words of the one-at-a-time loop, or None where it refuses."""
        acc = acc.copy()
        c = np.zeros(self.words * self.per, self.dtype)
        for i, row in enumerate(rows):
            out = acc if first and i == 0 else c
            fail = ctypes.c_int64(-1)
            row = np.ascontiguousarray(row)
            if self.lib.alphac_contribution(P(params.ctypes.data), P(row.ctypes.data), P(out.ctypes.data),
                                            ctypes.byref(fail)):
                return None
            if first and i == 0:
                j = self.lib.alphac_local_first(P(acc.ctypes.data), self.words)
            else:
                j = self.lib.alphac_local_add(P(acc.ctypes.data), P(c.ctypes.data), self.words)
            if j >= 0:
                return None
        return acc

    def lanes(self, params, rows, acc):
        rows = np.ascontiguousarray(rows)
        before, out = acc.copy(), np.full(acc.shape, 12345.0, self.dtype)
        status = self.lib.alphac_contribution_lanes(P(params.ctypes.data), P(rows.ctypes.data), P(acc.ctypes.data),
                                                    P(out.ctypes.data))
        assert acc.tobytes() == before.tobytes()  # only read
        return status, out


def _compare(kern: _Kernels, rng, trials: int, specials: bool, spread: int = 2) -> tuple[int, int, int]:
    """(equal, refused by both, declined where the sequential kernels gave words); values of
    magnitudes 10^-spread .. 10^spread."""
    equal = refused = declined = 0
    kp, rp = kern.words * kern.per, kern.row  # whole words of values; padding values +0.0
    for trial in range(trials):
        params = np.zeros(kp, kern.dtype)
        params[:kern.k] = rng.standard_normal(kern.k) * 10.0 ** rng.integers(-spread, spread + 1, kern.k)
        rows = np.zeros((LANES, rp), kern.dtype)
        rows[:, :kern.s] = rng.standard_normal((LANES, kern.s)) * 10.0 ** rng.integers(-spread, spread + 1,
                                                                                         (LANES, kern.s))
        first = trial % 2 == 0
        acc = np.zeros(kp, kern.dtype)
        if not first:
            acc[:kern.k] = rng.standard_normal(kern.k)
        if specials and trial % 3 == 0:  # overflow, a NaN, an infinity, signed zeros
            where = rng.integers(0, 3)
            big = float(np.finfo(kern.dtype).max) / 4  # sums of a few overflow
            pick = rng.choice([big, -big, 0.0, -0.0, np.nan, np.inf])
            if where == 1:
                rows[rng.integers(0, LANES), rng.integers(0, kern.s)] = pick
            else:
                (params if where == 0 else acc)[rng.integers(0, kern.k)] = pick
            if where == 2 and not np.isfinite(pick):
                continue  # acc is always finite: the sums before it were checked
        if first:
            acc = np.zeros(kp, kern.dtype)  # the runtime starts the lanes from +0.0
        if trial % 5 == 0:
            rows[rng.integers(0, LANES), :kern.s] = -0.0  # contributions of -0.0
        want = kern.sequential(params, rows, acc, first)
        status, got = kern.lanes(params, rows, acc)
        if want is None:
            assert status == 1
            refused += 1
        elif status == 0:
            assert got.tobytes() == want.tobytes()
            equal += 1
        else:
            declined += 1
    return equal, refused, declined


def test_indexed_least_squares_lanes_equal_the_sequential_words(tmp_path):
    k = 7
    kern = _Kernels(tmp_path, lsq_contribution_indexed(k), k, k + 1)
    assert kern.width == LANES
    equal, refused, declined = _compare(kern, np.random.default_rng(3), 600, specials=True)
    assert declined == 0 and equal > 300 and refused > 20


def test_first_sample_of_minus_zero_sums_to_plus_zero(tmp_path):
    """+0.0 + -0.0 is +0.0: acc starts at +0.0, as the sequential loop's first sample does."""
    k = 3
    kern = _Kernels(tmp_path, lsq_contribution_indexed(k), k, k + 1)
    params = np.zeros(k)
    rows = np.zeros((LANES, k + 1))
    rows[:, k] = 1.0  # r = -1, contribution -1 * x = -0.0 for x = +0.0
    status, got = kern.lanes(params, rows, np.zeros(k))
    assert status == 0 and got.view(np.uint64).tolist() == [0] * k
    assert kern.sequential(params, rows, np.zeros(k), True).view(np.uint64).tolist() == [0] * k


def test_binary32_storage_lanes_add_in_binary32_and_keep_the_padding(tmp_path):
    """An odd k of binary32 values: the last word's padding value is carried, and each lane's
    narrowed contribution is added in binary32 (the binary64 sum would give other bits)."""
    k = 5
    kern = _Kernels(tmp_path, lsq_contribution_indexed(k), k, k + 1, "binary32")
    assert kern.width == LANES and kern.words == 3
    equal, refused, declined = _compare(kern, np.random.default_rng(7), 400, specials=True)
    assert declined == 0 and equal > 200 and refused > 10


@pytest.mark.parametrize("name, program, k, s, fmt", [
    # a contribution word assigned twice: the first store would not be the sample's
    ("twice", n.Program(4, (assign(3, n.SlotRef(n.Index(1)), line=1), assign(3, n.SlotRef(n.Index(2)), line=2))), 1, 2,
     "binary64"),
    # a contribution read after its write
    ("reads", n.Program(4, (assign(3, n.SlotRef(n.Index(1))),
                            n.Let("t", n.SlotRef(n.Index(3)), Span("gate.alpha", 2, 3)))), 1, 2, "binary64"),
    ("independent", lsq_contribution_indexed(2), 2, 3, "none"),
])
def test_what_is_not_lowered_has_width_zero_and_declines(tmp_path, name, program, k, s, fmt):
    kern = _Kernels(tmp_path, program, k, s, fmt)
    assert kern.width == 0
    status, _ = kern.lanes(np.ones(k), np.ones((LANES, s)), np.zeros(k))
    assert status == 1


def test_every_spec_learner_lanes_equal_the_sequential_words(tmp_path):
    """Every spec's contribution, binary64 and binary32 storage: the lanes kernel where it
    has one, on random and special data."""
    rng = np.random.default_rng(11)
    lowered, stored32, seen = 0, 0, set()
    for i, (name, dep) in enumerate(every_deployment()):
        learner = dep.learner
        fmt = format_of(dep)
        if learner.independent or (learner.contribution, fmt) in seen:
            continue
        seen.add((learner.contribution, fmt))
        if not lanes_ok(learner.contribution, learner.k, learner.s, fmt):
            continue
        d = tmp_path / str(i)
        d.mkdir()
        kern = _Kernels(d, learner.contribution, learner.k, learner.s, fmt)
        assert kern.width == LANES, name
        stored32 += fmt == "binary32"
        lowered += 1
        equal, refused, declined = _compare(kern, rng, 60, specials=True, spread=1)
        assert equal > 30 and declined == 0, (name, equal, refused, declined)
    assert lowered >= 8 and stored32 >= 2


def _loops(*levels, body):
    """Nested loops (var, lo, hi), outermost first, around `body`."""
    for var, lo, hi in reversed(levels):
        body = (n.Loop(var, lo, hi, body),)
    return body


@pytest.mark.parametrize("name, body, ok", [
    ("a loop over the contribution", _loops(("i", 0, 4), body=(assign(6, n.SlotRef(n.Index(0, "i")), "i"),)), True),
    ("slot by slot", tuple(assign(6 + j, n.SlotRef(n.Index(j))) for j in (2, 0, 3, 1)), True),
    ("a 2-D view, row by row", _loops(("i", 0, 2), ("j", 0, 2), body=(
        n.Assign(n.affine(6, (("i", 2), ("j", 1))), n.SlotRef(n.Index(0)), Span("gate.alpha", 1, 3)),)), True),
    ("a word twice", _loops(("i", 0, 4), body=(assign(6, n.SlotRef(n.Index(0, "i")), "i"),)) + (
        assign(7, n.SlotRef(n.Index(0))),), False),
    ("a loop the write does not index", _loops(("t", 0, 2), ("i", 0, 4), body=(
        assign(6, n.SlotRef(n.Index(0, "i")), "i"),)), False),
    ("an empty loop around the rest", _loops(("t", 0, 0), body=(assign(6, n.SlotRef(n.Index(0))),)) + _loops(
        ("i", 0, 4), body=(assign(6, n.SlotRef(n.Index(0, "i")), "i"),)), True),
    ("a word never written", _loops(("i", 0, 3), body=(assign(6, n.SlotRef(n.Index(0, "i")), "i"),)), False),
    ("a stride that leaves gaps", _loops(("i", 0, 2), body=(
        n.Assign(n.affine(6, (("i", 2),)), n.SlotRef(n.Index(0)), Span("gate.alpha", 1, 3)),)), False),
])
def test_the_rule_tells_each_contribution_word_written_once(name, body, ok):
    """k = 4, s = 2: the contribution is words 6 .. 9."""
    assert lanes_ok(n.Program(10, body), 4, 2, "binary64") is ok, name


def test_the_rule_does_not_walk_the_words_of_a_large_learner():
    """Decided by intervals, one an assignment: 10^7 coordinates (a walk over every word took
    seconds a call, and the planner and the build ask it several times)."""
    k = 10**7
    body = _loops(("i", 0, k), body=(assign(2 * k + 1, mul(n.SlotRef(n.Index(0, "i")), n.SlotRef(n.Index(k))), "i"),))
    assert lanes_ok(n.Program(3 * k + 1, body), k, k + 1, "binary64")

"""The arithmetic between the program kernels: the local ordered sum of contributions, the
element-wise combine, and the mean before the update. The C runtime moves words and calls
these; every floating-point operation of an executable is emitted here or in program.py.

    i64 alphac_local_first(double* acc, i64 k)                  -> -1 or the first bad j
    i64 alphac_local_add(double* acc, double* c, i64 k)         -> -1 or the first bad j
    i64 alphac_add_range(double* dst, double* a, double* b, i64 lo, i64 hi) -> 1 if any bad
    i64 alphac_add_lanes(double* dst, double* a, double* b, u64* h, i64 n, i64 phase,
                         u64* lanes)                            -> 1 if any bad
    i64 alphac_mean_lanes(double* dst, double* src, i64 n, i64 phase, u64* lanes,
                          i64 count)                            -> 1 if any bad
    i64 alphac_first_nonfinite(double* p, i64 lo, i64 hi)       -> -1 or the first such j
    i64 alphac_mean(double* g, i64 count, i64 k)                -> -1 or the first bad j
    i64 alphac_mean_owned(double* mean, double* src, i64 count, i64 at, i64 first, i64 step,
                          i64 cnt, i64 sliced)                  -> -1 or the bad coordinate
    i64 alphac_delta(double* d, double* x, double* v, i64 count, i64 k) -> -1 or the first bad j
    i64 alphac_outer_momentum(double* x, double* b, double* v, double* mean, double* rate,
                              double* momentum, i64 k)          -> -1 or the first bad j

"Bad": a non-finite operand or result. Element loops only OR a flag, so they vectorise;
when it is set a second pass finds the first failing coordinate (the caller refuses, so
what the first pass wrote is never used). No fast-math or `contract` flags anywhere.

A binary32 learner's module (alphac/plan/storage.py) gets the same kernels over `float`
elements, two to a word: the counts and bounds the runtime passes (k, lo, hi, n) are in
words, the coordinates returned are elements, each add and quotient is binary32's own
(rounded once to binary32), and the mean's divisor is the count converted to binary32,
exact for the counts the planner admits (at most 2^24).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from alphac import wire
from alphac.codegen.types import F32, F64, I1, I32, I64, PTR

EXP = 0x7FF0000000000000


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


@dataclass(frozen=True)
class Element:
    """The element type of a module's kernels: its float and integer types, its exponent
    and sign masks, and how many elements a word holds."""

    float_type: ir.Type
    int_type: ir.IntType
    exp: int
    per_word: int

    @property
    def bits(self) -> int:
        return self.int_type.width

    def const(self, v: int) -> ir.Constant:
        return ir.Constant(self.int_type, v)


BINARY64 = Element(F64, I64, EXP, 1)
BINARY32 = Element(F32, I32, 0x7F800000, 2)
ELEMENTS = {"binary64": BINARY64, "binary32": BINARY32}


class _Fn:
    """One exported kernel under construction: its builder and counted loops."""

    def __init__(self, module: ir.Module, name: str, args: tuple, names: tuple,
                 el: Element = BINARY64):
        self.fn = ir.Function(module, ir.FunctionType(I64, args), name)
        self.fn.attributes.add("nounwind")
        for a, nm in zip(self.fn.args, names):
            a.name = nm
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.el = el

    def elements(self, words: ir.Value) -> ir.Value:
        """A count or bound in words, in elements."""
        return words if self.el.per_word == 1 else self.b.mul(words, _c(self.el.per_word))

    def at(self, base: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.gep(base, [j], inbounds=True, source_etype=self.el.float_type)

    def load(self, base: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.load(self.at(base, j), typ=self.el.float_type)

    def bad(self, *xs: ir.Value) -> ir.Value:
        """1 when any of xs is an infinity or a NaN (all exponent bits set)."""
        b, el = self.b, self.el
        out = None
        for x in xs:
            hit = b.icmp_unsigned("==", b.and_(b.bitcast(x, el.int_type), el.const(el.exp)), el.const(el.exp))
            out = hit if out is None else b.or_(out, hit)
        return out

    def loop(self, lo: ir.Value, hi: ir.Value, body, carry: ir.Value | None = None,
             step: ir.Value | None = None):
        """for (j = lo; j < hi; j += step (1)) carry = body(j, carry); returns the final carry."""
        b = self.b
        pre = b.block
        head = b.append_basic_block("head")
        blk = b.append_basic_block("body")
        end = b.append_basic_block("end")
        b.branch(head)
        b.position_at_end(head)
        j = b.phi(I64, "j")
        j.add_incoming(lo, pre)
        acc = None
        if carry is not None:
            acc = b.phi(carry.type, "carry")
            acc.add_incoming(carry, pre)
        b.cbranch(b.icmp_signed("<", j, hi), blk, end)
        b.position_at_end(blk)
        nxt = body(j, acc)
        j.add_incoming(b.add(j, step if step is not None else _c(1)), b.block)
        if acc is not None:
            acc.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(end)
        return acc

    def first(self, lo: ir.Value, hi: ir.Value, found) -> None:
        """Return the first j in [lo, hi) where found(j) holds, else fall through."""
        def body(j, _):
            b = self.b
            with b.if_then(found(j), likely=False):
                b.ret(j)
            return None
        self.loop(lo, hi, body)

    def flagged(self, k: ir.Value, body, rescan) -> None:
        """A branch-free pass `flag |= body(j)` over [0, k); if the flag is set, return the
        first j where rescan(j) holds (it must see the failure in what the pass left)."""
        b = self.b
        flag = self.loop(_c(0), k, lambda j, f: b.or_(f, body(j)), ir.Constant(I1, 0))
        with b.if_then(flag, likely=False):
            self.first(_c(0), k, rescan)
            b.ret(_c(-1))


def _add_range(module: ir.Module, el: Element) -> None:
    f = _Fn(module, "alphac_add_range", (PTR, PTR, PTR, I64, I64), ("dst", "a", "b", "lo", "hi"), el)
    dst, a, bb, lo, hi = f.fn.args
    lo, hi = f.elements(lo), f.elements(hi)

    def body(j, flag):
        x, y = f.load(a, j), f.load(bb, j)
        r = f.b.fadd(x, y)
        f.b.store(r, f.at(dst, j))
        return f.b.or_(flag, f.bad(x, y, r))

    flag = f.loop(lo, hi, body, ir.Constant(I1, 0))
    f.b.ret(f.b.zext(flag, I64))


# words of a received piece taken at a time: added (a loop that vectorises), then folded into
# the lanes, while they are still in the first-level cache
PIECE_BLOCK = 512


def _fold_lanes(f: _Fn, h: ir.Value, lanes: ir.Value, phase: ir.Value, lo: ir.Value, hi: ir.Value) -> None:
    """lanes[(phase + j) % LANES] = (lanes[...] ^ h[j]) * FNV_PRIME for j in [lo, hi), in
    order: single words until the lane is 0, then LANES words a step with the lanes in
    registers (independent multiply chains), then single words."""
    b, n_lanes = f.b, wire.LANES

    def fold(lane, j):
        word = b.load(b.gep(h, [j], inbounds=True, source_etype=I64), typ=I64)
        return b.mul(b.xor(lane, word), _c(wire.FNV_PRIME))

    def lane_slot(t):
        return b.gep(lanes, [t], inbounds=True, source_etype=I64)

    def one(j, _):
        slot = lane_slot(b.and_(b.add(phase, j), _c(n_lanes - 1)))
        b.store(fold(b.load(slot, typ=I64), j), slot)
        return None

    head = b.and_(b.sub(_c(0), b.add(phase, lo)), _c(n_lanes - 1))  # words until lane 0
    mid = b.add(lo, head)
    mid = b.select(b.icmp_signed("<", mid, hi), mid, hi)
    f.loop(lo, mid, one)
    groups = b.sdiv(b.sub(hi, mid), _c(n_lanes))
    regs = [b.load(lane_slot(_c(t)), typ=I64) for t in range(n_lanes)]
    pre, top, body, end = (b.block, b.append_basic_block("lanes.head"), b.append_basic_block("lanes.body"),
                           b.append_basic_block("lanes.end"))
    b.branch(top)
    b.position_at_end(top)
    g = b.phi(I64, "g")
    g.add_incoming(_c(0), pre)
    phis = [b.phi(I64, f"lane{t}") for t in range(n_lanes)]
    for phi, v in zip(phis, regs):
        phi.add_incoming(v, pre)
    b.cbranch(b.icmp_signed("<", g, groups), body, end)
    b.position_at_end(body)
    j0 = b.add(mid, b.mul(g, _c(n_lanes)))
    for t, phi in enumerate(phis):
        phi.add_incoming(fold(phi, b.add(j0, _c(t))), body)
    g.add_incoming(b.add(g, _c(1)), body)
    b.branch(top)
    b.position_at_end(end)
    for t, phi in enumerate(phis):
        b.store(phi, lane_slot(_c(t)))
    f.loop(b.add(mid, b.mul(groups, _c(n_lanes))), hi, one)


def _blocks(f: _Fn, n: ir.Value, block) -> ir.Value:
    """flag = block(lo, hi, flag) over [0, n) in blocks of PIECE_BLOCK words; the flag."""
    b = f.b

    def one(k, flag):
        lo = b.mul(k, _c(PIECE_BLOCK))
        hi = b.add(lo, _c(PIECE_BLOCK))
        return block(lo, b.select(b.icmp_signed("<", hi, n), hi, n), flag)

    count = b.sdiv(b.add(n, _c(PIECE_BLOCK - 1)), _c(PIECE_BLOCK))
    return f.loop(_c(0), count, one, ir.Constant(I1, 0))


def _add_lanes(module: ir.Module, el: Element) -> None:
    """A received piece in one pass: block by block (PIECE_BLOCK words), the frame
    checksum's FNV-1a lanes over the received words h[j] (h is a or b), word j going to
    lane (phase + j) % LANES (phase: the piece's first payload index mod LANES) exactly as
    frame.c's rt_lanes folds them (integer xor and multiply), then dst[j] = a[j] + b[j]
    (the add on arrival; the finite flag as alphac_add_range), j < n. The lanes come
    first, so dst may be h."""
    f = _Fn(module, "alphac_add_lanes", (PTR, PTR, PTR, PTR, I64, I64, PTR),
            ("dst", "a", "b", "h", "n", "phase", "lanes"), el)
    dst, a, bb, h, n, phase, lanes = f.fn.args
    b = f.b

    def add(j, flag):
        x, y = f.load(a, j), f.load(bb, j)
        r = b.fadd(x, y)
        b.store(r, f.at(dst, j))
        return b.or_(flag, f.bad(x, y, r))

    def block(lo, hi, flag):
        _fold_lanes(f, h, lanes, phase, lo, hi)
        return f.loop(f.elements(lo), f.elements(hi), add, flag)

    b.ret(b.zext(_blocks(f, n, block), I64))


def _divisor(f: _Fn, count: ir.Value):
    """(double) count (binary32: (float) count, exact below 2^24), whether it is a power of
    two, and its reciprocal (see _mean)."""
    b = f.b
    c = b.uitofp(count, F64)
    cbits = b.bitcast(c, I64)
    pow2 = b.and_(b.icmp_unsigned("==", b.and_(cbits, _c((1 << 52) - 1)), _c(0)),
                  b.icmp_unsigned("!=", cbits, _c(0)))
    if f.el.float_type is not F64:
        c = b.fptrunc(c, f.el.float_type)
    return c, pow2, b.fdiv(ir.Constant(f.el.float_type, 1.0), c)


def _quotient(f: _Fn, op: str, x: ir.Value, c: ir.Value, inv: ir.Value) -> ir.Value:
    return f.b.fmul(x, inv) if op == "mul" else f.b.fdiv(x, c)


def _mean_lanes(module: ir.Module, el: Element) -> None:
    """A received total in one pass, when the update of it comes next: block by block, the
    lanes over src[j] (as alphac_add_lanes), then dst[j] = src[j] / (double) count with
    alphac_mean's words (x * (1 / c) when c is a power of two); 1 if an operand or quotient
    is non-finite. dst may be src."""
    f = _Fn(module, "alphac_mean_lanes", (PTR, PTR, I64, I64, PTR, I64),
            ("dst", "src", "n", "phase", "lanes", "count"), el)
    dst, src, n, phase, lanes, count = f.fn.args
    b = f.b
    c, pow2, inv = _divisor(f, count)

    def blocks(op):
        def one(j, flag):
            x = f.load(src, j)
            r = _quotient(f, op, x, c, inv)
            b.store(r, f.at(dst, j))
            return b.or_(flag, f.bad(x, c, r))

        def block(lo, hi, flag):
            _fold_lanes(f, src, lanes, phase, lo, hi)
            return f.loop(f.elements(lo), f.elements(hi), one, flag)
        return _blocks(f, n, block)

    with b.if_else(pow2) as (exact, divide):
        with exact:
            b.ret(b.zext(blocks("mul"), I64))
        with divide:
            b.ret(b.zext(blocks("div"), I64))
    b.unreachable()


def _first_nonfinite(module: ir.Module, el: Element) -> None:
    f = _Fn(module, "alphac_first_nonfinite", (PTR, I64, I64), ("p", "lo", "hi"), el)
    p, lo, hi = f.fn.args
    f.first(f.elements(lo), f.elements(hi), lambda j: f.bad(f.load(p, j)))
    f.b.ret(_c(-1))


def _local_first(module: ir.Module, el: Element) -> None:
    """After the first sample's contribution was written straight into acc: acc = +0.0 + acc.

    +0.0 + c equals c bit for bit unless c is -0.0 (the sum is +0.0), and is finite exactly
    when c is. So a read-only integer scan (it vectorises) looks for "non-finite or -0.0",
    and only then does a second pass return the first non-finite word or rewrite each word
    as +0.0 + x. Bit 63 of (bits & EXP) + 2^52 is set exactly for an all-ones exponent;
    with d = bits ^ -0.0, bit 63 of ~d & (d - 1) is set exactly for d = 0."""
    f = _Fn(module, "alphac_local_first", (PTR, I64), ("acc", "k"), el)
    acc, k = f.fn.args
    k = f.elements(k)
    b = f.b
    top = el.bits - 1  # the sign bit; the mantissa's width is top - exponent bits

    def scan(j, special):
        bits = b.bitcast(f.load(acc, j), el.int_type)
        nonfinite = b.add(b.and_(bits, el.const(el.exp)), el.const(el.exp & -el.exp))
        d = b.xor(bits, el.const(1 << top))
        negzero = b.and_(b.not_(d), b.sub(d, el.const(1)))
        return b.or_(special, b.or_(nonfinite, negzero))

    special = f.loop(_c(0), k, scan, el.const(0))
    with b.if_then(b.icmp_signed("<", special, el.const(0)), likely=False):
        def fix(j, _):
            x = f.load(acc, j)
            with b.if_then(f.bad(x), likely=False):
                b.ret(j)
            b.store(b.fadd(ir.Constant(el.float_type, 0.0), x), f.at(acc, j))
            return None
        f.loop(_c(0), k, fix)
    b.ret(_c(-1))


def _local_add(module: ir.Module, el: Element) -> None:
    f = _Fn(module, "alphac_local_add", (PTR, PTR, I64), ("acc", "c", "k"), el)
    acc, c, k = f.fn.args
    k = f.elements(k)

    def body(j):
        x, y = f.load(acc, j), f.load(c, j)
        r = f.b.fadd(x, y)
        f.b.store(r, f.at(acc, j))
        return f.bad(x, y, r)

    # acc was finite before this pass (checked results), so a failure shows in c or in the
    # stored result
    f.flagged(k, body, lambda j: f.bad(f.load(c, j), f.load(acc, j)))
    f.b.ret(_c(-1))


def _mean(module: ir.Module, el: Element) -> None:
    """g[j] = g[j] / (double) count in place. When (double) count is a power of two, x / c
    and x * (1 / c) are the same word for every x: 1 / c is exact, so both are the exact
    quotient rounded once (subnormals included; c >= 1 cannot overflow). A multiply is
    several times cheaper than a divide. count is a u64, so c is finite, and a non-finite
    x gives a non-finite quotient: the first failing j is the first non-finite word left."""
    f = _Fn(module, "alphac_mean", (PTR, I64, I64), ("g", "count", "k"), el)
    g, count, k = f.fn.args
    k = f.elements(k)
    b = f.b
    c, pow2, inv = _divisor(f, count)

    def body(op):
        def one(j):
            x = f.load(g, j)
            r = _quotient(f, op, x, c, inv)
            b.store(r, f.at(g, j))
            return f.bad(x, c, r)
        return one

    with b.if_else(pow2) as (exact, divide):
        with exact:
            f.flagged(k, body("mul"), lambda j: f.bad(f.load(g, j)))
        with divide:
            f.flagged(k, body("div"), lambda j: f.bad(f.load(g, j)))
    b.ret(_c(-1))


def _mean_owned(module: ir.Module, el: Element) -> None:
    """mean[at + j] = x / (double) count for the cnt coordinates i = first + j*step of one
    run of an owner's coordinates (the run's first being the owner's at-th coordinate),
    x = src[at + j] (its slice, `sliced`) or src[i] (the full vector); the first coordinate
    whose operand or quotient is non-finite is returned. (binary32: the run counts words,
    each holding two coordinates of the owner's.) mean may be src: each word is read
    before any word at or above its position is written (coordinates ascend, so i >= at + j).
    (The replicated mean's word: its x * (1/c) is used only when exact, so a division gives
    the same bits.)"""
    f = _Fn(module, "alphac_mean_owned", (PTR, PTR, I64, I64, I64, I64, I64, I64),
            ("mean", "src", "count", "at", "first", "step", "cnt", "sliced"), el)
    mean, src, count, at, first, step, cnt, sliced = f.fn.args
    b = f.b
    c, _, _ = _divisor(f, count)
    whole = b.icmp_signed("==", sliced, _c(0))

    def body(j, _):
        word = b.add(first, b.mul(j, step))
        for e in range(el.per_word):  # a binary32 word's two coordinates, in order
            i = b.add(f.elements(word), _c(e))
            here = b.add(f.elements(b.add(at, j)), _c(e))
            x = f.load(src, b.select(whole, i, here))
            r = b.fdiv(x, c)
            with b.if_then(f.bad(x, r), likely=False):
                b.ret(i)
            b.store(r, f.at(mean, here))
        return None

    f.loop(_c(0), cnt, body)
    b.ret(_c(-1))


def _delta(module: ir.Module, el: Element) -> None:
    """Local steps: an owner's leaf value, d[j] = (x[j] - v[j]) * (double) count, its
    parameters' delta from the shared version weighted by its sample count (exact as a
    double below 2^53), the difference and the product each rounded once."""
    f = _Fn(module, "alphac_delta", (PTR, PTR, PTR, I64, I64), ("d", "x", "v", "count", "k"), el)
    d, x, v, count, k = f.fn.args
    b = f.b
    c, _, _ = _divisor(f, count)

    def body(j):
        diff = b.fsub(f.load(x, j), f.load(v, j))
        r = b.fmul(diff, c)
        b.store(r, f.at(d, j))
        return f.bad(diff, r)

    f.flagged(f.elements(k), body, lambda j: f.bad(b.fsub(f.load(x, j), f.load(v, j)), f.load(d, j)))
    b.ret(_c(-1))


def _outer_momentum(module: ir.Module, el: Element) -> None:
    """Local steps' outer momentum: b[j] = momentum * b[j] + mean[j], then x[j] = v[j] +
    rate * b[j], each product and sum rounded once (rate and momentum: one element each)."""
    f = _Fn(module, "alphac_outer_momentum", (PTR, PTR, PTR, PTR, PTR, PTR, I64),
            ("x", "b", "v", "mean", "rate", "momentum", "k"), el)
    x, bm, v, mean, rate, momentum, k = f.fn.args
    b = f.b
    r, mu = f.load(rate, _c(0)), f.load(momentum, _c(0))

    def body(j):
        nb = b.fadd(b.fmul(mu, f.load(bm, j)), f.load(mean, j))
        b.store(nb, f.at(bm, j))
        nx = b.fadd(f.load(v, j), b.fmul(r, nb))
        b.store(nx, f.at(x, j))
        return f.bad(nb, nx)

    f.flagged(f.elements(k), body, lambda j: f.bad(f.load(bm, j), f.load(x, j)))
    b.ret(_c(-1))


def emit_arith(module: ir.Module, fmt: str = "binary64") -> None:
    """Add every kernel of this module's docstring to `module`, over the elements of storage
    format `fmt`."""
    for emit in (_add_range, _add_lanes, _mean_lanes, _first_nonfinite, _local_first, _local_add, _mean, _mean_owned,
                 _delta, _outer_momentum):
        emit(module, ELEMENTS[fmt])

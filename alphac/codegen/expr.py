"""The expression half of a program's lowering (alphac/codegen/program.py): one function
being emitted (its region arguments, entry, body and fail blocks), addressing of slots and
views, the non-finite tests, and the lowering of expressions and sums; with the two check
disciplines an expression is lowered under (`_Checks`, scalar: a branch per statement;
`_Flag`, fast: one OR-ed mark) and the context a statement is lowered in (`_Ctx`).
Arithmetic carries no fast-math or `contract` flags (see program.py)."""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from alphac.diagnostics import NO_SPAN, CompileError, Diagnostic, Span
from alphac.codegen import elementary
from alphac.codegen.types import F32, F64, I1, I64, PTR
from alphac.ir import nodes as n
from alphac.ir.words import to_bits, to_float


EXP_MASK = 0x7FF0000000000000
SIGN_MASK = 0x8000000000000000
# IR comparisons as LLVM's ordered fcmp predicates (the operands are finite, never NaN).
_FCMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# Coordinates per chunk of the fast loop: the saved old words of a few views stay in L1.
CHUNK = 512


def is_finite_bits(bits: int) -> bool:
    return (bits & EXP_MASK) != EXP_MASK


def _unsupported(message: str, span: Span = NO_SPAN) -> CompileError:
    return CompileError(Diagnostic("program-unsupported", message, span))


# ----------------------------------------------------------------------------- emitter

@dataclass(frozen=True)
class _Var:
    value: ir.Value  # i64
    lo: int
    hi: int


class _Checks:
    """Scalar checks: every operand and result, collected per statement piece, then one
    branch to the fail block."""

    def __init__(self, em: "_Emitter"):
        self.em = em
        self.pending: list[ir.Value] = []

    def add(self, cond: ir.Value) -> None:
        self.pending.append(cond)

    def operand(self, value: ir.Value) -> None:
        self.add(self.em.nonfinite(value))

    result = operand

    def divisor(self, value: ir.Value, known_finite: bool) -> None:
        if not known_finite:
            self.add(self.em.nonfinite(value))

    absorbed = divisor  # an operand whose non-finiteness need not reach the result

    def root(self, value: ir.Value, arithmetic: bool) -> None:
        pass  # every value of the statement has been checked already

    def function(self, op: str) -> ir.Function:
        """What an elementary function's call calls: the whole function."""
        return elementary.define(self.em.module, op)

    def flush(self, ordinal: int, coord: ir.Value) -> None:
        if not self.pending:
            return
        b = self.em.b
        cond = self.pending[0]
        for c in self.pending[1:]:
            cond = b.or_(cond, c)
        self.pending = []
        ok = b.append_basic_block("ok")
        self.em.fail_edges.append((b.block, ordinal, coord))
        b.cbranch(cond, self.em.fail_block, ok)
        b.position_at_end(ok)


class _Flag:
    """Fast-path detector: one i1 accumulated with OR, no branches. It is set whenever some
    scalar check would fail, with far fewer tests: a non-finite operand or result makes
    every enclosing add, sub, mul, neg, sqrt, abs, numerator of a div and magnitude of a
    copysign non-finite too, so it reaches the statement's root; only an absorbing operand
    can stop it: a divisor (x / inf = 0), the sign of a copysign, either operand of min,
    max or a comparison, the values a select chooses from, and the operand of an
    elementary function (exp(-inf) = 0). Testing each arithmetic root and each absorbing
    operand therefore covers every check, and each of these tests is itself one of the
    checks, so the flag is set exactly when a check fails, or where an elementary
    function's fast phase could not decide (`function`)."""

    def __init__(self, em: "_Emitter", start: ir.Value):
        self.em = em
        self.value = start

    def add(self, cond: ir.Value) -> None:
        self.value = self.em.b.or_(self.value, cond)

    def operand(self, value: ir.Value) -> None:
        pass

    result = operand

    def divisor(self, value: ir.Value, known_finite: bool) -> None:
        # Op results are not tested on this path, so "known finite" does not hold here.
        self.add(self.em.nonfinite(value))

    absorbed = divisor

    def root(self, value: ir.Value, arithmetic: bool) -> None:
        if arithmetic:
            self.add(self.em.nonfinite(value))

    def function(self, op: str) -> ir.Function:
        """What an elementary function's call calls here: its branch-free fast phase, the
        whole function's word where its rounding test decides and NaN where it does not
        (or outside its domain). That NaN reaches the flag as a non-finite result would,
        so the coordinate is rerun by the scalar lowering, which calls the whole function:
        the words are the same, and an undecided call is no refusal."""
        return elementary.define_fast(self.em.module, op)

    def flush(self, ordinal: int, coord: ir.Value) -> None:
        pass


class _ExprEmitter:
    """One function being emitted, and its expressions (the statements: program._Emitter)."""

    def __init__(self, module: ir.Module, program: n.Program, name: str,
                 regions: list[tuple[int, int]], fmt: str = "binary64"):
        self.module = module
        # the slots' element type: binary64, or binary32 values (widened on load, and
        # narrowed on store, which is exact: the planner admits only binary32 values there)
        self.elem = F32 if fmt == "binary32" else F64
        self.program = program
        self.name = name
        self.regions = [(int(a), int(b)) for a, b in regions]
        args = [PTR] * len(self.regions) + [PTR]
        self.fn = ir.Function(module, ir.FunctionType(I64, args), name)
        self.fn.attributes.add("nounwind")
        for arg in self.fn.args:
            # Regions are disjoint slot ranges; saying so lets loops vectorise without
            # runtime overlap checks.
            arg.add_attribute("noalias")
        self.fail_coord = self.fn.args[-1]
        entry = self.fn.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(entry)
        body = self.fn.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        self.fail_block = self.fn.append_basic_block("fail")
        self.fail_edges: list[tuple[ir.Block, int, ir.Value]] = []
        self.sqrt = module.declare_intrinsic("llvm.sqrt", [F64])
        self.minus_one = ir.Constant(I64, -1)
        self.uid = 0
        self.vectors: dict[str, tuple[ir.Value, int]] = {}  # vector temporaries: (alloca, lo)

    # -- addressing -------------------------------------------------------------------------

    def _region_of(self, lo: int, hi: int) -> int | None:
        for j, (start, length) in enumerate(self.regions):
            if start <= lo and hi <= start + length:
                return j
        return None

    def address(self, index: n.Index, vars_: dict[str, _Var], span: Span) -> ir.Value:
        b = self.b
        if index.terms:
            return self._affine_address(index, vars_, span)
        if index.var is None:
            j = self._region_of(index.base, index.base + 1)
            if j is None:
                raise _unsupported(f"slot {index.base} lies in no region of {self.name}", span)
            return self.region_pointer(j, ir.Constant(I64, index.base - self.regions[j][0]))
        if index.var not in vars_:
            raise _unsupported(f"index variable {index.var!r} is not bound", span)
        var = vars_[index.var]
        if var.hi <= var.lo:  # never executed
            return b.gep(self.fn.args[0], [ir.Constant(I64, 0)], source_etype=self.elem)
        lo, hi = index.base + var.lo, index.base + var.hi
        j = self._region_of(lo, hi)
        if j is not None:
            return self.region_pointer(j, b.add(var.value, ir.Constant(I64, index.base - self.regions[j][0])))
        # A view spanning several regions: pick the region at run time.
        return self._across(b.add(var.value, ir.Constant(I64, index.base)), lo, hi, span)

    def _affine_address(self, index: n.Index, vars_: dict[str, _Var], span: Span) -> ir.Value:
        """The address of base + sum(stride * var) (a 2-D view's element)."""
        b = self.b
        ranges = {}
        for v, _ in index.terms:
            if v not in vars_:
                raise _unsupported(f"index variable {v!r} is not bound", span)
            ranges[v] = (vars_[v].lo, vars_[v].hi)
            if vars_[v].hi <= vars_[v].lo:  # never executed
                return b.gep(self.fn.args[0], [ir.Constant(I64, 0)], source_etype=self.elem)
        lo, hi = index.bounds(ranges)
        j = self._region_of(lo, hi)
        start = self.regions[j][0] if j is not None else 0
        slot = ir.Constant(I64, index.base - start)
        for v, s in index.terms:
            slot = b.add(slot, b.mul(vars_[v].value, ir.Constant(I64, s)))
        if j is not None:
            return self.region_pointer(j, slot)
        return self._across(slot, lo, hi, span)

    def region_pointer(self, j: int, off: ir.Value) -> ir.Value:
        """The address of word `off` of region j (a lanes kernel addresses a row per lane)."""
        return self.b.gep(self.fn.args[j], [off], inbounds=True, source_etype=self.elem)

    def _across(self, slot: ir.Value, lo: int, hi: int, span: Span) -> ir.Value:
        """The address of `slot` (an i64, one of [lo, hi)), whose region is picked at run time."""
        b = self.b
        ptr = None
        for j, (start, length) in enumerate(self.regions):
            if length == 0 or start + length <= lo or hi <= start:
                continue
            here = b.gep(self.fn.args[j], [b.sub(slot, ir.Constant(I64, start))], source_etype=self.elem)
            if ptr is None:
                ptr = here
            else:
                inside = b.icmp_unsigned("<", b.sub(slot, ir.Constant(I64, start)),
                                         ir.Constant(I64, length))
                ptr = b.select(inside, here, ptr)
        covered = sum(max(0, min(hi, s + ln) - max(lo, s)) for s, ln in self.regions)
        if ptr is None or covered < hi - lo:
            raise _unsupported(f"slots {lo}..{hi} are not all inside the regions of {self.name}", span)
        return ptr

    def vector_address(self, name: str, index: n.Index, vars_: dict[str, _Var], span: Span) -> ir.Value:
        """The address of element `index` of a vector temporary: its words are stack scratch
        of this function (an alloca of the entry block, made at its first use)."""
        b = self.b
        if name not in self.vectors:
            decl = next((v for v in n.vector_lets(self.program.body) if v.name == name), None)
            if decl is None:
                raise _unsupported(f"vector temporary {name!r} is never written", span)
            self.vectors[name] = (self.alloca_builder.alloca(self.ftype, size=max(1, decl.words),
                                                             name=f"vec.{name}"), decl.lo)
        storage, lo = self.vectors[name]
        off = ir.Constant(I64, index.base - lo)
        for v, s in index.strides:
            if v not in vars_:
                raise _unsupported(f"index variable {v!r} is not bound", span)
            if vars_[v].hi <= vars_[v].lo:  # never executed
                return b.gep(storage, [ir.Constant(I64, 0)], source_etype=self.ftype)
            off = b.add(vars_[v].value if s == 1 else b.mul(vars_[v].value, ir.Constant(I64, s)), off)
        return b.gep(storage, [off], inbounds=True, source_etype=self.ftype)

    def load_slot(self, ptr: ir.Value) -> ir.Value:
        """A slot's value, as binary64 (widening a binary32 slot is exact)."""
        value = self.b.load(ptr, typ=self.elem)
        return value if self.elem is F64 else self.b.fpext(value, F64)

    def store_slot(self, value: ir.Value, ptr: ir.Value) -> None:
        """Store a binary64 value into a slot: a binary32 slot gets fptrunc's word, exact for
        the binary32 values the planner admits into one (alphac/plan/storage.py)."""
        self.b.store(value if self.elem is F64 else self.b.fptrunc(value, F32), ptr)

    # -- the values' types (one binary64 value here; a lanes kernel's are vectors of them) -

    ftype = F64
    itype = I64  # the integer type of a value's word

    def call_function(self, fn: ir.Function, value: ir.Value) -> ir.Value:
        """An elementary function of one value."""
        return self.b.call(fn, [value])

    def round32(self, value: ir.Value) -> ir.Value:
        """To nearest binary32, then back: both IEEE conversions."""
        return self.b.fpext(self.b.fptrunc(value, F32), F64)

    # -- checks -----------------------------------------------------------------------------

    def nonfinite(self, value: ir.Value) -> ir.Value:
        """Whether the value's word (each lane's, of a vector) is non-finite; one i1 for a
        constant (a vector constant is one word in every lane)."""
        if isinstance(value, ir.Constant) and isinstance(value.constant, float):
            return ir.Constant(I1, 0 if is_finite_bits(to_bits(value.constant)) else 1)
        vector = isinstance(value.type, ir.VectorType)
        word = self.b.bitcast(value, ir.VectorType(I64, value.type.count) if vector else I64)
        mask = ir.Constant(word.type, EXP_MASK)
        return self.b.icmp_unsigned("==", self.b.and_(word, mask), mask)

    # -- expressions ------------------------------------------------------------------------

    def expr(self, e, ctx: "_Ctx") -> tuple[ir.Value, bool]:
        """The value of `e` and whether it is already known finite (an op result, checked)."""
        b = self.b
        if isinstance(e, n.Const):
            return ir.Constant(self.ftype, to_float(e.bits)), is_finite_bits(e.bits)
        if isinstance(e, n.SlotRef):
            idx = e.index
            if ctx.written is not None and idx.var == ctx.loop_var and idx.base in ctx.written:
                got = ctx.written[idx.base]
                if got is not None:
                    return got
            return self.load_slot(self.address(idx, ctx.vars, e.span)), False
        if isinstance(e, n.Local):
            if e.name not in ctx.env:
                raise _unsupported(f"temporary {e.name!r} is not bound here", e.span)
            return ctx.env[e.name]
        if isinstance(e, n.VectorLocal):  # a leaf: its uses check it, as a slot's
            return b.load(self.vector_address(e.name, e.index, ctx.vars, e.span), typ=self.ftype), False
        if isinstance(e, n.Unary):
            a, a_ok = self.expr(e.arg, ctx)
            if e.op in n.ELEMENTARY_OPS:
                # exp(-inf) is 0, tanh(inf) 1: these absorb a non-finite operand
                ctx.checks.absorbed(a, a_ok)
                r = self.call_function(ctx.checks.function(e.op), a)
                ctx.checks.result(r)
                return r, True
            if not a_ok:
                ctx.checks.operand(a)
            if e.op == "neg":
                r = b.fneg(a)
            elif e.op == "sqrt":
                r = b.call(self.sqrt, [a])
            elif e.op == "abs":
                r = self.with_sign(a, None)
            elif e.op == "round32":
                r = self.round32(a)
            else:
                raise _unsupported(f"unknown unary operation {e.op!r}", e.span)
            ctx.checks.result(r)
            return r, True
        if isinstance(e, n.Binary):
            x, x_ok = self.expr(e.lhs, ctx)
            y, y_ok = self.expr(e.rhs, ctx)
            if e.op in ("min", "max"):
                ctx.checks.absorbed(x, x_ok)
                ctx.checks.absorbed(y, y_ok)
                r = self.minmax(e.op, x, y)
                ctx.checks.result(r)
                return r, True
            if not x_ok:
                ctx.checks.operand(x)
            if e.op in ("div", "copysign"):
                ctx.checks.divisor(y, y_ok)
            elif not y_ok:
                ctx.checks.operand(y)
            if e.op == "copysign":
                r = self.with_sign(x, y)
            else:
                op = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}.get(e.op)
                if op is None:
                    raise _unsupported(f"unknown binary operation {e.op!r}", e.span)
                r = op(x, y)
            ctx.checks.result(r)
            return r, True
        if isinstance(e, n.Compare):
            x, x_ok = self.expr(e.lhs, ctx)
            y, y_ok = self.expr(e.rhs, ctx)
            ctx.checks.absorbed(x, x_ok)
            ctx.checks.absorbed(y, y_ok)
            return b.fcmp_ordered(_FCMP[e.op], x, y), True
        if isinstance(e, n.Select):
            c, _ = self.expr(e.cond, ctx)
            x, x_ok = self.expr(e.then, ctx)
            y, y_ok = self.expr(e.other, ctx)
            ctx.checks.absorbed(x, x_ok)
            ctx.checks.absorbed(y, y_ok)
            return b.select(c, x, y), True
        if isinstance(e, n.Sum):
            return self.sum(e, ctx)
        raise _unsupported(f"unknown expression {type(e).__name__}")

    def with_sign(self, x: ir.Value, y: ir.Value | None) -> ir.Value:
        """x with its sign bit cleared (`abs`), or replaced by y's (`copysign`): integer
        operations on the words, exact on every target."""
        b = self.b
        magnitude = b.and_(b.bitcast(x, self.itype), ir.Constant(self.itype, ~SIGN_MASK & (2**64 - 1)))
        if y is not None:
            magnitude = b.or_(magnitude, b.and_(b.bitcast(y, self.itype), ir.Constant(self.itype, SIGN_MASK)))
        return b.bitcast(magnitude, self.ftype)

    def minmax(self, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
        """IEEE 754-2019 minimum (maximum) of finite operands: x where x < y (x > y), y where
        y < x (y > x), and of two equal ones the one whose sign bit is set (clear), so that
        min(-0.0, +0.0) is -0.0 and max(-0.0, +0.0) is +0.0."""
        b = self.b
        first = "<" if op == "min" else ">"
        x_neg = b.icmp_signed("<", b.bitcast(x, self.itype), ir.Constant(self.itype, 0))
        tie = x if op == "min" else y
        other = y if op == "min" else x
        on_tie = b.select(x_neg, tie, other)
        r = b.select(b.fcmp_ordered(first, y, x), y, on_tie)
        return b.select(b.fcmp_ordered(first, x, y), x, r)

    def sum(self, e: n.Sum, ctx: "_Ctx") -> tuple[ir.Value, bool]:
        """Ordered left fold: body(lo), then acc + body(j) for j = lo+1 .. hi-1; every term
        and every partial sum is checked."""
        b = self.b
        if e.hi <= e.lo:
            return ir.Constant(self.ftype, 0.0), True
        first_vars = dict(ctx.vars)
        first_vars[e.var] = _Var(ir.Constant(I64, e.lo), e.lo, e.lo + 1)
        acc0, acc0_ok = self.expr(e.body, ctx.with_vars(first_vars))
        if not acc0_ok:  # every term of a sum is checked, a lone first term included
            ctx.checks.operand(acc0)
        if e.hi - e.lo == 1:
            return acc0, True
        # Checks of the first term belong to this statement; settle them before the loop.
        ctx.checks.flush(ctx.ordinal, ctx.coord)
        j, (acc,), close = self._loop("j", ir.Constant(I64, e.lo + 1), ir.Constant(I64, e.hi), "sum",
                                      [("acc", self.ftype, acc0)])
        vars_ = dict(ctx.vars)
        vars_[e.var] = _Var(j, e.lo + 1, e.hi)
        term, term_ok = self.expr(e.body, ctx.with_vars(vars_))
        if not term_ok:
            ctx.checks.operand(term)
        total = b.fadd(acc, term)
        ctx.checks.result(total)
        ctx.checks.flush(ctx.ordinal, ctx.coord)
        close(carried=[total])
        return acc, True

    def _loop(self, var: str, lo, hi, label: str, carry=()):
        """Open `for var in lo..hi` (i64 values) carrying values (name, type, initial) in
        phis; returns (var's phi, the carried phis, close(step=1, carried=the next values)):
        the builder is then in the body, and after close in the block after the loop."""
        b = self.b
        pre = b.block
        self.uid += 1
        head, body, done = (b.append_basic_block(f"{label}{self.uid}.{part}") for part in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, var)
        i.add_incoming(lo, pre)
        phis = [b.phi(typ, name) for name, typ, _ in carry]
        for phi, (_, _, initial) in zip(phis, carry):
            phi.add_incoming(initial, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)

        def close(step: ir.Value = ir.Constant(I64, 1), carried=()) -> None:
            i.add_incoming(b.add(i, step), b.block)
            for phi, value in zip(phis, carried):
                phi.add_incoming(value, b.block)
            b.branch(head)
            b.position_at_end(done)

        return i, phis, close


@dataclass
class _Ctx:
    vars: dict
    env: dict
    checks: object
    coord: ir.Value
    ordinal: int = 0
    written: dict | None = None  # fast path: view base -> (value, ok) written this iteration
    loop_var: str | None = None

    def at(self, ordinal: int) -> "_Ctx":
        self.ordinal = ordinal
        return self

    def with_vars(self, vars_: dict) -> "_Ctx":
        return _Ctx(vars=vars_, env=self.env, checks=self.checks, coord=self.coord,
                    ordinal=self.ordinal, written=self.written, loop_var=self.loop_var)


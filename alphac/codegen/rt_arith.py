"""The runtime's arithmetic between the kernels, in LLVM IR: the local ordered sum of
contributions, the element-wise combine, and the mean before the update kernel; every
operand and result checked finite."""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.rt_ir import (
    F64, I1, I64, PTR, VOID, entry_alloca, for_range, gep, gep64, i32, i64, is_nonfinite, load64,
    store64)
from alphac.codegen.rt_tables import HEADER_WORDS


def emit_add_range(rt) -> ir.Function:
    """i1 rt_add_range(double* dst, double* a, double* b, i64 lo, i64 hi): dst[j] = a[j] + b[j]
    for j in [lo, hi), returning whether any operand or result was non-finite. The receive
    of a combine value calls it on each range of words as it arrives (one of a, b is the
    register being received), so the add runs on words still in cache; the combine op
    that follows only checks the flag (`_emit_combine`, added = 1)."""
    fn, b = rt.function("rt_add_range", I1, (PTR, PTR, PTR, I64, I64), ("dst", "a", "b", "lo", "hi"))
    dst, ra, rb, lo, hi = fn.args
    flag = b.alloca(I1)
    b.store(ir.Constant(I1, 0), flag)
    with for_range(b, lo, hi, "j") as j:
        x = load64(b, ra, j, F64)
        y = load64(b, rb, j, F64)
        r = b.fadd(x, y)
        store64(b, r, dst, j)
        bad = b.or_(b.or_(is_nonfinite(b, x), is_nonfinite(b, y)), is_nonfinite(b, r))
        b.store(b.or_(b.load(flag, typ=I1), bad), flag)
    b.ret(b.load(flag, typ=I1))
    return fn


class Arithmetic:
    """Mixin of the runtime emitter: rt_local, rt_combine, rt_apply."""

    def _label(self, b: ir.IRBuilder, kernel: ir.Function, status: ir.Value) -> ir.Value:
        labels = self.rt.module.globals.get(f"{kernel.name}_labels")
        if labels is None:
            return self.rt.cstr("?")
        idx = b.sub(status, i64(1))
        return b.load(gep(b, labels, [i64(0), idx], labels.value_type), typ=PTR)

    def _flagged(self, b: ir.IRBuilder, body, rescan, refuse) -> None:
        """Run `body(j) -> bad` over j in [0, k) without branches (it vectorises), then, only
        if some coordinate was bad, find the first j where `rescan(j)` holds and `refuse(j)`.
        `rescan` must see the failure from what the loop left in memory; refusing exits, so
        nothing written by the loop is ever used."""
        flag = entry_alloca(b, I1)
        b.store(ir.Constant(I1, 0), flag)
        with for_range(b, 0, self.k, "j") as j:
            b.store(b.or_(b.load(flag, typ=I1), body(j)), flag)
        with b.if_then(b.load(flag, typ=I1), likely=False):
            with for_range(b, 0, self.k, "q") as j:
                with b.if_then(rescan(j)):
                    refuse(j)

    def _emit_local(self) -> ir.Function:
        """dst <- (sum of this owner's contributions in sample order, share), acc from +0.0.

        The first sample's contribution is written straight into dst: +0.0 + c equals c bit
        for bit unless c is -0.0 (the sum is +0.0), and is finite exactly when c is. So a
        read-only scan checks finiteness, and dst is rewritten only if a -0.0 is present;
        the words and the refusals are those of `acc[j] = +0.0 + c[j]`."""
        rt, k, s = self.rt, self.k, self.s
        fn, b = rt.function("rt_local", VOID, (PTR, I64), ("reg", "update"))
        reg, u = fn.args
        acc = gep64(b, reg, HEADER_WORDS)
        params = b.load(self.g_params, typ=PTR)
        cbuf = b.load(self.g_cbuf, typ=PTR)
        row0 = self._pos_tab(b, self.c_sample_row)
        share = self._pos_tab(b, self.c_share)
        fail = b.alloca(I64)
        me = b.load(self.g_owner, typ=I64)

        def refuse_sum(i):
            return lambda j: rt.refuse(
                b, "non-finite", "local sum coordinate %lld at update %lld (owner %lld, sample %lld)",
                j, u, me, i)

        def contribute(i, out):
            sample = gep64(b, self.c_samples, b.mul(b.add(row0, i), i64(s)))
            status = b.call(self.contribution, [params, sample, out, fail])
            with b.if_then(b.icmp_signed("!=", status, i64(0)), likely=False):
                rt.refuse(b, "non-finite",
                          "contribution statement '%s' coordinate %lld at update %lld "
                          "(owner %lld, sample %lld)",
                          self._label(b, self.contribution, status), b.load(fail, typ=I64), u, me, i)

        def first_sample():
            contribute(i64(0), acc)
            # One flag for "non-finite or -0.0"; only when it is set does a second pass
            # refuse at the first non-finite word or turn each -0.0 into +0.0 + -0.0 = +0.0
            # (finite x: +0.0 + x is x, bit for bit).
            # In integer form, so that it vectorises: bit 63 of (bits & EXP) + 2^52 is set
            # exactly for an all-ones exponent; with d = bits ^ -0.0, bit 63 of ~d & (d - 1)
            # is set exactly for d = 0.
            special = entry_alloca(b, I64)
            b.store(i64(0), special)
            with for_range(b, 0, k, "j") as j:
                bits = load64(b, acc, j)
                nonfinite = b.add(b.and_(bits, i64(0x7FF0000000000000)), i64(1 << 52))
                d = b.xor(bits, i64(1 << 63))
                negzero = b.and_(b.not_(d), b.sub(d, i64(1)))
                b.store(b.or_(b.load(special, typ=I64), b.or_(nonfinite, negzero)), special)
            found = b.icmp_signed("<", b.load(special, typ=I64), i64(0))
            with b.if_then(found, likely=False):
                with for_range(b, 0, k, "z") as j:
                    x = load64(b, acc, j, F64)
                    with b.if_then(is_nonfinite(b, x), likely=False):
                        refuse_sum(i64(0))(j)
                    store64(b, b.fadd(ir.Constant(F64, 0.0), x), acc, j)

        def next_sample(i):
            contribute(i, cbuf)

            def body(j):
                a = load64(b, acc, j, F64)
                c = load64(b, cbuf, j, F64)
                r = b.fadd(a, c)
                store64(b, r, acc, j)
                return b.or_(b.or_(is_nonfinite(b, a), is_nonfinite(b, c)), is_nonfinite(b, r))

            # acc was finite before this pass (checked results), so a failure shows in c or
            # in the stored result
            self._flagged(
                b, body,
                lambda j: b.or_(is_nonfinite(b, load64(b, cbuf, j, F64)), is_nonfinite(b, load64(b, acc, j, F64))),
                refuse_sum(i))

        with b.if_else(b.icmp_signed("==", share, i64(0))) as (empty, some):
            with empty:
                rt.call(b, "memset", acc, i32(0), i64(8 * k))
            with some:
                first_sample()
                with for_range(b, 1, share, "smp") as i:
                    next_sample(i)
        store64(b, share, reg, HEADER_WORDS + k)
        b.ret_void()
        return fn

    def _emit_combine(self) -> ir.Function:
        """dst <- a + b element-wise (left then right), counts added. The loop only ORs a
        flag so it vectorises; a set flag rescans dst for the first failing coordinate
        (refusing exits, so what was written is never used).

        With added = 1 the receive just before already wrote the sums as the words arrived
        (`emit_add_range`) and left its flag in `rt.added_bad`: only the check remains, at
        this op, after that receive verified the frame's checksum, so the refusals and
        their order are those of receive-then-combine."""
        rt, k = self.rt, self.k
        fn, b = rt.function("rt_combine", VOID, (PTR, PTR, PTR, I64, I64),
                            ("dst", "a", "b", "update", "added"))
        dst, ra, rb, u, added = fn.args
        da, db, dd = (gep64(b, r, HEADER_WORDS) for r in (ra, rb, dst))
        flag = b.alloca(I1)
        with b.if_else(b.icmp_unsigned("==", added, i64(0))) as (compute, done):
            with compute:
                b.store(b.call(self.add_range, [dd, da, db, i64(0), i64(k)]), flag)
            with done:
                b.store(b.trunc(b.load(self.g_added_bad, typ=I64), I1), flag)
        me = b.load(self.g_owner, typ=I64)
        # x + y is non-finite whenever x or y is, so the first failing coordinate is the
        # first non-finite sum (and dst holds every sum, however it was computed)
        with b.if_then(b.load(flag, typ=I1), likely=False):
            with for_range(b, 0, k, "q") as j:
                rt.refuse_if(b, is_nonfinite(b, load64(b, dd, j, F64)), "non-finite",
                             "combine coordinate %lld at update %lld (owner %lld)", j, u, me)
        ca = load64(b, ra, HEADER_WORDS + k)
        cb = load64(b, rb, HEADER_WORDS + k)
        store64(b, b.add(ca, cb), dst, HEADER_WORDS + k)
        b.ret_void()
        return fn

    def _emit_apply(self) -> ir.Function:
        """mean <- total / count (in place in the register), then the update kernel."""
        rt, k = self.rt, self.k
        fn, b = rt.function("rt_apply", VOID, (PTR, I64), ("reg", "update"))
        reg, u = fn.args
        g = gep64(b, reg, HEADER_WORDS)
        count = load64(b, reg, HEADER_WORDS + k)
        c = b.uitofp(count, F64)
        me = b.load(self.g_owner, typ=I64)
        # When c is a power of two, x / c and x * (1 / c) are the same word for every x:
        # 1 / c is exact, so both are the exact quotient rounded once (subnormals included,
        # and c >= 1 cannot overflow). A multiply is several times cheaper than a divide.
        cbits = b.bitcast(c, I64)
        pow2 = b.and_(b.icmp_unsigned("==", b.and_(cbits, i64((1 << 52) - 1)), i64(0)),
                      b.icmp_unsigned("!=", cbits, i64(0)))
        inv = b.fdiv(ir.Constant(F64, 1.0), c)

        # count is a u64, so c is finite, and a non-finite x gives a non-finite x / c: the
        # first failing coordinate is the first non-finite quotient left in place
        def mean_loop(op):
            def body(j):
                x = load64(b, g, j, F64)
                r = b.fmul(x, inv) if op == "mul" else b.fdiv(x, c)
                store64(b, r, g, j)
                return b.or_(b.or_(is_nonfinite(b, x), is_nonfinite(b, c)), is_nonfinite(b, r))

            self._flagged(b, body, lambda j: is_nonfinite(b, load64(b, g, j, F64)),
                          lambda j: rt.refuse(b, "non-finite",
                                              "mean coordinate %lld at update %lld (owner %lld, %llu samples)",
                                              j, u, me, count))

        with b.if_else(pow2) as (exact_inverse, divide):
            with exact_inverse:
                mean_loop("mul")
            with divide:
                mean_loop("div")
        fail = entry_alloca(b, I64)
        status = b.call(self.update, [b.load(self.g_params, typ=PTR), b.load(self.g_state, typ=PTR),
                                      g, self.g_rate, fail])
        with b.if_then(b.icmp_signed("!=", status, i64(0)), likely=False):
            rt.refuse(b, "non-finite", "update statement '%s' coordinate %lld at update %lld",
                      self._label(b, self.update, status), b.load(fail, typ=I64), u)
        b.ret_void()
        return fn

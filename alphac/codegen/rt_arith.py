"""The runtime's arithmetic between the kernels, in LLVM IR: the local ordered sum of
contributions, the element-wise combine, and the mean before the update kernel; every
operand and result checked finite."""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.rt_ir import (
    F64, I1, I64, PTR, VOID, for_range, gep, gep64, i32, i64, is_nonfinite, load64, store64)
from alphac.codegen.rt_tables import HEADER_WORDS


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
        flag = b.alloca(I1)
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
        negzero = b.alloca(I1)
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
            b.store(ir.Constant(I1, 0), negzero)

            def scan(j):
                bits = load64(b, acc, j)
                b.store(b.or_(b.load(negzero, typ=I1), b.icmp_unsigned("==", bits, i64(1 << 63))), negzero)
                return is_nonfinite(b, bits)

            self._flagged(b, scan, lambda j: is_nonfinite(b, load64(b, acc, j)), refuse_sum(i64(0)))
            with b.if_then(b.load(negzero, typ=I1), likely=False):
                with for_range(b, 0, k, "z") as j:
                    store64(b, b.fadd(ir.Constant(F64, 0.0), load64(b, acc, j, F64)), acc, j)

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
        flag so it vectorises; a set flag rescans the untouched inputs for the first
        failing coordinate (refusing exits, so the partly written dst is never used)."""
        rt, k = self.rt, self.k
        fn, b = rt.function("rt_combine", VOID, (PTR, PTR, PTR, I64), ("dst", "a", "b", "update"))
        dst, ra, rb, u = fn.args
        da, db, dd = (gep64(b, r, HEADER_WORDS) for r in (ra, rb, dst))
        flag = b.alloca(I1)
        b.store(ir.Constant(I1, 0), flag)
        with for_range(b, 0, k, "j") as j:
            x = load64(b, da, j, F64)
            y = load64(b, db, j, F64)
            r = b.fadd(x, y)
            store64(b, r, dd, j)
            bad = b.or_(b.or_(is_nonfinite(b, x), is_nonfinite(b, y)), is_nonfinite(b, r))
            b.store(b.or_(b.load(flag, typ=I1), bad), flag)
        me = b.load(self.g_owner, typ=I64)
        with b.if_then(b.load(flag, typ=I1), likely=False):
            with for_range(b, 0, k, "q") as j:
                x = load64(b, da, j, F64)
                y = load64(b, db, j, F64)
                r = b.fadd(x, y)
                bad = b.or_(b.or_(is_nonfinite(b, x), is_nonfinite(b, y)), is_nonfinite(b, r))
                rt.refuse_if(b, bad, "non-finite", "combine coordinate %lld at update %lld (owner %lld)",
                             j, u, me)
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
        # count is a u64, so c is finite, and a non-finite x gives a non-finite x / c: the
        # first failing coordinate is the first non-finite quotient left in place
        def body(j):
            x = load64(b, g, j, F64)
            r = b.fdiv(x, c)
            store64(b, r, g, j)
            return b.or_(b.or_(is_nonfinite(b, x), is_nonfinite(b, c)), is_nonfinite(b, r))

        self._flagged(b, body, lambda j: is_nonfinite(b, load64(b, g, j, F64)),
                      lambda j: rt.refuse(b, "non-finite",
                                          "mean coordinate %lld at update %lld (owner %lld, %llu samples)",
                                          j, u, me, count))
        fail = b.alloca(I64)
        status = b.call(self.update, [b.load(self.g_params, typ=PTR), b.load(self.g_state, typ=PTR),
                                      g, self.g_rate, fail])
        with b.if_then(b.icmp_signed("!=", status, i64(0)), likely=False):
            rt.refuse(b, "non-finite", "update statement '%s' coordinate %lld at update %lld",
                      self._label(b, self.update, status), b.load(fail, typ=I64), u)
        b.ret_void()
        return fn

"""The runtime's output file in LLVM IR: PATH.tmp written, fsynced and linked to PATH,
never overwriting; the words of the output format in docs/runtime.md."""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.rt_ir import (
    F_OK, I64, I8, O_CREAT, O_TRUNC, O_WRONLY, PTR, VOID, gep, i32, i64, store64)
from alphac.codegen.rt_tables import OUTPUT_FORMAT, OUTPUT_MAGIC


class Output:
    """Mixin of the runtime emitter: rt_write_output."""

    def _refuse_if_output_exists(self, b: ir.IRBuilder, path) -> None:
        self.rt.refuse_if(b, b.icmp_signed("==", self.rt.call(b, "access", path, i32(F_OK)), i32(0)),
                          "output-exists", "'%s' exists; results are never overwritten", path)

    def _publish(self, b: ir.IRBuilder, path, pieces) -> None:
        """Write `pieces` ((pointer, byte count) pairs) to PATH.tmp, fsync it, then link it
        to PATH and remove PATH.tmp. link(2) fails when PATH exists, so a result is never
        overwritten, even one another process created while this owner was running."""
        rt = self.rt
        size = b.add(rt.call(b, "strlen", path), i64(8))
        tmp = rt.call(b, "malloc", size)
        rt.call(b, "snprintf", tmp, size, rt.cstr("%s.tmp"), path)
        fd = rt.call(b, "open", tmp, i32(O_WRONLY | O_CREAT | O_TRUNC), i32(0o644))
        rt.refuse_if(b, b.icmp_signed("<", fd, i32(0)), "io-error", "cannot create '%s'", tmp)
        for buf, nbytes in pieces:
            nbytes = i64(nbytes) if isinstance(nbytes, int) else nbytes
            done = b.alloca(I64)
            b.store(i64(0), done)
            loop = b.append_basic_block("w.head")
            body = b.append_basic_block("w.body")
            end = b.append_basic_block("w.end")
            b.branch(loop)
            b.position_at_end(loop)
            got = b.load(done, typ=I64)
            b.cbranch(b.icmp_signed("<", got, nbytes), body, end)
            b.position_at_end(body)
            r = rt.call(b, "write", fd, gep(b, buf, [got], I8), b.sub(nbytes, got))
            with b.if_then(b.icmp_signed("<=", r, i64(0)), likely=False):
                rt.call(b, "unlink", tmp)
                rt.refuse(b, "io-error", "writing '%s' failed", tmp)
            b.store(b.add(got, r), done)
            b.branch(loop)
            b.position_at_end(end)
        bad = b.icmp_signed("!=", rt.call(b, "fsync", fd), i32(0))
        bad = b.or_(bad, b.icmp_signed("!=", rt.call(b, "close", fd), i32(0)))
        with b.if_then(bad, likely=False):
            rt.call(b, "unlink", tmp)
            rt.refuse(b, "io-error", "flushing '%s' failed", tmp)
        linked = rt.call(b, "link", tmp, path)
        rt.call(b, "unlink", tmp)
        with b.if_then(b.icmp_signed("!=", linked, i32(0)), likely=False):
            self._refuse_if_output_exists(b, path)
            rt.refuse(b, "io-error", "cannot publish '%s'", path)

    def _emit_write_output(self) -> ir.Function:
        """The output file of a replicated learner (format 1); refuses output-exists."""
        rt, k, m = self.rt, self.k, self.m
        fn, b = rt.function("rt_write_output", VOID, ())
        path = b.load(self.g_out_path, typ=PTR)
        self._refuse_if_output_exists(b, path)
        head = b.alloca(I64, size=7)
        for j, v in enumerate((i64(OUTPUT_MAGIC), i64(OUTPUT_FORMAT), b.load(self.g_owner, typ=I64),
                               b.load(self.g_updates, typ=I64), i64(self.plan.protocol_id), i64(k), i64(m))):
            store64(b, v, head, j)
        self._publish(b, path, ((head, 56), (b.load(self.g_params, typ=PTR), 8 * k),
                                (b.load(self.g_state, typ=PTR), 8 * m)))
        b.ret_void()
        return fn

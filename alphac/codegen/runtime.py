"""The role runtime: `main` of every executable, emitted as LLVM IR next to the two program
kernels. It parses the command line and the peers file, connects along the owner's
protocol, interprets the owner's op table once per update, compares replicas, and writes
the output file atomically; any failed check prints `refused: CODE: detail` and exits 1.

    emit_runtime(module, plan, role, target, contribution, update) -> ir.Function   (main)

The command line, frames and output format are documented in docs/runtime.md.
"""

from __future__ import annotations

import struct
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
from llvmlite import ir

from alphac.codegen.rt_arith import Arithmetic, emit_add_range
from alphac.codegen.rt_cli import DEFAULT_TIMEOUT_MS, CommandLine, usage_text
from alphac.codegen.rt_connect import Connections
from alphac.codegen.rt_ir import (
    F64, I32, I64, I8, PTR, VOID, Rt, for_range, gep, gep64, i32, i64, load64, store64)
from alphac.codegen.rt_net import (
    FNV_OFFSET, NetState, emit_fnv, emit_frames, emit_io, emit_lanes, emit_now_ms, emit_sockopts)
from alphac.codegen.rt_output import Output
from alphac.codegen.rt_tables import (
    HEADER_WORDS, KIND_COMBINE, KIND_DIGEST, KIND_PUBLISH, OP_WORDS, kind_code, owner_tables)

REGISTER_EXTRA = HEADER_WORDS + 2  # header, then k values, the count and the checksum
SUPPORTED_OPS = ("local", "send", "recv", "combine", "update", "digest-send", "digest-recv",
                 "publish-send", "publish-recv")


class RuntimeUnsupported(Exception):
    """The plan needs something this runtime does not implement: a one-line error with a
    TOOLING code, reported by `alphac build` like the targets' errors."""

    code = "build-failed"

    def __init__(self, message: str):
        super().__init__(f"{self.code}: {message}")
        self.message = message


class _Emitter(CommandLine, Connections, Arithmetic, Output):
    """Emits one role's runtime into a module: the globals and tables (here), the parts
    (mixins from rt_cli, rt_connect, rt_arith, rt_output), the op interpreter and `main`."""

    supported_ops = SUPPORTED_OPS

    def __init__(self, module: ir.Module, plan, role_name: str, target: str,
                 contribution: ir.Function, update: ir.Function):
        dep = plan.deployment
        learner = dep.learner
        self.rt = Rt(module)
        self.plan = plan
        self.dep = dep
        self.k, self.m, self.s, self.n = learner.k, learner.m, learner.s, dep.owners
        self.contribution = contribution
        self.update = update
        role = next((r for r in dep.roles if r.name == role_name), None)
        if role is None:
            raise RuntimeUnsupported(f"the deployment has no role {role_name!r}")
        self.role = role
        self.target = target
        protocols = tuple(o.protocol for o in plan.owners)
        for p in protocols:
            for op in p.update_ops + p.finish_ops:
                if op.kind not in self.supported_ops:
                    raise RuntimeUnsupported(f"owner {p.owner}'s protocol uses op {op.kind!r}, "
                                             "which this runtime does not execute")
        self.tables = owner_tables(protocols, role.owners, learner.samples.shares)

    # -- globals ---------------------------------------------------------------------------
    def _globals(self) -> None:
        rt, n = self.rt, self.n
        self.g_owner = rt.global_var("rt.owner", I64, 0)
        self.g_pos = rt.global_var("rt.pos", I64, 0)
        self.g_updates = rt.global_var("rt.updates", I64, self.dep.updates)
        self.g_timeout = rt.global_var("rt.timeout_ms", I64, DEFAULT_TIMEOUT_MS)
        self.g_peers_path = rt.global_var("rt.peers_path", PTR, None)
        self.g_out_path = rt.global_var("rt.out_path", PTR, None)
        self.g_fds = rt.global_var("rt.fds", ir.ArrayType(I32, n), None)
        self.g_addr = rt.global_var("rt.addr", ir.ArrayType(I32, n), None)
        self.g_port = rt.global_var("rt.port", ir.ArrayType(I32, n), None)
        self.g_have = rt.global_var("rt.have", ir.ArrayType(I8, n), None)
        self.g_accept = rt.global_var("rt.accept_from", ir.ArrayType(I8, n), None)
        self.g_params = rt.global_var("rt.params", PTR, None)
        self.g_state = rt.global_var("rt.state", PTR, None)
        self.g_regs = rt.global_var("rt.regs", PTR, None)
        self.g_cbuf = rt.global_var("rt.cbuf", PTR, None)
        self.g_digest = rt.global_var("rt.digest", I64, 0)
        self.g_added = rt.global_var("rt.added", I64, 0)
        self.g_added_bad = rt.global_var("rt.added_bad", I64, 0)
        self.g_sent_buf = rt.global_var("rt.sent_buf", PTR, None)
        self.g_sent_hash = rt.global_var("rt.sent_hash", I64, 0)
        # a double global: the update kernel's rate region is a double*
        rate = struct.unpack("<d", struct.pack("<Q", self.dep.learner.rate))[0]
        self.g_rate = rt.global_var("rt.rate", F64, rate)
        self.g_small = rt.global_var("rt.small", ir.ArrayType(I64, HEADER_WORDS + 4), None)
        self.g_small.align = 16

        learner = self.dep.learner
        t = self.tables
        self.c_role = rt.words("rt.role_owners", [tb.owner for tb in t])
        flat_ops = [w & (2**64 - 1) for tb in t for op in tb.ops for w in op]
        self.c_ops = rt.words("rt.ops", flat_ops)
        starts, peers_flat, peer_starts = [], [], []
        acc = 0
        for tb in t:
            starts.append(acc)
            acc += len(tb.ops)
        for tb in t:
            peer_starts.append(len(peers_flat))
            peers_flat.extend(tb.peers)
        self.c_op_start = rt.words("rt.op_start", starts)
        self.c_n_update = rt.words("rt.n_update", [tb.n_update for tb in t])
        self.c_n_finish = rt.words("rt.n_finish", [tb.n_finish for tb in t])
        self.c_peers = rt.words("rt.peers", peers_flat)
        self.c_peer_start = rt.words("rt.peer_start", peer_starts)
        self.c_peer_count = rt.words("rt.peer_count", [len(tb.peers) for tb in t])
        self.c_sample_row = rt.words("rt.sample_row", [tb.sample_row for tb in t])
        self.c_share = rt.words("rt.share", [tb.share for tb in t])
        self.nregs = max([tb.registers for tb in t] + [1])
        rows = [learner.samples.owner_rows(o) for o in self.role.owners]
        sample_words = (np.concatenate([np.asarray(r, dtype=np.uint64).reshape(-1) for r in rows])
                        if rows else np.zeros(0, dtype=np.uint64))
        self.c_samples = rt.words("rt.samples", sample_words)
        self.c_initial = rt.words("rt.initial", learner.initial.as_array())
        self.c_initial_state = rt.words("rt.initial_state", learner.initial_state.as_array())

    def _tab(self, b: ir.IRBuilder, table: ir.GlobalVariable, index) -> ir.Value:
        return load64(b, table, index)

    def _pos_tab(self, b: ir.IRBuilder, table: ir.GlobalVariable) -> ir.Value:
        return self._tab(b, table, b.load(self.g_pos, typ=I64))

    def _arr(self, b, g, index, ty):
        index = index if isinstance(index, ir.Value) else i64(index)
        return gep(b, g, [i64(0), index], g.value_type)

    def _reg(self, b: ir.IRBuilder, r: ir.Value) -> ir.Value:
        base = b.load(self.g_regs, typ=PTR)
        return gep64(b, base, b.mul(r, i64(self.k + REGISTER_EXTRA)))

    def _no_add(self) -> list[ir.Value]:
        """rt_recv_frame's trailing arguments for a receive with no add on arrival."""
        null = ir.Constant(PTR, None)
        return [null, null, null, i64(0)]

    # -- the op interpreter ----------------------------------------------------------------
    @contextmanager
    def _op_interpreter(self, kinds, keep_hash_on_send: bool):
        """`rt_run_ops(first, count, version)`: each op of this owner's table decoded and
        branched on by kind. Yields the decoded op; the caller emits `op.cases[kind]` for
        every kind in `kinds`, each ending in a branch to `op.after`. The payload hash kept
        for a register is forgotten before every op (but a send, if `keep_hash_on_send`)."""
        rt = self.rt
        fn, b = rt.function("rt_run_ops", VOID, (I64, I64, I64), ("first", "count", "version"))
        first, count, version = fn.args
        base = b.add(self._pos_tab(b, self.c_op_start), first)
        me = b.load(self.g_owner, typ=I64)
        with for_range(b, 0, count, "op") as i:
            at = b.mul(b.add(base, i), i64(OP_WORDS))
            kind, peer, dst, a, bb, step = (self._tab(b, self.c_ops, b.add(at, i64(w))) for w in range(OP_WORDS))
            fd = b.load(self._arr(b, self.g_fds, b.select(b.icmp_signed("<", peer, i64(0)), i64(0), peer), I32),
                        typ=I32)
            if keep_hash_on_send:
                with b.if_then(b.icmp_unsigned("!=", kind, i64(kind_code("send")))):
                    b.store(ir.Constant(PTR, None), self.g_sent_buf)
            else:
                b.store(ir.Constant(PTR, None), self.g_sent_buf)
            after = b.append_basic_block("op.after")
            default = b.append_basic_block("op.bad")
            sw = b.switch(kind, default)
            cases = {}
            for name in kinds:
                blk = b.append_basic_block(f"op.{name}")
                sw.add_case(i64(kind_code(name)), blk)
                cases[name] = blk
            b.position_at_end(default)
            rt.refuse(b, "corrupt-executable", "owner %lld: corrupt op table (kind %lld)", me, kind)
            yield SimpleNamespace(fn=fn, b=b, i=i, base=base, count=count, version=version, me=me,
                                  kind=kind, peer=peer, dst=dst, a=a, bb=bb, step=step, fd=fd,
                                  cases=cases, after=after)
            b.position_at_end(after)
        b.ret_void()

    def _emit_finish_cases(self, op, send_frame, recv_frame, digest_of: str) -> None:
        """The replica comparison and publication ops, alike in every runtime."""
        rt, b = self.rt, op.b
        b.position_at_end(op.cases["digest-send"])
        store64(b, b.load(self.g_digest, typ=I64), self.g_small, HEADER_WORDS)
        b.call(send_frame, [op.peer, i64(KIND_DIGEST), op.version, op.step, self.g_small, i64(1), i64(0)])
        b.branch(op.after)
        b.position_at_end(op.cases["digest-recv"])
        b.call(recv_frame, [op.fd, op.peer, i64(KIND_DIGEST), op.version, op.step, self.g_small, i64(1),
                            *self._no_add()])
        theirs = load64(b, self.g_small, HEADER_WORDS)
        mine = b.load(self.g_digest, typ=I64)
        rt.refuse_if(b, b.icmp_unsigned("!=", theirs, mine), "replica-divergence",
                     f"owner %lld's {digest_of} 0x%016llx differs from owner %lld's 0x%016llx "
                     "after %lld updates", op.peer, theirs, op.me, mine, op.version)
        b.branch(op.after)
        b.position_at_end(op.cases["publish-send"])
        b.call(send_frame, [op.peer, i64(KIND_PUBLISH), op.version, op.step, self.g_small, i64(0), i64(0)])
        b.branch(op.after)
        b.position_at_end(op.cases["publish-recv"])
        b.call(recv_frame, [op.fd, op.peer, i64(KIND_PUBLISH), op.version, op.step, self.g_small, i64(0),
                            *self._no_add()])
        b.branch(op.after)

    def _emit_run_ops(self, send_frame, recv_frame, local, combine, apply) -> ir.Function:
        k = self.k
        with self._op_interpreter(SUPPORTED_OPS, keep_hash_on_send=True) as op:
            b, cases, after = op.b, op.cases, op.after
            i, base, count, version = op.i, op.base, op.count, op.version
            peer, dst, a, bb, step, fd = op.peer, op.dst, op.a, op.bb, op.step, op.fd
            b.position_at_end(cases["local"])
            b.call(local, [self._reg(b, dst), version])
            b.branch(after)
            b.position_at_end(cases["send"])
            b.call(send_frame, [peer, i64(KIND_COMBINE), version, step, self._reg(b, a), i64(k + 1), i64(1)])
            b.branch(after)
            b.position_at_end(cases["recv"])
            # When the next op combines the register being received, its sums are computed
            # as the words arrive (rt_add_range); that combine op then only checks them.
            nxt = b.add(i, i64(1))
            has_next = b.icmp_signed("<", nxt, count)
            at2 = b.mul(b.add(base, b.select(has_next, nxt, i)), i64(OP_WORDS))
            nkind, _, ndst, na, nb = (self._tab(b, self.c_ops, b.add(at2, i64(w))) for w in range(5))
            fuse = b.and_(has_next, b.and_(b.icmp_signed("==", nkind, i64(kind_code("combine"))),
                                           b.or_(b.icmp_signed("==", na, dst), b.icmp_signed("==", nb, dst))))

            def payload(r):
                return gep64(b, self._reg(b, b.select(fuse, r, i64(0))), HEADER_WORDS)
            fdst = b.select(fuse, payload(ndst), ir.Constant(PTR, None))
            b.call(recv_frame, [fd, peer, i64(KIND_COMBINE), version, step, self._reg(b, dst), i64(k + 1),
                                fdst, payload(na), payload(nb), i64(k)])
            b.store(b.zext(fuse, I64), self.g_added)
            b.branch(after)
            b.position_at_end(cases["combine"])
            b.call(combine, [self._reg(b, dst), self._reg(b, a), self._reg(b, bb), version,
                             b.load(self.g_added, typ=I64)])
            b.store(i64(0), self.g_added)
            b.branch(after)
            b.position_at_end(cases["update"])
            b.call(apply, [self._reg(b, a), version])
            b.branch(after)
            self._emit_finish_cases(op, send_frame, recv_frame, "state digest")
        return op.fn

    # -- main ------------------------------------------------------------------------------
    def _begin_main(self, sup: SimpleNamespace) -> tuple[ir.Function, ir.IRBuilder]:
        """`main` up to its first socket: no connection yet, the command line, this owner,
        a refusal if its output already exists, the peers file."""
        main = ir.Function(self.rt.module, ir.FunctionType(I32, (I32, PTR)), "main")
        argc, argv = main.args
        b = ir.IRBuilder(main.append_basic_block("entry"))
        with for_range(b, 0, self.n, "fd") as j:
            b.store(i32(-1), self._arr(b, self.g_fds, j, I32))
        b.call(sup.parse_args, [argc, argv])
        b.call(sup.select_owner, [])
        self._refuse_if_output_exists(b, b.load(self.g_out_path, typ=PTR))
        b.call(sup.read_peers, [])
        return main, b

    def _emit_support(self, max_payload) -> SimpleNamespace:
        """What every runtime's `main` calls: the command line, this owner, the peers file,
        the frame I/O over sockets (payloads up to `max_payload` words) and connection setup."""
        rt = self.rt
        usage = usage_text(self.plan, self.role.name, self.target, self.role.owners)
        parse_args = self._emit_parse_args(usage)
        select_owner = self._emit_select_owner()
        read_peers = self._emit_read_peers()
        now_ms = emit_now_ms(rt)
        fnv = emit_fnv(rt)
        lanes = emit_lanes(rt)
        self.add_range = emit_add_range(rt)
        st = NetState(rt, self.g_owner, self.g_fds, self.g_accept, self.g_timeout,
                      self.plan.protocol_id, max_payload, self.g_added_bad, self.g_sent_buf,
                      self.g_sent_hash)
        read_all, write_all, read_hashed = emit_io(st, lanes, self.add_range)
        sockopts = emit_sockopts(st)
        send_frame, recv_frame = emit_frames(st, fnv, lanes, read_all, write_all, read_hashed)
        return SimpleNamespace(
            parse_args=parse_args, select_owner=select_owner, read_peers=read_peers, fnv=fnv,
            send_frame=send_frame, recv_frame=recv_frame,
            connect=self._emit_connect(now_ms, sockopts, send_frame, recv_frame))

    def emit(self) -> ir.Function:
        rt, k, m = self.rt, self.k, self.m
        self._globals()
        sup = self._emit_support(k + 1)
        fnv, send_frame, recv_frame, connect = sup.fnv, sup.send_frame, sup.recv_frame, sup.connect
        run_ops = self._emit_run_ops(send_frame, recv_frame, self._emit_local(),
                                     self._emit_combine(), self._emit_apply())
        write_output = self._emit_write_output()

        main, b = self._begin_main(sup)

        def alloc(words: int) -> ir.Value:
            p = rt.call(b, "malloc", i64(8 * max(words, 1)))
            rt.refuse_if(b, b.icmp_unsigned("==", b.ptrtoint(p, I64), i64(0)), "io-error",
                         f"cannot allocate {8 * max(words, 1)} bytes")
            return p

        params = alloc(k)
        state = alloc(m)
        rt.call(b, "memcpy", params, self.c_initial, i64(8 * k))
        rt.call(b, "memcpy", state, self.c_initial_state, i64(8 * m))
        b.store(params, self.g_params)
        b.store(state, self.g_state)
        b.store(alloc(self.nregs * (k + REGISTER_EXTRA)), self.g_regs)
        b.store(alloc(k), self.g_cbuf)
        b.call(connect, [])
        n_update = self._pos_tab(b, self.c_n_update)
        updates = b.load(self.g_updates, typ=I64)
        with for_range(b, 0, updates, "u") as u:
            b.call(run_ops, [i64(0), n_update, u])
        h = b.call(fnv, [params, i64(k), i64(FNV_OFFSET)])
        b.store(b.call(fnv, [state, i64(m), h]), self.g_digest)
        b.call(run_ops, [n_update, self._pos_tab(b, self.c_n_finish), updates])
        with for_range(b, 0, self.n, "cl") as j:
            fd = b.load(self._arr(b, self.g_fds, j, I32), typ=I32)
            with b.if_then(b.icmp_signed(">=", fd, i32(0))):
                rt.call(b, "close", fd)
        b.call(write_output, [])
        b.ret(i32(0))
        return main


def emit_runtime(module: ir.Module, plan, role: str, target: str,
                 contribution: ir.Function, update: ir.Function) -> ir.Function:
    """Add `main` and everything it calls to `module`; the kernels must already be in it."""
    return _Emitter(module, plan, role, target, contribution, update).emit()


def emit_owned_runtime(module: ir.Module, plan, role: str, target: str,
                       contribution: ir.Function, update: ir.Function,
                       owner_g: ir.GlobalVariable) -> ir.Function:
    """The partitioned learner's `main` (alphac/codegen/rt_owned.py); `update` is the owned
    update kernel and `owner_g` the owner global it reads."""
    from alphac.codegen.rt_owned import OWNED_OPS, OwnedRuntime, check_owned_plan

    class _OwnedEmitter(OwnedRuntime, _Emitter):
        supported_ops = OWNED_OPS

    check_owned_plan(plan)
    return _OwnedEmitter(module, plan, role, target, contribution, update).emit_owned(update, owner_g)

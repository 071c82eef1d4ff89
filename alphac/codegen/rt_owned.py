"""The role runtime of a partitioned learner (optimizer state, parameters or gradients
partitioned): the replicated runtime's command line, connections, frames and local sum,
with an op interpreter for the partitioned ops (`slice`, `offer`, `select`, `install`,
`replica-install`, `replica-release`, `update-owned`), registers sized by the plan's
`register_words`, the read replica with its version tag, a digest over the replicated words
only, and the output file of the owner's own words (format 2, docs/runtime.md).

The replicated learner never reaches this module (`runtime.emit_runtime` dispatches), so
its executables are unchanged.
"""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.rt_ir import (
    F64, I32, I64, PTR, VOID, for_range, gep64, i32, i64, is_nonfinite, load64, store64)
from alphac.codegen.rt_net import FNV_OFFSET
from alphac.codegen.rt_tables import HEADER_WORDS, KIND_COMBINE, OUTPUT_MAGIC
from alphac.plan.protocol import REGION_PARAMETERS, REGION_STATE, leaves

OUTPUT_FORMAT_OWNED = 2
TAG_WORDS = 2  # a register's payload ends with the leaf range [lo, hi) its words cover
OWNED_OPS = ("local", "send", "recv", "combine", "digest-send", "digest-recv", "publish-send",
             "publish-recv", "slice", "offer", "select", "install", "replica-install",
             "replica-release", "update-owned")


def coordinate_offsets(k: int, m: int, w: int, shared) -> list[int]:
    """State offset of block b's word for coordinate i, at index b*k + i: the (b*k + i)-th
    state word not declared shared."""
    shared = set(shared)
    return [j for j in range(m) if j not in shared][:w * k]


def held_state(k: int, m: int, n: int, part, owner: int) -> list[int]:
    """The state offsets `owner` holds, ascending (the oracle's layout)."""
    if not part.optimizer_state:
        return list(range(m))
    per = coordinate_offsets(k, m, part.words_per_coordinate, part.shared_state)
    mine = [off for pos, off in enumerate(per) if (pos % k) % n == owner]
    return sorted(set(mine) | set(part.shared_state))


def held_params(k: int, n: int, part, owner: int) -> list[int]:
    return list(range(owner, k, n)) if part.parameters else list(range(k))


def replicated_state(m: int, part) -> list[int]:
    """State offsets every owner holds alike (compared before publishing)."""
    return sorted(set(part.shared_state)) if part.optimizer_state else list(range(m))


def _flat(rows):
    starts, flat = [], []
    for r in rows:
        starts.append(len(flat))
        flat.extend(r)
    return starts, flat


def check_owned_plan(plan) -> None:
    """Refuse (RuntimeUnsupported) a partitioned plan this runtime cannot execute."""
    from alphac.codegen.runtime import RuntimeUnsupported

    for o in plan.owners:
        p = o.protocol
        for op in p.update_ops + p.finish_ops:
            if op.kind not in OWNED_OPS:
                raise RuntimeUnsupported(f"owner {p.owner}'s partitioned protocol uses op {op.kind!r}, "
                                         "which this runtime does not execute")
        if not p.register_words:
            raise RuntimeUnsupported(f"owner {p.owner}'s partitioned protocol has no register sizes")


class OwnedRuntime:
    """Mixin for the runtime emitter (`runtime._Emitter`): everything that differs for a
    partitioned plan. Call `emit_owned()` instead of `emit()`."""

    # -- tables ----------------------------------------------------------------------------
    def _owned_globals(self) -> None:
        rt, k, m, n = self.rt, self.k, self.m, self.n
        part = self.dep.partitioning
        self.part = part
        self.w = part.words_per_coordinate
        protos = {o.owner: o.protocol for o in self.plan.owners}
        self.leaf_order = leaves(self.plan.tree)
        leaf_pos = [0] * n
        for i, o in enumerate(self.leaf_order):
            leaf_pos[o] = i
        self.c_leaf_order = rt.words("rt.leaf_order", self.leaf_order)
        self.c_leaf_pos = rt.words("rt.leaf_pos", leaf_pos)
        self.c_coord_off = rt.words("rt.coord_off", coordinate_offsets(k, m, self.w, part.shared_state))
        sizes, offs = [], []
        for o in self.role.owners:
            ws = protos[o].register_words
            sizes.append(list(ws))
            acc, row = 0, []
            for words in ws:
                row.append(acc)
                acc += HEADER_WORDS + words + TAG_WORDS + 1
            offs.append(row + [acc])
        starts, flat_words = _flat(sizes)
        _, flat_offs = _flat(offs)
        self.c_reg_start = rt.words("rt.reg_start", starts)
        self.c_reg_words = rt.words("rt.reg_words", flat_words)
        off_starts, _ = _flat(offs)
        self.c_off_start = rt.words("rt.off_start", off_starts)
        self.c_reg_off = rt.words("rt.reg_off", flat_offs)
        self.c_reg_total = rt.words("rt.reg_total", [row[-1] for row in offs])
        self.max_payload = max([w for o in self.plan.owners for w in o.protocol.register_words] + [1]) \
            + TAG_WORDS
        hs = [held_state(k, m, n, part, o) for o in self.role.owners]
        hs_starts, hs_flat = _flat(hs)
        self.c_held_start = rt.words("rt.held_start", hs_starts)
        self.c_held_count = rt.words("rt.held_count", [len(h) for h in hs])
        self.c_held = rt.words("rt.held_state", hs_flat)
        self.repl_state = replicated_state(m, part)
        self.c_repl_state = rt.words("rt.repl_state", self.repl_state)
        self.g_replica = rt.global_var("rt.replica", PTR, None)
        self.g_replica_held = rt.global_var("rt.replica_held", I64, 0)
        self.g_replica_version = rt.global_var("rt.replica_version", I64, 0)
        self.g_mean = rt.global_var("rt.mean", PTR, None)
        self.g_gather = rt.global_var("rt.gather", PTR, None)

    def _oreg(self, b: ir.IRBuilder, r: ir.Value) -> ir.Value:
        base = b.load(self.g_regs, typ=PTR)
        off = self._tab(b, self.c_reg_off, b.add(self._pos_tab(b, self.c_off_start), r))
        return gep64(b, base, off)

    def _owords(self, b: ir.IRBuilder, r: ir.Value) -> ir.Value:
        return self._tab(b, self.c_reg_words, b.add(self._pos_tab(b, self.c_reg_start), r))

    def _owned_count(self, b: ir.IRBuilder, o: ir.Value) -> ir.Value:
        k, n = self.k, self.n
        cnt = b.udiv(b.sub(i64(k + n - 1), o), i64(n))
        return b.select(b.icmp_signed("<", o, i64(k)), cnt, i64(0))

    def _per(self, b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
        has_p = b.icmp_unsigned("!=", b.and_(mask, i64(REGION_PARAMETERS)), i64(0))
        has_s = b.icmp_unsigned("!=", b.and_(mask, i64(REGION_STATE)), i64(0))
        return b.add(b.select(has_p, i64(1), i64(0)), b.select(has_s, i64(self.w), i64(0)))

    # -- partitioned ops -------------------------------------------------------------------
    def _emit_slice(self) -> ir.Function:
        """dst <- a's sums at coordinate owner t's coordinates (t, t + n, ...), then a's count."""
        rt, k, n = self.rt, self.k, self.n
        fn, b = rt.function("rt_slice", VOID, (PTR, PTR, I64), ("dst", "a", "t"))
        dst, a, t = fn.args
        cnt = self._owned_count(b, t)
        with for_range(b, 0, cnt, "j") as j:
            store64(b, load64(b, a, b.add(i64(HEADER_WORDS), b.add(t, b.mul(j, i64(n))))), dst,
                    b.add(i64(HEADER_WORDS), j))
        store64(b, load64(b, a, HEADER_WORDS + k), dst, b.add(i64(HEADER_WORDS), cnt))
        b.ret_void()
        return fn

    def _emit_combine_owned(self) -> ir.Function:
        """dst <- a + b over `words - 1` sums (left then right), counts added; every operand
        and result checked finite, as the replicated combine."""
        rt = self.rt
        fn, b = rt.function("rt_combine_owned", VOID, (PTR, PTR, PTR, I64, I64),
                            ("dst", "a", "b", "words", "update"))
        dst, ra, rb, words, u = fn.args
        sums = b.sub(words, i64(1))
        me = b.load(self.g_owner, typ=I64)
        with for_range(b, 0, sums, "j") as j:
            at = b.add(j, i64(HEADER_WORDS))
            x = load64(b, ra, at, F64)
            y = load64(b, rb, at, F64)
            r = b.fadd(x, y)
            store64(b, r, dst, at)
            bad = b.or_(b.or_(is_nonfinite(b, x), is_nonfinite(b, y)), is_nonfinite(b, r))
            rt.refuse_if(b, bad, "non-finite", "combine coordinate %lld at update %lld (owner %lld)",
                         j, u, me)
        at = b.add(sums, i64(HEADER_WORDS))
        store64(b, b.add(load64(b, ra, at), load64(b, rb, at)), dst, at)
        b.ret_void()
        return fn

    def _emit_offer(self) -> ir.Function:
        """dst <- this owner's words of the regions in mask, by coordinate (the parameter,
        then its w state words), tagged with this owner's leaf position."""
        rt, k, n, w = self.rt, self.k, self.n, self.w
        fn, b = rt.function("rt_offer", VOID, (PTR, I64, I64), ("dst", "mask", "words"))
        dst, mask, words = fn.args
        me = b.load(self.g_owner, typ=I64)
        per = self._per(b, mask)
        has_p = b.icmp_unsigned("!=", b.and_(mask, i64(REGION_PARAMETERS)), i64(0))
        has_s = b.icmp_unsigned("!=", b.and_(mask, i64(REGION_STATE)), i64(0))
        params = b.load(self.g_params, typ=PTR)
        state = b.load(self.g_state, typ=PTR)
        with for_range(b, 0, self._owned_count(b, me), "j") as j:
            i = b.add(me, b.mul(j, i64(n)))
            pos = b.add(i64(HEADER_WORDS), b.mul(j, per))
            with b.if_then(has_p):
                store64(b, load64(b, params, i), dst, pos)
            first = b.add(pos, b.select(has_p, i64(1), i64(0)))
            with b.if_then(has_s):
                with for_range(b, 0, w, "bk") as bk:
                    off = self._tab(b, self.c_coord_off, b.add(b.mul(bk, i64(k)), i))
                    store64(b, load64(b, state, off), dst, b.add(first, bk))
        lo = self._tab(b, self.c_leaf_pos, me)
        store64(b, lo, dst, b.add(words, i64(HEADER_WORDS)))
        store64(b, b.add(lo, i64(1)), dst, b.add(words, i64(HEADER_WORDS + 1)))
        b.ret_void()
        return fn

    def _refuse_tags(self, b, lo, hi, want_lo, want_hi, what: str, u) -> None:
        """Refuse unless [lo, hi) == [want_lo, want_hi): a gap is missing coverage, an
        overlap a duplicated one (decided on leaf positions, never on word counts)."""
        rt = self.rt
        me = b.load(self.g_owner, typ=I64)
        overlap = b.or_(b.icmp_signed("<", lo, want_lo), b.icmp_signed(">", hi, want_hi))
        rt.refuse_if(b, overlap, "data-parallel-assembly-overlap",
                     f"owner %lld: {what} at update %lld covers leaves %lld..%lld, expected "
                     "%lld..%lld: a leaf's coordinates would be assembled twice", me, u, lo, hi,
                     want_lo, want_hi)
        gap = b.or_(b.icmp_signed("!=", lo, want_lo), b.icmp_signed("!=", hi, want_hi))
        rt.refuse_if(b, gap, "data-parallel-assembly-coverage",
                     f"owner %lld: {what} at update %lld covers leaves %lld..%lld, expected "
                     "%lld..%lld: a leaf's coordinates would be missing", me, u, lo, hi,
                     want_lo, want_hi)

    def _emit_select(self) -> ir.Function:
        """dst <- a's words then b's (adjacent leaf ranges, left then right); no arithmetic."""
        rt = self.rt
        fn, b = rt.function("rt_select", VOID, (PTR, PTR, PTR, I64, I64, I64),
                            ("dst", "a", "b", "wa", "wb", "update"))
        dst, ra, rb, wa, wb, u = fn.args
        a_lo = load64(b, ra, b.add(wa, i64(HEADER_WORDS)))
        a_hi = load64(b, ra, b.add(wa, i64(HEADER_WORDS + 1)))
        b_lo = load64(b, rb, b.add(wb, i64(HEADER_WORDS)))
        b_hi = load64(b, rb, b.add(wb, i64(HEADER_WORDS + 1)))
        # b must start where a ends: before is a duplicate, after is a gap
        self._refuse_tags(b, b_lo, b_hi, a_hi, b.select(b.icmp_signed(">", b_hi, a_hi), b_hi, a_hi),
                          "a selection's right operand", u)
        rt.call(b, "memcpy", gep64(b, dst, HEADER_WORDS), gep64(b, ra, HEADER_WORDS), b.mul(wa, i64(8)))
        rt.call(b, "memcpy", gep64(b, dst, b.add(wa, i64(HEADER_WORDS))), gep64(b, rb, HEADER_WORDS),
                b.mul(wb, i64(8)))
        end = b.add(b.add(wa, wb), i64(HEADER_WORDS))
        store64(b, a_lo, dst, end)
        store64(b, b_hi, dst, b.add(end, i64(1)))
        b.ret_void()
        return fn

    def _emit_install(self) -> ir.Function:
        """Check that a covers every leaf, then scatter its words (leaf order, each owner's
        coordinates ascending) into params (or the replica) and the state."""
        rt, k, n, w = self.rt, self.k, self.n, self.w
        fn, b = rt.function("rt_install", VOID, (PTR, I64, I64, PTR, I64),
                            ("a", "mask", "words", "params", "update"))
        a, mask, words, params, u = fn.args
        lo = load64(b, a, b.add(words, i64(HEADER_WORDS)))
        hi = load64(b, a, b.add(words, i64(HEADER_WORDS + 1)))
        self._refuse_tags(b, lo, hi, i64(0), i64(len(self.leaf_order)), "an assembled vector", u)
        per = self._per(b, mask)
        has_p = b.icmp_unsigned("!=", b.and_(mask, i64(REGION_PARAMETERS)), i64(0))
        has_s = b.icmp_unsigned("!=", b.and_(mask, i64(REGION_STATE)), i64(0))
        state = b.load(self.g_state, typ=PTR)
        pos = b.alloca(I64)
        b.store(i64(HEADER_WORDS), pos)
        with for_range(b, 0, len(self.leaf_order), "leaf") as li:
            o = self._tab(b, self.c_leaf_order, li)
            with for_range(b, 0, self._owned_count(b, o), "j") as j:
                i = b.add(o, b.mul(j, i64(n)))
                p = b.load(pos, typ=I64)
                with b.if_then(has_p):
                    store64(b, load64(b, a, p), params, i)
                first = b.add(p, b.select(has_p, i64(1), i64(0)))
                with b.if_then(has_s):
                    with for_range(b, 0, w, "bk") as bk:
                        off = self._tab(b, self.c_coord_off, b.add(b.mul(bk, i64(k)), i))
                        store64(b, load64(b, a, b.add(first, bk)), state, off)
                b.store(b.add(p, per), pos)
        me = b.load(self.g_owner, typ=I64)
        used = b.sub(b.load(pos, typ=I64), i64(HEADER_WORDS))
        rt.refuse_if(b, b.icmp_signed("!=", used, words), "data-parallel-assembly-coverage",
                     "owner %lld: an assembled vector at update %lld holds %lld words, its owners' "
                     "coordinates %lld", me, u, words, used)
        b.ret_void()
        return fn

    def _emit_update_owned(self, kernel: ir.Function, owner_g: ir.GlobalVariable) -> ir.Function:
        """mean <- sum / count at this owner's coordinates (from the full vector, or from its
        slice under gradient partitioning), then the owned update kernel."""
        rt, n = self.rt, self.n
        fn, b = rt.function("rt_update_owned", VOID, (PTR, I64, I64), ("a", "words", "update"))
        a, words, u = fn.args
        me = b.load(self.g_owner, typ=I64)
        if self.part.parameters:
            rt.refuse_if(b, b.icmp_unsigned("!=", b.load(self.g_replica_held, typ=I64), i64(0)),
                         "data-parallel-replica-retained",
                         "owner %lld: the read replica of version %lld is still held at the update "
                         "of version %lld", me, b.load(self.g_replica_version, typ=I64), u)
        count = load64(b, a, b.add(words, i64(HEADER_WORDS - 1)))
        c = b.uitofp(count, F64)
        mean = b.load(self.g_mean, typ=PTR)
        with for_range(b, 0, self._owned_count(b, me), "j") as j:
            i = b.add(me, b.mul(j, i64(n)))
            src = j if self.part.gradients else i
            x = load64(b, a, b.add(src, i64(HEADER_WORDS)), F64)
            r = b.fdiv(x, c)  # the replicated mean's word (its x * (1/c) is used only when exact)
            rt.refuse_if(b, b.or_(is_nonfinite(b, x), is_nonfinite(b, r)), "non-finite",
                         "mean coordinate %lld at update %lld (owner %lld, %llu samples)", i, u, me, count)
            store64(b, r, mean, i)
        b.store(me, owner_g)
        fail = b.alloca(I64)
        status = b.call(kernel, [b.load(self.g_params, typ=PTR), b.load(self.g_state, typ=PTR),
                                 mean, self.g_rate, fail])
        with b.if_then(b.icmp_signed("!=", status, i64(0)), likely=False):
            rt.refuse(b, "non-finite", "update statement '%s' coordinate %lld at update %lld",
                      self._label(b, kernel, status), b.load(fail, typ=I64), u)
        b.ret_void()
        return fn

    # -- the op interpreter ----------------------------------------------------------------
    def _emit_run_owned_ops(self, send_frame, recv_frame, local, fns) -> ir.Function:
        rt = self.rt
        with self._op_interpreter(OWNED_OPS, keep_hash_on_send=False) as op:
            b, cases, after, version, me = op.b, op.cases, op.after, op.version, op.me
            peer, dst, a, bb, step, fd = op.peer, op.dst, op.a, op.bb, op.step, op.fd

            def case(name):
                b.position_at_end(cases[name])

            case("local")
            if self.part.parameters:
                rt.refuse_if(b, b.icmp_unsigned("==", b.load(self.g_replica_held, typ=I64), i64(0)),
                             "data-parallel-replica-released",
                             "owner %lld: the contribution of version %lld reads no held replica "
                             "(released or never installed)", me, version)
                held = b.load(self.g_replica_version, typ=I64)
                rt.refuse_if(b, b.icmp_unsigned("!=", held, version), "data-parallel-replica-version",
                             "owner %lld: the contribution of version %lld reads a replica of "
                             "version %lld", me, version, held)
            b.call(local, [self._oreg(b, dst), version])
            b.branch(after)
            case("send")
            b.call(send_frame, [peer, i64(KIND_COMBINE), version, step, self._oreg(b, a),
                                b.add(self._owords(b, a), i64(TAG_WORDS)), i64(0)])
            b.branch(after)
            case("recv")
            null = ir.Constant(PTR, None)
            b.call(recv_frame, [fd, peer, i64(KIND_COMBINE), version, step, self._oreg(b, dst),
                                b.add(self._owords(b, dst), i64(TAG_WORDS)), null, null, null, i64(0)])
            b.branch(after)
            case("combine")
            b.call(fns["combine"], [self._oreg(b, dst), self._oreg(b, a), self._oreg(b, bb),
                                    self._owords(b, dst), version])
            b.branch(after)
            case("slice")
            b.call(fns["slice"], [self._oreg(b, dst), self._oreg(b, a), peer])
            b.branch(after)
            case("offer")
            b.call(fns["offer"], [self._oreg(b, dst), a, self._owords(b, dst)])
            b.branch(after)
            case("select")
            b.call(fns["select"], [self._oreg(b, dst), self._oreg(b, a), self._oreg(b, bb),
                                   self._owords(b, a), self._owords(b, bb), version])
            b.branch(after)
            case("install")
            b.call(fns["install"], [self._oreg(b, a), bb, self._owords(b, a),
                                    b.load(self.g_params, typ=PTR), version])
            b.branch(after)
            case("replica-install")
            b.call(fns["install"], [self._oreg(b, a), i64(REGION_PARAMETERS), self._owords(b, a),
                                    b.load(self.g_replica, typ=PTR), version])
            b.store(i64(1), self.g_replica_held)
            b.store(version, self.g_replica_version)
            b.branch(after)
            case("replica-release")
            b.store(i64(0), self.g_replica_held)
            b.branch(after)
            case("update-owned")
            b.call(fns["update"], [self._oreg(b, a), self._owords(b, a), version])
            b.branch(after)
            self._emit_finish_cases(op, send_frame, recv_frame, "digest of the replicated words")
        return op.fn

    # -- output ----------------------------------------------------------------------------
    def _emit_write_owned(self) -> ir.Function:
        """Format 2: magic, 2, owner, version, protocol, k, m, kp, mp, then the kp parameter
        coordinates and the mp state offsets this owner holds, then their words. PATH.tmp
        written, fsynced, linked; never overwriting."""
        rt, k, n = self.rt, self.k, self.n
        fn, b = rt.function("rt_write_output", VOID, ())
        path = b.load(self.g_out_path, typ=PTR)
        self._refuse_if_output_exists(b, path)
        me = b.load(self.g_owner, typ=I64)
        if self.part.parameters:
            kp, p0, pstep = self._owned_count(b, me), me, i64(n)
        else:
            kp, p0, pstep = i64(k), i64(0), i64(1)
        mp = self._pos_tab(b, self.c_held_count)
        hs = self._pos_tab(b, self.c_held_start)
        total = b.add(i64(9), b.mul(b.add(kp, mp), i64(2)))
        buf = rt.call(b, "malloc", b.mul(total, i64(8)))
        for j, v in enumerate((i64(OUTPUT_MAGIC), i64(OUTPUT_FORMAT_OWNED), me,
                               b.load(self.g_updates, typ=I64), i64(self.plan.protocol_id), i64(k),
                               i64(self.m), kp, mp)):
            store64(b, v, buf, j)
        params = b.load(self.g_params, typ=PTR)
        state = b.load(self.g_state, typ=PTR)
        words0 = b.add(i64(9), b.add(kp, mp))
        with for_range(b, 0, kp, "p") as j:
            i = b.add(p0, b.mul(j, pstep))
            store64(b, i, buf, b.add(i64(9), j))
            store64(b, load64(b, params, i), buf, b.add(words0, j))
        with for_range(b, 0, mp, "s") as j:
            off = self._tab(b, self.c_held, b.add(hs, j))
            store64(b, off, buf, b.add(b.add(i64(9), kp), j))
            store64(b, load64(b, state, off), buf, b.add(b.add(words0, kp), j))
        self._publish(b, path, ((buf, b.mul(total, i64(8))),))
        b.ret_void()
        return fn

    # -- main ------------------------------------------------------------------------------
    def emit_owned(self, kernel: ir.Function, owner_g: ir.GlobalVariable) -> ir.Function:
        rt, k, m = self.rt, self.k, self.m
        self._globals()
        self._owned_globals()
        sup = self._emit_support(self.max_payload)
        fnv, send_frame, recv_frame, connect = sup.fnv, sup.send_frame, sup.recv_frame, sup.connect
        # the contribution reads the read replica when parameters are partitioned
        if self.part.parameters:
            held, self.g_params = self.g_params, self.g_replica
            local = self._emit_local()
            self.g_params = held
        else:
            local = self._emit_local()
        fns = {"combine": self._emit_combine_owned(), "slice": self._emit_slice(),
               "offer": self._emit_offer(), "select": self._emit_select(),
               "install": self._emit_install(), "update": self._emit_update_owned(kernel, owner_g)}
        run_ops = self._emit_run_owned_ops(send_frame, recv_frame, local, fns)
        write_output = self._emit_write_owned()

        main, b = self._begin_main(sup)

        def alloc(words) -> ir.Value:
            words = words if isinstance(words, ir.Value) else i64(max(words, 1))
            nbytes = b.mul(words, i64(8))
            p = rt.call(b, "malloc", nbytes)
            rt.refuse_if(b, b.icmp_unsigned("==", b.ptrtoint(p, I64), i64(0)), "io-error",
                         "cannot allocate %lld bytes", nbytes)
            # zeroed: the tag words of sum registers travel in frames too
            rt.call(b, "memset", p, i32(0), nbytes)
            return p

        params = alloc(k)
        state = alloc(m)
        # Every owner starts from the initial words; it reads and writes only the ones it
        # owns (and the replicated ones), at their logical positions.
        rt.call(b, "memcpy", params, self.c_initial, i64(8 * k))
        rt.call(b, "memcpy", state, self.c_initial_state, i64(8 * m))
        b.store(params, self.g_params)
        b.store(state, self.g_state)
        b.store(alloc(self._pos_tab(b, self.c_reg_total)), self.g_regs)
        b.store(alloc(k), self.g_cbuf)
        b.store(alloc(k), self.g_replica)
        b.store(alloc(k), self.g_mean)
        gather = alloc(k + m)
        b.call(connect, [])
        n_update = self._pos_tab(b, self.c_n_update)
        updates = b.load(self.g_updates, typ=I64)
        with for_range(b, 0, updates, "u") as u:
            b.call(run_ops, [i64(0), n_update, u])
        # the digest covers the words every owner holds alike: unpartitioned parameters,
        # then the replicated state words (all of them, or the shared ones)
        nw = 0
        if not self.part.parameters:
            rt.call(b, "memcpy", gather, params, i64(8 * k))
            nw = k
        with for_range(b, 0, len(self.repl_state), "rs") as j:
            off = self._tab(b, self.c_repl_state, j)
            store64(b, load64(b, state, off), gather, b.add(j, i64(nw)))
        b.store(b.call(fnv, [gather, i64(nw + len(self.repl_state)), i64(FNV_OFFSET)]), self.g_digest)
        b.call(run_ops, [n_update, self._pos_tab(b, self.c_n_finish), updates])
        with for_range(b, 0, self.n, "cl") as j:
            fd = b.load(self._arr(b, self.g_fds, j, I32), typ=I32)
            with b.if_then(b.icmp_signed(">=", fd, i32(0))):
                rt.call(b, "close", fd)
        b.call(write_output, [])
        b.ret(i32(0))
        return main


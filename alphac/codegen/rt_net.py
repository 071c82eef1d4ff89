"""The runtime's network layer in LLVM IR: whole-buffer socket reads and writes bounded by
the socket timeouts, the FNV-1a word checksum, and identity-checked frames.

Frames are assembled in place: a register is laid out as [8 header words | payload |
checksum], so a combine value goes out in one send loop and comes in straight into the
register that holds it, with no copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from alphac.codegen.rt_ir import (
    EAGAIN, EINTR, I32, I64, I8, IPPROTO_TCP, MSG_NOSIGNAL, PTR, SO_RCVTIMEO, SO_SNDTIMEO,
    SOL_SOCKET, TCP_NODELAY, VOID, CLOCK_MONOTONIC, Rt, for_range, gep, gep64, i32, i64, load64, store64)
from alphac.codegen.rt_tables import FRAME_MAGIC, HEADER_WORDS

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
SEND_CHUNK_WORDS = 1 << 15  # 256 KiB: hashed, then written, while the peer reads the last one
KIND_NAMES = {1: "hello", 2: "combine", 3: "digest", 4: "publish"}


@dataclass
class NetState:
    """Globals the network functions read (created by the runtime's main emitter)."""

    rt: Rt
    owner: ir.GlobalVariable       # i64: this process's owner index
    fds: ir.GlobalVariable         # [n x i32]: connection per peer owner, -1 if none
    accept_from: ir.GlobalVariable  # [n x i8]: 1 for peers that connect to this owner
    timeout_ms: ir.GlobalVariable  # i64
    protocol_id: int
    max_payload: int               # the largest payload this protocol sends (k + 1)


def emit_now_ms(rt: Rt) -> ir.Function:
    fn, b = rt.function("rt_now_ms", I64, ())
    ts = b.alloca(I64, size=2)
    rt.call(b, "clock_gettime", i32(CLOCK_MONOTONIC), ts)
    sec = load64(b, ts, 0)
    nsec = load64(b, ts, 1)
    b.ret(b.add(b.mul(sec, i64(1000)), b.sdiv(nsec, i64(1000000))))
    return fn


def emit_fnv(rt: Rt) -> ir.Function:
    """i64 rt_fnv(i64* p, i64 n, i64 h): FNV-1a over n words, continuing from h."""
    fn, b = rt.function("rt_fnv", I64, (PTR, I64, I64), ("p", "n", "h"))
    p, n, h0 = fn.args
    pre = b.block
    head = b.append_basic_block("head")
    body = b.append_basic_block("body")
    end = b.append_basic_block("end")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, "i")
    h = b.phi(I64, "h")
    i.add_incoming(i64(0), pre)
    h.add_incoming(h0, pre)
    b.cbranch(b.icmp_signed("<", i, n), body, end)
    b.position_at_end(body)
    w = load64(b, p, i)
    h2 = b.mul(b.xor(h, w), i64(FNV_PRIME))
    i.add_incoming(b.add(i, i64(1)), body)
    h.add_incoming(h2, body)
    b.branch(head)
    b.position_at_end(end)
    b.ret(h)
    return fn


def _errno(rt: Rt, b: ir.IRBuilder) -> ir.Value:
    return b.load(rt.call(b, "__errno_location"), typ=I32)


def emit_io(st: NetState, fnv: ir.Function) -> tuple[ir.Function, ir.Function, ir.Function]:
    """rt_read_all / rt_write_all(i32 fd, ptr buf, i64 nbytes, i64 peer): move every byte or
    refuse: peer-closed (end of stream, reset) or peer-timeout (SO_RCVTIMEO/SO_SNDTIMEO).

    i64 rt_read_hashed(i32 fd, ptr buf, i64 nbytes, i64 peer, i64 h, i64 words) reads like
    rt_read_all and folds the first `words` words into the FNV-1a state h as they arrive,
    so a large payload's checksum is done while the rest of it is still in flight."""
    rt = st.rt
    out = []
    for name, call, verb in (("rt_read_all", "recv", "reading from"), ("rt_write_all", "send", "writing to"),
                             ("rt_read_hashed", "recv", "reading from")):
        hashed = name == "rt_read_hashed"
        args = (I32, PTR, I64, I64) + ((I64, I64) if hashed else ())
        names = ("fd", "buf", "n", "peer") + (("h", "words") if hashed else ())
        fn, b = rt.function(name, I64 if hashed else VOID, args, names)
        fd, buf, n, peer = fn.args[:4]
        done = b.alloca(I64)
        b.store(i64(0), done)
        if hashed:
            h_slot = b.alloca(I64)
            b.store(fn.args[4], h_slot)
            folded = b.alloca(I64)
            b.store(i64(0), folded)
        head = b.append_basic_block("head")
        body = b.append_basic_block("body")
        end = b.append_basic_block("end")
        b.branch(head)
        b.position_at_end(head)
        got = b.load(done, typ=I64)
        b.cbranch(b.icmp_signed("<", got, n), body, end)
        b.position_at_end(body)
        at = gep(b, buf, [got], I8)
        flags = i32(MSG_NOSIGNAL if call == "send" else 0)
        r = rt.call(b, call, fd, at, b.sub(n, got), flags)
        ok = b.icmp_signed(">", r, i64(0))
        with b.if_else(ok) as (then, otherwise):
            with then:
                now = b.add(got, r)
                b.store(now, done)
                if hashed:
                    whole = b.sdiv(now, i64(8))
                    upto = b.select(b.icmp_signed("<", whole, fn.args[5]), whole, fn.args[5])
                    start = b.load(folded, typ=I64)
                    h = b.call(fnv, [gep64(b, buf, start), b.sub(upto, start), b.load(h_slot, typ=I64)])
                    b.store(h, h_slot)
                    b.store(upto, folded)
            with otherwise:
                me = b.load(st.owner, typ=I64)
                if call == "recv":
                    rt.refuse_if(b, b.icmp_signed("==", r, i64(0)), "peer-closed",
                                 "owner %lld: owner %lld closed the connection", me, peer)
                err = _errno(rt, b)
                with b.if_then(b.icmp_signed("!=", err, i32(EINTR))):
                    tmo = b.load(st.timeout_ms, typ=I64)
                    rt.refuse_if(b, b.icmp_signed("==", err, i32(EAGAIN)), "peer-timeout",
                                 f"owner %lld: {verb} owner %lld took longer than %lld ms", me, peer, tmo)
                    rt.refuse(b, "peer-closed",
                              f"owner %lld: {verb} owner %lld failed (errno %d)", me, peer, err)
        b.branch(head)
        b.position_at_end(end)
        if hashed:
            b.ret(b.load(h_slot, typ=I64))
        else:
            b.ret_void()
        out.append(fn)
    return out[0], out[1], out[2]


def emit_sockopts(st: NetState) -> ir.Function:
    """rt_sockopts(i32 fd): TCP_NODELAY and read/write timeouts from --timeout-ms."""
    rt = st.rt
    fn, b = rt.function("rt_sockopts", VOID, (I32,), ("fd",))
    (fd,) = fn.args
    one = b.alloca(I32)
    b.store(i32(1), one)
    rt.call(b, "setsockopt", fd, i32(IPPROTO_TCP), i32(TCP_NODELAY), one, i32(4))
    tv = b.alloca(I64, size=2)
    ms = b.load(st.timeout_ms, typ=I64)
    store64(b, b.sdiv(ms, i64(1000)), tv, 0)
    store64(b, b.mul(b.srem(ms, i64(1000)), i64(1000)), tv, 1)
    for opt in (SO_RCVTIMEO, SO_SNDTIMEO):
        rt.call(b, "setsockopt", fd, i32(SOL_SOCKET), i32(opt), tv, i32(16))
    b.ret_void()
    return fn


def emit_frames(st: NetState, fnv: ir.Function, read_all: ir.Function, write_all: ir.Function,
                read_hashed: ir.Function) -> tuple[ir.Function, ir.Function]:
    """rt_send_frame(i64 peer, i64 kind, i64 version, i64 step, i64* buf, i64 len) fills the
    header at buf[0..8), the checksum after the payload, and sends the whole frame.

    i64 rt_recv_frame(i32 fd, i64 peer, i64 kind, i64 version, i64 step, i64* buf, i64 len)
    reads a frame into buf, checking magic, protocol, sender (peer; or, for peer -1, any
    owner still expected to connect), receiver, version, step, kind, length (oversized
    before reading the payload) and checksum in that order; returns the sender."""
    rt = st.rt
    send, b = rt.function("rt_send_frame", VOID, (I64, I64, I64, I64, PTR, I64),
                          ("peer", "kind", "version", "step", "buf", "len"))
    peer, kind, version, step, buf, length = send.args
    me = b.load(st.owner, typ=I64)
    for idx, value in enumerate((i64(FRAME_MAGIC), i64(st.protocol_id), me, peer, version, step,
                                 kind, length)):
        store64(b, value, buf, idx)
    fd = b.load(gep(b, st.fds, [i64(0), peer], st.fds.value_type), typ=I32)
    words = b.add(length, i64(HEADER_WORDS))
    with b.if_else(b.icmp_signed("<=", length, i64(SEND_CHUNK_WORDS))) as (small, large):
        with small:  # one write for the whole frame
            store64(b, b.call(fnv, [buf, words, i64(FNV_OFFSET)]), buf, words)
            b.call(write_all, [fd, buf, b.mul(b.add(words, i64(1)), i64(8)), peer])
        with large:
            # Hash and send in chunks: the receiver reads (and hashes) one chunk while this
            # owner hashes the next. The header goes with the first chunk, the checksum last.
            h_slot = b.alloca(I64)
            b.store(b.call(fnv, [buf, i64(HEADER_WORDS), i64(FNV_OFFSET)]), h_slot)
            chunks = b.udiv(b.add(length, i64(SEND_CHUNK_WORDS - 1)), i64(SEND_CHUNK_WORDS))
            with for_range(b, 0, chunks, "chunk") as c:
                lo = b.add(b.mul(c, i64(SEND_CHUNK_WORDS)), i64(HEADER_WORDS))
                hi = b.add(lo, i64(SEND_CHUNK_WORDS))
                hi = b.select(b.icmp_signed("<", hi, words), hi, words)
                h = b.call(fnv, [gep64(b, buf, lo), b.sub(hi, lo), b.load(h_slot, typ=I64)])
                b.store(h, h_slot)
                start = b.select(b.icmp_signed("==", c, i64(0)), i64(0), lo)
                b.call(write_all, [fd, gep64(b, buf, start), b.mul(b.sub(hi, start), i64(8)), peer])
            store64(b, b.load(h_slot, typ=I64), buf, words)
            b.call(write_all, [fd, gep64(b, buf, words), i64(8), peer])
    b.ret_void()

    recv, b = rt.function("rt_recv_frame", I64, (I32, I64, I64, I64, I64, PTR, I64),
                          ("fd", "peer", "kind", "version", "step", "buf", "len"))
    fd, peer, kind, version, step, buf, length = recv.args
    me = b.load(st.owner, typ=I64)
    b.call(read_all, [fd, buf, i64(HEADER_WORDS * 8), peer])
    f = [load64(b, buf, j) for j in range(HEADER_WORDS)]
    who = "owner %lld: frame from owner %lld"
    rt.refuse_if(b, b.icmp_unsigned("!=", f[0], i64(FRAME_MAGIC)), "frame-magic",
                 f"{who}: magic 0x%016llx, expected 0x{FRAME_MAGIC:016x}", me, peer, f[0])
    # a hello's connection is not identified yet: name the owner its sender field claims
    is_hello = b.icmp_signed("<", peer, i64(0))
    rt.refuse_if(b, b.icmp_unsigned("!=", f[1], i64(st.protocol_id)), "frame-protocol",
                 f"{who}: protocol 0x%016llx, expected 0x{st.protocol_id:016x} (another plan, "
                 "topology or contract)", me, b.select(is_hello, f[2], peer), f[1])
    # the sender: the expected peer, or (hello) an owner that has yet to connect
    n = st.fds.value_type.count
    in_range = b.icmp_unsigned("<", f[2], i64(n))
    idx = b.select(in_range, f[2], i64(0))
    flag = b.load(gep(b, st.accept_from, [i64(0), idx], st.accept_from.value_type), typ=I8)
    pending = b.load(gep(b, st.fds, [i64(0), idx], st.fds.value_type), typ=I32)
    hello_ok = b.and_(in_range, b.and_(b.icmp_unsigned("!=", flag, ir.Constant(I8, 0)),
                                       b.icmp_signed("<", pending, i32(0))))
    rt.refuse_if(b, b.and_(is_hello, b.not_(hello_ok)), "frame-sender",
                 "owner %lld: a hello names sender %lld, not a peer still expected to connect",
                 me, f[2])
    rt.refuse_if(b, b.and_(b.not_(is_hello), b.icmp_unsigned("!=", f[2], peer)), "frame-sender",
                 "owner %lld: frame names sender %lld, expected owner %lld", me, f[2], peer)
    rt.refuse_if(b, b.icmp_unsigned("!=", f[3], me), "frame-receiver",
                 f"{who}: addressed to owner %lld", me, f[2], f[3])
    rt.refuse_if(b, b.icmp_unsigned("!=", f[4], version), "frame-version",
                 f"{who}: version %llu, expected %llu", me, f[2], f[4], version)
    rt.refuse_if(b, b.icmp_unsigned("!=", f[5], step), "frame-step",
                 f"{who}: step %llu, expected %llu", me, f[2], f[5], step)
    rt.refuse_if(b, b.icmp_unsigned("!=", f[6], kind), "frame-kind",
                 f"{who}: kind %llu, expected %llu", me, f[2], f[6], kind)
    rt.refuse_if(b, b.icmp_unsigned(">", f[7], i64(st.max_payload)), "frame-oversized",
                 f"{who}: %llu payload words, this protocol allows at most {st.max_payload}",
                 me, f[2], f[7])
    rt.refuse_if(b, b.icmp_unsigned("!=", f[7], length), "frame-length",
                 f"{who}: %llu payload words, expected %llu", me, f[2], f[7], length)
    rest = b.add(length, i64(1))
    h0 = b.call(fnv, [buf, i64(HEADER_WORDS), i64(FNV_OFFSET)])
    h = b.call(read_hashed, [fd, gep64(b, buf, HEADER_WORDS), b.mul(rest, i64(8)), f[2], h0, length])
    words = b.add(length, i64(HEADER_WORDS))
    got = load64(b, buf, words)
    rt.refuse_if(b, b.icmp_unsigned("!=", h, got), "frame-checksum",
                 f"{who}: checksum 0x%016llx, computed 0x%016llx", me, f[2], got, h)
    b.ret(f[2])
    return send, recv

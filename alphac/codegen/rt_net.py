"""The runtime's network layer in LLVM IR: whole-buffer socket reads and writes bounded by
the socket timeouts, the frame checksum (payload lanes, then the header folded on top), the
serial FNV-1a word hash of the state digest, and identity-checked frames.

Frames are assembled in place: a register is laid out as [8 header words | payload |
checksum], so a combine value goes out in one send loop and comes in straight into the
register that holds it, with no copy. The payload hash does not depend on the header, so a
register sent to several peers in a row is hashed once (`NetState.sent_buf`).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from alphac.codegen.rt_ir import (
    EAGAIN, EINTR, I32, I64, I8, IPPROTO_TCP, MSG_NOSIGNAL, PTR, SO_RCVTIMEO, SO_SNDTIMEO,
    SOL_SOCKET, TCP_NODELAY, VOID, CLOCK_MONOTONIC, Rt, entry_alloca, for_range, gep, gep64, i32, i64, load64, store64)
from alphac.codegen.rt_tables import FRAME_MAGIC, HEADER_WORDS, KIND_COMBINE

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
LANES = 4  # independent FNV-1a lanes of the payload hash (docs/runtime.md, Frames)
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
    # i64: 1 when a receive's on-arrival add (rt_add_range) saw a non-finite word
    added_bad: ir.GlobalVariable | None = None
    # ptr / i64: the register whose payload hash `sent_hash` holds; null when none is valid.
    # Set by a combine send or receive; any op other than a combine send may change a
    # register, so the op loop clears it before every such op.
    sent_buf: ir.GlobalVariable | None = None
    sent_hash: ir.GlobalVariable | None = None


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


def emit_lanes(rt: Rt) -> ir.Function:
    """void rt_lanes(i64* payload, i64 lo, i64 hi, i64* lanes): fold payload words [lo, hi)
    into the LANES lane states, word i into lane i % LANES. Called on consecutive ranges
    as a payload arrives or is sent; the lanes are independent multiply chains, so the
    multiplier is kept busy instead of waiting on one chain's latency."""
    fn, b = rt.function("rt_lanes", VOID, (PTR, I64, I64, PTR), ("p", "lo", "hi", "lanes"))
    p, lo, hi, lanes = fn.args

    def one(i):  # a word outside whole groups (at most LANES - 1 at each end of a range)
        slot = gep64(b, lanes, b.and_(i, i64(LANES - 1)))
        b.store(b.mul(b.xor(b.load(slot, typ=I64), load64(b, p, i)), i64(FNV_PRIME)), slot)

    up = b.and_(b.add(lo, i64(LANES - 1)), i64(-LANES))
    first = b.select(b.icmp_signed("<", up, hi), up, hi)
    with for_range(b, lo, first, "pre") as i:
        one(i)
    last = b.add(first, b.and_(b.sub(hi, first), i64(-LANES)))
    pre = b.block
    head = b.append_basic_block("groups.head")
    body = b.append_basic_block("groups.body")
    end = b.append_basic_block("groups.end")
    init = [load64(b, lanes, j) for j in range(LANES)]
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, "g")
    i.add_incoming(first, pre)
    hs = []
    for j in range(LANES):
        h = b.phi(I64, f"lane{j}")
        h.add_incoming(init[j], pre)
        hs.append(h)
    b.cbranch(b.icmp_signed("<", i, last), body, end)
    b.position_at_end(body)
    for j in range(LANES):
        hs[j].add_incoming(b.mul(b.xor(hs[j], load64(b, p, b.add(i, i64(j)))), i64(FNV_PRIME)), body)
    i.add_incoming(b.add(i, i64(LANES)), body)
    b.branch(head)
    b.position_at_end(end)
    for j in range(LANES):
        store64(b, hs[j], lanes, j)
    with for_range(b, last, hi, "post") as i:
        one(i)
    b.ret_void()
    return fn


def _lanes_init(b: ir.IRBuilder) -> ir.Value:
    lanes = entry_alloca(b, ir.ArrayType(I64, LANES))
    for j in range(LANES):
        store64(b, i64(FNV_OFFSET ^ j), lanes, j)
    return lanes


def _errno(rt: Rt, b: ir.IRBuilder) -> ir.Value:
    return b.load(rt.call(b, "__errno_location"), typ=I32)


def emit_io(st: NetState, lanes_fn: ir.Function,
            add_range: ir.Function) -> tuple[ir.Function, ir.Function, ir.Function]:
    """rt_read_all / rt_write_all(i32 fd, ptr buf, i64 nbytes, i64 peer): move every byte or
    refuse: peer-closed (end of stream, reset) or peer-timeout (SO_RCVTIMEO/SO_SNDTIMEO).

    rt_read_hashed(i32 fd, ptr buf, i64 nbytes, i64 peer, i64* lanes, i64 words, ptr dst,
    ptr a, ptr b, i64 add_words) reads like rt_read_all and folds the first `words` words into
    the payload lanes as they arrive, so a large payload is hashed while the rest of it is
    still in flight; with dst not null it also sets dst[j] = a[j] + b[j] for each arrived
    j < add_words (one of a, b being buf), OR-ing the non-finite flag into `added_bad`."""
    rt = st.rt
    out = []
    for name, call, verb in (("rt_read_all", "recv", "reading from"), ("rt_write_all", "send", "writing to"),
                             ("rt_read_hashed", "recv", "reading from")):
        hashed = name == "rt_read_hashed"
        args = (I32, PTR, I64, I64) + ((PTR, I64, PTR, PTR, PTR, I64) if hashed else ())
        names = ("fd", "buf", "n", "peer") + (
            ("lanes", "words", "dst", "a", "b", "add_words") if hashed else ())
        fn, b = rt.function(name, VOID, args, names)
        fd, buf, n, peer = fn.args[:4]
        done = b.alloca(I64)
        b.store(i64(0), done)
        if hashed:
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
                    b.call(lanes_fn, [buf, start, upto, fn.args[4]])
                    dst, xa, xb, add_words = fn.args[6:10]
                    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(dst, I64), i64(0))):
                        lo = b.select(b.icmp_signed("<", start, add_words), start, add_words)
                        hi = b.select(b.icmp_signed("<", upto, add_words), upto, add_words)
                        bad = b.zext(b.call(add_range, [dst, xa, xb, lo, hi]), I64)
                        b.store(b.or_(b.load(st.added_bad, typ=I64), bad), st.added_bad)
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


def emit_frames(st: NetState, fnv: ir.Function, lanes_fn: ir.Function, read_all: ir.Function,
                write_all: ir.Function, read_hashed: ir.Function) -> tuple[ir.Function, ir.Function]:
    """rt_send_frame(i64 peer, i64 kind, i64 version, i64 step, i64* buf, i64 len, i64 reuse)
    fills the header at buf[0..8), the checksum after the payload, and sends the whole
    frame. With reuse = 1 (combine values) the payload hash is kept for buf, and a send of
    the same buf before any other op only re-folds the header onto it.

    i64 rt_recv_frame(i32 fd, i64 peer, i64 kind, i64 version, i64 step, i64* buf, i64 len,
    ptr dst, ptr a, ptr b, i64 add_words) reads a frame into buf, checking magic, protocol,
    sender (peer; or, for peer -1, any owner still expected to connect), receiver, version,
    step, kind, length (oversized before reading the payload) and checksum in that order;
    returns the sender. dst, a, b, add_words: the add done as the payload arrives (null dst:
    none; see rt_read_hashed); its sums are not used unless the checksum holds, since a
    failing check refuses here."""
    rt = st.rt
    send, b = rt.function("rt_send_frame", VOID, (I64, I64, I64, I64, PTR, I64, I64),
                          ("peer", "kind", "version", "step", "buf", "len", "reuse"))
    peer, kind, version, step, buf, length, reuse = send.args
    me = b.load(st.owner, typ=I64)
    for idx, value in enumerate((i64(FRAME_MAGIC), i64(st.protocol_id), me, peer, version, step,
                                 kind, length)):
        store64(b, value, buf, idx)
    fd = b.load(gep(b, st.fds, [i64(0), peer], st.fds.value_type), typ=I32)
    words = b.add(length, i64(HEADER_WORDS))
    payload = gep64(b, buf, HEADER_WORDS)
    lanes = _lanes_init(b)
    ph_slot = b.alloca(I64)
    cached = b.icmp_unsigned("==", b.ptrtoint(b.load(st.sent_buf, typ=PTR), I64), b.ptrtoint(buf, I64))
    hit = b.and_(b.icmp_unsigned("!=", reuse, i64(0)), cached)
    whole = b.or_(hit, b.icmp_signed("<=", length, i64(SEND_CHUNK_WORDS)))
    with b.if_else(whole) as (small, large):
        with small:  # one write for the whole frame
            with b.if_else(hit) as (again, fresh):
                with again:
                    b.store(b.load(st.sent_hash, typ=I64), ph_slot)
                with fresh:
                    b.call(lanes_fn, [payload, i64(0), length, lanes])
                    b.store(b.call(fnv, [lanes, i64(LANES), i64(FNV_OFFSET)]), ph_slot)
            check = b.call(fnv, [buf, i64(HEADER_WORDS), b.load(ph_slot, typ=I64)])
            store64(b, check, buf, words)
            b.call(write_all, [fd, buf, b.mul(b.add(words, i64(1)), i64(8)), peer])
        with large:
            # Hash and send in chunks: the receiver reads (and hashes) one chunk while this
            # owner hashes the next. The header goes with the first chunk, the checksum last.
            chunks = b.udiv(b.add(length, i64(SEND_CHUNK_WORDS - 1)), i64(SEND_CHUNK_WORDS))
            with for_range(b, 0, chunks, "chunk") as c:
                lo = b.mul(c, i64(SEND_CHUNK_WORDS))
                hi = b.add(lo, i64(SEND_CHUNK_WORDS))
                hi = b.select(b.icmp_signed("<", hi, length), hi, length)
                b.call(lanes_fn, [payload, lo, hi, lanes])
                start = b.select(b.icmp_signed("==", c, i64(0)), i64(0), b.add(lo, i64(HEADER_WORDS)))
                end = b.add(hi, i64(HEADER_WORDS))
                b.call(write_all, [fd, gep64(b, buf, start), b.mul(b.sub(end, start), i64(8)), peer])
            b.store(b.call(fnv, [lanes, i64(LANES), i64(FNV_OFFSET)]), ph_slot)
            store64(b, b.call(fnv, [buf, i64(HEADER_WORDS), b.load(ph_slot, typ=I64)]), buf, words)
            b.call(write_all, [fd, gep64(b, buf, words), i64(8), peer])
    with b.if_then(b.icmp_unsigned("!=", reuse, i64(0))):
        b.store(buf, st.sent_buf)
        b.store(b.load(ph_slot, typ=I64), st.sent_hash)
    b.ret_void()

    recv, b = rt.function("rt_recv_frame", I64, (I32, I64, I64, I64, I64, PTR, I64, PTR, PTR, PTR, I64),
                          ("fd", "peer", "kind", "version", "step", "buf", "len", "dst", "a", "b",
                           "add_words"))
    fd, peer, kind, version, step, buf, length = recv.args[:7]
    me = b.load(st.owner, typ=I64)
    b.call(read_all, [fd, buf, i64(HEADER_WORDS * 8), peer])
    f = [load64(b, buf, j) for j in range(HEADER_WORDS)]
    who = "owner %lld: frame from owner %lld"
    # a hello's connection is not identified yet (peer -1): name the owner its sender
    # word claims
    is_hello = b.icmp_signed("<", peer, i64(0))
    claimed = b.select(is_hello, f[2], peer)
    rt.refuse_if(b, b.icmp_unsigned("!=", f[0], i64(FRAME_MAGIC)), "frame-magic",
                 f"{who}: magic 0x%016llx, expected 0x{FRAME_MAGIC:016x}", me, claimed, f[0])
    rt.refuse_if(b, b.icmp_unsigned("!=", f[1], i64(st.protocol_id)), "frame-protocol",
                 f"{who}: protocol 0x%016llx, expected 0x{st.protocol_id:016x} (another plan, "
                 "topology or contract)", me, claimed, f[1])
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
    lanes = _lanes_init(b)
    b.store(i64(0), st.added_bad)
    b.call(read_hashed, [fd, gep64(b, buf, HEADER_WORDS), b.mul(rest, i64(8)), f[2], lanes, length,
                         *recv.args[7:11]])
    ph = b.call(fnv, [lanes, i64(LANES), i64(FNV_OFFSET)])
    h = b.call(fnv, [buf, i64(HEADER_WORDS), ph])
    words = b.add(length, i64(HEADER_WORDS))
    got = load64(b, buf, words)
    rt.refuse_if(b, b.icmp_unsigned("!=", h, got), "frame-checksum",
                 f"{who}: checksum 0x%016llx, computed 0x%016llx", me, f[2], got, h)
    # A combine value received intact is what this owner may send on next (a hierarchy's
    # inner owner forwards the total down): keep its payload hash for buf, unless the add
    # on arrival wrote into buf itself.
    dst = recv.args[7]
    forwardable = b.and_(b.icmp_unsigned("==", kind, i64(KIND_COMBINE)),
                         b.icmp_unsigned("!=", b.ptrtoint(dst, I64), b.ptrtoint(gep64(b, buf, HEADER_WORDS), I64)))
    with b.if_then(forwardable):
        b.store(buf, st.sent_buf)
        b.store(ph, st.sent_hash)
    b.ret(f[2])
    return send, recv

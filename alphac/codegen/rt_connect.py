"""The runtime's connection setup in LLVM IR: listen, connect to lower peers with retries
until the deadline and send hello, accept higher peers and check their hello."""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.rt_ir import (
    AF_INET, I32, I64, I8, POLLIN, PTR, SO_REUSEADDR, SOCK_STREAM, SOL_SOCKET, VOID,
    for_range, gep, i32, i64, store64)
from alphac.codegen.rt_tables import KIND_HELLO


class Connections:
    """Mixin of the runtime emitter: one socket per peer in `rt.fds`."""

    def _sockaddr(self, b: ir.IRBuilder, sa: ir.Value, owner: ir.Value) -> ir.Value:
        """Fill `sa` with the sockaddr_in (16 bytes, same layout on both ISAs) of `owner`."""
        self.rt.call(b, "memset", sa, i32(0), i64(16))
        b.store(ir.Constant(ir.IntType(16), AF_INET), gep(b, sa, [i64(0)], I8))
        port = b.load(self._arr(b, self.g_port, owner, I32), typ=I32)
        b.store(b.trunc(b.lshr(port, i32(8)), I8), gep(b, sa, [i64(2)], I8))
        b.store(b.trunc(port, I8), gep(b, sa, [i64(3)], I8))
        b.store(b.load(self._arr(b, self.g_addr, owner, I32), typ=I32), gep(b, sa, [i64(4)], I8))
        return sa

    def _emit_connect(self, now_ms, sockopts, send_frame, recv_frame) -> ir.Function:
        """Listen if a higher owner talks to this one; connect (retrying until the deadline)
        to every lower peer and send hello; accept and check every higher peer's hello."""
        rt = self.rt
        fn, b = rt.function("rt_connect", VOID, ())
        me = b.load(self.g_owner, typ=I64)
        tmo = b.load(self.g_timeout, typ=I64)
        deadline = b.add(b.call(now_ms, []), tmo)
        start = self._pos_tab(b, self.c_peer_start)
        count = self._pos_tab(b, self.c_peer_count)
        n_accept = b.alloca(I64)
        b.store(i64(0), n_accept)
        with for_range(b, 0, count, "p") as j:
            p = self._tab(b, self.c_peers, b.add(start, j))
            with b.if_then(b.icmp_signed(">", p, me)):
                b.store(ir.Constant(I8, 1), self._arr(b, self.g_accept, p, I8))
                b.store(b.add(b.load(n_accept, typ=I64), i64(1)), n_accept)
        nacc = b.load(n_accept, typ=I64)
        lfd_slot = b.alloca(I32)
        b.store(i32(-1), lfd_slot)
        one = b.alloca(I32)
        b.store(i32(1), one)
        sa_buf = b.alloca(I8, size=16)
        fd_slot = b.alloca(I32)
        ts = b.alloca(I64, size=2)
        pfd = b.alloca(I32, size=2)
        with b.if_then(b.icmp_signed(">", nacc, i64(0))):
            lfd = rt.call(b, "socket", i32(AF_INET), i32(SOCK_STREAM), i32(0))
            rt.call(b, "setsockopt", lfd, i32(SOL_SOCKET), i32(SO_REUSEADDR), one, i32(4))
            sa = self._sockaddr(b, sa_buf, me)
            r = rt.call(b, "bind", lfd, sa, i32(16))
            port = b.load(self._arr(b, self.g_port, me, I32), typ=I32)
            bad = b.or_(b.icmp_signed("<", lfd, i32(0)), b.icmp_signed("!=", r, i32(0)))
            with b.if_then(bad):
                err = b.load(rt.call(b, "__errno_location"), typ=I32)
                rt.refuse(b, "io-error", "owner %lld cannot listen on port %d (errno %d)", me, port, err)
            # a backlog for every owner that may connect at once (the hub of a large star)
            rt.call(b, "listen", lfd, i32(max(128, self.n)))
            # SO_RCVTIMEO bounds accept(2) too, should a polled connection vanish before it
            b.call(sockopts, [lfd])
            b.store(lfd, lfd_slot)
        # connect to lower peers, in ascending order
        with for_range(b, 0, count, "c") as j:
            p = self._tab(b, self.c_peers, b.add(start, j))
            with b.if_then(b.icmp_signed("<", p, me)):
                sa = self._sockaddr(b, sa_buf, p)
                retry = b.append_basic_block("connect.retry")
                ok_bb = b.append_basic_block("connect.ok")
                b.branch(retry)
                b.position_at_end(retry)
                fd = rt.call(b, "socket", i32(AF_INET), i32(SOCK_STREAM), i32(0))
                b.store(fd, fd_slot)
                r = rt.call(b, "connect", fd, sa, i32(16))
                fail_bb = b.append_basic_block("connect.fail")
                b.cbranch(b.icmp_signed("==", r, i32(0)), ok_bb, fail_bb)
                b.position_at_end(fail_bb)
                rt.call(b, "close", fd)
                port = b.load(self._arr(b, self.g_port, p, I32), typ=I32)
                rt.refuse_if(b, b.icmp_signed(">=", b.call(now_ms, []), deadline), "connect-timeout",
                             "owner %lld could not connect to owner %lld (port %d) within %lld ms",
                             me, p, port, tmo)
                store64(b, i64(0), ts, 0)
                store64(b, i64(10_000_000), ts, 1)  # 10 ms between attempts
                rt.call(b, "nanosleep", ts, ir.Constant(PTR, None))
                b.branch(retry)
                b.position_at_end(ok_bb)
                fd = b.load(fd_slot, typ=I32)
                b.call(sockopts, [fd])
                b.store(fd, self._arr(b, self.g_fds, p, I32))
                b.call(send_frame, [p, i64(KIND_HELLO), i64(0), i64(0), self.g_small, i64(0), i64(0)])
        # accept every higher peer; its hello says who it is
        with for_range(b, 0, nacc, "a") as j:
            remaining = b.sub(deadline, b.call(now_ms, []))
            lfd = b.load(lfd_slot, typ=I32)
            b.store(lfd, pfd)
            b.store(i32(POLLIN), gep(b, pfd, [i64(1)], I32))
            ready = rt.call(b, "poll", pfd, i64(1), b.trunc(b.select(
                b.icmp_signed("<", remaining, i64(0)), i64(0), remaining), I32))
            rt.refuse_if(b, b.icmp_signed("<=", ready, i32(0)), "connect-timeout",
                         "owner %lld: %lld of %lld peers did not connect within %lld ms",
                         me, b.sub(nacc, j), nacc, tmo)
            fd = rt.call(b, "accept", lfd, ir.Constant(PTR, None), ir.Constant(PTR, None))
            rt.refuse_if(b, b.icmp_signed("<", fd, i32(0)), "io-error",
                         "owner %lld: accepting a peer's connection failed", me)
            b.call(sockopts, [fd])
            sender = b.call(recv_frame, [fd, i64(-1), i64(KIND_HELLO), i64(0), i64(0), self.g_small, i64(0),
                                         *self._no_add()])
            b.store(fd, self._arr(b, self.g_fds, sender, I32))
        with b.if_then(b.icmp_signed(">=", b.load(lfd_slot, typ=I32), i32(0))):
            rt.call(b, "close", b.load(lfd_slot, typ=I32))
        b.ret_void()
        return fn

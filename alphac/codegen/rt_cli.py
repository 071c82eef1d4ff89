"""The runtime's command line and peers file, in LLVM IR: `--owner/--peers/--out/--updates/
--timeout-ms/--help`, the owner's position in its role, and `OWNER HOST:PORT` lines."""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.rt_ir import (
    AF_INET, EXIT_USAGE, I32, I64, I8, PTR, VOID, for_range, i32, i64, load64)

DEFAULT_TIMEOUT_MS = 30000
MAX_TIMEOUT_MS = 2**31 - 1


def usage_text(plan, role_name: str, target: str, role_owners) -> str:
    dep = plan.deployment
    owners = ", ".join(str(o) for o in role_owners)
    return (
        "usage: EXE --owner I --peers FILE --out PATH [--updates N] [--timeout-ms MS] [--help]\n"
        f"  deployment {dep.name}, role {role_name} (owners {owners}) of {dep.owners}, "
        f"target {target}, protocol {plan.protocol_id:016x}\n"
        "  --owner I        this process's owner index (must belong to the role)\n"
        "  --peers FILE     one line per owner: 'OWNER HOST:PORT' (IPv4 or localhost)\n"
        "  --out PATH       where the final words are written (never overwritten)\n"
        f"  --updates N      number of updates (default {dep.updates})\n"
        f"  --timeout-ms MS  bound on connecting and on every socket read/write "
        f"(default {DEFAULT_TIMEOUT_MS})\n"
        "  exit 0: output written; 1: refused (stderr: 'refused: CODE: detail'); 2: usage\n")


class CommandLine:
    """Mixin of the runtime emitter: parsing what the owner was started with."""

    def _emit_parse_num(self) -> ir.Function:
        rt = self.rt
        fn, b = rt.function("rt_parse_num", I64, (PTR, PTR), ("text", "flag"))
        text, flag = fn.args
        end = b.alloca(PTR)
        errno = rt.call(b, "__errno_location")
        b.store(i32(0), errno)
        v = rt.call(b, "strtoll", text, end, i32(10))
        overflow = b.icmp_signed("!=", b.load(errno, typ=I32), i32(0))  # ERANGE
        last = b.load(end, typ=PTR)
        first = b.load(text, typ=I8)
        tail = b.load(last, typ=I8)
        bad = b.or_(b.icmp_unsigned("==", first, ir.Constant(I8, 0)),
                    b.or_(b.or_(b.icmp_unsigned("!=", tail, ir.Constant(I8, 0)), overflow),
                          b.icmp_signed("<", v, i64(0))))
        rt.refuse_if(b, bad, "usage", "%s needs a non-negative integer, got '%s' (try --help)",
                     flag, text, status=EXIT_USAGE)
        b.ret(v)
        return fn

    def _emit_parse_args(self, usage: str) -> ir.Function:
        rt = self.rt
        parse_num = self._emit_parse_num()
        fn, b = rt.function("rt_parse_args", VOID, (I32, PTR), ("argc", "argv"))
        argc, argv = fn.args
        argc64 = b.sext(argc, I64)
        seen_owner = b.alloca(I8)
        b.store(ir.Constant(I8, 0), seen_owner)
        i = b.alloca(I64)
        b.store(i64(1), i)
        head = b.append_basic_block("args.head")
        body = b.append_basic_block("args.body")
        end = b.append_basic_block("args.end")
        b.branch(head)
        b.position_at_end(head)
        iv = b.load(i, typ=I64)
        b.cbranch(b.icmp_signed("<", iv, argc64), body, end)
        b.position_at_end(body)
        arg = load64(b, argv, iv, PTR)

        def is_flag(name):
            return b.icmp_signed("==", rt.call(b, "strcmp", arg, rt.cstr(name)), i32(0))

        with b.if_then(is_flag("--help")):
            rt.call(b, "dprintf", i32(1), rt.cstr("%s"), rt.cstr(usage))
            rt.call(b, "exit", i32(0))
            b.unreachable()
        next_i = b.add(iv, i64(1))
        rt.refuse_if(b, b.icmp_signed(">=", next_i, argc64), "usage",
                     "'%s' is not an option with a value (try --help)", arg, status=EXIT_USAGE)
        value = load64(b, argv, next_i, PTR)
        done = b.append_basic_block("args.next")
        for flag, action in (
                ("--owner", "owner"), ("--peers", "peers"), ("--out", "out"),
                ("--updates", "updates"), ("--timeout-ms", "timeout")):
            with b.if_then(is_flag(flag)):
                if action == "peers":
                    b.store(value, self.g_peers_path)
                elif action == "out":
                    b.store(value, self.g_out_path)
                else:
                    v = b.call(parse_num, [value, rt.cstr(flag)])
                    if action == "owner":
                        b.store(v, self.g_owner)
                        b.store(ir.Constant(I8, 1), seen_owner)
                    elif action == "updates":
                        b.store(v, self.g_updates)
                    else:
                        # bounded so that deadlines and poll(2)'s int timeout cannot overflow
                        bad = b.or_(b.icmp_signed("==", v, i64(0)), b.icmp_signed(">", v, i64(MAX_TIMEOUT_MS)))
                        rt.refuse_if(b, bad, "usage", f"--timeout-ms must be in 1..{MAX_TIMEOUT_MS}",
                                     status=EXIT_USAGE)
                        b.store(v, self.g_timeout)
                b.branch(done)
        rt.refuse(b, "usage", "unknown option '%s' (try --help)", arg, status=EXIT_USAGE)
        b.position_at_end(done)
        b.store(b.add(iv, i64(2)), i)
        b.branch(head)
        b.position_at_end(end)
        rt.refuse_if(b, b.icmp_unsigned("==", b.load(seen_owner, typ=I8), ir.Constant(I8, 0)),
                     "usage", "--owner is required (try --help)", status=EXIT_USAGE)
        for g, flag in ((self.g_peers_path, "--peers"), (self.g_out_path, "--out")):
            rt.refuse_if(b, b.icmp_unsigned("==", b.ptrtoint(b.load(g, typ=PTR), I64), i64(0)),
                         "usage", f"{flag} is required (try --help)", status=EXIT_USAGE)
        b.ret_void()
        return fn

    def _emit_select_owner(self) -> ir.Function:
        rt = self.rt
        fn, b = rt.function("rt_select_owner", VOID, ())
        owner = b.load(self.g_owner, typ=I64)
        found = b.alloca(I64)
        b.store(i64(-1), found)
        with for_range(b, 0, len(self.tables), "r") as r:
            hit = b.icmp_signed("==", self._tab(b, self.c_role, r), owner)
            with b.if_then(hit):
                b.store(r, found)
        pos = b.load(found, typ=I64)
        owners = ", ".join(str(o) for o in self.role.owners)
        rt.refuse_if(b, b.icmp_signed("<", pos, i64(0)), "owner-not-in-role",
                     f"owner %lld is not in role {self.role.name} (owners {owners}) "
                     f"of deployment {self.dep.name}", owner)
        b.store(pos, self.g_pos)
        b.ret_void()
        return fn

    def _emit_read_peers(self) -> ir.Function:
        """Parse the peers file: `OWNER HOST:PORT` per line; blank lines and `#` comments."""
        rt = self.rt
        fn, b = rt.function("rt_read_peers", VOID, ())
        path = b.load(self.g_peers_path, typ=PTR)
        f = rt.call(b, "fopen", path, rt.cstr("r"))
        rt.refuse_if(b, b.icmp_unsigned("==", b.ptrtoint(f, I64), i64(0)), "io-error",
                     "cannot read the peers file '%s'", path)
        line = b.alloca(I8, size=512)
        host = b.alloca(I8, size=64)
        tmp = b.alloca(I8, size=8)
        o = b.alloca(I64)
        port = b.alloca(I64)
        extra = b.alloca(I8, size=8)
        addr = b.alloca(I32)
        lineno = b.alloca(I64)
        b.store(i64(0), lineno)
        head = b.append_basic_block("lines.head")
        body = b.append_basic_block("lines.body")
        end = b.append_basic_block("lines.end")
        b.branch(head)
        b.position_at_end(head)
        got = rt.call(b, "fgets", line, i32(512), f)
        b.cbranch(b.icmp_unsigned("==", b.ptrtoint(got, I64), i64(0)), end, body)
        b.position_at_end(body)
        ln = b.add(b.load(lineno, typ=I64), i64(1))
        b.store(ln, lineno)
        blank = b.icmp_signed("<=", rt.call(b, "sscanf", line, rt.cstr(" %1s"), tmp), i32(0))
        comment = b.icmp_signed("==", rt.call(b, "sscanf", line, rt.cstr(" %1[#]"), tmp), i32(1))
        with b.if_then(b.or_(blank, comment)):
            b.branch(head)
        count = rt.call(b, "sscanf", line, rt.cstr(" %lld %63[^: \t\r\n]:%lld %1s"), o, host, port, extra)
        bad_line = (f"peers file '%s' line %lld: expected 'OWNER HOST:PORT' with OWNER in "
                    f"0..{self.n - 1} and PORT in 1..65535")
        rt.refuse_if(b, b.icmp_signed("!=", count, i32(3)), "usage", bad_line, path, ln, status=EXIT_USAGE)
        ov = b.load(o, typ=I64)
        pv = b.load(port, typ=I64)
        bad = b.or_(b.or_(b.icmp_signed("<", ov, i64(0)), b.icmp_signed(">=", ov, i64(self.n))),
                    b.or_(b.icmp_signed("<", pv, i64(1)), b.icmp_signed(">", pv, i64(65535))))
        rt.refuse_if(b, bad, "usage", bad_line, path, ln, status=EXIT_USAGE)
        have = self._arr(b, self.g_have, ov, I8)
        rt.refuse_if(b, b.icmp_unsigned("!=", b.load(have, typ=I8), ir.Constant(I8, 0)), "usage",
                     "peers file '%s' line %lld: owner %lld is listed twice", path, ln, ov,
                     status=EXIT_USAGE)
        ok = b.icmp_signed("==", rt.call(b, "inet_pton", i32(AF_INET), host, addr), i32(1))
        with b.if_then(b.not_(ok)):
            local = b.icmp_signed("==", rt.call(b, "strcmp", host, rt.cstr("localhost")), i32(0))
            rt.refuse_if(b, b.not_(local), "usage",
                         "peers file '%s' line %lld: '%s' is not an IPv4 address", path, ln, host,
                         status=EXIT_USAGE)
            # 127.0.0.1 as the four bytes in network order
            b.store(i32(0x0100007F), addr)
        b.store(b.load(addr, typ=I32), self._arr(b, self.g_addr, ov, I32))
        b.store(b.trunc(pv, I32), self._arr(b, self.g_port, ov, I32))
        b.store(ir.Constant(I8, 1), have)
        b.branch(head)
        b.position_at_end(end)
        rt.call(b, "fclose", f)
        # every owner this one talks to, and itself, need an endpoint
        me = b.load(self.g_owner, typ=I64)
        missing = "peers file '%s' has no endpoint for owner %lld"
        rt.refuse_if(b, b.icmp_unsigned("==", b.load(self._arr(b, self.g_have, me, I8), typ=I8),
                                        ir.Constant(I8, 0)), "usage", missing, path, me, status=EXIT_USAGE)
        start = self._pos_tab(b, self.c_peer_start)
        with for_range(b, 0, self._pos_tab(b, self.c_peer_count), "p") as j:
            p = self._tab(b, self.c_peers, b.add(start, j))
            flag = b.load(self._arr(b, self.g_have, p, I8), typ=I8)
            rt.refuse_if(b, b.icmp_unsigned("==", flag, ir.Constant(I8, 0)), "usage", missing, path, p,
                         status=EXIT_USAGE)
        b.ret_void()
        return fn

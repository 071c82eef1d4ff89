"""Building blocks for the role runtime's LLVM IR: types, libc declarations, string and
word constants, counted loops, and the one way a refusal is emitted.

Everything here is target-neutral: it relies only on what x86-64 and AArch64 Linux share
(LP64 C types, the generic socket and open(2) constants, glibc's `__errno_location`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from llvmlite import ir

from alphac.codegen.types import F64, I1, I16, I32, I64, I8, PTR, VOID  # noqa: F401 (re-exported)

# Linux constants that are identical on x86-64 and AArch64 (asm-generic values).
AF_INET = 2
SOCK_STREAM = 1
SOL_SOCKET = 1
SO_REUSEADDR = 2
SO_RCVTIMEO = 20
SO_SNDTIMEO = 21
IPPROTO_TCP = 6
TCP_NODELAY = 1
MSG_NOSIGNAL = 0x4000
POLLIN = 1
EINTR = 4
EAGAIN = 11
CLOCK_MONOTONIC = 1
O_WRONLY = 0o1
O_CREAT = 0o100
O_TRUNC = 0o1000
F_OK = 0

EXIT_REFUSED = 1
EXIT_USAGE = 2

# name -> (return type, argument types, variadic)
_LIBC = {
    "socket": (I32, (I32, I32, I32), False),
    "setsockopt": (I32, (I32, I32, I32, PTR, I32), False),
    "bind": (I32, (I32, PTR, I32), False),
    "listen": (I32, (I32, I32), False),
    "accept": (I32, (I32, PTR, PTR), False),
    "connect": (I32, (I32, PTR, I32), False),
    "recv": (I64, (I32, PTR, I64, I32), False),
    "send": (I64, (I32, PTR, I64, I32), False),
    "close": (I32, (I32,), False),
    "poll": (I32, (PTR, I64, I32), False),
    "nanosleep": (I32, (PTR, PTR), False),
    "clock_gettime": (I32, (I32, PTR), False),
    "open": (I32, (PTR, I32), True),
    "write": (I64, (I32, PTR, I64), False),
    "fsync": (I32, (I32,), False),
    "link": (I32, (PTR, PTR), False),
    "unlink": (I32, (PTR,), False),
    "access": (I32, (PTR, I32), False),
    "fopen": (PTR, (PTR, PTR), False),
    "fgets": (PTR, (PTR, I32, PTR), False),
    "fclose": (I32, (PTR,), False),
    "sscanf": (I32, (PTR, PTR), True),
    "snprintf": (I32, (PTR, I64, PTR), True),
    "strtoll": (I64, (PTR, PTR, I32), False),
    "strcmp": (I32, (PTR, PTR), False),
    "strlen": (I64, (PTR,), False),
    "dprintf": (I32, (I32, PTR), True),
    "exit": (VOID, (I32,), False),
    "malloc": (PTR, (I64,), False),
    "memcpy": (PTR, (PTR, PTR, I64), False),
    "memset": (PTR, (PTR, I32, I64), False),
    "inet_pton": (I32, (I32, PTR, PTR), False),
    "__errno_location": (PTR, (), False),
}


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


@dataclass
class Rt:
    """The module being built plus caches of what was declared in it."""

    module: ir.Module
    _strings: dict = field(default_factory=dict)
    _counter: list = field(default_factory=lambda: [0])

    def libc(self, name: str) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        ret, args, var_arg = _LIBC[name]
        fn = ir.Function(self.module, ir.FunctionType(ret, args, var_arg=var_arg), name)
        if name == "exit":
            fn.attributes.add("noreturn")
        return fn

    def call(self, b: ir.IRBuilder, name: str, *args) -> ir.Value:
        return b.call(self.libc(name), list(args))

    def cstr(self, text: str) -> ir.GlobalVariable:
        """A private NUL-terminated string constant (deduplicated by text)."""
        g = self._strings.get(text)
        if g is None:
            data = bytearray(text.encode("utf-8") + b"\0")
            ty = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, ty, f"rt.str.{len(self._strings)}")
            g.initializer = ir.Constant(ty, data)
            g.global_constant = True
            g.linkage = "private"
            g.unnamed_addr = True
            self._strings[text] = g
        return g

    def words(self, name: str, words, constant: bool = True) -> ir.GlobalVariable:
        """A global array of 64-bit words from a sequence of ints or a numpy uint64 array,
        emitted as bytes (fast for millions of words) and 16-byte aligned."""
        import numpy as np

        arr = np.ascontiguousarray(np.asarray(words, dtype=np.uint64).reshape(-1)).astype("<u8")
        nbytes = max(arr.nbytes, 8)
        ty = ir.ArrayType(I8, nbytes)
        g = ir.GlobalVariable(self.module, ty, name)
        if arr.nbytes == 0 or not arr.any():
            g.initializer = ir.Constant(ty, None)
        else:
            g.initializer = ir.Constant(ty, bytearray(arr.tobytes()))
        g.global_constant = constant
        g.linkage = "internal"
        g.align = 16
        return g

    def global_var(self, name: str, ty: ir.Type, init=None) -> ir.GlobalVariable:
        g = ir.GlobalVariable(self.module, ty, name)
        g.initializer = ir.Constant(ty, init)
        g.linkage = "internal"
        return g

    def function(self, name: str, ret: ir.Type, args: tuple, names: tuple = ()) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        fn.linkage = "internal"
        for a, n in zip(fn.args, names):
            a.name = n
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        return fn, b

    # -- refusals ------------------------------------------------------------------------
    def refuse(self, b: ir.IRBuilder, code: str, fmt: str, *args, status: int = EXIT_REFUSED) -> None:
        """Print `refused: CODE: detail` on stderr and exit; the block ends unreachable.

        Exiting is what guarantees that nothing is published: the output file is written
        only after every check of every update and of the replica comparison has passed.
        """
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, code
        text = self.cstr(f"refused: {code}: {fmt}\n")
        self.call(b, "dprintf", i32(2), text, *args)
        self.call(b, "exit", i32(status))
        b.unreachable()

    def refuse_if(self, b: ir.IRBuilder, cond: ir.Value, code: str, fmt: str, *args,
                  status: int = EXIT_REFUSED) -> None:
        with b.if_then(cond, likely=False):
            self.refuse(b, code, fmt, *args, status=status)


@contextmanager
def for_range(b: ir.IRBuilder, start, stop, name: str = "i"):
    """A counted loop `for (i = start; i < stop; ++i)` over i64; yields i."""
    start = start if isinstance(start, ir.Value) else i64(start)
    stop = stop if isinstance(stop, ir.Value) else i64(stop)
    pre = b.block
    head = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    end = b.append_basic_block(f"{name}.end")
    b.branch(head)
    b.position_at_end(head)
    idx = b.phi(I64, name)
    idx.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", idx, stop), body, end)
    b.position_at_end(body)
    yield idx
    nxt = b.add(idx, i64(1))
    idx.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(end)


def entry_alloca(b: ir.IRBuilder, ty: ir.Type) -> ir.Value:
    """A stack slot in the function's entry block, wherever `b` stands: LLVM promotes only
    entry-block slots to registers (a flag left in memory keeps a loop from vectorising),
    and a slot allocated inside a loop would grow the stack on every iteration."""
    entry = b.function.entry_basic_block
    if b.block is entry:  # (a second builder inserting here would shift b's position)
        return b.alloca(ty)
    eb = ir.IRBuilder(entry)
    if entry.instructions:
        eb.position_before(entry.instructions[0])
    return eb.alloca(ty)


def is_nonfinite(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """True when x's exponent bits are all ones (an infinity or a NaN)."""
    bits = b.bitcast(x, I64) if x.type == F64 else x
    exp = b.and_(bits, i64(0x7FF0000000000000))
    return b.icmp_unsigned("==", exp, i64(0x7FF0000000000000))


def gep64(b: ir.IRBuilder, base: ir.Value, index, ty: ir.Type = I64) -> ir.Value:
    """Address of the index-th 64-bit element at base (i64 or double view)."""
    index = index if isinstance(index, ir.Value) else i64(index)
    return gep(b, base, [index], ty)


def gep(b: ir.IRBuilder, base: ir.Value, indices: list, ty: ir.Type) -> ir.Value:
    """A GEP whose result is an opaque `ptr`. llvmlite types globals and allocas as typed
    pointers and gives a GEP naming its own source element type its base's type, so the
    result is retyped; the printed IR is the same (LLVM reads every pointer as `ptr`)."""
    g = b.gep(base, indices, inbounds=True, source_etype=ty)
    g.type = PTR
    return g


def load64(b: ir.IRBuilder, base: ir.Value, index, ty: ir.Type = I64) -> ir.Value:
    return b.load(gep64(b, base, index, ty), typ=ty)


def store64(b: ir.IRBuilder, value: ir.Value, base: ir.Value, index) -> None:
    b.store(value, gep64(b, base, index, value.type))

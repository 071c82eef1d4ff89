"""Every parser of untrusted bytes in the C runtime, fuzzed: the command line (and the
engines' variables), peers files, host lists (node lists, task counts, hostfiles), key
files, frames and shared-memory offers in-process, each parser's cases in one forked
child (a crash or a hang fails the test, naming the case), and the restore of damaged
checkpoints through an executable, a process per case. Every case is a valid input changed by a seeded mutator
(flipped, inserted and deleted bytes, NUL and 0xff, truncation, duplicated and dropped
lines, huge numbers, very long lines, empty input); each must end OK or with a refusal
code of the runtime's table and a one-line detail, and where a second reader exists (the
emitters' host list parser, the key file's rule) with its outcome.

`make test-sanitize` runs this file with the library and the executable built with
AddressSanitizer and UBSan (ALPHAC_SANITIZE=1), ALPHAC_FUZZ_SCALE times as many cases."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

from alphac import driver, wire
from alphac.image.cheader import runtime_codes
from alphac.testing import frames as fr
from alphac.launch.hostlist import HostlistError, expand

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostlist_cases import EXPANDS, REFUSED  # noqa: E402

pytestmark = pytest.mark.fuzz

SANITIZE = os.environ.get("ALPHAC_SANITIZE") == "1"
SCALE = int(os.environ.get("ALPHAC_FUZZ_SCALE", "1"))
CASES = 300 * SCALE  # per parser
DEADLINE_S = 10  # per case
CODES = frozenset(runtime_codes())
ROOT = Path(__file__).resolve().parents[2]
CKPT = ROOT / "tests" / "errors" / "checkpoints"


@pytest.fixture(scope="module")
def lib(request):
    """The suite's runtime library, or under ALPHAC_SANITIZE=1 the one built with the
    sanitizers (loaded into a Python that has libasan and libubsan preloaded)."""
    if SANITIZE and "libasan" not in os.environ.get("LD_PRELOAD", ""):
        pytest.fail("ALPHAC_SANITIZE=1 needs libasan and libubsan in LD_PRELOAD: run make test-sanitize")
    return request.getfixturevalue("sanlib" if SANITIZE else "rtlib")


def _needed(path: Path) -> set:
    """The libraries an ELF file names (DT_NEEDED), without their versions."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        dynamic = next(s for s in ELFFile(f).iter_sections() if isinstance(s, DynamicSection))
        return {t.needed.split(".so")[0] for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"}


@pytest.mark.skipif(not SANITIZE, reason="the sanitized build is fuzzed by make test-sanitize")
def test_the_fuzzed_library_and_executable_are_sanitized(lib, restore_exe):
    """What make test-sanitize fuzzes was built by driver.build(sanitize=True): linked with
    AddressSanitizer and UBSan, and the executable runs."""
    assert {"libasan", "libubsan"} <= _needed(Path(lib.lib._name)) and {"libasan", "libubsan"} <= _needed(restore_exe)
    done = subprocess.run([str(restore_exe), "--version"], capture_output=True, timeout=DEADLINE_S)
    assert (done.returncode, done.stderr) == (0, b"")


# -- the mutator ---------------------------------------------------------------------------

HUGE = (b"0", b"-1", b"65535", b"65536", b"2147483648", b"4294967296", b"9223372036854775807",
        b"9223372036854775808", b"18446744073709551616", b"999999999999999999999999999999")
SPECIAL = (0, 0xFF, 0x7F, 0x80, 0x20, 0x0A, 0x09, 0x0D, 0x2C, 0x3A, 0x5B, 0x5D, 0x2D, 0x23, 0x3D)


def mutate(rng: random.Random, data: bytes, tokens: tuple[bytes, ...] = (), longest: int = 70000) -> bytes:
    """1 to 4 random edits of `data`: a bit flipped, a byte set to a special one, bytes
    inserted (NUL and 0xff among them), a range deleted, the rest cut off, a line
    duplicated, dropped or swapped, a number made huge, a very long run inserted (up to
    `longest` bytes), all of it emptied, or one of `tokens` inserted."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op, at = rng.randrange(12), rng.randint(0, len(b))
        lines = bytes(b).split(b"\n")
        if op == 0 and b:
            b[min(at, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[min(at, len(b) - 1)] = rng.choice(SPECIAL)
        elif op == 2:
            b[at:at] = bytes(rng.choice((*SPECIAL, rng.randrange(256))) for _ in range(rng.randint(1, 8)))
        elif op == 3 and b:
            del b[at:at + rng.randint(1, 16)]
        elif op == 4:
            del b[at:]
        elif op == 5:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            b = bytearray(b"\n".join(lines))
        elif op == 6 and len(lines) > 1:
            del lines[rng.randrange(len(lines))]
            b = bytearray(b"\n".join(lines))
        elif op == 7 and len(lines) > 1:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            b = bytearray(b"\n".join(lines))
        elif op == 8:
            digits = [m.span() for m in re.finditer(rb"[0-9]+", bytes(b))]
            if digits:
                s, e = rng.choice(digits)
                b[s:e] = rng.choice(HUGE)
        elif op == 9:
            b[at:at] = bytes([rng.choice(b"a9:[,. ")]) * min(longest, rng.choice((300, 1100, 5000, 70000)))
        elif op == 10 and rng.random() < 0.2:
            b.clear()
        elif tokens:
            b[at:at] = rng.choice(tokens)
    return bytes(b)


def resealed(rng: random.Random, frame: fr.Frame, key: bytes | None = None) -> bytes:
    """The frame with its payload's bytes mutated (whole words, zero-padded) and its
    checksum (and with `key`, its tag) made right again, so the payload is read."""
    data = mutate(rng, struct.pack(f"<{len(frame.payload)}Q", *frame.payload), longest=200)
    data += bytes(-len(data) % 8)
    words = struct.unpack(f"<{len(data) // 8}Q", data)
    return fr.Frame(**{**frame.__dict__, "payload": words}).encode(key=key)


def corpus(seed: int, valid: list, count: int, change) -> list:
    """The valid inputs themselves, then `count` - len(valid) of them changed by
    change(rng, input), from a generator seeded with `seed` (reproducible)."""
    rng = random.Random(seed)
    return list(valid) + [change(rng, rng.choice(valid)) for _ in range(count - len(valid))]


# -- one forked child per parser -----------------------------------------------------------

def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited {os.WEXITSTATUS(status)}"


def in_child(cases: list, call) -> list:
    """call(case) for every case in a forked child, which writes each outcome (JSON) on a
    pipe as the case ends; the outcomes, in order. A case that ends the child (a signal, a
    sanitizer's report, an exception) or runs past DEADLINE_S fails the test, naming it
    and quoting what the child wrote on its stderr."""
    r, w = os.pipe()
    err = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(r)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(err.fileno(), 2)
            for case in cases:
                os.write(w, json.dumps(call(case)).encode() + b"\n")
        except BaseException:
            os.write(2, traceback.format_exc().encode())
            code = 3
        os._exit(code)
    os.close(w)
    outcomes, pending, why = [], b"", ""
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(outcomes) < len(cases):
            if not select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
                why = f"ran longer than {DEADLINE_S} s"
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            outcomes += [json.loads(line) for line in lines]
            deadline = time.monotonic() + DEADLINE_S
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if len(outcomes) < len(cases) or status != 0:
        err.seek(0)
        said = err.read().decode("utf-8", "replace")
        said = said if len(said) < 4000 else said[:3000] + "\n...\n" + said[-800:]
        i = len(outcomes)
        case = repr(cases[i])[:400] if i < len(cases) else "after the last case"
        pytest.fail(f"case {i} ({case}): the child {why or _status(status)}; its stderr:\n{said}")
    return outcomes


def text(data: bytes) -> str:
    """Bytes as the characters of the same codes (what JSON and os.environ can carry)."""
    return data.decode("latin-1")


def refusal(lib, rt, rc: int) -> list:
    """[code, detail] of a return value, the detail as latin-1."""
    return [lib.code(rc), text(ctypes.string_at(lib.lib.rt_message(rt))) if rc > 0 else ""]


def assert_outcomes(outcomes: list, allowed: set) -> None:
    """Every code allowed; every detail one line of printable characters (never the bytes
    of a control character taken from the input)."""
    codes = {o[0] for o in outcomes}
    assert codes <= allowed, codes - allowed
    bad = [o for o in outcomes if re.search(r"[\x00-\x1f\x7f]", o[1])]
    assert not bad, bad[:3]


# -- the command line ----------------------------------------------------------------------

ARGV = [
    ["--owner", "1", "--peers", "p", "--out", "o", "--insecure"],
    ["--owner=2", "--peers=p", "--out=o", "--key", "k", "--timeout-ms", "100", "--updates", "5"],
    ["--owner", "3", "--nodelist", "n[1-4]", "--base-port", "29000", "--out-dir", "d", "--insecure"],
    ["--owner", "1", "--hostfile", "h", "--base-port", "29000", "--out", "o", "--run-id", "ab12", "--insecure"],
    ["--owner", "1", "--peers", "p", "--out", "o", "--resume", "ck", "--new-contract", "--insecure",
     "--checkpoint-dir", "ck", "--checkpoint-key", "ck.key"],
    ["--owner", "2", "--peers", "p", "--out", "o", "--stats", "s", "--connections", "c", "--listen-any",
     "--status-fd", "1", "--insecure"],
    ["--help"], ["--version"], [],
]
ENGINE_VARS = (*(rank for rank, _ in wire.ENGINE_RANKS), wire.SLURM_NODELIST)
ARGV_TOKENS = (b"\0--owner\0", b"\0--peers\0", b"--out=", b"\0--help", b"\0--timeout-ms\0", b"\0-", b"=", b"\0--")


def _argv_case(rng: random.Random, argv: list) -> tuple:
    """A command line (its arguments joined by NUL, mutated, split again: an argument
    holds no NUL) and, sometimes, an engine's variable set to a mutated number."""
    args = mutate(rng, b"\0".join(a.encode() for a in argv), ARGV_TOKENS, longest=5000).split(b"\0")
    env = {}
    if rng.random() < 0.3:
        env[rng.choice(ENGINE_VARS)] = text(mutate(rng, rng.choice((b"1", b"2", b"n[1-4]"))).replace(b"\0", b""))
    return [text(a) for a in args], env


def test_command_lines_end_ok_or_refused(lib):
    cases = corpus(1, [(a, {}) for a in ARGV], CASES, lambda rng, c: _argv_case(rng, c[0]))

    def call(case):
        argv, env = case
        for name, value in env.items():
            os.environ[name] = value
        rt = lib.new()
        array = (ctypes.c_char_p * (len(argv) + 2))(b"exe", *(a.encode("latin-1") for a in argv), None)
        rc = lib.lib.rt_parse_args(rt, len(argv) + 1, array)
        if rc == 0:
            rc = lib.lib.rt_select_owner(rt) or lib.lib.rt_key_or_insecure(rt)
        for name in env:
            del os.environ[name]
        return refusal(lib, rt, rc)

    outcomes = in_child(cases, call)
    assert_outcomes(outcomes, {"ok", "done", "usage", "owner-not-in-role", "owner-ambiguous"})
    assert outcomes[:len(ARGV)] == [["ok", ""]] * 6 + [["done", ""]] * 2 + [["usage", outcomes[8][1]]]


# -- peers files ---------------------------------------------------------------------------

PEERS = [
    b"0 127.0.0.1:47000\n1 127.0.0.1:47001\n",
    b"# a comment\n\n   \n0 localhost:47000\n\t1\t127.0.0.1:47001   \n",
    b"0 [::1]:47000 shm\n1 [::1]:47001 shm-only\n2 127.0.0.1:5 tcp\n3 127.0.0.1:6\n",
]
PEERS_TOKENS = (b"[::1]:", b"]:", b" shm-only", b"\n#", b":65535", b"\n4 127.0.0.1:7\n", b" tcp extra")


def test_peers_files_end_ok_or_refused(lib, tmp_path):
    cases = corpus(2, PEERS, CASES, lambda rng, c: mutate(rng, c, PEERS_TOKENS))
    path = tmp_path / "peers"

    def call(data):
        path.write_bytes(data)
        rt = lib.owner(1, str(path), "out", "--insecure")
        return refusal(lib, rt, lib.lib.rt_read_peers(rt))

    outcomes = in_child(cases, call)
    assert_outcomes(outcomes, {"ok", "usage"})
    assert outcomes[:len(PEERS)] == [["ok", ""]] * len(PEERS)
    assert [c for c, o in zip(cases, outcomes) if b"\0" in c and o[0] == "ok"] == []  # a NUL byte is refused


# -- host lists, task counts, hostfiles ----------------------------------------------------

HOSTLISTS = [t.encode() for t, _ in EXPANDS + REFUSED] + [b"n[0-65535]", b"a,b[1-3]c,d[01-02]"]
HOSTLIST_TOKENS = (b"[", b"]", b",", b"-", b"[1-3]", b"[0-65535]", b"[99999999999-100000000000]", b"[01-010]")


def _python_expand(data: bytes) -> list:
    """What the emitters' parser makes of the list (up to a NUL, where a C string ends),
    its message cut as the C one is, to the 511 characters of a 512-byte buffer."""
    try:
        names = expand(text(data.split(b"\0")[0]))
    except HostlistError as e:
        return [-1, str(e)[:511]]
    return [0, hashlib.sha256("".join(n + "\n" for n in names).encode("latin-1")).hexdigest()]


def test_host_lists_end_ok_or_refused_as_the_emitters_parser(lib):
    cases = corpus(3, HOSTLISTS, CASES, lambda rng, c: mutate(rng, c, HOSTLIST_TOKENS, longest=600))
    size = 1 << 23
    out, err = ctypes.create_string_buffer(size), ctypes.create_string_buffer(512)

    def call(data):
        rc = lib.lib.rt_hostlist_text(data, out, size, err, 512)
        return [rc, text(err.value)] if rc else [0, hashlib.sha256(out.value).hexdigest()]

    outcomes = in_child(cases, call)
    assert {o[0] for o in outcomes} <= {0, -1}
    differ = [(c, o, _python_expand(c)) for c, o in zip(cases, outcomes) if o != _python_expand(c)]
    assert not differ, differ[:3]


TASKS = [b"1", b"2(x3),1", b"4,4", b"1(x4)", b"65536", b"1(x2),2(x1)"]


def test_task_counts_end_ok_or_refused(lib):
    cases = corpus(4, TASKS, CASES, lambda rng, c: mutate(rng, c, (b"(x", b")", b",", b"(x65536)"), longest=600))
    counts, nodes, err = (ctypes.c_int64 * 16)(), ctypes.c_int64(), ctypes.create_string_buffer(512)

    def call(data):
        rc = lib.lib.rt_tasks_per_node(data, counts, 16, ctypes.byref(nodes), err, 512)
        return [rc, text(err.value) if rc else str(list(counts)[:min(16, nodes.value)])]

    outcomes = in_child(cases, call)
    assert {o[0] for o in outcomes} <= {0, -1}
    assert outcomes[:len(TASKS)] == [[0, "[1]"], [0, "[2, 2, 2, 1]"], [0, "[4, 4]"], [0, "[1, 1, 1, 1]"],
                                      [0, "[65536]"], [0, "[1, 1, 2]"]]


class Names(ctypes.Structure):
    _fields_ = [("text", ctypes.c_void_p), ("used", ctypes.c_size_t), ("cap", ctypes.c_size_t),
                ("count", ctypes.c_int64)]


HOSTFILES = [b"node1 slots=2\nnode2\n", b"# the job's hosts\nn1 slots=4 # four\n\nn2\tslots=1\nn1\n", b"a\n"]


def test_hostfiles_end_ok_or_refused(lib, tmp_path):
    cases = corpus(5, HOSTFILES, CASES, lambda rng, c: mutate(rng, c, (b" slots=", b"#", b"slots=65536", b"\t")))
    path = tmp_path / "hostfile"
    err = ctypes.create_string_buffer(512)

    def call(data):
        path.write_bytes(data)
        names = Names()
        rc = lib.lib.rt_hostfile_read(str(path).encode(), ctypes.byref(names), err, 512)
        count = names.count
        lib.lib.rt_names_free(ctypes.byref(names))
        return [rc, text(err.value) if rc else str(count)]

    outcomes = in_child(cases, call)
    assert {o[0] for o in outcomes} <= {0, -1}
    assert outcomes[:len(HOSTFILES)] == [[0, "3"], [0, "6"], [0, "1"]]
    assert [c for c, o in zip(cases, outcomes) if b"\0" in c and o[0] == 0] == []  # a NUL byte is refused


# -- key files -----------------------------------------------------------------------------

KEYS = [bytes(range(32)), bytes(range(256)) * 16, b"\0" * 64, b"\xff" * 4096]
MODES = (0o600, 0o400, 0o700, 0o640, 0o604, 0o644, 0o200)


def test_key_files_are_read_exactly_when_private_and_32_to_4096_bytes(lib, tmp_path):
    cases = corpus(6, [(k, 0o600) for k in KEYS], CASES,
                   lambda rng, c: (mutate(rng, c[0]), c[1] if rng.random() < 0.7 else rng.choice(MODES)))
    path = tmp_path / "run.key"

    def call(case):
        data, mode = case
        path.unlink(missing_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
        rt = lib.owner(1, "peers", "out", "--key", str(path))
        return refusal(lib, rt, lib.lib.rt_read_key(rt))

    outcomes = in_child(cases, call)
    assert_outcomes(outcomes, {"ok", "key-file"})
    want = ["ok" if 32 <= len(d) <= 4096 and not m & 0o077 else "key-file" for d, m in cases]
    assert [o[0] for o in outcomes] == want


# -- frames --------------------------------------------------------------------------------

KEY = bytes(range(32))
LEN = 3  # a combine value of the fixture's protocol: k sums and the count


def _frames(lib) -> list:
    """(keyed, hello, frame): a combine value from owner 0 and a hello from owner 3, each
    untagged and tagged under KEY."""
    value = fr.Frame(lib.protocol, 0, 1, 3, 5, fr.COMBINE, (11, 12, 2))
    return [(keyed, f.kind == fr.HELLO, f) for keyed in (False, True) for f in (value, fr.hello(lib.protocol, 3, 1, 5))]


def _frame_case(rng: random.Random, case: tuple) -> tuple:
    """A frame's bytes mutated, or its payload mutated and the frame sealed again."""
    keyed, hello, f = case
    key = KEY if keyed else None
    return keyed, hello, mutate(rng, f.encode(key=key), longest=2000) if rng.random() < 0.7 else resealed(rng, f, key)


def test_frames_end_ok_or_refused(lib, tmp_path):
    valid = [(keyed, hello, f.encode(key=KEY if keyed else None)) for keyed, hello, f in _frames(lib)]
    cases = corpus(7, valid, CASES, lambda rng, c: _frame_case(rng, _frames(lib)[valid.index(c)]))
    key = tmp_path / "run.key"
    key.write_bytes(KEY)
    key.chmod(0o600)

    def call(case):
        keyed, hello, data = case
        a, b = socket.socketpair()
        rt = lib.owner(1, "peers", "out", "--timeout-ms", "2000", *(("--key", str(key)) if keyed else ()))
        if keyed:
            assert lib.lib.rt_read_key(rt) == 0
        if hello:
            lib.lib.rt_attach(rt, 3, -1, 1)
        else:
            lib.lib.rt_attach(rt, 0, a.fileno(), 0)
        b.sendall(data)
        b.shutdown(socket.SHUT_WR)
        length = wire.HELLO_WORDS if hello else LEN
        buf = np.zeros(wire.HEADER_WORDS + length + 1 + wire.TAG_WORDS, dtype=np.uint64)
        rc = lib.lib.rt_recv_frame(rt, a.fileno(), -1 if hello else 0, fr.HELLO if hello else fr.COMBINE,
                                   0 if hello else 3, 0 if hello else 5, buf.ctypes.data_as(ctypes.c_void_p),
                                   length, None, None)
        a.close()
        b.close()
        return refusal(lib, rt, rc)

    outcomes = in_child(cases, call)
    assert_outcomes(outcomes, {"ok", "peer-closed"} | {c for c in CODES if c.startswith("frame-")})
    assert outcomes[:len(valid)] == [["ok", ""]] * len(valid)


def _segment(name: str) -> tuple[int, int, int]:
    """A shared-memory segment as an owner makes one (docs/runtime.md, "Transports"): its
    device, inode and size."""
    fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT, 0o600)
    size = wire.SHM_HEADER_BYTES + 2 * wire.SHM_RING_MIN
    os.ftruncate(fd, size)
    os.pwrite(fd, struct.pack("<3Q", wire.SHM_MAGIC, size, wire.SHM_RING_MIN), 0)
    st = os.fstat(fd)
    os.close(fd)
    return st.st_dev, st.st_ino, size


def test_shared_memory_offers_end_ok_or_refused(lib):
    """Owner 1 answers owner 0's offer of a segment (a transport frame naming it), mutated;
    the segment's name is linked to it again for every case (a mapped one is unlinked)."""
    name = f"{wire.SHM_PREFIX}{os.getpid()}-fuzz"
    path, kept = Path(f"/dev/shm/{name}"), Path(f"/dev/shm/{name}-kept")
    boot = fr.boot_id_words(Path("/proc/sys/kernel/random/boot_id").read_text())
    offer = fr.transport(lib.protocol, 0, 1, boot, "offer", _segment(name), f"/{name}".encode())
    os.link(path, kept)
    declined = fr.transport(lib.protocol, 0, 1, boot, "declined", (13, 0, 0))
    valid = [offer, declined]
    cases = corpus(9, [f.encode() for f in valid], CASES, lambda rng, c: resealed(rng, rng.choice(valid))
                   if rng.random() < 0.7 else mutate(rng, c, longest=600))

    def call(data):
        if not path.exists():
            os.link(kept, path)
        a, b = socket.socketpair()
        rt = lib.owner(1, "peers", "out", "--timeout-ms", "2000")
        lib.lib.rt_attach(rt, 0, a.fileno(), 0)
        b.sendall(data)
        b.shutdown(socket.SHUT_WR)
        rc = lib.lib.rt_shm_answer(rt, 0)
        a.close()
        b.close()
        return refusal(lib, rt, rc)

    try:
        outcomes = in_child(cases, call)
    finally:
        path.unlink(missing_ok=True)
        kept.unlink()
    assert_outcomes(outcomes, {"ok", "peer-closed", "shm-segment"} | {c for c in CODES if c.startswith("frame-")})
    assert outcomes[:2] == [["ok", ""], ["ok", ""]]


# -- checkpoints, restored by an executable ------------------------------------------------

FIXTURE = CKPT / "lsq-star-v2"
CKPT_TOKENS = (b"\nmanifest 1 manifest-1.txt ", b"\nfragment 0 state 152 1 ", b"0+0x2", b"0+1x999999999999",
               b"\nshard 0 shard-0.bin 160 ", b"\nversion 2", b"\nidentity ", b" -", b",0+1x1", b"\nauth none",
               b"\nauth hmac-sha256 " + b"0" * 64, b"\ninputs ")
CKPT_KEY = bytes(range(100, 132))  # the checkpoint key of the keyed cases


@pytest.fixture(scope="module")
def restore_exe(tmp_path_factory) -> Path:
    plan = driver.plan(driver.deployment(str(CKPT / "lsq-star.alpha")))
    return driver.build(plan, "coordinator", "x86_64", tmp_path_factory.mktemp("fuzz-exe"), sanitize=SANITIZE)


def signed(body: bytes) -> bytes:
    from alphac.checkpoint.manifest import with_trailer

    return with_trailer(body)


def tagged(body: bytes) -> bytes:
    """The body with its auth line (if any) the tag under CKPT_KEY of every byte before it."""
    from alphac.checkpoint.manifest import checkpoint_key

    at = body.rfind(b"\nauth ")
    if at < 0:
        return body
    head = body[:at + 1]
    return head + b"auth hmac-sha256 " + hmac.new(checkpoint_key(CKPT_KEY), head, "sha256").hexdigest().encode() + b"\n"


def _before_auth(body: bytes, line: bytes) -> bytes:
    at = body.rfind(b"\nauth ")
    return body[:at + 1] + line + body[at + 1:] if at >= 0 else body + line


def _shard_case(rng: random.Random, body: bytes, seal) -> dict:
    """A shard changed, and its manifest's lines made to agree with it (its size, its
    fragments' and its own sha256), so that the restore reads its header and words."""
    owner = rng.randrange(4)
    name = f"shard-{owner}.bin"
    data = mutate(rng, (FIXTURE / name).read_bytes(), longest=200)
    lines = body.split(b"\n")
    frags = [i for i, line in enumerate(lines) if line.startswith(b"fragment %d " % owner)]
    shas = []
    for i in frags:
        f = lines[i].split(b" ")
        offset, words = int(f[3]), int(f[4])
        shas.append(hashlib.sha256(data[offset:offset + 8 * words]).hexdigest().encode())
        lines[i] = b" ".join([*f[:6], shas[-1]])
    head = data[:max(0, len(data) - 8 * sum(int(lines[i].split(b" ")[4]) for i in frags))]
    digest = hashlib.sha256(head + b"".join(bytes.fromhex(sha.decode()) for sha in shas)).hexdigest()
    lines = [f"shard {owner} {name} {len(data)} {digest}".encode() if line.startswith(b"shard %d " % owner)
             else line for line in lines]
    return {"manifest.txt": seal(b"\n".join(lines)), name: data}


def _checkpoint_case(rng: random.Random, _) -> tuple:
    """A damaged copy of the fixture: (keyed, {file name: bytes}). The root manifest
    changed (and signed again three times in four, so the items are read), a shard changed
    (its manifest's lines made to agree with it, or not), or a child manifest named with its
    right hash, itself a changed manifest signed again. A keyed case (one in three) is
    restored with --checkpoint-key, its root manifest signed with its tag made right (nine
    times in ten)."""
    root = (FIXTURE / "manifest.txt").read_bytes()
    body = root.rsplit(b"sha256 ", 1)[0]
    keyed = rng.random() < 1 / 3
    seal = (lambda b: signed(tagged(b))) if keyed and rng.random() < 0.9 else signed
    which = rng.random()
    if which < 0.6:
        changed = mutate(rng, body, CKPT_TOKENS, longest=5000)
        return keyed, {"manifest.txt": seal(changed) if rng.random() < 0.75 else mutate(rng, root, CKPT_TOKENS)}
    if which < 0.7:
        name = f"shard-{rng.randrange(4)}.bin"
        return keyed, {name: mutate(rng, (FIXTURE / name).read_bytes()), "manifest.txt": seal(body)}
    if which < 0.85:
        return keyed, _shard_case(rng, body, seal)
    owner = rng.randrange(4)
    child = signed(mutate(rng, body, CKPT_TOKENS) if rng.random() < 0.8 else body)
    line = f"manifest {owner} manifest-{owner}.txt {hashlib.sha256(child).hexdigest()}\n".encode()
    return keyed, {"manifest.txt": seal(_before_auth(body, line)), f"manifest-{owner}.txt": child}


def test_damaged_checkpoints_are_refused_by_the_restore(restore_exe, tmp_path):
    body = (FIXTURE / "manifest.txt").read_bytes().rsplit(b"sha256 ", 1)[0]
    cases = corpus(8, [(False, {}), (True, {"manifest.txt": signed(tagged(body))})], CASES, _checkpoint_case)
    key = tmp_path / "ckpt.key"
    key.write_bytes(CKPT_KEY)
    key.chmod(0o600)
    peers = tmp_path / "peers"
    base = 20000 + os.getpid() % 9000
    peers.write_text("".join(f"{o} 127.0.0.1:{base + o}\n" for o in range(4)))
    allowed = {c for c in CODES if c.startswith(("checkpoint-", "shard-coverage-", "numerical-"))}
    allowed |= {"connect-timeout", "io-error"}
    failures, codes = [], set()
    for i, (keyed, files) in enumerate(cases):
        d = tmp_path / f"case-{i}" / "ckpt-2"
        shutil.copytree(FIXTURE, d)
        for name, data in files.items():
            (d / name).write_bytes(data)
        try:
            done = subprocess.run([str(restore_exe), "--owner", "0", "--peers", str(peers), "--insecure",
                                   "--out", str(d.parent / "out"), "--resume", str(d), "--timeout-ms", "50",
                                   *(("--checkpoint-key", str(key)) if keyed else ())],
                                  capture_output=True, timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            failures.append((i, files, f"ran longer than {DEADLINE_S} s"))
            continue
        err = text(done.stderr)
        m = re.fullmatch(r"refused: ([a-z0-9-]+): [^\x00-\x1f\x7f]*\n", err)
        if done.returncode != 1 or not m or m.group(1) not in allowed:
            failures.append((i, files, f"exit {done.returncode}: {err[-2000:]}"))
        else:
            codes.add(m.group(1))
        shutil.rmtree(d.parent)
    assert not failures, failures[:2]
    assert "connect-timeout" in codes and "checkpoint-manifest" in codes, codes


# -- what the fuzzing found, kept as fixed inputs ------------------------------------------

def test_a_refusal_quoting_a_control_character_stays_one_line(lib):
    """A detail quoting an argument (or a file's text) printed its bytes: a newline in an
    argument split the refusal, and could forge a line after it."""
    rt = lib.new()
    rc = lib.parse(rt, "--owner", "1\n2", "--peers", "p", "--out", "o")
    assert lib.result(rt, rc) == ("usage", "--owner needs a non-negative integer, got '1?2' (try --help)")


@pytest.mark.parametrize("run_id", ["-1", "+12", " 12", "0x12", "12 ", "1" * 17, "0" * 16])
def test_a_run_id_is_hexadecimal_digits_only(lib, run_id):
    """strtoull took '-1' as ffffffffffffffff, and a sign, blanks or 0x before the digits."""
    rt = lib.new()
    rc = lib.parse(rt, "--owner", "1", "--peers", "p", "--out", "o", "--run-id", run_id)
    assert lib.result(rt, rc) == ("usage", f"--run-id needs a non-zero hexadecimal number of at most 16 digits, "
                                           f"got '{run_id}' (try --help)")


@pytest.mark.parametrize("flag,value", [("--owner", "+1"), ("--owner", " 1"), ("--updates", "+5"),
                                        ("--timeout-ms", "\t100"), ("--base-port", "+29000")])
def test_a_number_on_the_command_line_is_digits_only(lib, flag, value):
    """strtoll took a sign and blanks before the digits."""
    rt = lib.new()
    where = ("--peers", "p") if flag != "--base-port" else ("--nodelist", "a,b,c,d")
    rc = lib.parse(rt, "--owner", "1", *where, "--out", "o", flag, value)
    shown = value.replace("\t", "?")  # a control character prints as '?'
    assert lib.result(rt, rc) == ("usage", f"{flag} needs a non-negative integer, got '{shown}' (try --help)")


def test_an_engine_variable_is_digits_only(lib):
    def call(_):
        os.environ[wire.ENGINE_RANKS[0][0]] = "+1"
        rt = lib.new()
        return refusal(lib, rt, lib.parse(rt, "--peers", "p", "--out", "o"))

    assert in_child([0], call) == [["usage", "SLURM_PROCID='+1' is not a non-negative integer"]]


def test_an_executable_refuses_on_one_line_whatever_the_argument_holds(restore_exe):
    done = subprocess.run([str(restore_exe), "--bogus\nrefused: ok: \x1b[2K"], capture_output=True, timeout=DEADLINE_S)
    assert (done.returncode, done.stderr) == (2, b"refused: usage: unknown option '--bogus?refused: ok: ?[2K' "
                                                 b"(try --help)\n")


def test_a_nul_byte_in_a_peers_file_is_refused_naming_its_line(lib, tmp_path):
    """fgets ended the line at the NUL unseen: the rest of the line was ignored."""
    path = tmp_path / "peers"
    path.write_bytes(b"0 127.0.0.1:47000\n1 127.0.0.1:47001\0 tcp junk\n")
    rt = lib.owner(1, str(path), "out", "--insecure")
    assert lib.result(rt, lib.lib.rt_read_peers(rt)) == ("usage", f"peers file '{path}' line 2 holds a NUL byte")


def test_a_nul_byte_in_a_hostfile_is_refused_naming_its_line(lib, tmp_path):
    path = tmp_path / "hostfile"
    path.write_bytes(b"node1\0 slots=9\nnode2\n")
    names, err = Names(), ctypes.create_string_buffer(512)
    rc = lib.lib.rt_hostfile_read(str(path).encode(), ctypes.byref(names), err, 512)
    lib.lib.rt_names_free(ctypes.byref(names))
    assert (rc, err.value.decode()) == (-1, f"hostfile '{path}' line 1 holds a NUL byte")


def test_task_counts_past_every_owner_are_refused_before_any_host_is_repeated(lib):
    """SLURM_STEP_TASKS_PER_NODE '65536(x65536)' over 65536 nodes named 2^32 hosts, each
    appended (some 30 GB) before their count was compared with the owners'."""
    def call(_):
        if not SANITIZE:  # without the fix it runs out of this, not of the machine
            resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        os.environ.update({wire.SLURM_NODELIST: "n[1-65536]", wire.SLURM_TASKS_PER_NODE: "65536(x65536)"})
        rt = lib.new()
        rc = lib.parse(rt, "--owner", "1", "--base-port", "29000", "--out", "o", "--insecure")
        return refusal(lib, rt, rc or lib.lib.rt_select_owner(rt) or lib.lib.rt_read_peers(rt))

    assert in_child([0], call) == [["usage", "SLURM_STEP_NODELIST 'n[1-65536]' with SLURM_STEP_TASKS_PER_NODE "
                                             "'65536(x65536)' places 4294967296 owners; the deployment has 4"]]


@pytest.mark.parametrize("runs", ["+0+1x1", "\t0+1x1", "-0+1x1", "0+1x+1"])
def test_a_fragments_runs_are_digits_only_as_the_python_reader_reads_them(restore_exe, tmp_path, runs):
    """sscanf took a sign or blanks before a number: the restore read runs the Python reader
    (alphac inspect) refuses."""
    d = tmp_path / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    body = (FIXTURE / "manifest.txt").read_bytes().rsplit(b"sha256 ", 1)[0]
    (d / "manifest.txt").write_bytes(signed(body.replace(b" parameters 144 1 0+1x1 ", f" parameters 144 1 {runs} "
                                                                                   .encode())))
    peers = tmp_path / "peers"
    peers.write_text("".join(f"{o} 127.0.0.1:{20000 + os.getpid() % 9000 + o}\n" for o in range(4)))
    done = subprocess.run([str(restore_exe), "--owner", "0", "--peers", str(peers), "--insecure", "--out",
                           str(tmp_path / "out"), "--resume", str(d), "--timeout-ms", "50"], capture_output=True,
                          timeout=DEADLINE_S)
    assert (done.returncode, done.stderr.decode()) == (1, f"refused: checkpoint-manifest: {d / 'manifest.txt'}: "
                                                          "malformed runs of owner 0's fragment\n")


@pytest.mark.parametrize("which", ["peers", "hostfile"])
def test_a_fifo_without_a_writer_as_a_peers_file_or_hostfile_reads_as_empty(lib, tmp_path, which):
    """fopen(3) waited for a writer, before any deadline: the owner hung. (A pipe with a
    writer, such as --peers <(...), is read as before.)"""
    path = tmp_path / which
    os.mkfifo(path)

    def call(_):
        if which == "peers":
            rt = lib.owner(1, str(path), "out", "--insecure")
            return refusal(lib, rt, lib.lib.rt_read_peers(rt))
        names, err = Names(), ctypes.create_string_buffer(512)
        return [lib.lib.rt_hostfile_read(str(path).encode(), ctypes.byref(names), err, 512), err.value.decode()]

    want = ["usage", f"peers file '{path}' has no endpoint for owner 1"] if which == "peers" else \
        [-1, f"hostfile '{path}' names no host"]
    assert in_child([0], call) == [want]


def test_a_pipe_with_a_writer_is_read_as_a_peers_file(lib):
    def call(_):
        r, w = os.pipe()
        os.write(w, PEERS[0])
        os.close(w)
        rt = lib.owner(1, f"/dev/fd/{r}", "out", "--insecure")
        return refusal(lib, rt, lib.lib.rt_read_peers(rt))

    assert in_child([0], call) == [["ok", ""]]

"""The exchange primitive (rt_exchange) and the shared-memory transport, in-process: owners
1, 2 and 3 of specs/wide_star.alpha (1 MiB frames, far above a socket's buffer) connected
by socketpairs, over TCP and over rings negotiated as the executables negotiate them; an
all-to-all step that a serial send-then-receive would deadlock; adds on arrival; deadline
expiry; a peer that dies in the middle of a frame (a forked process, killed); offers of a
segment that is not what it claims; and the one-pass kernel of a received piece."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from alphac import wire
from alphac.testing import frames as fr

H = wire.HEADER_WORDS
OWNERS = (1, 2, 3)
B = 100_000  # words of each block: 800 KB, several socket buffers
SHM = Path("/dev/shm")


def ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


def register(len_: int) -> np.ndarray:
    return np.zeros(H + len_ + 1 + wire.TAG_WORDS, dtype=np.uint64)


def pattern(sender: int, receiver: int, n: int = B) -> np.ndarray:
    return (np.uint64(sender) << np.uint64(40)) | (np.uint64(receiver) << np.uint64(32)) | np.arange(n, dtype=np.uint64)


def _both(f, g):
    """f() and g() at once (two runtimes that talk to each other); their return values."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("f", f()))
    t.start()
    out["g"] = g()
    t.join(30)
    assert not t.is_alive()
    return out["f"], out["g"]


class Mesh:
    """Runtimes for `owners`, each pair connected by a socketpair; the pairs in `shm`
    (lower, higher) then negotiate shared memory, the higher one offering (it connects in
    a run)."""

    def __init__(self, lib, owners=OWNERS, shm=(), timeout_ms=10000, key=None):
        self.lib = lib
        extra = ("--key", str(key)) if key else ()
        self.rts = {o: lib.owner(o, "peers", "out", "--timeout-ms", str(timeout_ms), *extra) for o in owners}
        for rt in self.rts.values():
            assert not key or lib.lib.rt_read_key(rt) == 0, lib.message(rt)
        self.socks = []
        for i, a in enumerate(owners):
            for b in owners[i + 1:]:
                sa, sb = socket.socketpair()
                self.socks += [sa, sb]
                lib.lib.rt_attach(self.rts[a], b, sa.fileno(), 0)
                lib.lib.rt_attach(self.rts[b], a, sb.fileno(), 0)
        for lo, hi in shm:
            got = _both(lambda: lib.lib.rt_shm_offer(self.rts[hi], lo),
                        lambda: lib.lib.rt_shm_answer(self.rts[lo], hi))
            assert got == (0, 0), [lib.message(self.rts[o]) for o in (hi, lo)]
            assert lib.lib.rt_link_shm(self.rts[lo], hi) and lib.lib.rt_link_shm(self.rts[hi], lo)

    def close(self):
        for s in self.socks:
            s.close()


def _fill(x, peer, send, buf, len_, step, add=None):
    """Point struct xfer `x` at `buf` (which the caller keeps alive while it is used)."""
    x.public.peer, x.public.send, x.public.buf, x.public.len = peer, send, buf.ctypes.data, len_
    x.public.kind, x.public.version, x.public.step = fr.COMBINE, 7, step
    x.public.add = ctypes.addressof(add) if add is not None else None


def all_to_all(mesh: Mesh, owners=OWNERS) -> dict:
    """Every owner sends block t to owner t and receives its block from every other owner,
    in one exchange each, all owners at once (threads). {owner: (rc, message, received)}"""
    lib, results = mesh.lib, {}

    def one(o):
        others = [t for t in owners if t != o]
        xs = lib.xfers(2 * len(others))
        keep = {}
        for i, t in enumerate(others):  # sends first: a serial exchange would block in them
            keep[("out", t)] = register(B)
            keep[("out", t)][H:H + B] = pattern(o, t)
            _fill(xs[i], t, 1, keep[("out", t)], B, 100 + o)
            keep[("in", t)] = register(B)
            _fill(xs[len(others) + i], t, 0, keep[("in", t)], B, 100 + t)
        rc = lib.lib.rt_exchange(mesh.rts[o], xs, len(xs))
        results[o] = (*lib.result(mesh.rts[o], rc), {t: keep[("in", t)][H:H + B].copy() for t in others})

    threads = [threading.Thread(target=one, args=(o,)) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "the exchange deadlocked"
    return results


def assert_every_block_arrives(mesh: Mesh) -> None:
    try:
        results = all_to_all(mesh)
    finally:
        mesh.close()
    for o, (code, msg, got) in results.items():
        assert (code, msg) == ("ok", ""), o
        for t, words in got.items():
            assert np.array_equal(words, pattern(t, o)), (o, t)


@pytest.mark.parametrize("shm", [(), ((1, 2), (1, 3), (2, 3)), ((1, 2),)], ids=["tcp", "shm", "mixed"])
def test_an_all_to_all_step_completes_with_every_block(widelib, shm):
    assert_every_block_arrives(Mesh(widelib, shm=shm))


def test_negotiated_segments_are_unlinked_at_once(widelib):
    mine = lambda: sorted(p.name for p in SHM.glob(f"{wire.SHM_PREFIX}{os.getpid()}-*"))  # noqa: E731
    before = mine()
    mesh = Mesh(widelib, owners=(1, 2), shm=((1, 2),))
    try:
        assert mine() == before
    finally:
        mesh.close()


@pytest.mark.parametrize("shm", [(), ((1, 2), (1, 3), (2, 3)), ((1, 2),)], ids=["tcp", "shm", "mixed"])
def test_in_an_authenticated_run_frames_over_tcp_are_tagged_and_frames_in_rings_not(widelib, tmp_path, shm):
    """The segment is authenticated when it is set up; its frames carry the plain magic and
    no tag, while every frame over TCP carries the tag (and verifies: the exchange is ok)."""
    key = tmp_path / "run.key"
    key.write_bytes(bytes(range(32)))
    key.chmod(0o600)
    assert_every_block_arrives(Mesh(widelib, shm=shm, key=key))
    # the magic of each received frame is in its register's header
    lib = widelib
    mesh = Mesh(lib, owners=(1, 2), shm=((1, 2),) if shm else (), key=key)
    try:
        out, into = register(B), register(B)
        out[H:H + B] = pattern(2, 1)
        sx, rx = lib.xfers(1), lib.xfers(1)
        _fill(sx[0], 1, 1, out, B, 5)
        _fill(rx[0], 2, 0, into, B, 5)
        rc = _both(lambda: lib.lib.rt_exchange(mesh.rts[2], sx, 1), lambda: lib.lib.rt_exchange(mesh.rts[1], rx, 1))
    finally:
        mesh.close()
    assert rc == (0, 0)
    assert int(into[0]) == (fr.MAGIC if shm else fr.MAGIC_AUTH)
    assert np.array_equal(into[H:H + B], pattern(2, 1))


@pytest.mark.parametrize("shm", [False, True], ids=["tcp", "shm"])
@pytest.mark.parametrize("mode", ["add", "mean"])
def test_a_receive_adds_or_takes_the_mean_on_arrival(widelib, shm, mode):
    """dst = a + (the words received), or the received words / 3 in their register, as the
    words arrive; over shared memory read where they lie in the ring."""
    mesh = Mesh(widelib, owners=(1, 2), shm=((1, 2),) if shm else ())
    rng = np.random.default_rng(3)
    sums = rng.standard_normal(B)
    a = rng.standard_normal(B)
    try:
        out = register(B)
        out[H:H + B] = sums.view(np.uint64)
        into = register(B)
        dst = np.zeros(B, dtype=np.float64) if mode == "add" else into[H:].view(np.float64)
        add = widelib.arrival(dst, a if mode == "add" else None, into[H:], B - 1, 3 if mode == "mean" else -1)
        sx, rx = widelib.xfers(1), widelib.xfers(1)
        _fill(sx[0], 1, 1, out, B, 5)
        _fill(rx[0], 2, 0, into, B, 5, add)
        rc = _both(lambda: widelib.lib.rt_exchange(mesh.rts[2], sx, 1),
                   lambda: widelib.lib.rt_exchange(mesh.rts[1], rx, 1))
    finally:
        mesh.close()
    assert rc == (0, 0)
    want = a[:B - 1] + sums[:B - 1] if mode == "add" else sums[:B - 1] / 3
    assert np.array_equal(dst[:B - 1].view(np.uint64), want.view(np.uint64))
    assert into[H + B - 1] == sums.view(np.uint64)[B - 1]  # the words not added are kept


@pytest.mark.parametrize("shm", [False, True], ids=["tcp", "shm"])
def test_an_exchange_past_its_deadline_refuses_naming_the_peer(widelib, shm):
    mesh = Mesh(widelib, owners=(1, 2), shm=((1, 2),) if shm else (), timeout_ms=150)
    try:
        xs = widelib.xfers(1)
        into = register(B)  # alive while the exchange writes into it
        _fill(xs[0], 2, 0, into, B, 5)
        t0 = time.monotonic()
        rc = widelib.lib.rt_exchange(mesh.rts[1], xs, 1)
        elapsed = time.monotonic() - t0
        got = widelib.result(mesh.rts[1], rc)
    finally:
        mesh.close()
    assert got == ("peer-timeout", "owner 1: reading from owner 2 took longer than 150 ms")
    assert 0.14 <= elapsed < 2.0


@pytest.mark.parametrize("shm", [False, True], ids=["tcp", "shm"])
def test_a_peer_that_dies_mid_frame_is_refused_at_once(widelib, shm):
    """Owner 2, a forked process, writes the start of a frame (its header and 2000 of its
    B words) and is killed: owner 1 refuses peer-closed long before its deadline, over TCP
    and over shared memory alike."""
    a, b = socket.socketpair()
    one = widelib.owner(1, "peers", "out", "--timeout-ms", "20000")
    widelib.lib.rt_attach(one, 2, a.fileno(), 0)
    head = fr.Frame(widelib.protocol, 2, 1, 7, 5, fr.COMBINE, ()).header(B)
    start = ctypes.create_string_buffer(struct.pack(f"<{H}Q", *head) + bytes(8 * 2000))
    pid = os.fork()
    if pid == 0:  # owner 2
        try:
            a.close()
            two = widelib.owner(2, "peers", "out", "--timeout-ms", "20000")
            widelib.lib.rt_attach(two, 1, b.fileno(), 0)
            if shm and widelib.lib.rt_shm_offer(two, 1) != 0:
                os._exit(3)
            if widelib.lib.rt_link_write(two, 1, start, len(start.raw)) == len(start.raw):
                os.kill(os.getpid(), signal.SIGSTOP)  # then killed
        finally:
            os._exit(4)
    b.close()
    try:
        if shm:
            assert widelib.lib.rt_shm_answer(one, 2) == 0, widelib.message(one)
        _, status = os.waitpid(pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status  # the start of the frame is written
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        xs = widelib.xfers(1)
        into = register(B)  # alive while the exchange writes into it
        _fill(xs[0], 2, 0, into, B, 5)
        t0 = time.monotonic()
        rc = widelib.lib.rt_exchange(one, xs, 1)
        elapsed = time.monotonic() - t0
        got = widelib.result(one, rc)
    finally:
        a.close()
    assert got == ("peer-closed", "owner 1: owner 2 closed the connection")
    assert elapsed < 1.0


# -- offers that are not what they claim -------------------------------------------------------

def _boot() -> tuple[int, int]:
    return fr.boot_id_words(Path("/proc/sys/kernel/random/boot_id").read_text())


def _answer(lib, offer: fr.Frame):
    """Owner 1 answers `offer` from owner 2 (played here): its refusal and the answer."""
    a, b = socket.socketpair()
    one = lib.owner(1)
    lib.lib.rt_attach(one, 2, a.fileno(), 0)
    try:
        b.sendall(offer.encode())
        rc = lib.lib.rt_shm_answer(one, 2)
        answer = fr.read_frame(b)
    finally:
        a.close()
        b.close()
    return lib.result(one, rc), answer, one


def _segment(tmp_name: str, mode: int) -> tuple[Path, tuple[int, int, int]]:
    path = SHM / tmp_name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
    os.fchmod(fd, mode)
    size = wire.SHM_HEADER_BYTES + 2 * wire.SHM_RING_MIN
    os.ftruncate(fd, size)
    os.write(fd, struct.pack("<3Q", wire.SHM_MAGIC, size, wire.SHM_RING_MIN))
    st = os.fstat(fd)
    os.close(fd)
    return path, (st.st_dev, st.st_ino, size)


MISMATCH = ("shm-segment", "owner 1: what owner 2's shared-memory segment name opens is not the segment "
                           "offered (another name, device, inode, owner, mode, size or control page)")


@pytest.mark.parametrize("change", ["mode", "inode", "size", "name"])
def test_an_offer_of_another_segment_is_refused(widelib, change):
    name = f"{wire.SHM_PREFIX}{os.getpid()}-test-{change}"
    path, ident = _segment(name, 0o644 if change == "mode" else 0o600)
    try:
        if change == "inode":
            ident = (ident[0], ident[1] + 1, ident[2])
        if change == "size":
            ident = (ident[0], ident[1], ident[2] * 2)
        offered = f"/{name}" if change != "name" else f"/{name}/../x"
        got, answer, _ = _answer(widelib, fr.transport(widelib.protocol, 2, 1, _boot(), "offer", ident,
                                                       offered.encode()))
    finally:
        path.unlink(missing_ok=True)
    assert got == MISMATCH
    assert answer.payload[2] == wire.TRANSPORT_STATUS["mismatch"]


def test_a_well_formed_offer_is_mapped_and_its_name_unlinked(widelib):
    name = f"{wire.SHM_PREFIX}{os.getpid()}-test-good"
    path, ident = _segment(name, 0o600)
    try:
        got, answer, one = _answer(widelib, fr.transport(widelib.protocol, 2, 1, _boot(), "offer", ident,
                                                         f"/{name}".encode()))
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)
    assert got == ("ok", "") and answer.payload[2] == wire.TRANSPORT_STATUS["mapped"]
    assert widelib.lib.rt_link_shm(one, 2)


def test_an_offer_from_another_host_is_declined(widelib):
    boot = _boot()
    got, answer, one = _answer(widelib, fr.transport(widelib.protocol, 2, 1, (boot[0] ^ 1, boot[1]), "offer",
                                                     (1, 2, 3), b"/alphac-1-x"))
    assert got == ("ok", "") and answer.payload[2] == wire.TRANSPORT_STATUS["declined"]
    assert not widelib.lib.rt_link_shm(one, 2)


# -- the kernel of a received piece ---------------------------------------------------------------

@pytest.mark.parametrize("n,phase", [(0, 0), (1, 3), (3, 1), (4, 0), (5, 2), (1000, 1), (4099, 3)])
def test_one_pass_adds_and_folds_the_lanes_as_frame_c_does(widelib, n, phase):
    rng = np.random.default_rng(n + phase)
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    dst = np.zeros(n)
    lanes = np.array([fr.FNV_OFFSET ^ j for j in range(wire.LANES)], dtype=np.uint64)
    want = lanes.copy()
    # rt_lanes folds payload words [phase, phase + n) of a payload whose word i is b's i - phase
    payload = np.concatenate([np.zeros(phase, dtype=np.uint64), b.view(np.uint64)])
    widelib.lib.rt_lanes(ptr(payload), phase, phase + n, ptr(want))
    bad = widelib.lib.alphac_add_lanes(ptr(dst), ptr(a), ptr(b), ptr(b), n, phase, ptr(lanes))
    assert bad == 0
    assert lanes.tolist() == want.tolist()
    assert np.array_equal(dst.view(np.uint64), (a + b).view(np.uint64))


@pytest.mark.parametrize("word", [np.inf, -np.inf, np.nan, 1e308])
def test_one_pass_flags_a_non_finite_operand_or_sum(widelib, word):
    a, b = np.ones(9), np.ones(9)
    b[6] = word
    a[6] = 1e308 if word == 1e308 else 1.0  # 1e308 + 1e308 overflows
    lanes = np.zeros(wire.LANES, dtype=np.uint64)
    assert widelib.lib.alphac_add_lanes(ptr(np.zeros(9)), ptr(a), ptr(b), ptr(b), 9, 0, ptr(lanes)) == 1


@pytest.mark.parametrize("count", [1, 3, 4, 6, 2**40])
@pytest.mark.parametrize("in_place", [False, True])
def test_the_mean_on_arrival_has_the_words_of_the_mean_pass(widelib, count, in_place):
    n, phase = 1237, 2
    rng = np.random.default_rng(count)
    src = rng.standard_normal(n) * 1e300
    src[5] = 5e-324  # a subnormal quotient
    want = src.copy()
    assert widelib.lib.alphac_mean(ptr(want), count, n) == -1
    lanes = np.array([fr.FNV_OFFSET ^ j for j in range(wire.LANES)], dtype=np.uint64)
    want_lanes = lanes.copy()
    payload = np.concatenate([np.zeros(phase, dtype=np.uint64), src.view(np.uint64)])
    widelib.lib.rt_lanes(ptr(payload), phase, phase + n, ptr(want_lanes))
    dst = src if in_place else np.zeros(n)
    assert widelib.lib.alphac_mean_lanes(ptr(dst), ptr(src), n, phase, ptr(lanes), count) == 0
    assert np.array_equal(dst.view(np.uint64), want.view(np.uint64))
    assert lanes.tolist() == want_lanes.tolist()


@pytest.mark.parametrize("count,word", [(3, np.inf), (3, np.nan), (0, 1.0)])
def test_the_mean_on_arrival_flags_what_the_mean_pass_refuses(widelib, count, word):
    src = np.ones(40)
    src[33] = word
    lanes = np.zeros(wire.LANES, dtype=np.uint64)
    assert widelib.lib.alphac_mean_lanes(ptr(np.zeros(40)), ptr(src), 40, 0, ptr(lanes), count) == 1

"""Checksums, frame encoding and every frame refusal of the C runtime, in-process: the
runtime's end of a socketpair against alphac.testing.frames, the Python reference."""

from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np
import pytest

from alphac import wire
from alphac.testing import frames as fr

K = 2
LEN = K + 1  # a combine value: k sums and the count (the largest payload of this protocol)
MASK = (1 << 64) - 1


def words(values) -> np.ndarray:
    return np.ascontiguousarray(np.asarray([v & MASK for v in values], dtype=np.uint64))


def ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 1000, wire.SEND_CHUNK_WORDS + 5])
def test_checksum_equals_the_python_reference(rtlib, n):
    rng = np.random.default_rng(n)
    payload = rng.integers(0, 2**63, size=n, dtype=np.uint64) * np.uint64(3)
    header = words([fr.MAGIC, 0xABCDEF, 1, 0, 7, 3, fr.COMBINE, n])
    got = rtlib.lib.rt_checksum(ptr(header), ptr(payload), n)
    assert got == fr.frame_checksum(tuple(int(h) for h in header), tuple(int(w) for w in payload))


def test_lanes_fed_in_pieces_equal_one_pass(rtlib):
    rng = np.random.default_rng(5)
    payload = rng.integers(0, 2**63, size=1001, dtype=np.uint64)
    whole = words([fr.FNV_OFFSET ^ j for j in range(fr.LANES)])
    rtlib.lib.rt_lanes(ptr(payload), 0, len(payload), ptr(whole))
    for trial in range(20):
        cuts = sorted(rng.integers(0, len(payload), size=trial % 7).tolist())
        lanes = words([fr.FNV_OFFSET ^ j for j in range(fr.LANES)])
        for lo, hi in zip([0, *cuts], [*cuts, len(payload)]):
            rtlib.lib.rt_lanes(ptr(payload), lo, hi, ptr(lanes))
        assert lanes.tolist() == whole.tolist()
    assert rtlib.lib.rt_fnv(ptr(payload), 10, fr.FNV_OFFSET) == fr.fnv1a_words(payload[:10].tolist())


def _frame_buffer(payload) -> np.ndarray:
    buf = np.zeros(wire.HEADER_WORDS + len(payload) + 1, dtype=np.uint64)
    buf[wire.HEADER_WORDS:wire.HEADER_WORDS + len(payload)] = words(payload)
    return buf


@pytest.mark.parametrize("n", [0, 1, LEN, wire.SEND_CHUNK_WORDS, 2 * wire.SEND_CHUNK_WORDS + 3])
def test_sent_frames_decode_in_python(rtlib, pair, n):
    """Whole frames and chunked ones (longer than SEND_CHUNK_WORDS); a second send of the
    same register reuses the payload hash and is still correct."""
    fd, sock = pair
    rt = rtlib.owner(1)
    rtlib.lib.rt_attach(rt, 0, fd, 0)
    payload = list(range(1, n + 1))
    buf = _frame_buffer(payload)
    got = []
    reader = threading.Thread(target=lambda: got.extend(fr.read_frame(sock) for _ in range(2)))
    reader.start()
    for _ in range(2):
        assert rtlib.lib.rt_send_frame(rt, 0, fr.COMBINE, 4, 9, ptr(buf), n, 1) == 0
    reader.join(10)
    assert len(got) == 2
    for f in got:
        assert (f.protocol, f.sender, f.receiver, f.version, f.step, f.kind) == (
            rtlib.protocol, 1, 0, 4, 9, fr.COMBINE)
        assert list(f.payload) == payload


def _good(rtlib, **changes) -> fr.Frame:
    f = fr.Frame(rtlib.protocol, 0, 1, 3, 5, fr.COMBINE, (11, 12, 2))
    return fr.Frame(**{**f.__dict__, **changes})


def _recv(rtlib, pair, data: bytes, *extra, peer=0, kind=fr.COMBINE, length=LEN, close=False):
    """What owner 1's runtime makes of `data` arriving from `peer` (-1: a hello)."""
    fd, sock = pair
    rt = rtlib.owner(1, "peers", "out", *extra)
    if peer >= 0:
        rtlib.lib.rt_attach(rt, peer, fd, 0)
    sock.sendall(data)
    if close:
        sock.shutdown(2)
    buf = np.zeros(wire.HEADER_WORDS + length + 1, dtype=np.uint64)
    sender = ctypes.c_int64(-9)
    rc = rtlib.lib.rt_recv_frame(rt, fd, peer, kind, 3 if kind == fr.COMBINE else 0,
                                 5 if kind == fr.COMBINE else 0, ptr(buf), length, None,
                                 ctypes.byref(sender))
    return rtlib.result(rt, rc), sender.value, buf, rt


WHO = "owner 1: frame from owner 0: "


def test_an_intact_frame_is_received_with_its_payload(rtlib, pair):
    (code, msg), sender, buf, _ = _recv(rtlib, pair, _good(rtlib).encode())
    assert (code, msg, sender) == ("ok", "", 0)
    assert buf[wire.HEADER_WORDS:wire.HEADER_WORDS + LEN].tolist() == [11, 12, 2]


def defects(rtlib):
    p = rtlib.protocol
    return {
        "frame-magic": (dict(magic=0x1234), WHO + f"magic 0x{0x1234:016x}, expected 0x{fr.MAGIC:016x}"),
        "frame-protocol": (dict(protocol=p ^ 1), WHO + f"protocol 0x{p ^ 1:016x}, expected 0x{p:016x} "
                                                       "(another plan, topology or contract)"),
        "frame-sender": (dict(sender=2), "owner 1: frame names sender 2, expected owner 0"),
        "frame-receiver": (dict(receiver=3), WHO + "addressed to owner 3"),
        "frame-version": (dict(version=2), WHO + "version 2, expected 3"),
        "frame-step": (dict(step=4), WHO + "step 4, expected 5"),
        "frame-kind": (dict(kind=fr.DIGEST), WHO + f"kind {fr.DIGEST}, expected {fr.COMBINE}"),
        "frame-length": (dict(payload=(11, 2)), WHO + f"2 payload words, expected {LEN}"),
        "frame-checksum": (dict(checksum=0xDEADBEEF), None),
    }


UNKEYED = [c for c in wire.FRAME_CHECKS if c != "frame-auth"]  # tags: test_rt_auth.py


@pytest.mark.parametrize("code", [c for c in UNKEYED if c != "frame-oversized"])
def test_each_defect_is_refused_by_its_code_and_message(rtlib, pair, code):
    change, message = defects(rtlib)[code]
    frame = _good(rtlib, **change)
    (got, msg), _, _, _ = _recv(rtlib, pair, frame.encode())
    if code == "frame-checksum":
        message = WHO + f"checksum 0x{0xDEADBEEF:016x}, computed 0x{_good(rtlib).correct_checksum():016x}"
    assert (got, msg) == (code, message)


def test_an_oversized_frame_is_refused_before_its_payload_arrives(rtlib, pair):
    """Only the header is sent, claiming 2^40 words: the receiver must not wait for them."""
    head = _good(rtlib).header(1 << 40)
    (got, msg), _, _, _ = _recv(rtlib, pair, struct.pack("<8Q", *head))
    assert (got, msg) == ("frame-oversized", WHO + f"{1 << 40} payload words, this protocol allows "
                                                   f"at most {rtlib.max_payload}")


@pytest.mark.parametrize("first,second", list(zip(UNKEYED, UNKEYED[1:])))
def test_checks_run_in_the_order_of_the_wire_table(rtlib, pair, first, second):
    table = defects(rtlib)
    table["frame-oversized"] = (dict(), None)
    change = {**table[second][0], **table[first][0]}
    frame = _good(rtlib, **{k: v for k, v in change.items() if k != "payload"})
    length = 1 << 40 if "frame-oversized" in (first, second) else None
    if "payload" in change and length is None:
        frame = fr.Frame(**{**frame.__dict__, "payload": change["payload"]})
    data = frame.encode(length) if length is None else struct.pack("<8Q", *frame.header(length))
    (got, _), _, _, _ = _recv(rtlib, pair, data)
    assert got == first


def test_a_closed_connection_and_a_silent_peer_are_refused(rtlib, pair):
    (got, msg), _, _, _ = _recv(rtlib, pair, _good(rtlib).encode()[:30], close=True)
    assert (got, msg) == ("peer-closed", "owner 1: owner 0 closed the connection")


def test_a_silent_peer_times_out(rtlib, pair):
    fd, sock = pair
    rt = rtlib.owner(1, "peers", "out", "--timeout-ms", "150")
    rtlib.lib.rt_sockopts(rt, fd)
    rtlib.lib.rt_attach(rt, 0, fd, 0)
    buf = np.zeros(wire.HEADER_WORDS + LEN + 1, dtype=np.uint64)
    rc = rtlib.lib.rt_recv_frame(rt, fd, 0, fr.COMBINE, 3, 5, ptr(buf), LEN, None, None)
    assert rtlib.result(rt, rc) == ("peer-timeout", "owner 1: reading from owner 0 took longer than 150 ms")


# -- hello ---------------------------------------------------------------------------------

def _hello(rtlib, pair, sender: int, expect=(3,), connected=(), **changes):
    fd, sock = pair
    rt = rtlib.owner(1)
    for p in expect:
        rtlib.lib.rt_attach(rt, p, -1, 1)
    for p in connected:
        rtlib.lib.rt_attach(rt, p, 99, 1)
    f = fr.Frame(**{**fr.hello(rtlib.protocol, sender, 1, 5).__dict__, **changes})
    sock.sendall(f.encode())
    buf = np.zeros(wire.HEADER_WORDS + wire.HELLO_WORDS + 1, dtype=np.uint64)
    who = ctypes.c_int64(-9)
    rc = rtlib.lib.rt_recv_frame(rt, fd, -1, fr.HELLO, 0, 0, ptr(buf), wire.HELLO_WORDS, None,
                                 ctypes.byref(who))
    return rtlib.result(rt, rc), who.value


def test_a_hello_from_an_expected_peer_names_the_connection(rtlib, pair):
    assert _hello(rtlib, pair, 3) == (("ok", ""), 3)


@pytest.mark.parametrize("sender,connected", [(2, ()), (3, (3,)), (99, ()), (1, ())])
def test_a_hello_from_no_peer_still_expected_is_refused(rtlib, pair, sender, connected):
    (code, msg), _ = _hello(rtlib, pair, sender, connected=connected)
    assert (code, msg) == ("frame-sender", f"owner 1: a hello names sender {sender}, not a peer still "
                                           "expected to connect")


def test_a_hello_with_a_bad_magic_names_the_sender_it_claims(rtlib, pair):
    (code, msg), _ = _hello(rtlib, pair, 3, magic=7)
    assert (code, msg) == ("frame-magic", f"owner 1: frame from owner 3: magic 0x{7:016x}, expected "
                                          f"0x{fr.MAGIC:016x}")

"""Authenticated frames in the C runtime, in-process: the key file's checks, and frames
tagged with HMAC-SHA-256 under the run's key (the seq-0 frame of a connection, a hello's
position) accepted only with the right key, tag and sequence number."""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
import pytest

from alphac import wire
from alphac.testing import frames as fr

KEY = bytes(range(32))
LEN = 3


def _key_file(tmp_path, data=KEY, mode=0o600):
    path = tmp_path / "run.key"
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _keyed(rtlib, tmp_path, **kw):
    rt = rtlib.owner(1, "peers", "out", "--key", str(_key_file(tmp_path, **kw)))
    return rt, rtlib.result(rt, rtlib.lib.rt_read_key(rt))


def test_a_private_key_file_is_read(rtlib, tmp_path):
    assert _keyed(rtlib, tmp_path)[1] == ("ok", "")


@pytest.mark.parametrize("kw,message", [
    (dict(mode=0o644), "has mode 0644; it must be private to its owner (chmod 600)"),
    (dict(mode=0o640), "has mode 0640; it must be private to its owner (chmod 600)"),
    (dict(data=b"short"), "holds 5 bytes; a key is 32 to 4096 bytes"),
    (dict(data=b"x" * 4097), "holds 4097 bytes; a key is 32 to 4096 bytes"),
])
def test_an_unsafe_or_malformed_key_file_is_refused(rtlib, tmp_path, kw, message):
    _, (code, msg) = _keyed(rtlib, tmp_path, **kw)
    assert (code, msg) == ("key-file", f"the key file '{tmp_path / 'run.key'}' {message}")


def test_a_missing_key_file_or_a_link_to_one_is_refused(rtlib, tmp_path):
    for path in (tmp_path / "absent", tmp_path / "link"):
        if path.name == "link":
            path.symlink_to(_key_file(tmp_path))
        rt = rtlib.owner(1, "peers", "out", "--key", str(path))
        code, msg = rtlib.result(rt, rtlib.lib.rt_read_key(rt))
        assert code == "key-file" and msg.startswith(f"cannot open the key file '{path}'"), msg


def test_a_fifo_as_the_key_file_is_refused_without_waiting_for_a_writer(rtlib, tmp_path):
    fifo = tmp_path / "run.key"
    os.mkfifo(fifo, 0o600)
    rt = rtlib.owner(1, "peers", "out", "--key", str(fifo))
    got = []
    reader = threading.Thread(target=lambda: got.append(rtlib.lib.rt_read_key(rt)), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # it blocked in open(2): give it a writer so that the thread ends
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        reader.join(10)
        pytest.fail("reading a FIFO as the key file blocked until a writer came")
    assert rtlib.result(rt, got[0]) == ("key-file", f"the key file '{fifo}' is not a regular file")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_key_file_of_another_user_is_refused(rtlib, tmp_path):
    path = _key_file(tmp_path)
    os.chown(path, 65534, 65534)
    rt = rtlib.owner(1, "peers", "out", "--key", str(path))
    assert rtlib.result(rt, rtlib.lib.rt_read_key(rt)) == (
        "key-file", f"the key file '{path}' belongs to uid 65534; it must be this user's (uid 0) or root's")


def _frame(rtlib, **changes):
    f = fr.Frame(rtlib.protocol, 0, 1, 3, 5, fr.COMBINE, (11, 12, 2))
    return fr.Frame(**{**f.__dict__, **changes})


def _receive(rtlib, tmp_path, pair, *datas):
    """Owner 1, keyed, receives each of `datas` in turn from owner 0; the results."""
    fd, sock = pair
    rt, _ = _keyed(rtlib, tmp_path)
    rtlib.lib.rt_attach(rt, 0, fd, 0)
    out = []
    for data in datas:
        sock.sendall(data)
        buf = np.zeros(wire.HEADER_WORDS + LEN + 1 + wire.TAG_WORDS, dtype=np.uint64)
        rc = rtlib.lib.rt_recv_frame(rt, fd, 0, fr.COMBINE, 3, 5, buf.ctypes.data_as(ctypes.c_void_p), LEN,
                                     None, None)
        out.append(rtlib.result(rt, rc))
        if rc:
            break
    return out


WHO = "owner 1: frame from owner 0: "


def test_a_frame_tagged_with_the_run_key_is_accepted(rtlib, tmp_path, pair):
    assert _receive(rtlib, tmp_path, pair, _frame(rtlib).encode(key=KEY)) == [("ok", "")]


def test_an_untagged_frame_in_an_authenticated_run_is_refused(rtlib, tmp_path, pair):
    assert _receive(rtlib, tmp_path, pair, _frame(rtlib).encode()) == [
        ("frame-auth", WHO + "no authentication tag (the peer runs without a key)")]


def test_a_tagged_frame_without_a_key_is_refused(rtlib, pair):
    fd, sock = pair
    rt = rtlib.owner(1)
    rtlib.lib.rt_attach(rt, 0, fd, 0)
    sock.sendall(_frame(rtlib).encode(key=KEY))
    buf = np.zeros(wire.HEADER_WORDS + LEN + 1 + wire.TAG_WORDS, dtype=np.uint64)
    rc = rtlib.lib.rt_recv_frame(rt, fd, 0, fr.COMBINE, 3, 5, buf.ctypes.data_as(ctypes.c_void_p), LEN, None, None)
    assert rtlib.result(rt, rc) == ("frame-auth", WHO + "authenticated, and this owner runs without --key")


def _retagged(rtlib, frame_words, tag_words) -> bytes:
    return b"".join((w & (2**64 - 1)).to_bytes(8, "little") for w in (*frame_words, *tag_words))


@pytest.mark.parametrize("case", ["another key", "a changed payload", "a replay"])
def test_a_forged_or_replayed_frame_is_refused(rtlib, tmp_path, pair, case):
    good = _frame(rtlib, magic=fr.MAGIC_AUTH)
    tag = fr.frame_tag(KEY, 0, good.words())
    if case == "another key":
        datas = [_frame(rtlib).encode(key=os.urandom(32))]
    elif case == "a changed payload":
        # the checksum is right for the new payload; only the tag gives it away
        datas = [_retagged(rtlib, _frame(rtlib, magic=fr.MAGIC_AUTH, payload=(11, 13, 2)).words(), tag)]
    else:
        datas = [good.encode(key=KEY), good.encode(key=KEY)]  # the second arrives as frame 1
    got = _receive(rtlib, tmp_path, pair, *datas)
    seq = 1 if case == "a replay" else 0
    assert got[-1] == ("frame-auth", WHO + f"the authentication tag of frame {seq} does not verify "
                                           "(another key, or a forged or replayed frame)")


def test_the_checksum_is_checked_before_the_tag(rtlib, tmp_path, pair):
    bad = _frame(rtlib, magic=fr.MAGIC_AUTH, checksum=7)
    (code, _), = _receive(rtlib, tmp_path, pair, _retagged(rtlib, bad.words(), (1, 2, 3, 4)))
    assert code == "frame-checksum"

"""Publication by the C runtime, in-process: PATH.tmp written, fsynced, linked to PATH,
never overwriting; the output file read back by alphac.launch.results."""

from __future__ import annotations

import ctypes
import os

from alphac.launch.results import read_result


def _publish(rtlib, path, *chunks: bytes):
    rt = rtlib.owner(1)
    sizes = (ctypes.c_size_t * len(chunks))(*(len(c) for c in chunks))
    keep = [ctypes.c_char_p(c) for c in chunks]  # alive during the call
    bufs = (ctypes.c_void_p * len(chunks))(*(ctypes.cast(k, ctypes.c_void_p) for k in keep))
    return rtlib.result(rt, rtlib.lib.rt_publish(rt, str(path).encode(), bufs, sizes, len(chunks)))


def test_publish_writes_every_piece_and_leaves_no_temporary(rtlib, tmp_path):
    out = tmp_path / "o"
    assert _publish(rtlib, out, b"abc", b"", b"defg") == ("ok", "")
    assert out.read_bytes() == b"abcdefg"
    assert sorted(os.listdir(tmp_path)) == ["o"]


def test_an_existing_result_is_never_overwritten(rtlib, tmp_path):
    out = tmp_path / "o"
    out.write_bytes(b"keep")
    assert _publish(rtlib, out, b"new") == ("output-exists", f"'{out}' exists; results are never overwritten")
    assert out.read_bytes() == b"keep"
    assert sorted(os.listdir(tmp_path)) == ["o"]


def test_an_unwritable_location_is_an_io_error(rtlib, tmp_path):
    out = tmp_path / "missing" / "o"
    assert _publish(rtlib, out, b"x") == ("io-error", f"cannot create '{out}.tmp'")


def test_the_output_file_holds_the_owner_version_and_words(rtlib, tmp_path):
    out = tmp_path / "owner-2.out"
    rt = rtlib.owner(2, "peers", str(out), "--updates", "7")
    assert rtlib.lib.rt_alloc(rt) == 0
    assert rtlib.result(rt, rtlib.lib.rt_write_output(rt)) == ("ok", "")
    res = read_result(out)
    learner = rtlib.plan.deployment.learner
    assert (res.owner, res.version, res.protocol) == (2, 7, rtlib.protocol)
    assert res.params == learner.initial.as_tuple() and res.state == learner.initial_state.as_tuple()
    rt = rtlib.owner(2, "peers", str(out))
    assert rtlib.code(rtlib.lib.rt_refuse_if_exists(rt, str(out).encode())) == "output-exists"

"""Staged publication by the C runtime, in-process: PATH.tmp created O_EXCL|O_NOFOLLOW
(mode 0600) before any work, written and fsynced, linked to PATH only when published,
never overwriting; the output file read back by alphac.launch.results."""

from __future__ import annotations

import ctypes
import hashlib
import os
import stat

from alphac.launch.results import read_result


class Staged(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("tmp", ctypes.c_char_p), ("fd", ctypes.c_int),
                ("created", ctypes.c_int), ("dev", ctypes.c_uint64), ("ino", ctypes.c_uint64)]


def _stage(rtlib, path):
    rt, s = rtlib.owner(1), Staged()
    rc = rtlib.lib.rt_stage_create(rt, ctypes.byref(s), str(path).encode(), b"")
    return rt, s, rtlib.result(rt, rc)


def _write(rtlib, rt, s, *chunks: bytes):
    keep = [ctypes.c_char_p(c) for c in chunks]  # alive during the call
    bufs = (ctypes.c_void_p * len(chunks))(*(ctypes.cast(k, ctypes.c_void_p) for k in keep))
    sizes = (ctypes.c_size_t * len(chunks))(*(len(c) for c in chunks))
    digest = (ctypes.c_ubyte * 32)()
    rc = rtlib.lib.rt_stage_write(rt, ctypes.byref(s), bufs, sizes, len(chunks), digest)
    return rtlib.result(rt, rc), bytes(digest)


def test_staged_then_published_and_no_temporary_left(rtlib, tmp_path):
    out = tmp_path / "o"
    rt, s, res = _stage(rtlib, out)
    assert res == ("ok", "")
    tmp = tmp_path / "o.tmp"
    assert stat.S_IMODE(tmp.stat().st_mode) == 0o600 and not out.exists()
    assert _write(rtlib, rt, s, b"abc", b"", b"defg") == (("ok", ""), hashlib.sha256(b"abcdefg").digest())
    assert rtlib.result(rt, rtlib.lib.rt_stage_publish(rt, ctypes.byref(s))) == ("ok", "")
    assert out.read_bytes() == b"abcdefg"
    assert sorted(os.listdir(tmp_path)) == ["o"]


def test_an_output_the_root_has_published_already_is_finalized(rtlib, tmp_path):
    """The root of a run directory links every owner's staged output with its commit record
    and then removes the .tmp names: the owner's own "finalize" finds its file published,
    with its .tmp still there or gone."""
    for name, removed in (("kept", False), ("gone", True)):
        out = tmp_path / name
        rt, s, _ = _stage(rtlib, out)
        _write(rtlib, rt, s, b"words")
        os.link(tmp_path / f"{name}.tmp", out)
        if removed:
            os.unlink(tmp_path / f"{name}.tmp")
        assert rtlib.result(rt, rtlib.lib.rt_stage_publish(rt, ctypes.byref(s))) == ("ok", "")
        assert out.read_bytes() == b"words" and not (tmp_path / f"{name}.tmp").exists()
    assert sorted(os.listdir(tmp_path)) == ["gone", "kept"]


def test_a_discarded_stage_leaves_nothing(rtlib, tmp_path):
    rt, s, _ = _stage(rtlib, tmp_path / "o")
    rtlib.lib.rt_stage_discard(ctypes.byref(s))
    assert os.listdir(tmp_path) == []


def test_an_existing_result_is_never_overwritten(rtlib, tmp_path):
    out = tmp_path / "o"
    out.write_bytes(b"keep")
    _, _, res = _stage(rtlib, out)
    assert res == ("output-exists", f"'{out}' exists; results are never overwritten")
    assert out.read_bytes() == b"keep" and sorted(os.listdir(tmp_path)) == ["o"]


def test_a_result_appearing_while_staged_is_not_overwritten(rtlib, tmp_path):
    out = tmp_path / "o"
    rt, s, _ = _stage(rtlib, out)
    out.write_bytes(b"keep")
    assert rtlib.code(rtlib.lib.rt_stage_publish(rt, ctypes.byref(s))) == "output-exists"
    assert out.read_bytes() == b"keep"


def test_a_file_or_link_at_the_staged_path_is_refused_and_left_alone(rtlib, tmp_path):
    target = tmp_path / "precious"
    target.write_bytes(b"precious")
    (tmp_path / "a.tmp").symlink_to(target)
    (tmp_path / "b.tmp").symlink_to(tmp_path / "nowhere")
    (tmp_path / "c.tmp").write_bytes(b"other")
    for name in ("a", "b", "c"):
        _, _, (code, msg) = _stage(rtlib, tmp_path / name)
        assert code == "output-exists" and msg.startswith(f"'{tmp_path / name}.tmp' exists"), msg
    assert target.read_bytes() == b"precious" and (tmp_path / "c.tmp").read_bytes() == b"other"


def test_an_unwritable_location_is_an_io_error(rtlib, tmp_path):
    out = tmp_path / "missing" / "o"
    _, _, (code, msg) = _stage(rtlib, out)
    assert (code, msg) == ("io-error", f"cannot create '{out}.tmp' (No such file or directory)")


def test_the_output_file_holds_the_owner_version_and_words(rtlib, tmp_path):
    out = tmp_path / "owner-2.out"
    rt = rtlib.owner(2, "peers", str(out), "--updates", "7")
    assert rtlib.lib.rt_alloc(rt) == 0
    assert rtlib.result(rt, rtlib.lib.rt_open_outputs(rt)) == ("ok", "")
    assert rtlib.result(rt, rtlib.lib.rt_stage_output(rt)) == ("ok", "")
    assert rtlib.result(rt, rtlib.lib.rt_stage_publish(rt, rtlib.lib.rt_output(rt))) == ("ok", "")
    res = read_result(out)
    learner = rtlib.plan.deployment.learner
    assert (res.owner, res.version, res.protocol) == (2, 7, rtlib.protocol)
    assert res.params == learner.initial.as_tuple() and res.state == learner.initial_state.as_tuple()
    rt = rtlib.owner(2, "peers", str(out))
    assert rtlib.code(rtlib.lib.rt_refuse_if_exists(rt, str(out).encode())) == "output-exists"

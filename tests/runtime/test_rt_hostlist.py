"""The executables' hostlist parser (alphac/runtime/hostlist.c), in-process, on the table
of cases the emitters' parser is held to (tests/hostlist_cases.py)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostlist_cases import EXPANDS, REFUSED  # noqa: E402


def _expand(rtlib, text: str, size: int = 1 << 22):
    out = ctypes.create_string_buffer(size)
    err = ctypes.create_string_buffer(512)
    rc = rtlib.lib.rt_hostlist_text(text.encode(), out, size, err, 512)
    return (out.value.decode().splitlines(), "") if rc == 0 else (None, err.value.decode())


@pytest.mark.parametrize("text,hosts", EXPANDS)
def test_a_host_list_expands_as_slurm_expands_it(rtlib, text, hosts):
    assert _expand(rtlib, text) == (hosts, "")


@pytest.mark.parametrize("text,message", REFUSED)
def test_a_bad_host_list_is_refused_with_the_same_line_as_the_emitters(rtlib, text, message):
    assert _expand(rtlib, text) == (None, message)


def test_the_largest_list_is_accepted_whole(rtlib):
    hosts, _ = _expand(rtlib, "n[0-65535]")
    assert (len(hosts), hosts[0], hosts[-1]) == (65536, "n0", "n65535")

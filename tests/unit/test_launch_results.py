"""Owner output files: exact layout, and every malformation reported with the file name."""

import struct

import pytest

from alphac.launch.results import OUT_MAGIC, OwnerResult, ResultError, parse_result, read_result
from alphac.testing.outputs import encode_result


def test_magic_spells_alhaout1():
    assert struct.pack("<Q", OUT_MAGIC) == b"ALHAOUT1"


def test_round_trip_exact_words(tmp_path):
    r = OwnerResult(owner=3, version=5, protocol=0xABCDEF0123456789,
                    params=(0x3FF0000000000000, 0x8000000000000000), state=(0x1, 0x2, 0x3))
    data = encode_result(r)
    assert struct.unpack("<12Q", data) == (OUT_MAGIC, 1, 3, 5, 0xABCDEF0123456789, 2, 3,
                                           0x3FF0000000000000, 0x8000000000000000, 1, 2, 3)
    p = tmp_path / "o3.out"
    p.write_bytes(data)
    assert read_result(p) == r


def test_empty_state():
    r = OwnerResult(0, 0, 1, (7,), ())
    assert parse_result(encode_result(r)) == r


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d[:-1], "whole number of words"),
    (lambda d: d[:16], "short of the 7-word header"),
    (lambda d: struct.pack("<Q", 1) + d[8:], "magic"),
    (lambda d: d[:8] + struct.pack("<Q", 2) + d[16:], "format 2"),
    (lambda d: d + struct.pack("<Q", 0), "k + m = 3"),
])
def test_malformed_files_are_refused(mutate, fragment):
    data = encode_result(OwnerResult(0, 1, 2, (1, 2), (3,)))
    with pytest.raises(ResultError) as e:
        parse_result(mutate(data), "x.out")
    assert str(e.value).startswith("x.out: ")
    assert fragment in str(e.value)

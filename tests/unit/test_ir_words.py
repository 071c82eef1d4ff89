"""The one binary64 word <-> float conversion (alphac.ir.words) is exact both ways: every
bit pattern, NaN payloads and signed zeros included, comes back unchanged, and it agrees
with the numpy views the oracle's vector engines use."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, strategies as st

from alphac.ir import builders
from alphac.ir.words import to_bits, to_float

EDGES = [0, 1 << 63, 1, 0x000F_FFFF_FFFF_FFFF, 0x0010_0000_0000_0000, 0x3FF0_0000_0000_0000,
         0x7FEF_FFFF_FFFF_FFFF, 0x7FF0_0000_0000_0000, 0xFFF0_0000_0000_0000, 0x7FF8_0000_0000_0000,
         0x7FF0_0000_0000_0001, 0xFFFF_FFFF_FFFF_FFFF, 0x7FF4_0000_DEAD_BEEF]


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_every_word_goes_to_a_float_and_back_unchanged(w):
    assert to_bits(to_float(w)) == w
    assert int(np.array([w], dtype=np.uint64).view(np.float64).view(np.uint64)[0]) == w


def test_the_edges_and_the_numpy_view_agree_bit_for_bit():
    for w in EDGES:
        x = to_float(w)
        assert to_bits(x) == w
        assert int(np.float64(x).view(np.uint64)) == w or math.isnan(x)  # numpy may quiet a NaN
        assert np.array([w], dtype=np.uint64).view(np.float64)[0].tobytes() == w.to_bytes(8, "little")
    assert to_bits(-0.0) == 1 << 63 and to_bits(0.0) == 0
    assert to_float(0x3FB9_9999_9999_999A) == 0.1


@given(st.floats(allow_nan=False))
def test_a_float_is_its_word(x):
    assert to_float(to_bits(x)) == x and math.copysign(1.0, to_float(to_bits(x))) == math.copysign(1.0, x)
    assert to_bits(x) == int(np.float64(x).view(np.uint64))


def test_the_builders_short_names_are_the_same_conversion():
    assert builders.bits is to_bits and builders.flt is to_float
    assert builders.C(0.5).bits == 0x3FE0_0000_0000_0000

"""A binary64 word and its Python float, the one conversion each way: by the eight
little-endian bytes, so every bit (signed zeros, subnormals, infinities, NaN payloads)
goes across unchanged."""

from __future__ import annotations

import struct

_F64 = struct.Struct("<d")
_U64 = struct.Struct("<Q")


def to_bits(x: float) -> int:
    """The binary64 word of a float."""
    return _U64.unpack(_F64.pack(x))[0]


def to_float(w: int) -> float:
    """The float of a binary64 word (an int below 2**64)."""
    return _F64.unpack(_U64.pack(w))[0]

"""Binary64 words: bit patterns <-> floats, hex spelling and the per-owner digest."""

from __future__ import annotations

import hashlib
import struct

import numpy as np


def to_float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def to_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def floats(words) -> np.ndarray:
    """A float64 copy of a word vector (tuple of ints or uint64 array)."""
    return np.array(words, dtype=np.uint64).reshape(-1).view(np.float64)


def bits_of(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)


def hex_word(w: int) -> str:
    return f"{int(w):016x}"


def digest(params: np.ndarray, state: np.ndarray) -> str:
    """sha256 of the little-endian bytes of the parameter words, then the state words."""
    h = hashlib.sha256()
    h.update(np.asarray(params, dtype="<u8").tobytes())
    h.update(np.asarray(state, dtype="<u8").tobytes())
    return h.hexdigest()

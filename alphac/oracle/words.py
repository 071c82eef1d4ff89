"""Binary64 word vectors: bit patterns <-> float arrays, storage formats, hex spelling and the
per-owner digest (one word <-> one float: alphac.ir.words)."""

from __future__ import annotations

import hashlib

import numpy as np


def floats(words) -> np.ndarray:
    """A float64 copy of a word vector (tuple of ints or uint64 array)."""
    return np.array(words, dtype=np.uint64).reshape(-1).view(np.float64)


def bits_of(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)


def narrow32(values) -> np.ndarray:
    """Each value rounded to the nearest binary32 (ties to even, subnormals kept, overflow to
    infinity), widened back exactly: a binary32 operation's result, from the binary64 result
    of the same operation on binary32 operands (+ - * / and sqrt: 53 >= 2 * 24 + 2 bits, so
    the second rounding never differs from rounding the exact value once)."""
    with np.errstate(all="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64)


def storage_count(values: int, fmt: str) -> int:
    """How many words hold `values` values: each its own (binary64), two a word (binary32)."""
    return values if fmt == "binary64" else (values + 1) // 2


def storage_words(bits: np.ndarray, fmt: str) -> np.ndarray:
    """The words the executables hold for the values whose binary64 words are `bits`: the
    same words (binary64), or their float32 bytes two to a word, the odd last one padded
    with +0.0 (binary32)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint64).reshape(-1)
    if fmt == "binary64":
        return bits
    halves = np.zeros(2 * storage_count(bits.size, fmt), dtype="<f4")
    halves[:bits.size] = bits.view(np.float64)
    return halves.view("<u8").astype(np.uint64)


def storage_floats(words, count: int, fmt: str) -> np.ndarray:
    """The first `count` values held in the storage words `words`, as float64."""
    words = np.ascontiguousarray(np.asarray(words, dtype=np.uint64).reshape(-1), dtype="<u8")
    if fmt == "binary64":
        return words.view(np.float64)[:count].astype(np.float64)
    return words.view("<f4")[:count].astype(np.float64)


def hex_word(w: int) -> str:
    return f"{int(w):016x}"


def digest(params: np.ndarray, state: np.ndarray) -> str:
    """sha256 of the little-endian bytes of the parameter words, then the state words."""
    h = hashlib.sha256()
    h.update(np.asarray(params, dtype="<u8").tobytes())
    h.update(np.asarray(state, dtype="<u8").tobytes())
    return h.hexdigest()

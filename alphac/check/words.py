"""binary64 words at check time: literal parsing, exact constant arithmetic, loading word files.

Constant arithmetic uses Python floats, which are IEEE binary64 with round-to-nearest-even
and never fuse operations; a non-finite operand or result is reported, never produced.
"""

from __future__ import annotations

import math
import os
import stat
import struct

import numpy as np

EXP_MASK = 0x7FF0_0000_0000_0000
MAX_WORDS = 1 << 26  # the most words one word list or file may hold (512 MiB)


class WordError(Exception):
    """A problem with a word or a word file; `code` is a catalogue code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def value(word: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", word))[0]


def is_finite_word(word: int) -> bool:
    return (word & EXP_MASK) != EXP_MASK


def parse_literal(text: str) -> int:
    """The word of a decimal or hex-float literal (correctly rounded); WordError if non-finite."""
    try:
        number = float.fromhex(text) if text[:2] in ("0x", "0X") else float(text)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise WordError("non-finite-literal", f"{text} is not a finite binary64 number")
    return bits(number)


def from_nat(n: int) -> int:
    """f64(n): the exact binary64 value of a Nat, or WordError if it would round."""
    try:
        number = float(n)
    except OverflowError:
        raise WordError("inexact-conversion", f"{n} has no binary64 value") from None
    if int(number) != n:
        raise WordError("inexact-conversion",
                        f"{n} is not exactly representable in binary64 (nearest {number!r})")
    return bits(number)


def raw_word(n: int) -> int:
    if n >= 1 << 64:
        raise WordError("word-out-of-range", f"0x{n:x} does not fit in 64 bits")
    if not is_finite_word(n):
        raise WordError("non-finite-literal", f"word(0x{n:016X}) is not a finite binary64 number")
    return n


def apply(op: str, *words: int) -> int:
    """One binary64 operation on constant words; WordError(non-finite-constant) if not finite."""
    args = [value(w) for w in words]
    try:
        if op == "add":
            result = args[0] + args[1]
        elif op == "sub":
            result = args[0] - args[1]
        elif op == "mul":
            result = args[0] * args[1]
        elif op == "div":
            result = args[0] / args[1]
        elif op == "neg":
            result = -args[0]
        elif op == "sqrt":
            result = math.sqrt(args[0])
        else:
            raise AssertionError(op)
    except (ZeroDivisionError, ValueError, OverflowError):
        result = math.nan
    if not math.isfinite(result):
        raise WordError("non-finite-constant", f"{op} of these constants is not a finite binary64 number")
    return bits(result)


def load_words(path: str) -> np.ndarray:
    """A word file as little-endian uint64 words, in the file's shape: a `.npy` of float64
    (its shape kept, so that callers can check rows against a width) or raw little-endian
    binary64 (1-D). Raises WordError(load-file)."""
    try:
        if os.path.isdir(path):
            raise WordError("load-file", f"{path} is a directory")
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise WordError("load-file", f"{path} is not a regular file")
        size = info.st_size
        if size > MAX_WORDS * 8 + 4096:
            raise WordError("load-file", f"{path} has {size} bytes; at most {MAX_WORDS} words load")
        if path.endswith(".npy"):
            try:
                array = np.load(path, allow_pickle=False, mmap_mode=None)
            except (ValueError, EOFError) as exc:
                raise WordError("load-file", f"{path} is not a readable .npy file ({exc})") from None
            if array.dtype.kind == "f" and array.dtype.itemsize == 8:
                shape = array.shape
                flat = np.ascontiguousarray(array.astype("<f8", copy=False)).reshape(-1)
                return flat.view("<u8").astype(np.uint64).reshape(shape)
            if array.dtype.kind == "u" and array.dtype.itemsize == 8:
                # uint64 is ambiguous (integers to convert, or bit patterns?); refused rather
                # than guessed. Raw words load from a raw file or as word(...) literals.
                raise WordError("load-file", f"{path} holds uint64; a .npy of words holds float64 "
                                "(raw words load from a raw little-endian file)")
            raise WordError("load-file", f"{path} holds {array.dtype}; a .npy of words holds float64")
        if size % 8:
            raise WordError("load-file", f"{path} has {size} bytes, not a whole number of 8-byte words")
        return np.fromfile(path, dtype="<u8").astype(np.uint64)
    except FileNotFoundError:
        raise WordError("load-file", f"{path} does not exist") from None
    except OSError as exc:
        raise WordError("load-file", f"{path} cannot be read: {exc.strerror or exc}") from None


def shape_text(shape: tuple) -> str:
    """An array shape for a message: `3 x 2`, or `0-dimensional`."""
    return " x ".join(str(d) for d in shape) if shape else "0-dimensional"


def first_non_finite(words: np.ndarray) -> int:
    """The index of the first non-finite word, or -1."""
    bad = np.flatnonzero((words & np.uint64(EXP_MASK)) == np.uint64(EXP_MASK))
    return int(bad[0]) if bad.size else -1

"""binary64 words at check time: literal parsing, exact constant arithmetic, loading word files.

Constant arithmetic uses Python floats, which are IEEE binary64 with round-to-nearest-even
and never fuse operations; a non-finite operand or result is reported, never produced.
"""

from __future__ import annotations

import math
import os
import stat

import numpy as np

from alphac.ir.words import to_bits, to_float

EXP_MASK = 0x7FF0_0000_0000_0000
MAX_WORDS = 1 << 26  # the most words one word list or file may hold (512 MiB)


class WordError(Exception):
    """A problem with a word or a word file; `code` is a catalogue code, `notes` what the
    diagnostic adds (the files beside a missing one)."""

    def __init__(self, code: str, message: str, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.code = code
        self.message = message
        self.notes = notes


# How many of the files beside a missing one its diagnostic lists.
BESIDE_LISTED = 8


def missing_file(code: str, path: str) -> WordError:
    """`path does not exist`, with a did-you-mean among the files of its suffix beside it
    and a note listing some of them (or that there are none, or that its directory is
    missing)."""
    from alphac.diagnostics import hinted

    folder, name = os.path.split(path)
    try:
        beside = sorted(e.name for e in os.scandir(folder or ".") if e.is_file())
    except OSError:
        return WordError(code, f"{path} does not exist", (f"its directory {folder or '.'} does not exist",))
    suffix = os.path.splitext(name)[1]
    alike = [b for b in beside if os.path.splitext(b)[1] == suffix]
    message = hinted(f"{path} does not exist", name, alike)
    kind = f"{suffix} files" if suffix else "files without a suffix"
    if not alike:
        return WordError(code, message, (f"{folder or '.'} holds no {kind}",))
    more = len(alike) - BESIDE_LISTED
    shown = ", ".join(alike[:BESIDE_LISTED]) + (f" and {more} more" if more > 0 else "")
    return WordError(code, message, (f"{kind} beside it: {shown}",))


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
    return to_bits(number)


def from_nat(n: int) -> int:
    """f64(n): the exact binary64 value of a Nat, or WordError if it would round."""
    try:
        number = float(n)
    except OverflowError:
        raise WordError("inexact-conversion", f"{n} has no binary64 value") from None
    if int(number) != n:
        raise WordError("inexact-conversion",
                        f"{n} is not exactly representable in binary64 (nearest {number!r})")
    return to_bits(number)


def raw_word(n: int) -> int:
    if n >= 1 << 64:
        raise WordError("word-out-of-range", f"0x{n:x} does not fit in 64 bits")
    if not is_finite_word(n):
        raise WordError("non-finite-literal", f"word(0x{n:016X}) is not a finite binary64 number")
    return n


def apply(op: str, *words: int) -> int:
    """One binary64 operation on constant words; WordError(non-finite-constant) if not finite."""
    args = [to_float(w) for w in words]
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
    return to_bits(result)


def load_words(path: str) -> np.ndarray:
    """A word file as little-endian uint64 words, in the file's shape: a `.npy` of float64
    or float32 (its shape kept, so that callers can check rows against a width; binary32
    values widened exactly to binary64 words, a copy) or raw little-endian binary64 (1-D).
    Raises WordError(load-file).

    The file is memory-mapped and its words are a read-only view of the mapping, never a
    copy (but for a big-endian `.npy`, whose words are swapped once): loading costs about
    the file's size. A `.npy` header is read and checked against the file's size before
    anything is mapped, so a header claiming more words than the file holds is refused
    without allocating them."""
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
            shape, dtype, offset = _npy_header(path, size)
            return _mapped(path, dtype, shape, offset)
        if size % 8:
            raise WordError("load-file", f"{path} has {size} bytes, not a whole number of 8-byte words")
        return _mapped(path, np.dtype("<u8"), (size // 8,), 0)
    except FileNotFoundError:
        raise missing_file("load-file", path) from None
    except OSError as exc:
        raise WordError("load-file", f"{path} cannot be read: {exc.strerror or exc}") from None


def _npy_header(path: str, size: int) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, word dtype, data offset) of a `.npy` file of float64 whose header agrees
    with the file's size; WordError(load-file) otherwise. Reads the header only."""
    fmt = np.lib.format
    with open(path, "rb") as fh:
        try:
            version = fmt.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(fh)
            else:
                raise WordError("load-file", f"{path} is a .npy file of format version "
                                f"{version[0]}.{version[1]}; versions 1.0 and 2.0 load")
        except (ValueError, EOFError, SyntaxError, TypeError) as exc:
            raise WordError("load-file", f"{path} is not a readable .npy file ({exc})") from None
        offset = fh.tell()
    if dtype.hasobject:
        raise WordError("load-file", f"{path} holds Python objects ({dtype}); a .npy of words "
                        "holds float64")
    if dtype.kind == "u" and dtype.itemsize == 8:
        # uint64 is ambiguous (integers to convert, or bit patterns?); refused rather than
        # guessed. Raw words load from a raw file or as word(...) literals.
        raise WordError("load-file", f"{path} holds uint64; a .npy of words holds float64 "
                        "(raw words load from a raw little-endian file)")
    if not (dtype.kind == "f" and dtype.itemsize in (4, 8) and dtype.fields is None):
        raise WordError("load-file", f"{path} holds {dtype}; a .npy of words holds float64 "
                        "(or float32, widened exactly)")
    count = math.prod(shape)
    claimed = offset + count * dtype.itemsize
    if claimed != size:
        raise WordError("load-file", f"{path} has {size} bytes, but its header describes a "
                        f"{shape_text(shape)} {dtype.name} array: {claimed} bytes ({offset} of header, "
                        f"{count * dtype.itemsize} of words)")
    if count > MAX_WORDS:
        raise WordError("load-file", f"{path} holds {count} words; at most {MAX_WORDS} words load")
    if fortran and len(shape) > 1:
        raise WordError("load-file", f"{path} stores its {shape_text(shape)} array column by "
                        "column (Fortran order); words load row by row from a C-order array "
                        "(np.save(path, np.ascontiguousarray(a)))")
    if dtype.itemsize == 4:  # binary32 values, widened to binary64 words when mapped
        return tuple(shape), np.dtype("f4").newbyteorder(dtype.byteorder), offset
    # the same bytes as words: uint64 of the file's byte order
    return tuple(shape), np.dtype("u8").newbyteorder(dtype.byteorder), offset


def _mapped(path: str, dtype: np.dtype, shape: tuple[int, ...], offset: int) -> np.ndarray:
    """The words at `offset` of `path`, read-only and memory-mapped; native uint64."""
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=np.uint64)
    words = np.asarray(np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="C"))
    if dtype.kind == "f":
        # binary32: every value widened to the binary64 of the same value (exact), as words
        return words.astype(np.float64).view(np.uint64)
    if not dtype.isnative:
        words = words.astype(np.uint64)  # a big-endian file: its words swapped, once
    return words


def shape_text(shape: tuple) -> str:
    """An array shape for a message: `3 x 2`, or `0-dimensional`."""
    return " x ".join(str(d) for d in shape) if shape else "0-dimensional"


SCAN_WORDS = 1 << 16  # words tested at a time: the scan's scratch stays small


def first_non_finite(words: np.ndarray) -> int:
    """The index of the first non-finite word (in row order), or -1. Scans in chunks, so
    that a file's words are never doubled by a mask of their size."""
    flat = words.reshape(-1)
    mask = np.uint64(EXP_MASK)
    for start in range(0, flat.size, SCAN_WORDS):
        bad = np.flatnonzero((flat[start:start + SCAN_WORDS] & mask) == mask)
        if bad.size:
            return start + int(bad[0])
    return -1

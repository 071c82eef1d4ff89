"""Reading an owner's output file (the executable contract's `ALHAOUT1` format).

Layout, little-endian u64 words: magic, format (1), owner, version (completed updates),
protocol id, k, m, then k parameter words, then m state words. Nothing else follows.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

OUT_MAGIC = 0x3154554F41484C41  # "ALHAOUT1"
OUT_FORMAT = 1
HEAD_WORDS = 7


class ResultError(ValueError):
    """An output file that does not follow the format; the message says where."""


@dataclass(frozen=True)
class OwnerResult:
    owner: int
    version: int
    protocol: int
    params: tuple[int, ...]
    state: tuple[int, ...]


def encode_result(r: OwnerResult) -> bytes:
    """The exact bytes an executable writes for `r` (used by tests and tools)."""
    words = [OUT_MAGIC, OUT_FORMAT, r.owner, r.version, r.protocol,
             len(r.params), len(r.state), *r.params, *r.state]
    return struct.pack(f"<{len(words)}Q", *words)


def parse_result(data: bytes, where: str = "<bytes>") -> OwnerResult:
    if len(data) % 8:
        raise ResultError(f"{where}: {len(data)} bytes is not a whole number of words")
    if len(data) < HEAD_WORDS * 8:
        raise ResultError(f"{where}: {len(data)} bytes, short of the {HEAD_WORDS}-word header")
    magic, fmt, owner, version, protocol, k, m = struct.unpack_from("<7Q", data, 0)
    if magic != OUT_MAGIC:
        raise ResultError(f"{where}: magic {magic:#018x}, expected {OUT_MAGIC:#018x}")
    if fmt != OUT_FORMAT:
        raise ResultError(f"{where}: format {fmt}, expected {OUT_FORMAT}")
    words = len(data) // 8 - HEAD_WORDS
    if words != k + m:
        raise ResultError(f"{where}: {words} words after the header, k + m = {k + m}")
    body = struct.unpack_from(f"<{words}Q", data, HEAD_WORDS * 8)
    return OwnerResult(owner, version, protocol, tuple(body[:k]), tuple(body[k:]))


def read_result(path: str | Path) -> OwnerResult:
    p = Path(path)
    return parse_result(p.read_bytes(), str(p))

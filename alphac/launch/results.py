"""Reading an owner's output file (the executable contract's `ALHAOUT1` format), and its
connections report (which transport each of its connections used).

Layout, little-endian u64 words: magic, format (1), owner, version (completed updates),
protocol id, k, m, then k parameter words, then m state words. Nothing else follows.

Format 3 (bounded staleness): magic, 3, owner, version, protocol id, k, m, r, then k
parameter words, m state words, then r words: the version this owner's contributions to
each of the run's r updates read (version - r, ..., version - 1).

Format 2 (partitioned learners: the owner's own words only): magic, 2, owner, version,
protocol id, k, m, kp, mp, then the kp parameter coordinates and the mp state offsets the
owner holds (ascending), then their kp parameter words and mp state words. Format 4
(partitioned, bounded staleness): magic, 4, owner, version, protocol id, k, m, kp, mp, r,
then format 2's words, then the r reads as format 3 has them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from alphac.resources import open_regular
from alphac.wire import OUTPUT_MAGIC as OUT_MAGIC, OUTPUT_OWNED as OUT_FORMAT_OWNED
from alphac.wire import OUTPUT_OWNED_SCHEDULED as OUT_FORMAT_OWNED_SCHEDULED
from alphac.wire import OUTPUT_REPLICATED as OUT_FORMAT, OUTPUT_SCHEDULED as OUT_FORMAT_SCHEDULED

HEAD_WORDS = 7
HEAD_WORDS_OWNED = 9


class ResultError(ValueError):
    """An output file that does not follow the format; the message says where."""


@dataclass(frozen=True)
class OwnerResult:
    owner: int
    version: int
    protocol: int
    params: tuple[int, ...]
    state: tuple[int, ...]
    # format 2: which parameter coordinates and state offsets the words are (None: all)
    param_coords: tuple[int, ...] | None = None
    state_offsets: tuple[int, ...] | None = None
    # format 3: the version its contributions to each of the run's updates read
    reads: tuple[int, ...] | None = None


def parse_result(data: bytes, where: str = "<bytes>") -> OwnerResult:
    if len(data) % 8:
        raise ResultError(f"{where}: {len(data)} bytes is not a whole number of words")
    if len(data) < HEAD_WORDS * 8:
        raise ResultError(f"{where}: {len(data)} bytes, short of the {HEAD_WORDS}-word header")
    magic, fmt, owner, version, protocol, k, m = struct.unpack_from("<7Q", data, 0)
    if magic != OUT_MAGIC:
        raise ResultError(f"{where}: magic {magic:#018x}, expected {OUT_MAGIC:#018x}")
    if fmt in (OUT_FORMAT_OWNED, OUT_FORMAT_OWNED_SCHEDULED):
        return _parse_owned(data, where, fmt == OUT_FORMAT_OWNED_SCHEDULED)
    if fmt not in (OUT_FORMAT, OUT_FORMAT_SCHEDULED):
        raise ResultError(f"{where}: format {fmt}, expected {OUT_FORMAT}")
    scheduled = fmt == OUT_FORMAT_SCHEDULED  # format 3: the header's r, then r reads after the words
    head = HEAD_WORDS + scheduled
    if len(data) < head * 8:
        raise ResultError(f"{where}: format 3: {len(data)} bytes, short of the {head}-word header")
    r = struct.unpack_from("<Q", data, 56)[0] if scheduled else 0
    words = len(data) // 8 - head
    if words != k + m + r or r > version:
        raise ResultError(f"{where}: format 3: {words} words after the header, k + m + r = {k + m + r} "
                          f"(r = {r} reads of version {version})" if scheduled else
                          f"{where}: {words} words after the header, k + m = {k + m}")
    body = struct.unpack_from(f"<{words}Q", data, head * 8)
    return OwnerResult(owner, version, protocol, tuple(body[:k]), tuple(body[k:k + m]),
                       reads=tuple(body[k + m:]) if scheduled else None)


def recorded_schedule(outputs: dict, owners: int) -> tuple[tuple[int, ...], ...] | None:
    """The versions each owner's contributions read, from the run's outputs (format 3), in
    owner order; None unless every owner's output records them."""
    got = [outputs.get(o) for o in range(owners)]
    if any(r is None or r.reads is None for r in got):
        return None
    return tuple(r.reads for r in got)


def _parse_owned(data: bytes, where: str, scheduled: bool = False) -> OwnerResult:
    head, name = HEAD_WORDS_OWNED + scheduled, "format 4" if scheduled else "format 2"
    if len(data) < head * 8:
        raise ResultError(f"{where}: {name}: {len(data)} bytes, short of the {head}-word header")
    _, _, owner, version, protocol, k, m, kp, mp = struct.unpack_from("<9Q", data, 0)
    r = struct.unpack_from("<Q", data, 72)[0] if scheduled else 0
    words = len(data) // 8 - head
    if kp > k or mp > m or words != 2 * (kp + mp) + r or r > version:
        reads = (" + r", f", r = {r} reads") if scheduled else ("", "")
        raise ResultError(f"{where}: {name}: {words} words after the header, 2 * (kp + mp){reads[0]} = "
                          f"{2 * (kp + mp) + r} (kp = {kp} of k = {k}, mp = {mp} of m = {m}{reads[1]})")
    body = struct.unpack_from(f"<{words}Q", data, head * 8)
    coords, offs = body[:kp], body[kp:kp + mp]
    for what, pos, limit in (("parameter coordinate", coords, k), ("state offset", offs, m)):
        if any(p >= limit for p in pos) or any(a >= b for a, b in zip(pos, pos[1:])):
            raise ResultError(f"{where}: format 2: {what}s are not ascending below {limit}")
    vals = body[kp + mp:2 * (kp + mp)]
    return OwnerResult(owner, version, protocol, tuple(vals[:kp]), tuple(vals[kp:]),
                       tuple(coords), tuple(offs), tuple(body[2 * (kp + mp):]) if scheduled else None)


def read_result(path: str | Path) -> OwnerResult:
    p = Path(path)
    with open_regular(p) as f:
        return parse_result(f.read(), str(p))


@dataclass(frozen=True)
class Connection:
    """One line of an owner's connections report (`--connections FILE`): the peer, the
    transport its frames went over, and why it is TCP ("" for shared memory)."""

    peer: int
    transport: str
    why: str = ""

    def as_json(self) -> dict:
        return {"peer": self.peer, "transport": self.transport, **({"why": self.why} if self.why else {})}


def read_connections(path: str | Path) -> tuple[Connection, ...] | None:
    """An owner's connections report, None if it wrote none (it ended before its
    connections were set up). Each line is `PEER shm` or `PEER tcp REASON`."""
    p = Path(path)
    try:
        text = p.read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    out = []
    for line in text.splitlines():
        peer, transport, *why = line.split(" ", 2)
        out.append(Connection(int(peer), transport, why[0] if why else ""))
    return tuple(out)


def transport_summary(connections: tuple[Connection, ...] | None) -> str:
    """What an owner's frames went over: shm, tcp, shm+tcp, or "-" (no report, or no peer)."""
    kinds = sorted({c.transport for c in connections or ()})
    return "+".join(kinds) if kinds else "-"

"""The wire format of the executables' frames, in Python: encode, decode, checksum.

Used by tests that play a misbehaving peer against a real owner, and by tools that read
frames off a socket. The constants are the wire table `alphac.wire`, which the C runtime's
generated header is made from. The layout is the executable contract (docs/runtime.md): all words
are u64 little-endian; 8 header words, the payload, then one checksum word: the payload
hashed in LANES independent FNV-1a lanes, the lanes folded into one word, then the 8
header words folded on top (`frame_checksum`).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from alphac import wire

MAGIC = wire.FRAME_MAGIC
HEADER_WORDS = wire.HEADER_WORDS
MASK = (1 << 64) - 1
FNV_OFFSET = wire.FNV_OFFSET
FNV_PRIME = wire.FNV_PRIME
# payload lanes of the frame checksum: lane j hashes the payload words i with i % LANES == j
LANES = wire.LANES

# frame kinds (header word 6)
HELLO = wire.KINDS["hello"]
COMBINE = wire.KINDS["combine"]
DIGEST = wire.KINDS["digest"]
PUBLISH = wire.KINDS["publish"]
KIND_NAMES = {code: name for name, code in wire.KINDS.items()}


class FrameError(ValueError):
    """A frame that cannot be decoded; `code` is the refusal code an executable would use."""

    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def fnv1a_words(words) -> int:
    """FNV-1a over 64-bit words (not bytes): h = (h ^ w) * prime mod 2**64 for each word."""
    h = FNV_OFFSET
    for w in words:
        h = ((h ^ (int(w) & MASK)) * FNV_PRIME) & MASK
    return h


def fnv1a_fold(h: int, words) -> int:
    """Continue an FNV-1a word chain from state h."""
    for w in words:
        h = ((h ^ (int(w) & MASK)) * FNV_PRIME) & MASK
    return h


def payload_hash(payload) -> int:
    """The payload part of the frame checksum. Lane j (0 <= j < LANES) starts at
    FNV_OFFSET ^ j and folds the words payload[j], payload[j + LANES], ... in order; the
    result is FNV-1a over the LANES lane words in lane order, from FNV_OFFSET. It does not
    depend on the header, so one payload sent to several receivers is hashed once."""
    lanes = [fnv1a_fold(FNV_OFFSET ^ j, payload[j::LANES]) for j in range(LANES)]
    return fnv1a_words(lanes)


def frame_checksum(header, payload) -> int:
    """The checksum word of a frame: the 8 header words folded onto the payload hash."""
    return fnv1a_fold(payload_hash(tuple(payload)), header)


def state_digest(params, state) -> int:
    """The digest frame's payload word: FNV-1a over the k params then the m state words."""
    return fnv1a_words(list(params) + list(state))


@dataclass(frozen=True)
class Frame:
    protocol: int
    sender: int
    receiver: int
    version: int
    step: int
    kind: int
    payload: tuple[int, ...] = ()
    magic: int = MAGIC
    # None: the correct checksum; an int: this exact word (to send a corrupt frame)
    checksum: int | None = None

    def header(self, length: int | None = None) -> tuple[int, ...]:
        n = len(self.payload) if length is None else length
        return (self.magic, self.protocol, self.sender, self.receiver, self.version,
                self.step, self.kind, n)

    def correct_checksum(self) -> int:
        return frame_checksum(self.header(), self.payload)

    def words(self, length: int | None = None) -> tuple[int, ...]:
        """Every word on the wire. `length` overrides the header's payload length (to claim
        more or fewer words than are sent); the checksum still covers the header as sent."""
        head = self.header(length)
        check = self.checksum if self.checksum is not None else frame_checksum(head, self.payload)
        return head + tuple(self.payload) + (check,)

    def encode(self, length: int | None = None) -> bytes:
        ws = [w & MASK for w in self.words(length)]
        return struct.pack(f"<{len(ws)}Q", *ws)


def combine_payload(sum_words, count: int) -> tuple[int, ...]:
    """A combine-value payload: k binary64 words of the summed contribution, then the count."""
    return tuple(int(w) & MASK for w in sum_words) + (int(count),)


def hello(protocol: int, sender: int, receiver: int, version: int = 0) -> Frame:
    return Frame(protocol, sender, receiver, version, 0, HELLO)


def decode(data: bytes, max_payload: int | None = None) -> tuple[Frame, int]:
    """Decode one frame from the start of `data`; returns it and the bytes it used.

    Checks magic, length bound and checksum (those need no context); protocol, sender,
    receiver, version and step are the receiver's to judge.
    """
    if len(data) < HEADER_WORDS * 8:
        raise FrameError("peer-closed", f"{len(data)} bytes, short of a frame header")
    head = struct.unpack_from(f"<{HEADER_WORDS}Q", data, 0)
    if head[0] != MAGIC:
        raise FrameError("frame-magic", f"magic {head[0]:#018x}")
    n = head[7]
    if max_payload is not None and n > max_payload:
        raise FrameError("frame-oversized", f"{n} payload words, at most {max_payload}")
    total = (HEADER_WORDS + n + 1) * 8
    if len(data) < total:
        raise FrameError("peer-closed", f"{len(data)} bytes, short of a {total}-byte frame")
    body = struct.unpack_from(f"<{n + 1}Q", data, HEADER_WORDS * 8)
    payload, check = tuple(body[:n]), body[n]
    want = frame_checksum(head, payload)
    if check != want:
        raise FrameError("frame-checksum", f"checksum {check:#018x}, computed {want:#018x}")
    frame = Frame(protocol=head[1], sender=head[2], receiver=head[3], version=head[4],
                  step=head[5], kind=head[6], payload=payload, magic=head[0], checksum=check)
    return frame, total


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes from a socket; a short read raises FrameError('peer-closed')."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise FrameError("peer-closed", f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket, max_payload: int | None = None) -> Frame:
    """Read one whole frame from a socket, checking magic, bound and checksum."""
    head_bytes = recv_exact(sock, HEADER_WORDS * 8)
    head = struct.unpack("<8Q", head_bytes)
    if head[0] != MAGIC:
        raise FrameError("frame-magic", f"magic {head[0]:#018x}")
    if max_payload is not None and head[7] > max_payload:
        raise FrameError("frame-oversized", f"{head[7]} payload words, at most {max_payload}")
    rest = recv_exact(sock, (head[7] + 1) * 8)
    return decode(head_bytes + rest, max_payload)[0]

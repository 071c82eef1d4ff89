"""The wire format of the executables' frames, in Python: encode, decode, checksum.

Used by tests that play a misbehaving peer against a real owner (the executables speak
the format in C). The constants are the wire table `alphac.wire`, which the C runtime's
generated header is made from. The layout is the executable contract (docs/runtime.md): all words
are u64 little-endian; 8 header words, the payload, then one checksum word: the payload
hashed in LANES independent FNV-1a lanes, the lanes folded into one word, then the 8
header words folded on top (`frame_checksum`).
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
import time
from dataclasses import dataclass

from alphac import wire

MAGIC = wire.FRAME_MAGIC
MAGIC_AUTH = wire.FRAME_MAGIC_AUTH
TAG_WORDS = wire.TAG_WORDS
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
TRANSPORT = wire.KINDS["transport"]
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

    def encode(self, length: int | None = None, key: bytes | None = None, seq: int = 0,
               run_key: bytes | None = None) -> bytes:
        """The bytes on the wire; with `key`, an authenticated frame (magic ALFRAMEA unless
        another was set, and the tag of the seq-th frame after the checksum; `run_key`, if
        not `key` itself, keys the payload's MAC)."""
        frame = self
        if key is not None and self.magic == MAGIC:
            frame = Frame(**{**self.__dict__, "magic": MAGIC_AUTH})
        ws = [w & MASK for w in frame.words(length)]
        if key is not None:
            ws += frame_tag(key, seq, ws, run_key)
        return struct.pack(f"<{len(ws)}Q", *ws)


def payload_key(key: bytes, protocol: int) -> bytes:
    """The key of the payload MACs of a run: HMAC-SHA-256(run key, "alphac-payload-1" ||
    protocol)."""
    return hmac.new(key, b"alphac-payload-1" + struct.pack("<Q", protocol), hashlib.sha256).digest()


def payload_mac(key: bytes, protocol: int, payload: bytes) -> bytes:
    """A payload's MAC: AES-256-GMAC under the payload key with the zero IV, the payload's
    bytes the associated data (docs/security.md, "How a frame is tagged")."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    gcm = Cipher(algorithms.AES(payload_key(key, protocol)), modes.GCM(bytes(12))).encryptor()
    gcm.authenticate_additional_data(payload)
    gcm.finalize()
    return gcm.tag[:wire.PAYLOAD_MAC_BYTES]


def frame_tag(key: bytes, seq: int, words, run_key: bytes | None = None) -> tuple[int, ...]:
    """The HMAC-SHA-256 tag of a frame (its words, header through checksum) sent as the
    seq-th frame of its direction of a connection under `key` (the run's key for a hello,
    else the connection's session key), as TAG_WORDS words: over seq, the header, the
    payload's MAC (under the payload key of `run_key`, default `key`) and the checksum."""
    words = [w & MASK for w in words]
    payload = struct.pack(f"<{len(words) - HEADER_WORDS - 1}Q", *words[HEADER_WORDS:-1])
    mac = payload_mac(key if run_key is None else run_key, words[1], payload)
    data = (struct.pack(f"<Q{HEADER_WORDS}Q", seq, *words[:HEADER_WORDS]) + mac
            + struct.pack("<Q", words[-1]))
    return struct.unpack("<4Q", hmac.new(key, data, hashlib.sha256).digest())


def session_key(key: bytes, protocol: int, connector: int, acceptor: int, connector_nonce,
                acceptor_nonce) -> bytes:
    """A connection's key once both hellos are through."""
    data = b"alphac-session-1" + struct.pack("<7Q", protocol, connector, acceptor, *connector_nonce,
                                             *acceptor_nonce)
    return hmac.new(key, data, hashlib.sha256).digest()


def combine_payload(sum_words, count: int) -> tuple[int, ...]:
    """A combine-value payload: k binary64 words of the summed contribution, then the count."""
    return tuple(int(w) & MASK for w in sum_words) + (int(count),)


def hello(protocol: int, sender: int, receiver: int, updates: int, nonce=(0, 0), version: int = 0,
          start: int = 0, run_id: int = 0) -> Frame:
    """A hello: the run's update count, the version it starts from, its run id, and the
    sender's nonce of the connection."""
    return Frame(protocol, sender, receiver, version, 0, HELLO, (updates, start, run_id, *nonce))


def boot_id_words(text: str) -> tuple[int, int]:
    """A boot id (`/proc/sys/kernel/random/boot_id`) as a transport frame carries it: its 32
    hex digits as two words, first half first."""
    digits = "".join(c for c in text.lower() if c in "0123456789abcdef")
    return int(digits[:16], 16), int(digits[16:32], 16)


def transport(protocol: int, sender: int, receiver: int, boot: tuple[int, int], status: str,
              ident=(0, 0, 0), name: bytes = b"") -> Frame:
    """A transport frame (docs/runtime.md, "Transports"): the sender's boot id, a status of
    wire.TRANSPORT_STATUS, then the segment's device, inode and size (an offer; a decline
    puts an errno first) and its name, NUL-padded."""
    padded = name.ljust(8 * wire.SHM_NAME_WORDS, b"\0")[:8 * wire.SHM_NAME_WORDS]
    words = (*boot, wire.TRANSPORT_STATUS[status], *ident, *struct.unpack(f"<{wire.SHM_NAME_WORDS}Q", padded))
    return Frame(protocol, sender, receiver, 0, 0, TRANSPORT, words)


def prepared_payload(digest: int, entries) -> tuple[int, ...]:
    """"prepared": the replica digest, then (owner, sha256 of its output as 32 bytes) for
    every owner of the sender's subtree."""
    words = [digest, len(entries)]
    for owner, sha in entries:
        words += [owner, *struct.unpack("<4Q", sha)]
    return tuple(words)


def _check_magic(magic: int, key: bytes | None) -> None:
    want, other = (MAGIC_AUTH, MAGIC) if key is not None else (MAGIC, MAGIC_AUTH)
    if magic == other:
        raise FrameError("frame-auth", "no authentication tag" if key is not None else
                         "an authenticated frame, and no key")
    if magic != want:
        raise FrameError("frame-magic", f"magic {magic:#018x}")


def decode(data: bytes, max_payload: int | None = None, key: bytes | None = None,
           seq: int = 0, run_key: bytes | None = None) -> tuple[Frame, int]:
    """Decode one frame from the start of `data`; returns it and the bytes it used.

    Checks magic, length bound, checksum and (with `key`, as the seq-th frame received on
    its connection) the tag: those need no context; protocol, sender, receiver, version and
    step are the receiver's to judge.
    """
    if len(data) < HEADER_WORDS * 8:
        raise FrameError("peer-closed", f"{len(data)} bytes, short of a frame header")
    head = struct.unpack_from(f"<{HEADER_WORDS}Q", data, 0)
    _check_magic(head[0], key)
    n = head[7]
    if max_payload is not None and n > max_payload:
        raise FrameError("frame-oversized", f"{n} payload words, at most {max_payload}")
    tags = TAG_WORDS if key is not None else 0
    total = (HEADER_WORDS + n + 1 + tags) * 8
    if len(data) < total:
        raise FrameError("peer-closed", f"{len(data)} bytes, short of a {total}-byte frame")
    body = struct.unpack_from(f"<{n + 1 + tags}Q", data, HEADER_WORDS * 8)
    payload, check = tuple(body[:n]), body[n]
    want = frame_checksum(head, payload)
    if check != want:
        raise FrameError("frame-checksum", f"checksum {check:#018x}, computed {want:#018x}")
    if key is not None and tuple(body[n + 1:]) != frame_tag(key, seq, head + payload + (check,), run_key):
        raise FrameError("frame-auth", f"the tag of frame {seq} does not verify")
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


def read_frame(sock: socket.socket, max_payload: int | None = None, key: bytes | None = None,
               seq: int = 0, run_key: bytes | None = None) -> Frame:
    """Read one whole frame from a socket, checking magic, bound, checksum and tag."""
    head_bytes = recv_exact(sock, HEADER_WORDS * 8)
    head = struct.unpack("<8Q", head_bytes)
    _check_magic(head[0], key)
    if max_payload is not None and head[7] > max_payload:
        raise FrameError("frame-oversized", f"{head[7]} payload words, at most {max_payload}")
    rest = recv_exact(sock, (head[7] + 1 + (TAG_WORDS if key is not None else 0)) * 8)
    return decode(head_bytes + rest, max_payload, key, seq, run_key)[0]


def connect(port: int, deadline_s: float = 10.0) -> socket.socket:
    """A TCP connection (no delay) to the owner listening on 127.0.0.1:`port`, tried again
    until it listens or `deadline_s` has passed."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


class Connection:
    """One connection to a real owner, played from Python (a peer in tests and tools): the
    connecting side's hello and the owner's reply, then frames with their sequence numbers
    and, with the run's `key`, the session key the executables derive."""

    def __init__(self, sock: socket.socket, protocol: int, me: int, peer: int, updates: int,
                 key: bytes | None = None, nonce=(0x1111, 0x2222), run_id: int | None = None):
        self.sock, self.protocol, self.me, self.peer = sock, protocol, me, peer
        self.run_key, self.key = key, key
        self.sent = self.received = 0
        nonce = nonce if key is not None else (0, 0)
        self.send(hello(protocol, me, peer, updates, nonce, run_id=0 if run_id is None else run_id))
        reply = self.recv()
        if key is not None:
            self.key = session_key(key, protocol, me, peer, nonce, reply.payload[3:5])
        self.reply = reply

    def send(self, frame: Frame, length: int | None = None, raw: bytes | None = None) -> None:
        """Send `frame` (or, with `raw`, exactly those bytes, still counting a frame)."""
        key = self.run_key if self.sent == 0 else self.key
        self.sock.sendall(raw if raw is not None else frame.encode(length, key, self.sent, self.run_key))
        self.sent += 1

    def recv(self, max_payload: int | None = None) -> Frame:
        key = self.run_key if self.received == 0 else self.key
        frame = read_frame(self.sock, max_payload, key, self.received, self.run_key)
        self.received += 1
        return frame

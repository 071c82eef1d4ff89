"""The frame codec against hand-computed words, the published FNV-1a test vectors, and a
reference of the lane checksum written out here from docs/runtime.md."""

import struct

import pytest

from alphac.testing import frames
from alphac.testing.frames import Frame, FrameError, decode, fnv1a_words, frame_checksum, payload_hash

M64 = 2**64
OFF, PRIME = 0xCBF29CE484222325, 0x100000001B3


def reference_checksum(header, payload):
    """docs/runtime.md, word by word: four lanes seeded OFF ^ j over payload words i with
    i % 4 == j, the lanes folded from OFF in lane order, then the 8 header words."""
    lanes = [OFF ^ 0, OFF ^ 1, OFF ^ 2, OFF ^ 3]
    for i, w in enumerate(payload):
        lanes[i % 4] = ((lanes[i % 4] ^ w) * PRIME) % M64
    h = OFF
    for w in lanes + list(header):
        h = ((h ^ w) * PRIME) % M64
    return h


def test_fnv1a_single_small_word_equals_the_byte_hash_vectors():
    # For one word below 256, one word step equals FNV-1a-64 of that single byte; the
    # published vectors: "" -> cbf29ce484222325, "\0" -> af63bd4c8601b7df, "a" -> af63dc4c8601ec8c
    assert fnv1a_words([]) == 0xCBF29CE484222325
    assert fnv1a_words([0]) == 0xAF63BD4C8601B7DF
    assert fnv1a_words([0x61]) == 0xAF63DC4C8601EC8C


def test_fnv1a_whole_word_xor_then_multiply():
    h = 0xCBF29CE484222325
    for w in (0xFFFFFFFFFFFFFFFF, 0x3FF0000000000000):
        h = ((h ^ w) * 0x100000001B3) % 2**64
    assert fnv1a_words([0xFFFFFFFFFFFFFFFF, 0x3FF0000000000000]) == h


def test_magic_spells_alframe1():
    assert struct.pack("<Q", frames.MAGIC) == b"ALFRAME1"


def test_hello_encodes_to_exact_words():
    f = frames.hello(0x1234, sender=1, receiver=0, updates=5, nonce=(7, 9), start=2, run_id=3)
    data = f.encode()
    assert len(data) == (8 + 5 + 1) * 8
    words = struct.unpack("<14Q", data)
    assert words[:13] == (frames.MAGIC, 0x1234, 1, 0, 0, 0, frames.HELLO, 5, 5, 2, 3, 7, 9)
    assert words[13] == reference_checksum(words[:8], [5, 2, 3, 7, 9])
    # without a payload the checksum is the folded lane seeds and header (a fixed vector)
    empty = frames.Frame(0x1234, 1, 0, 0, 0, frames.HELLO).encode()
    assert struct.unpack("<9Q", empty)[8] == reference_checksum(struct.unpack("<9Q", empty)[:8], []) \
        == 0xB73387A34CDC75E8


def test_an_authenticated_frame_carries_the_tag_of_its_sequence_number():
    import hashlib
    import hmac

    key = bytes(range(32))
    f = frames.Frame(0x1234, 1, 0, 2, 3, frames.COMBINE, (10, 20, 1))
    data = f.encode(key=key, seq=4)
    words = struct.unpack(f"<{len(data) // 8}Q", data)
    assert words[0] == frames.MAGIC_AUTH and len(words) == 8 + 3 + 1 + frames.TAG_WORDS
    # over seq, the header, the payload's MAC and the checksum; the payload's MAC is the
    # tag of AES-256-GCM over nothing, with the payload as associated data, under the
    # payload key and the zero IV
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    body = data[:-32]
    payload_key = hmac.new(key, b"alphac-payload-1" + struct.pack("<Q", 0x1234), hashlib.sha256).digest()
    payload_mac = AESGCM(payload_key).encrypt(bytes(12), b"", body[64:-8])
    assert len(payload_mac) == 16
    mac = hmac.new(key, struct.pack("<Q", 4) + body[:64] + payload_mac + body[-8:], hashlib.sha256).digest()
    assert data[-32:] == mac
    back, used = frames.decode(data, key=key, seq=4)
    assert used == len(data) and back.payload == (10, 20, 1)
    for key2, seq2, code in ((bytes(32), 4, "frame-auth"), (key, 5, "frame-auth"), (None, 0, "frame-auth")):
        with pytest.raises(frames.FrameError) as err:
            frames.decode(data, key=key2, seq=seq2)
        assert err.value.code == code


def test_combine_frame_round_trips():
    payload = frames.combine_payload([0x3FF0000000000000, 0xC000000000000000], 3)
    f = Frame(protocol=0xDEADBEEFCAFEF00D, sender=2, receiver=0, version=4, step=7,
              kind=frames.COMBINE, payload=payload)
    data = f.encode()
    g, used = decode(data + b"trailing")
    assert used == len(data) == (8 + 3 + 1) * 8
    assert g.payload == (0x3FF0000000000000, 0xC000000000000000, 3)
    assert (g.protocol, g.sender, g.receiver, g.version, g.step, g.kind) == (
        0xDEADBEEFCAFEF00D, 2, 0, 4, 7, frames.COMBINE)
    assert g.checksum == f.correct_checksum()


def test_bad_checksum_is_refused_by_code():
    f = Frame(1, 1, 0, 0, 0, frames.COMBINE, (5, 1), checksum=12345)
    with pytest.raises(FrameError) as e:
        decode(f.encode())
    assert e.value.code == "frame-checksum"


def test_one_flipped_payload_bit_is_caught():
    data = bytearray(Frame(1, 1, 0, 0, 0, frames.COMBINE, (5, 1)).encode())
    data[8 * 8] ^= 1
    with pytest.raises(FrameError) as e:
        decode(bytes(data))
    assert e.value.code == "frame-checksum"


def test_bad_magic_and_oversized_and_short():
    with pytest.raises(FrameError) as e:
        decode(Frame(1, 1, 0, 0, 0, frames.HELLO, magic=7).encode())
    assert e.value.code == "frame-magic"
    with pytest.raises(FrameError) as e:
        decode(Frame(1, 1, 0, 0, 0, frames.COMBINE, (1, 2, 3)).encode(), max_payload=2)
    assert e.value.code == "frame-oversized"
    with pytest.raises(FrameError) as e:
        decode(Frame(1, 1, 0, 0, 0, frames.COMBINE, (1, 2, 3)).encode()[:-1])
    assert e.value.code == "peer-closed"


def test_claimed_length_override_is_covered_by_the_checksum():
    f = Frame(1, 1, 0, 0, 0, frames.COMBINE, (9,))
    words = f.words(length=1 << 40)
    assert words[7] == 1 << 40
    assert words[-1] == reference_checksum(words[:8], [9])


def test_checksum_matches_the_reference_for_every_lane_position():
    for n in range(0, 11):
        payload = [(0x9E3779B97F4A7C15 * (i + 1)) % M64 for i in range(n)]
        head = (frames.MAGIC, 77, 2, 0, 5, 3, frames.COMBINE, n)
        assert frame_checksum(head, payload) == reference_checksum(head, payload)
        assert Frame(77, 2, 0, 5, 3, frames.COMBINE, tuple(payload)).words()[-1] == \
            reference_checksum(head, payload)


def test_payload_hash_is_shared_by_receivers_and_only_the_header_is_refolded():
    payload = frames.combine_payload([0x3FF0000000000000, 0x4000000000000000, 7], 3)
    ph = payload_hash(payload)
    sums = set()
    for receiver in (1, 2, 3):
        f = Frame(5, 0, receiver, 1, 4, frames.COMBINE, payload)
        h = ph
        for w in f.header():
            h = ((h ^ w) * PRIME) % M64
        assert f.words()[-1] == h
        sums.add(h)
    assert len(sums) == 3


def test_lanes_keep_the_word_order():
    a = [1, 2, 3, 4, 5, 6, 7, 8]
    base = payload_hash(a)
    assert payload_hash([2, 1] + a[2:]) != base      # two lanes swapped
    assert payload_hash([5, 2, 3, 4, 1, 6, 7, 8]) != base  # order within lane 0
    assert payload_hash(a + [0]) != base              # one more word, even a zero
    assert len({payload_hash([0] * n) for n in range(9)}) == 9


def test_state_digest_is_params_then_state():
    assert frames.state_digest([1, 2], [3]) == fnv1a_words([1, 2, 3])
    assert frames.state_digest([1], [2, 3]) == fnv1a_words([1, 2, 3])
    assert frames.state_digest([2, 1], [3]) != fnv1a_words([1, 2, 3])

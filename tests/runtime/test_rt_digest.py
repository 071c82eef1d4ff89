"""The runtime's digests and MACs, which come from OpenSSL's libcrypto: SHA-256 (fed whole
and in pieces that straddle the 64-byte blocks) against hashlib, and the payload MAC of
an authenticated frame (AES-256-GMAC under the payload key) against the Python codec's,
which computes it with the `cryptography` package."""

from __future__ import annotations

import ctypes
import hashlib

import numpy as np
import pytest

from alphac import wire
from alphac.testing import frames as fr

KEY = bytes(range(32))


class Sha(ctypes.Structure):  # struct rt_sha256: libcrypto's context and a failure flag
    _fields_ = [("ctx", ctypes.c_void_p), ("failed", ctypes.c_int)]


def _sha(lib, pieces) -> bytes:
    s, out = Sha(), (ctypes.c_ubyte * 32)()
    lib.rt_sha256_init(ctypes.byref(s))
    for p in pieces:
        lib.rt_sha256_update(ctypes.byref(s), p, len(p))
    assert lib.rt_sha256_final(ctypes.byref(s), out) == 0
    assert s.ctx is None  # the context is freed
    return bytes(out)


@pytest.mark.parametrize("n", [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 100_003])
def test_sha256_equals_hashlib(rtlib, n):
    data = bytes((i * 7 + n) & 0xFF for i in range(n))
    assert _sha(rtlib.lib, [data]) == hashlib.sha256(data).digest()
    cuts = sorted({0, n // 3, min(n, n // 3 + 1), (2 * n) // 3, n})
    assert _sha(rtlib.lib, [data[a:b] for a, b in zip(cuts, cuts[1:])]) == hashlib.sha256(data).digest()
    out = (ctypes.c_ubyte * 32)()
    rtlib.lib.rt_sha256_bytes.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
    assert rtlib.lib.rt_sha256_bytes(data, n, out) == 0 and bytes(out) == hashlib.sha256(data).digest()


def _mac(rtlib, tmp_path, words: np.ndarray) -> bytes:
    key = tmp_path / "run.key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    rt = rtlib.owner(1, "peers", "out", "--key", str(key))
    assert rtlib.lib.rt_read_key(rt) == 0, rtlib.message(rt)
    lib, out = rtlib.lib, (ctypes.c_ubyte * wire.PAYLOAD_MAC_BYTES)()
    lib.rt_payload_mac.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    assert lib.rt_payload_mac(rt, words.ctypes.data, len(words), out) == 0, rtlib.message(rt)
    return bytes(out)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 1000, 65_537])
def test_the_payload_mac_equals_the_codecs(rtlib, tmp_path, n):
    words = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    want = fr.payload_mac(KEY, rtlib.protocol, words.tobytes())
    assert len(want) == wire.PAYLOAD_MAC_BYTES == 16
    assert _mac(rtlib, tmp_path, words) == want


def test_the_payload_mac_covers_every_bit_and_the_length(rtlib, tmp_path):
    words = np.arange(9, dtype=np.uint64)
    base = _mac(rtlib, tmp_path, words)
    flipped = words.copy()
    flipped[8] ^= np.uint64(1 << 63)
    assert _mac(rtlib, tmp_path, flipped) != base
    assert _mac(rtlib, tmp_path, np.append(words, np.uint64(0))) != base  # one zero word more
    assert fr.payload_mac(KEY, rtlib.protocol + 1, words.tobytes()) != base  # another protocol's key

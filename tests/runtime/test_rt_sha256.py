"""SHA-256 and HMAC-SHA-256 of the C runtime against hashlib and hmac, fed whole and in
pieces that straddle the 64-byte blocks."""

from __future__ import annotations

import ctypes
import hashlib
import hmac

import pytest


class Sha(ctypes.Structure):
    _fields_ = [("h", ctypes.c_uint32 * 8), ("len", ctypes.c_uint64), ("buf", ctypes.c_ubyte * 64),
                ("used", ctypes.c_size_t)]


class Hmac(ctypes.Structure):
    _fields_ = [("inner", Sha), ("outer", Sha)]


def _sha(lib, pieces) -> bytes:
    s, out = Sha(), (ctypes.c_ubyte * 32)()
    lib.rt_sha256_init(ctypes.byref(s))
    for p in pieces:
        lib.rt_sha256_update(ctypes.byref(s), p, len(p))
    lib.rt_sha256_final(ctypes.byref(s), out)
    return bytes(out)


@pytest.mark.parametrize("n", [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 100_003])
def test_sha256_equals_hashlib(rtlib, n):
    data = bytes((i * 7 + n) & 0xFF for i in range(n))
    assert _sha(rtlib.lib, [data]) == hashlib.sha256(data).digest()
    cuts = sorted({0, n // 3, min(n, n // 3 + 1), (2 * n) // 3, n})
    assert _sha(rtlib.lib, [data[a:b] for a, b in zip(cuts, cuts[1:])]) == hashlib.sha256(data).digest()


@pytest.mark.parametrize("key_len", [0, 1, 32, 64, 65, 200])
def test_hmac_equals_the_hmac_module(rtlib, key_len):
    key = bytes(range(key_len))
    msg = b"alphac frame " * 11
    m, out = Hmac(), (ctypes.c_ubyte * 32)()
    rtlib.lib.rt_hmac_init(ctypes.byref(m), key, len(key))
    rtlib.lib.rt_sha256_update(ctypes.byref(m.inner), msg[:5], 5)
    rtlib.lib.rt_sha256_update(ctypes.byref(m.inner), msg[5:], len(msg) - 5)
    rtlib.lib.rt_hmac_final(ctypes.byref(m), out)
    assert bytes(out) == hmac.new(key, msg, hashlib.sha256).digest()


@pytest.mark.parametrize("blocks", [1, 2, 7, 64])
def test_the_processors_sha_instructions_and_portable_c_agree(rtlib, blocks):
    """The compression function the runtime picks at run time against the portable one; on a
    processor without SHA instructions both are the portable one."""
    import os

    lib = rtlib.lib
    for name in ("rt_sha256_portable", "rt_sha256_native"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    data = os.urandom(64 * blocks)
    states = []
    for name in ("rt_sha256_portable", "rt_sha256_native"):
        h = (ctypes.c_uint32 * 8)(0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                  0x1f83d9ab, 0x5be0cd19)
        getattr(lib, name)(h, data, blocks)
        states.append(list(h))
    assert states[0] == states[1]

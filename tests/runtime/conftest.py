"""The C role runtime in-process: the worker role of specs/lsq_plain_star.alpha (4 owners,
k = 2; and, for long frames, of specs/wide_star.alpha here, k = 131072) built as a host
shared library (kernels, image and runtime, as in the executable), driven through ctypes
with socketpairs, shared memory and temporary files; no processes but where a test kills
a peer."""

from __future__ import annotations

import ctypes
import socket
from pathlib import Path

import pytest

from alphac import driver
from alphac.image.cheader import runtime_codes

SPECS = Path(__file__).resolve().parents[2] / "specs"
SPEC = SPECS / "lsq_plain_star.alpha"
WIDE = Path(__file__).resolve().parent / "specs" / "wide_star.alpha"
ROLE = "worker"  # owners 1, 2, 3


class Xfer(ctypes.Structure):
    """struct xfer's fields a caller fills (alphac/runtime/frame.h); the rest is the
    exchange's own, sized by rt_xfer_bytes()."""

    _fields_ = [("peer", ctypes.c_int64), ("fd", ctypes.c_int), ("send", ctypes.c_int),
                ("kind", ctypes.c_uint64), ("version", ctypes.c_uint64), ("step", ctypes.c_uint64),
                ("buf", ctypes.c_void_p), ("len", ctypes.c_int64), ("add", ctypes.c_void_p),
                ("reuse", ctypes.c_int)]


class Arrival(ctypes.Structure):
    _fields_ = [("dst", ctypes.c_void_p), ("a", ctypes.c_void_p), ("b", ctypes.c_void_p),
                ("words", ctypes.c_int64), ("count", ctypes.c_int64)]


class Runtime:
    """One loaded library and the calls tests make into it."""

    def __init__(self, path: Path, plan):
        self.lib = ctypes.CDLL(str(path))
        self.plan = plan
        self._argv: dict = {}  # rt -> the argv array it was parsed from (kept alive with it)
        self.protocol = plan.protocol_id
        lib = self.lib
        p, i64, u64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64
        sig = {
            "rt_new": (p, []),
            "rt_message": (ctypes.c_char_p, [p]),
            "rt_attach": (None, [p, i64, ctypes.c_int, ctypes.c_int]),
            "rt_parse_args": (ctypes.c_int, [p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]),
            "rt_select_owner": (ctypes.c_int, [p]),
            "rt_read_peers": (ctypes.c_int, [p]),
            "rt_parse_endpoint": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_int)]),
            "rt_hostlist_text": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                                ctypes.c_char_p, ctypes.c_size_t]),
            "rt_tasks_per_node": (ctypes.c_int, [ctypes.c_char_p, p, i64, ctypes.POINTER(i64), ctypes.c_char_p,
                                                 ctypes.c_size_t]),
            "rt_hostfile_read": (ctypes.c_int, [ctypes.c_char_p, p, ctypes.c_char_p, ctypes.c_size_t]),
            "rt_names_free": (None, [p]),
            "rt_key_or_insecure": (ctypes.c_int, [p]),
            "rt_endpoint_text": (ctypes.c_int, [p, i64, ctypes.c_char_p, ctypes.c_size_t]),
            "rt_out_path": (ctypes.c_char_p, [p]),
            "rt_fnv": (u64, [p, i64, u64]),
            "rt_lanes": (None, [p, i64, i64, p]),
            "rt_checksum": (u64, [p, p, i64]),
            "rt_send_frame": (ctypes.c_int, [p, i64, u64, u64, u64, p, i64, ctypes.c_int]),
            "rt_recv_frame": (ctypes.c_int, [p, ctypes.c_int, i64, u64, u64, u64, p, i64, p,
                                             ctypes.POINTER(i64)]),
            "rt_stage_create": (ctypes.c_int, [p, p, ctypes.c_char_p, ctypes.c_char_p]),
            "rt_stage_write": (ctypes.c_int, [p, p, ctypes.POINTER(p), ctypes.POINTER(ctypes.c_size_t),
                                              ctypes.c_int, p]),
            "rt_stage_publish": (ctypes.c_int, [p, p]),
            "rt_stage_discard": (None, [p]),
            "rt_open_outputs": (ctypes.c_int, [p]),
            "rt_stage_output": (ctypes.c_int, [p]),
            "rt_output": (p, [p]),
            "rt_read_key": (ctypes.c_int, [p]),
            "rt_alloc": (ctypes.c_int, [p]),
            "rt_refuse_if_exists": (ctypes.c_int, [p, ctypes.c_char_p]),
            "rt_sockopts": (None, [p, ctypes.c_int]),
            "rt_self_connected": (ctypes.c_int, [ctypes.c_int]),
            "rt_sha256_init": (None, [p]),
            "rt_sha256_update": (None, [p, ctypes.c_char_p, ctypes.c_size_t]),
            "rt_sha256_final": (ctypes.c_int, [p, p]),
            "rt_exchange": (ctypes.c_int, [p, p, i64]),
            "rt_xfer_bytes": (ctypes.c_size_t, []),
            "rt_shm_offer": (ctypes.c_int, [p, i64]),
            "rt_shm_answer": (ctypes.c_int, [p, i64]),
            "rt_link_shm": (ctypes.c_int, [p, i64]),
            "rt_link_write": (ctypes.c_size_t, [p, i64, p, ctypes.c_size_t]),
            "alphac_add_lanes": (i64, [p, p, p, p, i64, i64, p]),
            "alphac_add_range": (i64, [p, p, p, i64, i64]),
            "alphac_mean_lanes": (i64, [p, p, i64, i64, p, i64]),
            "alphac_mean": (i64, [p, i64, i64]),
        }
        for name, (res, args) in sig.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args

    @staticmethod
    def code(rc: int) -> str:
        """The refusal code of a return value (0: ok, -1: done, --help or --version printed)."""
        return "ok" if rc == 0 else "done" if rc == -1 else runtime_codes()[rc - 1]

    def new(self):
        rt = self.lib.rt_new()
        assert rt
        return rt

    def message(self, rt) -> str:
        return self.lib.rt_message(rt).decode()

    def parse(self, rt, *args: str) -> int:
        argv = (ctypes.c_char_p * (len(args) + 2))(b"exe", *(a.encode() for a in args), None)
        # the runtime keeps pointers into argv (a process's argv lives as long as it does):
        # the array must live as long as `rt`, or a later message reads freed bytes
        self._argv[rt] = argv
        return self.lib.rt_parse_args(rt, len(args) + 1, argv)

    def owner(self, owner: int, peers: str = "peers", out: str = "out", *extra: str):
        """A runtime parsed as `--owner OWNER --peers PEERS --out OUT` and placed in its role."""
        rt = self.new()
        assert self.parse(rt, "--owner", str(owner), "--peers", peers, "--out", out, *extra) == 0
        assert self.lib.rt_select_owner(rt) == 0, self.message(rt)
        return rt

    def result(self, rt, rc: int) -> tuple[str, str]:
        return self.code(rc), (self.message(rt) if rc else "")

    @property
    def max_payload(self) -> int:
        return driver.image(self.plan, ROLE, "x86_64").max_payload

    @staticmethod
    def arrival(dst, a, b, words: int, count: int = -1) -> Arrival:
        """struct arrival over numpy arrays: dst[j] = a[j] + b[j] for j < words, or with a
        count, dst[j] = b[j] / count (b the payload received)."""
        add = Arrival()
        add.dst, add.a, add.b = dst.ctypes.data, None if a is None else a.ctypes.data, b.ctypes.data
        add.words, add.count = words, count
        return add

    def xfers(self, count: int):
        """count zeroed struct xfer, laid out as the library's."""
        size = self.lib.rt_xfer_bytes()
        cls = type("XferFull", (ctypes.Structure,), {"_fields_": [
            ("public", Xfer), ("_own", ctypes.c_ubyte * (size - ctypes.sizeof(Xfer)))]})
        assert ctypes.sizeof(cls) == size
        return (cls * count)()


def _library(tmp_path_factory, spec: Path, name: str, sanitize: bool = False) -> Runtime:
    plan = driver.plan(driver.deployment(str(spec)))
    out = tmp_path_factory.mktemp(name)
    return Runtime(driver.build(plan, ROLE, "x86_64", out, shared=True, sanitize=sanitize), plan)


@pytest.fixture(scope="session")
def rtlib(tmp_path_factory) -> Runtime:
    return _library(tmp_path_factory, SPEC, "rtlib")


@pytest.fixture(scope="session")
def sanlib(tmp_path_factory) -> Runtime:
    """rtlib's library built with AddressSanitizer and UBSan (`make test-sanitize`, which
    preloads their runtimes into Python)."""
    return _library(tmp_path_factory, SPEC, "sanlib", sanitize=True)


@pytest.fixture(scope="session")
def widelib(tmp_path_factory) -> Runtime:
    return _library(tmp_path_factory, WIDE, "widelib")


@pytest.fixture
def pair():
    """A connected socketpair: (the runtime's end as an fd, the test's socket)."""
    a, b = socket.socketpair()
    yield a.fileno(), b
    a.close()
    b.close()

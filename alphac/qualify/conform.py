"""`alphac conform`: how far the elementary-function kernels are from the real functions,
measured on this host, recorded as conformance evidence (alphac/plan/evidence.py).

For each function the kernel (alphac.codegen.elementary.host(name), or any callable mapping
a float64 array to a float64 array) is run on `count` arguments, and each result k is
compared with the real value y, computed with mpmath at REFERENCE_PREC bits
(alphac.oracle.elementary.real): its error in ulps is |k - y| / ulp(y), ulp(y) the spacing of
binary64 numbers in y's binade (2^-1074 below 2^-1022). For the correctly rounded functions
(exp, log, log1p, expm1) the words that differ from the correctly rounded result are
counted too (there must be none); for the declared algorithms (sigmoid, tanh) those that
differ from the oracle's evaluation of the algorithm.

The arguments, per function, all finite and in the domain where the result is finite:
  * `hard-cases`: the arguments of HARD_CASES (hard to round, each with its source);
  * `boundary` (a fifth of the rest): the regions of BOUNDARIES, near the overflow and
    underflow thresholds, zero and the subnormals, 1 for log, -1 for log1p, 20 for tanh;
  * `random-words` (half of what is left): uniformly random 64-bit words (sign, exponent
    and significand), kept where they are arguments of the domain;
  * `linear`: uniform on the ranges of LINEAR.
They depend on the seed and the count alone, not on the number of jobs.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from alphac.oracle import elementary as ref
from alphac.plan import evidence

FORMAT = evidence.FORMAT
FUNCTIONS = ref.FUNCTIONS
DEFAULT_COUNT = 10_000_000
REFERENCE_PREC = 128
CHUNK = 4096

# The largest x whose exp (and expm1) is finite: e^x < 2^1024 (1 - 2^-54) there and not at
# the next binary64 (tests/test_conform.py checks both).
EXP_MAX = float.fromhex("0x1.62e42fefa39efp+9")        # 709.782712893384
# The largest x whose exp rounds to 0: e^x < 2^-1075 there, not at the next binary64.
EXP_ZERO = float.fromhex("-0x1.74910d52d3052p+9")      # -745.1332191019412
# The largest x whose exp is subnormal (rounds below 2^-1022).
EXP_SUBNORMAL = float.fromhex("-0x1.6232bdd7abcd3p+9")  # -708.3964185322642
LARGEST = sys.float_info.max

# Arguments whose results are hard to round, with their source. Each value's run of
# identical bits after the rounding position is checked by tests/test_conform.py.
HARD_CASES: dict[str, tuple[tuple[str, str], ...]] = {
    "exp": (
        # V. Lefevre, J.-M. Muller, "Worst cases for correct rounding of the elementary
        # functions in double precision", ARITH-15 (2001): the worst case of exp for
        # round-to-nearest, e^x = 1.0000000007541752..., 57 identical bits after the
        # rounding bit
        ("0x1.9e9cbbfd6080bp-31", "Lefevre & Muller 2001, exp worst case (nearest)"),
        # e^x = 1 + x + x^2/2 + ...: at x = j 2^-53 (j odd) 1 + x is a midpoint of [1, 2)
        # and e^x exceeds it by j^2 2^-107; at x = -j 2^-54, 1 + x is a midpoint of [1/2, 1)
        ("0x1p-53", "Taylor series: 1 + 2^-53 is a midpoint"),
        ("0x1.8p-52", "Taylor series: 1 + 3 2^-53 is a midpoint"),
        ("0x1.4p-51", "Taylor series: 1 + 5 2^-53 is a midpoint"),
        ("-0x1p-54", "Taylor series: 1 - 2^-54 is a midpoint"),
        ("-0x1.8p-53", "Taylor series: 1 - 3 2^-54 is a midpoint"),
    ),
    "log": (
        # J.-M. Muller, "Elementary Functions: Algorithms and Implementation" (and Lefevre &
        # Muller 2001): log x = 470.2797657541441..., 64 zeros after the last bit: the worst
        # case of log for the directed roundings
        ("0x1.62a88613629b6p+678", "Lefevre & Muller 2001, log worst case (directed)"),
    ),
    "log1p": (
        # log1p(x) = x - x^2/2 + ...: 2^-53 - 2^-107 is a midpoint of [2^-54, 2^-53), and
        # -(2^-52 + 2^-105) one of [2^-52, 2^-51)
        ("0x1p-53", "Taylor series: 2^-53 - 2^-107 is a midpoint"),
        ("-0x1p-52", "Taylor series: -(2^-52 + 2^-105) is a midpoint"),
    ),
    "expm1": (
        # expm1(x) = x + x^2/2 + ...: 2^-52 + 2^-105 is a midpoint of [2^-52, 2^-51), and
        # -(2^-53 - 2^-107) one of [2^-54, 2^-53)
        ("0x1p-52", "Taylor series: 2^-52 + 2^-105 is a midpoint"),
        ("-0x1p-53", "Taylor series: -(2^-53 - 2^-107) is a midpoint"),
    ),
    "sigmoid": (),
    "tanh": (),
}

# Boundary regions: ("ulps", p, k) the binary64 numbers within k steps of p; ("interval",
# lo, hi) uniform on [lo, hi]; ("binades", sign, lo, hi) random words of magnitude in
# [2^lo, 2^hi) (lo = -1074: the subnormals too), sign +1, -1 or 0 (either).
BOUNDARIES: dict[str, tuple] = {
    "exp": (("ulps", EXP_MAX, 4096), ("interval", 700.0, EXP_MAX),
            ("ulps", EXP_ZERO, 4096), ("interval", -745.2, EXP_SUBNORMAL),
            ("ulps", EXP_SUBNORMAL, 4096), ("binades", 0, -1074, -20)),
    "log": (("ulps", 1.0, 4096), ("interval", 1.0 - 2.0 ** -8, 1.0 + 2.0 ** -8),
            ("binades", 1, -1074, -1022), ("ulps", 2.0 ** -1022, 4096),
            ("ulps", LARGEST, 4096), ("interval", 0.5, 2.0)),
    "log1p": (("ulps", -1.0, 4096), ("interval", -1.0, -1.0 + 2.0 ** -10),
              ("binades", 0, -1074, -20), ("ulps", LARGEST, 4096),
              ("interval", -0.5, 1.0)),
    "expm1": (("ulps", EXP_MAX, 4096), ("interval", 700.0, EXP_MAX),
              ("interval", -40.0, -36.0), ("binades", 0, -1074, -20),
              ("interval", -1.0, 1.0)),
    "sigmoid": (("binades", 0, -1074, -20), ("interval", -746.0, -700.0),
                ("interval", 30.0, 40.0), ("interval", -1.0, 1.0)),
    "tanh": (("ulps", 20.0, 4096), ("ulps", -20.0, 4096), ("interval", 19.0, 21.0),
             ("interval", -21.0, -19.0), ("binades", 0, -1074, -20), ("interval", -1.0, 1.0)),
}

# Uniform ranges of the `linear` arguments, the count split evenly between them.
LINEAR: dict[str, tuple[tuple[float, float], ...]] = {
    "exp": ((-745.2, EXP_MAX),),
    "log": ((0.0, 4.0), (0.0, 1e6)),
    "log1p": ((-1.0, 4.0),),
    "expm1": ((-40.0, 40.0), (-40.0, EXP_MAX)),
    "sigmoid": ((-40.0, 40.0),),
    "tanh": ((-40.0, 40.0),),
}

REGIONS = ("hard-cases", "boundary", "random-words", "linear")


# ----------------------------------------------------------------------------- arguments

def in_domain(name: str, x: np.ndarray) -> np.ndarray:
    """Where x is finite and the function's result is finite."""
    ok = np.isfinite(x)
    if name in ("exp", "expm1"):
        ok &= x <= EXP_MAX
    elif name == "log":
        ok &= x > 0.0
    elif name == "log1p":
        ok &= x > -1.0
    return ok


_SIGN = np.uint64(1 << 63)


def _ordered(x: np.ndarray) -> np.ndarray:
    """binary64 numbers as integers in their order (-0.0 and +0.0 both 0)."""
    bits = x.view(np.uint64)
    mag = (bits & ~_SIGN).astype(np.int64)
    return np.where(bits & _SIGN, -mag, mag)


def _from_ordered(n: np.ndarray) -> np.ndarray:
    mag = np.abs(n).astype(np.uint64)
    return np.where(n < 0, mag | _SIGN, mag).view(np.float64)


def _region(kind: tuple, n: int, rng: np.random.Generator) -> np.ndarray:
    if n <= 0:
        return np.empty(0)
    if kind[0] == "ulps":
        p, k = kind[1], kind[2]
        steps = np.arange(1, n + 1) // 2 * np.where(np.arange(1, n + 1) % 2, -1, 1)  # 0, 1, -1, 2, ...
        steps = steps[np.abs(steps) <= k] if n > 2 * k + 1 else steps
        return _from_ordered(_ordered(np.array([p]))[0] + steps.astype(np.int64))
    if kind[0] == "interval":
        return rng.uniform(kind[1], kind[2], n)
    _, sign, lo, hi = kind
    # magnitudes 2^e (1 + f), e uniform in [lo, hi), as words: the subnormals (lo = -1074)
    # are the exponent field 0, one word range among the binades
    lo_field, hi_field = max(lo + 1023, 0), hi + 1023
    fields = rng.integers(lo_field, hi_field, n, dtype=np.int64).astype(np.uint64)
    mantissa = rng.integers(0, 1 << 52, n, dtype=np.int64).astype(np.uint64)
    words = (fields << np.uint64(52)) | mantissa
    signs = rng.integers(0, 2, n).astype(bool) if sign == 0 else np.full(n, sign < 0)
    words = np.where(signs, words | _SIGN, words)
    return words.view(np.float64)


def _words(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    out, have = [], 0
    while have < n:
        words = rng.integers(0, np.iinfo(np.uint64).max, max(2 * (n - have), 1024),
                             dtype=np.uint64, endpoint=True)
        x = words.view(np.float64)
        x = x[in_domain(name, x)]
        out.append(x)
        have += len(x)
    return np.concatenate(out)[:n] if out else np.empty(0)


def _filled(name: str, parts: list[np.ndarray], n: int, rng: np.random.Generator,
            fallback: tuple) -> np.ndarray:
    """The parts' arguments in the domain, topped up to n from `fallback` (an interval)."""
    x = np.concatenate(parts) if parts else np.empty(0)
    x = x[in_domain(name, x)]
    while len(x) < n:
        more = rng.uniform(fallback[0], fallback[1], n - len(x))
        x = np.concatenate([x, more[in_domain(name, more)]])
    return x[:n]


def arguments(name: str, count: int, seed: int) -> dict[str, np.ndarray]:
    """The `count` arguments of `name`, by region (module docstring)."""
    rng = np.random.default_rng([seed, FUNCTIONS.index(name)])
    hard = np.array([float.fromhex(h) for h, _ in HARD_CASES[name]], dtype=np.float64)[:count]
    rest = count - len(hard)
    n_boundary = rest // 5
    n_words = (rest - n_boundary) // 2
    n_linear = rest - n_boundary - n_words
    kinds = BOUNDARIES[name]
    share = [n_boundary // len(kinds) + (i < n_boundary % len(kinds)) for i in range(len(kinds))]
    boundary = _filled(name, [_region(k, s, rng) for k, s in zip(kinds, share)], n_boundary, rng,
                       LINEAR[name][0])
    ranges = LINEAR[name]
    split = [n_linear // len(ranges) + (i < n_linear % len(ranges)) for i in range(len(ranges))]
    linear = _filled(name, [rng.uniform(lo, hi, s) for (lo, hi), s in zip(ranges, split)],
                     n_linear, rng, ranges[0])
    return {"hard-cases": hard, "boundary": boundary, "random-words": _words(name, n_words, rng),
            "linear": linear}


# ----------------------------------------------------------------------------- measuring

INF = "inf"


@dataclass
class Measured:
    """One function's measurement: the largest error (a raw mpf, or INF), where, and the
    words that differ from the oracle's."""

    n: int = 0
    max_err: object = None
    worst_x: float = math.nan
    worst_y: float = math.nan
    mismatches: int = 0
    first_mismatch: float | None = None

    def merge(self, other: "Measured") -> None:
        if _greater(other.max_err, self.max_err):
            self.max_err, self.worst_x, self.worst_y = other.max_err, other.worst_x, other.worst_y
        self.n += other.n
        self.mismatches += other.mismatches
        if self.first_mismatch is None:
            self.first_mismatch = other.first_mismatch


def _greater(a, b) -> bool:
    from mpmath.libmp import mpf_cmp

    if a is None:
        return False
    if b is None:
        return True
    if b == INF:
        return False
    if a == INF:
        return True
    return mpf_cmp(a, b) > 0


def ulps(k: float, y) -> object:
    """|k - y| / ulp(y) as a raw mpf (64 bits), INF for a non-finite k; y a raw mpf."""
    from mpmath.libmp import from_float, mpf_abs, mpf_shift, mpf_sub

    if not math.isfinite(k):
        return INF
    sign, man, exp, bc = y
    ulp_exp = -1074 if not man else max(exp + bc - 53, -1074)
    return mpf_shift(mpf_abs(mpf_sub(from_float(k), y, 64)), -ulp_exp)


def _same(a: float, b: float) -> bool:
    """The same binary64 word (NaNs alike)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def measure_chunk(task: tuple[str, np.ndarray, np.ndarray]) -> Measured:
    """Errors of the kernel's results `ys` at `xs` (module docstring)."""
    name, xs, ys = task
    xs, ys = np.asarray(xs, dtype=np.float64).tolist(), np.asarray(ys, dtype=np.float64).tolist()
    out = Measured()
    cr = name in ref.CORRECTLY_ROUNDED
    for x, k in zip(xs, ys):
        y = ref.real(name, x, REFERENCE_PREC)
        if cr:
            fixed = ref.special(name, x)
            expected = fixed if fixed is not None else ref.rounded_from(name, x, y, REFERENCE_PREC)
        else:
            expected = ref.evaluate(name, x)
        if not _same(k, expected):
            out.mismatches += 1
            if out.first_mismatch is None:
                out.first_mismatch = x
        err = ulps(k, y)
        if _greater(err, out.max_err):
            out.max_err, out.worst_x, out.worst_y = err, x, k
        out.n += 1
    return out


def _worker_signals() -> None:
    """A worker leaves interrupts to the command: it ignores Ctrl-C (the terminal sends it
    to the whole group) and ends quietly when the pool is terminated."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def ulps_text(err) -> str:
    """The error rounded up to 3 digits after the point, as a decimal string ('inf')."""
    from mpmath.libmp import from_int, mpf_ceil, mpf_mul, to_int

    if err is None:
        return "0.000"
    if err == INF:
        return INF
    q = int(to_int(mpf_ceil(mpf_mul(err, from_int(1000)))))
    return f"{q // 1000}.{q % 1000:03d}"


def _hex(x: float) -> str:
    return float(x).hex()


def measure(name: str, kernel: Callable, count: int, seed: int, jobs: int,
            progress: Callable[[str], None] | None = None) -> dict:
    """The record's entry for `name`: `count` arguments, the kernel's results, their errors."""
    regions = arguments(name, count, seed)
    xs = np.concatenate([regions[r] for r in REGIONS])
    ys = np.asarray(kernel(xs), dtype=np.float64)
    if ys.shape != xs.shape:
        raise ValueError(f"the {name} kernel returned {ys.shape} results for {xs.shape} arguments")
    chunks = (len(xs) + CHUNK - 1) // CHUNK
    tasks = ((name, xs[i:i + CHUNK], ys[i:i + CHUNK]) for i in range(0, len(xs), CHUNK))
    total = Measured()
    started = time.monotonic()
    if jobs <= 1 or chunks <= 1:
        results = map(measure_chunk, tasks)
        pool = None
    else:
        ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                          else "spawn")
        pool = ctx.Pool(min(jobs, chunks), initializer=_worker_signals)
        results = pool.imap(measure_chunk, tasks, chunksize=max(1, min(16, chunks // (8 * jobs))))
    try:
        for i, part in enumerate(results):
            total.merge(part)
            if progress and (i + 1) % 256 == 0:
                progress(f"{name}: {total.n} of {len(xs)} arguments, {time.monotonic() - started:.0f} s")
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    cr = name in ref.CORRECTLY_ROUNDED
    return {
        "level": ref.LEVELS[name],
        "max_ulps": ulps_text(total.max_err),
        "arguments": total.n,
        "regions": {r: int(len(regions[r])) for r in REGIONS},
        "mismatches_vs_correctly_rounded": total.mismatches if cr else None,
        "mismatches_vs_declared_algorithm": None if cr else total.mismatches,
        "first_mismatch": None if total.first_mismatch is None else _hex(total.first_mismatch),
        "worst_argument": _hex(total.worst_x),
        "worst_result": _hex(total.worst_y),
    }


# ----------------------------------------------------------------------------- the record

def host_facts() -> dict:
    from alphac.qualify.host import cpu_model

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpuinfo = f.read()
    except OSError:
        cpuinfo = ""
    facts = {"machine": platform.machine(), "cpu": cpu_model(cpuinfo), "system": platform.system()}
    try:
        import llvmlite.binding as llvm

        facts["llvm_cpu"] = llvm.get_host_cpu_name()
    except Exception:  # noqa: BLE001 - a fact about the host, absent where llvmlite is
        facts["llvm_cpu"] = None
    return facts


def kernels_for(target: str | None = None, cpu: str = "baseline") -> tuple[Callable[[str], Callable], dict]:
    """alphac's own kernels and their identity (the sha256 of the LLVM IR they are compiled
    from, where and how they run). Without `target`: JIT-compiled in this process for this
    host, at CPU level `cpu` (baseline or host); with one (x86_64, aarch64): compiled for it
    into one executable with a driver that only moves words, run under the target's runner
    (qemu-aarch64 for AArch64 elsewhere)."""
    from alphac.codegen import elementary

    identity = {"source": "alphac.codegen.elementary", "ir_sha256": elementary.ir_sha256()}
    if target is None:
        return (lambda name: elementary.host(name, cpu)), {
            **identity, "target": "host", "cpu": cpu}
    run = on_target(target)
    return (lambda name: functools.partial(run, name)), {**identity, "target": target, "cpu": "baseline"}


def conform(count: int = DEFAULT_COUNT, seed: int = 0, jobs: int | None = None,
            functions=FUNCTIONS, kernels: Callable[[str], Callable] | None = None,
            kernel_identity: dict | None = None,
            progress: Callable[[str], None] | None = None) -> dict:
    """The evidence record of `functions` (each measured on `count` arguments) of `kernels`
    (name -> a function of float64 arrays; by default this host's, `kernels_for()`)."""
    import mpmath
    from mpmath import libmp

    import alphac

    if kernels is None:
        kernels, kernel_identity = kernels_for()
    jobs = jobs or os.cpu_count() or 1
    entries = {}
    for name in functions:
        started = time.monotonic()
        entries[name] = measure(name, kernels(name), count, seed, jobs, progress)
        if progress:
            progress(f"{name}: {count} arguments, largest error {entries[name]['max_ulps']} ulps, "
                     f"{time.monotonic() - started:.1f} s")
    return {
        "format": FORMAT,
        "alphac": alphac.__version__,
        "host": host_facts(),
        "kernels": kernel_identity or {"source": "unnamed"},
        "reference": {"library": f"mpmath {mpmath.__version__}", "backend": libmp.BACKEND,
                      "precision_bits": REFERENCE_PREC},
        "seed": seed,
        "count": count,
        "functions": entries,
    }


def store(record: dict, directory: str | None = None):
    """Write the record into `directory` (default: the store, alphac.plan.evidence.store_dir);
    its sha256 and path. OSError when it cannot be written."""
    return evidence.write(record, evidence.store_dir() if directory is None else directory)


LEVEL_WORDS = {"correctly-rounded": "correctly rounded", "declared": "declared"}
TABLE_HEADER = ("| function | level | largest error (ulps) | arguments tested |\n"
                "|---|---|---|---|\n")


def table(record: dict) -> str:
    """The record as a markdown table, one row per function, in FUNCTIONS order (a stored
    record's keys are sorted)."""
    functions = record["functions"]
    rows = [f"| {name} | {LEVEL_WORDS[functions[name]['level']]} | {functions[name]['max_ulps']} | "
            f"{functions[name]['arguments']} |\n" for name in FUNCTIONS if name in functions]
    return TABLE_HEADER + "".join(rows)


def parse_table(text: str) -> dict[str, dict]:
    """The rows of a table `table` wrote, found in `text` (a document holding one):
    function -> {level, max_ulps, arguments}."""
    lines = text.splitlines()
    head = TABLE_HEADER.splitlines()[0]
    start = lines.index(head)
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name, level, err, n = cells
        rows[name] = {"level": level, "max_ulps": err, "arguments": int(n)}
    return rows


def on_target(target_name: str):
    """The kernels compiled for `target_name` (x86_64, aarch64) into one executable with
    the word-moving driver alphac/runtime/tools/elementary_main.c, run under the target's runner
    (qemu-aarch64 for AArch64 on another machine): a function (name, float64 array) ->
    float64 array. The executable is built once per process."""
    import numpy as np

    from alphac.codegen import elementary

    exe, runner = _target_executable(target_name)

    def run(name: str, xs):
        import subprocess

        if name not in elementary.FUNCTIONS:
            raise ValueError(f"unknown elementary function {name!r}")
        x = np.ascontiguousarray(xs, dtype="<f8")
        done = subprocess.run([*runner, str(exe), name], input=x.tobytes(), capture_output=True,
                              timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{exe.name} {name} exited {done.returncode}: "
                               f"{done.stderr.decode(errors='replace').strip()}")
        return np.frombuffer(done.stdout, dtype="<f8").reshape(x.shape)

    return run


@functools.lru_cache(maxsize=None)
def _target_executable(target_name: str):
    import subprocess
    import tempfile
    from pathlib import Path

    from alphac.codegen import elementary
    from alphac.resources import data_path
    from alphac.targets import compile_object, link_bytes, load_target

    target = load_target(target_name)
    tmp = Path(tempfile.mkdtemp(prefix="alphac-elementary-"))
    src = tmp / "elementary_main.c"
    src.write_bytes((data_path("alphac", "runtime") / "tools" / "elementary_main.c").read_bytes())
    obj = tmp / "elementary_main.o"
    subprocess.run([*target.cc, "-O2", "-std=c11", "-ffp-contract=off", "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True, timeout=120)
    exe = link_bytes(compile_object(elementary.vector_module(), target), target, tmp / f"elementary-{target_name}",
                     extra=(obj,))
    return exe, tuple(target.runner)

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

The arguments, per function (hard cases, boundaries, random words, linear ranges), are
alphac/qualify/arguments.py's.
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

from alphac.qualify.arguments import REGIONS, arguments

FORMAT = evidence.FORMAT
FUNCTIONS = ref.FUNCTIONS
DEFAULT_COUNT = 10_000_000
REFERENCE_PREC = 128
CHUNK = 4096


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

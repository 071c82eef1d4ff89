"""Which executables a launch must (re)build: the embedded `.alphac` metadata and staleness
by content, and the building of those that are missing or stale (`ensure_built`: each
executable of the plan's build order, alphac.executables.build_order, built through
alphac.executables.build).

Every build leaves a record of what it read beside the executable, `EXE.deps`: the sha256
of the compiler (its modules and the data shipped with them: grammar, std library,
targets, runtime sources) and of each input file (the spec, every module it imports, the
data files it loads). An executable is reused only if it exists, its metadata names the
plan's protocol identity, role and target and the CPU the build asks for (level, LLVM cpu
and features: a `host` build from another machine is rebuilt), and its record says that
the compiler and every input still hash the same; files beside the spec that it does not
import do not matter. Format (docs/launch.md): `alphac-deps 1`, `compiler SHA256`, then
`file SHA256 PATH` lines.
"""

from __future__ import annotations

import functools
import hashlib
import time
from pathlib import Path

from alphac.resources import sha256_file
from alphac.targets.elf import read_metadata
from alphac.targets.target import TargetError

_PACKAGE = Path(__file__).resolve().parents[1]
# What the compiler is made of: its modules and the data files shipped beside them.
_COMPILER_SUFFIXES = (".py", ".lark", ".alpha", ".toml", ".c", ".h")
DEPS_HEAD = "alphac-deps 1"


def deps_path(exe: str | Path) -> Path:
    p = Path(exe)
    return p.with_name(p.name + ".deps")


@functools.lru_cache(maxsize=1)
def compiler_digest() -> str:
    """sha256 over every file of the compiler, by path relative to the package, in order."""
    h = hashlib.sha256()
    for p in sorted(p for p in _PACKAGE.rglob("*") if p.suffix in _COMPILER_SUFFIXES and p.is_file()):
        h.update(str(p.relative_to(_PACKAGE)).encode() + b"\0" + sha256_file(p).encode() + b"\n")
    return h.hexdigest()


def record_inputs(exe: str | Path, inputs: tuple[str, ...]) -> Path:
    """Write `EXE.deps`: the compiler's digest and every input's (the build order's
    `inputs`), as read now."""
    lines = [DEPS_HEAD, f"compiler {compiler_digest()}"]
    lines += [f"file {sha256_file(p)} {p}" for p in inputs]
    path = deps_path(exe)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _recorded(exe: Path) -> tuple[str, dict[str, str]] | None:
    """(compiler digest, {path: sha256}) of EXE.deps, or None when it is missing or malformed."""
    try:
        lines = deps_path(exe).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if len(lines) < 2 or lines[0] != DEPS_HEAD or not lines[1].startswith("compiler "):
        return None
    files = {}
    for line in lines[2:]:
        word, _, rest = line.partition(" ")
        digest, _, path = rest.partition(" ")
        if word != "file" or len(digest) != 64 or not path:
            return None
        files[path] = digest
    return lines[1].split(" ", 1)[1], files


def stale_reason(exe: str | Path, protocol_hex: str, wanted, inputs: tuple[str, ...]) -> str | None:
    """Why `exe` must be rebuilt as the build order's `wanted` executable (alphac
    .executables.build_order: its role, target and CPU record) from its `inputs`, or None when it can
    be reused."""
    p = Path(exe)
    if not p.exists():
        return "missing"
    try:
        meta = read_metadata(p)
    except TargetError:
        return "no .alphac metadata"
    if str(meta.get("protocol")) != protocol_hex:
        return f"protocol {meta.get('protocol')} differs from the plan's {protocol_hex}"
    cpu = wanted.cpu
    if meta.get("role") != wanted.role or meta.get("target") != wanted.target:
        return "built for another role or target"
    if meta.get("cpu") != cpu:
        built = meta.get("cpu") or {}
        return (f"built for CPU level {built.get('level')} (LLVM cpu {built.get('llvm_cpu')}), "
                f"not {cpu['level']} (LLVM cpu {cpu['llvm_cpu']})")
    recorded = _recorded(p)
    if recorded is None:
        return f"no record of its inputs ({deps_path(p).name})"
    compiler, files = recorded
    if compiler != compiler_digest():
        return "the compiler changed"
    for path in inputs:
        if path not in files:
            return f"{path} is a new input"
    for path, digest in files.items():
        try:
            if sha256_file(path) != digest:
                return f"{path} changed"
        except OSError:
            return f"cannot read its input {path}"
    return None


LOCAL_CPU = "host"  # every owner of a launch runs on this machine


def ensure_built(plan, out_dir: str | Path, force: bool = False, log=None,
                 cpu: str = LOCAL_CPU, progress=None, faults: bool = False,
                 pairs: list[tuple[str, str]] | None = None) -> dict[tuple[str, str], Path]:
    """Build each executable of the plan's build order (`pairs`, default every (role,
    target) the placement needs; the kernels for the CPU level `cpu`, on targets that
    describe it: AArch64 ones for its baseline) into out_dir unless an up-to-date one is
    there (alphac.executables.build; `faults`: a test build's); `log` hears why each one is
    built, `progress` how long it took. A mutant's executables have their own names
    (`-mutant-NAME`) and identity, so they never stand in for a normal build's, nor it for
    theirs."""
    from alphac.executables import build_order

    order = build_order(plan, cpu, pairs)
    return {(w.role, w.target): path for w, path, _ in build_stale(plan, order, out_dir, force, log,
                                                                    progress, faults)}


def build_stale(plan, order, out_dir: str | Path, force: bool = False, log=None, progress=None,
                faults: bool = False):
    """ensure_built of a build order (alphac.executables.build_order) already made, one
    executable at a time: yields (wanted, path, why it was built or None when the one
    there was reused)."""
    from alphac.executables import build

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for wanted in order.wanted:
        path = out / wanted.name
        why = "forced" if force else stale_reason(path, plan.protocol_hex, wanted, order.inputs)
        if why is not None:
            if log:
                log(f"build {path.name}: {why}")
            t0 = time.perf_counter()
            path = build(plan, wanted.role, wanted.target, out, cpu=wanted.level, faults=faults)
            record_inputs(path, order.inputs)
            if progress is not None:
                progress.built(path.name, time.perf_counter() - t0)
        yield wanted, path, why

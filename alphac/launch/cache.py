"""Which executables a launch must (re)build: the embedded `.alphac` metadata and staleness
by content, and the building of those that are missing or stale (`ensure_built`: each
(role, target) the placement `needed`, through alphac.driver).

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
import os
import time
from pathlib import Path

from alphac.resources import sha256_file
from alphac.targets import levels, load_target
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


def data_files(dep) -> tuple[str, ...]:
    """The files the deployment's words were loaded from (`load "..."`): samples and initial
    words are embedded in the executables but are not part of the protocol identity."""
    L = dep.learner
    return tuple(src for src in (L.samples.source, L.initial.source, L.initial_state.source) if src)


def cpu_wanted(target: str, level: str) -> dict:
    """The `cpu` record of an executable for `target` built at `level`, resolved here."""
    return levels.record(levels.at_level(load_target(target), level))


def inputs(spec_file: str | Path | None, data: tuple[str, ...] = ()) -> list[str]:
    """The files a build of the spec reads: the spec, its modules, its data files."""
    found = _spec_files(str(spec_file)) if spec_file else []
    return sorted({str(Path(p).resolve()) for p in [*found, *data]})


_FOUND: dict[str, tuple[list[str], list[tuple[int, int] | None]]] = {}


def _stamps(paths: list[str]) -> list[tuple[int, int] | None]:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return out


def _spec_files(spec_file: str) -> list[str]:
    """driver.spec_files, parsed again only when one of the files it found has changed
    (an import added or removed changes the file that names it)."""
    from alphac import driver

    known = _FOUND.get(spec_file)
    if known is not None and _stamps([spec_file, *known[0]]) == known[1]:
        return known[0]
    found = list(driver.spec_files(spec_file))
    _FOUND[spec_file] = (found, _stamps([spec_file, *found]))
    return found


def record_inputs(exe: str | Path, spec_file: str | Path | None, data: tuple[str, ...] = ()) -> Path:
    """Write `EXE.deps`: the compiler's digest and every input's, as read now."""
    lines = [DEPS_HEAD, f"compiler {compiler_digest()}"]
    lines += [f"file {sha256_file(p)} {p}" for p in inputs(spec_file, data)]
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


def stale_reason(exe: str | Path, protocol_hex: str, role: str, target: str, cpu: dict,
                 spec_file: str | Path | None, data: tuple[str, ...] = ()) -> str | None:
    """Why `exe` must be rebuilt, or None when it can be reused (`cpu`: the record
    `cpu_wanted` gives for the level the build asks for)."""
    p = Path(exe)
    if not p.exists():
        return "missing"
    try:
        meta = read_metadata(p)
    except TargetError:
        return "no .alphac metadata"
    if str(meta.get("protocol")) != protocol_hex:
        return f"protocol {meta.get('protocol')} differs from the plan's {protocol_hex}"
    if meta.get("role") != role or meta.get("target") != target:
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
    for path in inputs(spec_file, data):
        if path not in files:
            return f"{path} is a new input"
    for path, digest in files.items():
        try:
            if sha256_file(path) != digest:
                return f"{path} changed"
        except OSError:
            return f"cannot read its input {path}"
    return None


def needed(dep) -> list[tuple[str, str]]:
    """Every (role, target) the placement needs, in owner order, each once."""
    out: list[tuple[str, str]] = []
    for o in range(dep.owners):
        key = (dep.role_of(o).name, dep.placement[o])
        if key not in out:
            out.append(key)
    return out


LOCAL_CPU = "host"  # every owner of a launch runs on this machine


def ensure_built(plan, out_dir: str | Path, force: bool = False, log=None,
                 cpu: str = LOCAL_CPU, progress=None, faults: bool = False) -> dict[tuple[str, str], Path]:
    """Build each needed (role, target) into out_dir unless an up-to-date one is there
    (alphac.driver.build; `faults`: a test build's), the kernels for the CPU level `cpu` (on
    targets that describe it: AArch64 ones for its baseline); `log` hears why each one is
    built, `progress` how long it took. A mutant's executables have their own names
    (`-mutant-NAME`) and identity, so they never stand in for a normal build's, nor it for theirs."""
    from alphac import driver

    dep = plan.deployment
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exes: dict[tuple[str, str], Path] = {}
    for role, target in needed(dep):
        level = driver.cpu_level_for(target, cpu)
        path, why = built_state(plan, role, target, out, level)
        why = "forced" if force else why
        if why is not None:
            if log:
                log(f"build {path.name}: {why}")
            t0 = time.perf_counter()
            path = driver.build(plan, role, target, out, cpu=level, faults=faults)
            record_inputs(path, dep.source_file or None, data_files(dep))
            if progress is not None:
                progress.built(path.name, time.perf_counter() - t0)
        exes[(role, target)] = path
    return exes


def built_state(plan, role: str, target: str, out_dir: str | Path, level: str) -> tuple[Path, str | None]:
    """Where the executable of (role, target) for CPU level `level` goes in out_dir, and why
    it must be built (None: the one there is up to date: stale_reason)."""
    from alphac import driver

    dep = plan.deployment
    path = Path(out_dir) / driver.executable_name(plan, role, target, level)
    return path, stale_reason(path, plan.protocol_hex, role, target, cpu_wanted(target, level),
                              dep.source_file or None, data_files(dep))

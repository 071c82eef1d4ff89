"""Which executables a launch must (re)build: the embedded `.alphac` metadata and staleness.

An executable is reused only if it exists, its metadata names the plan's protocol identity,
role and target and the CPU the build asks for (level, LLVM cpu and features: a `host`
build from another machine is rebuilt), and it is newer than the spec, the .alpha files it may import and every
file of the compiler: its modules and the data shipped with them (grammar, std library,
targets, runtime sources). Samples and initial words are embedded, not all in the identity.
"""

from __future__ import annotations

from pathlib import Path

from alphac.targets import levels, load_target
from alphac.targets.elf import read_metadata
from alphac.targets.target import TargetError

_PACKAGE = Path(__file__).resolve().parents[1]
# What the compiler is made of: its modules and the data files shipped beside them.
_COMPILER_SUFFIXES = (".py", ".lark", ".alpha", ".toml", ".c", ".h")


def _std_dir() -> Path:
    from alphac.check.modules import std_root

    return std_root()


def _newest_source_mtime(spec_file: str | Path | None) -> float:
    """The newest of: the spec, every .alpha file beside it or below (imports are resolved
    there), the std library, and every file of the compiler."""
    files = [p for p in _PACKAGE.rglob("*") if p.suffix in _COMPILER_SUFFIXES]
    files += _std_dir().rglob("*.alpha")
    if spec_file:
        spec = Path(spec_file)
        files.append(spec)
        if spec.parent.is_dir():
            files += spec.parent.rglob("*.alpha")
    newest = 0.0
    for p in files:
        try:
            newest = max(newest, p.stat().st_mtime)
        except OSError:
            pass
    return newest


def data_files(dep) -> tuple[str, ...]:
    """The files the deployment's words were loaded from (`load "..."`): samples and initial
    words are embedded in the executables but are not part of the protocol identity."""
    L = dep.learner
    return tuple(src for src in (L.samples.source, L.initial.source, L.initial_state.source) if src)


def cpu_wanted(target: str, level: str) -> dict:
    """The `cpu` record of an executable for `target` built at `level`, resolved here."""
    return levels.record(levels.at_level(load_target(target), level))


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
    if p.stat().st_mtime < _newest_source_mtime(spec_file):
        return "older than the spec or the compiler"
    for src in data:
        try:
            if p.stat().st_mtime < Path(src).stat().st_mtime:
                return f"older than its data file {src}"
        except OSError:
            return f"cannot read its data file {src}"
    return None

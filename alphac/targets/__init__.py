"""targets stage: target descriptions (alphac/targets/*.toml), object emission and linking.

    compile_object(module, target) -> bytes       target: a Target or its name
    link(objects, target, exe_path) -> Path
    runtime_object(target) -> Path                 the C role runtime, compiled and cached
    libraries_object(target, runtime) -> (Path,)   the members of the libraries it uses
"""

from __future__ import annotations

import os
from pathlib import Path

from alphac.targets.target import Target, TargetError, load_target, target_names


def _backend(target: "Target | str"):
    """The backend of a target name, or of a given Target value (e.g. with another cpu): its
    registered backend (a device target's keeps its host) holding that value."""
    from dataclasses import replace

    from alphac.targets.registry import backend

    found = backend(target.name if isinstance(target, Target) else target)
    return replace(found, target=target) if isinstance(target, Target) else found


def compile_object(module, target: "Target | str") -> bytes:
    """Lower an llvmlite `ir.Module` to a relocatable object for `target` (O2, PIC)."""
    return _backend(target).compile_object(module)


def link(objects, target: "Target | str", exe_path: "str | os.PathLike") -> Path:
    """Link one object (or several, in order) into an executable with the target's linker."""
    return _backend(target).link(objects, exe_path)


def link_bytes(obj: bytes, target: "Target | str", exe_path: "str | os.PathLike", extra=()) -> Path:
    """Link object bytes written under a fixed file name, then `extra` object files
    (reproducible builds)."""
    return _backend(target).link_bytes(obj, exe_path, extra)


def runtime_object(target: "Target | str", pic: bool = False, sanitize: bool = False, faults: bool = False) -> Path:
    """The C role runtime compiled for `target` (cached; see alphac.targets.runtime)."""
    from alphac.targets.runtime import runtime_object as build

    return build(target if isinstance(target, Target) else load_target(target), pic, sanitize, faults)


def libraries_object(target: Target, runtime: Path) -> "tuple[Path, ...]":
    """The members of `target`'s libraries the runtime object uses, linked once (cached;
    see alphac.targets.runtime): that object, or none for a target without libraries."""
    from alphac.targets.runtime import libraries_object as build

    return build(target, runtime)


__all__ = ["Target", "TargetError", "compile_object", "libraries_object", "link", "link_bytes",
           "load_target", "runtime_object", "target_names"]

"""targets stage: target descriptions (alphac/targets/*.toml), object emission and linking.

    compile_object(module, target) -> bytes       target: a Target or its name
    link(object_path, target, exe_path) -> Path
"""

from __future__ import annotations

import os
from pathlib import Path

from alphac.targets.target import Target, TargetError, load_target, target_names


def _backend(target: "Target | str"):
    """The backend of a target name, or of a given Target value (e.g. with another cpu)."""
    from alphac.targets.native import NativeBackend
    from alphac.targets.registry import backend

    found = backend(target.name if isinstance(target, Target) else target)
    return NativeBackend(target) if isinstance(target, Target) else found


def compile_object(module, target: "Target | str") -> bytes:
    """Lower an llvmlite `ir.Module` to a relocatable object for `target` (O2, PIC)."""
    return _backend(target).compile_object(module)


def link(object_path: "str | os.PathLike", target: "Target | str", exe_path: "str | os.PathLike") -> Path:
    """Link one object into an executable with the target's linker command."""
    return _backend(target).link(object_path, exe_path)


def link_bytes(obj: bytes, target: "Target | str", exe_path: "str | os.PathLike") -> Path:
    """Link object bytes written under a fixed file name (reproducible builds)."""
    return _backend(target).link_bytes(obj, exe_path)


__all__ = ["Target", "TargetError", "compile_object", "link", "link_bytes", "load_target",
           "target_names"]

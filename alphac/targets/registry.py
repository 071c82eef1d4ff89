"""Backends by target name: one small module per buildable target."""

from __future__ import annotations

from alphac.diagnostics import hinted
from alphac.targets import aarch64, sm86, x86_64
from alphac.targets.native import NativeBackend
from alphac.targets.target import TargetError, target_names

BUILDERS = {x86_64.NAME: x86_64.backend, aarch64.NAME: aarch64.backend, sm86.NAME: sm86.backend}


def buildable() -> tuple[str, ...]:
    """Targets executables can be built for today, sorted."""
    return tuple(sorted(BUILDERS))


def backend(name: str) -> NativeBackend:
    if name not in BUILDERS:
        known = target_names()
        if name in known:
            raise TargetError("target-not-buildable",
                              f"target {name!r} is described but cannot be built yet; "
                              f"buildable: {', '.join(buildable())}")
        raise TargetError("unknown-target", hinted(f"unknown target {name!r}; known: "
                                                   f"{', '.join(buildable())}", name, buildable()))
    return BUILDERS[name]()

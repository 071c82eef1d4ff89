"""CPU levels of a target: the baseline (its toml's `cpu`), the levels of its [levels]
tables, and `host`, this machine's CPU as LLVM sees it. A level fixes the kernels' LLVM cpu
and features, and the features of the target's `cpu_checks` an executable built for it
tests at startup (`refused: cpu-unsupported: ...` without them). The runtime is compiled
for the baseline at every level, and no level changes a result: nothing is contracted.

    names(target) -> ("baseline", ...)
    at_level(target, name) -> Target          TargetError unknown-cpu-level
    level_for(target, requested) -> str       the level a build asking for `requested` uses
    required_mask(target) -> int              bit i set: cpu_checks[i] is required
    runs_here(target) -> bool                 this machine has every feature it requires
    record(target) -> dict                    an executable's `cpu` metadata
    label(target) -> str                      how the executable names its level
"""

from __future__ import annotations

from dataclasses import replace

from alphac.targets.llvm import host_cpu
from alphac.targets.target import Target, TargetError

BASELINE = "baseline"
HOST = "host"


def names(target: Target) -> tuple[str, ...]:
    return (BASELINE, *(lv.name for lv in target.levels))


def at_level(target: Target, name: str) -> Target:
    """`target` with the cpu, features and requirements of its level `name`."""
    if name == BASELINE:
        return target
    lv = next((lv for lv in target.levels if lv.name == name), None)
    if lv is None:
        raise TargetError("unknown-cpu-level", f"target {target.name} has no CPU level {name!r}; "
                          f"levels: {', '.join(names(target))}")
    if not lv.host:
        return replace(target, cpu=lv.cpu, features=lv.features, level=name, requires=lv.requires)
    cpu, features, have = host_cpu()
    requires = tuple(check for check, feature in target.cpu_checks if feature in have)
    return replace(target, cpu=cpu, features=host_features(features, have), level=name, requires=requires)


def host_features(features: str, have: frozenset[str]) -> str:
    """The host level's features: the CPU's, and where it has AVX-512, its 512-bit vectors
    used (LLVM tunes such CPUs to prefer 256-bit ones). The vector width changes no result
    (nothing is reassociated or contracted), only how many lanes a loop runs at once."""
    return f"{features},-prefer-256-bit" if "avx512f" in have else features


def level_for(target: Target, requested: str) -> str:
    """The level a build asking for `requested` uses on `target`: that one, or the baseline
    on a target that describes none above it (AArch64: its owners run under qemu, and
    `generic` is what every AArch64 CPU runs)."""
    return requested if target.levels else BASELINE


def required_mask(target: Target) -> int:
    return sum(1 << i for i, (check, _) in enumerate(target.cpu_checks) if check in target.requires)


def runs_here(target: Target) -> bool:
    """Whether this machine's CPU has every feature `target`'s level requires."""
    llvm_name = dict(target.cpu_checks)
    have = host_cpu()[2] if target.requires else frozenset()
    return all(llvm_name[check] in have for check in target.requires)


def record(target: Target) -> dict:
    """What an executable records about its CPU level (the `.alphac` section's `cpu`)."""
    return {"level": target.level, "llvm_cpu": target.cpu, "features": target.features,
            "requires": list(target.requires)}


def label(target: Target) -> str:
    """How the executable names its level (--version, the cpu-unsupported refusal)."""
    return f"{target.level} (LLVM cpu {target.cpu})"

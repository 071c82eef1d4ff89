"""A plan's executables: which ones a build makes and what it reads (`build_order`), what
each embeds (`image`), and the build itself (`build`): kernels compiled by llvmlite, the C
runtime, the role image as data, linked. alphac.driver hands these on; the launcher asks
for a plan's build order once and then builds only what is stale (alphac.launch.cache).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from alphac.diagnostics import hinted
from alphac.targets.target import TargetError

if TYPE_CHECKING:
    from alphac.image import RoleImage
    from alphac.ir.nodes import Deployment
    from alphac.plan import Plan


@dataclass(frozen=True)
class Wanted:
    """One executable of a build: `role` on `target`, its kernels for the CPU `level` the
    build's requested level comes to on that target, its file `name`, and the `cpu` record
    (alphac.targets.levels.record) its metadata names."""

    role: str
    target: str
    level: str
    name: str
    cpu: dict


@dataclass(frozen=True)
class BuildOrder:
    """What a build of a plan at one CPU level makes (`wanted`, in owner order) and reads
    (`inputs`: the spec, every module it imports and the data files it loads, resolved and
    sorted; the samples and initial words those hold are embedded in the executables but
    are not part of the protocol identity)."""

    wanted: tuple[Wanted, ...]
    inputs: tuple[str, ...]


def needed(dep: "Deployment") -> list[tuple[str, str]]:
    """Every (role, target) the placement needs, in owner order, each once."""
    out: list[tuple[str, str]] = []
    for o in range(dep.owners):
        key = (dep.role_of(o).name, dep.placement[o])
        if key not in out:
            out.append(key)
    return out


def build_order(plan: "Plan", cpu: str = "baseline",
                pairs: "list[tuple[str, str]] | None" = None) -> BuildOrder:
    """The executables of `pairs` (default: every (role, target) the placement needs) built
    for the CPU level `cpu`, and the files such a build reads; TargetError
    (unknown-cpu-level)."""
    from alphac.check import module_files
    from alphac.image.image import executable_name as name
    from alphac.targets import levels, load_target

    dep = plan.deployment
    wanted = []
    for role, target in (needed(dep) if pairs is None else pairs):
        level = cpu_level_for(target, cpu)
        record = levels.record(levels.at_level(load_target(target), level))
        wanted.append(Wanted(role, target, level, name(plan, role, target, level), record))
    L = dep.learner
    data = [src for src in (L.samples.source, L.initial.source, L.initial_state.source) if src]
    found = module_files(dep.source_file) if dep.source_file else []
    return BuildOrder(tuple(wanted), tuple(sorted({str(Path(p).resolve()) for p in [*found, *data]})))


def image(plan: "Plan", role: str, target: str, cpu: str = "baseline") -> "RoleImage":
    """What the executable of `role` on `target`, its kernels built for the CPU level
    `cpu`, embeds; ImageError, TargetError (unknown-cpu-level)."""
    from alphac.image import CpuNeeds, build_image
    from alphac.targets import levels, load_target

    the_target = levels.at_level(load_target(target), cpu)
    needs = CpuNeeds(levels.label(the_target), levels.required_mask(the_target), the_target.level)
    return build_image(plan, role, target, needs)


def cpu_levels() -> tuple[str, ...]:
    """Every CPU level some buildable target describes: baseline first, then in the order
    of the targets' descriptions."""
    from alphac.targets import levels, load_target

    found: list[str] = []
    for name in buildable_targets():
        found += [lv for lv in levels.names(load_target(name)) if lv not in found]
    return tuple(found)


def cpu_level_for(target: str, requested: str) -> str:
    """The level `target`'s kernels are built for when a build asks for `requested`: that
    one, or the baseline on a target that describes no level above it (AArch64);
    TargetError unknown-cpu-level when no buildable target describes `requested`."""
    from alphac.targets import levels, load_target

    known = cpu_levels()
    if requested not in known:
        raise TargetError("unknown-cpu-level", hinted(f"unknown CPU level {requested!r}; levels: "
                                                      f"{', '.join(known)}", requested, known))
    return levels.level_for(load_target(target), requested)


def executable_name(plan: "Plan", role: str, target: str, cpu: str = "baseline") -> str:
    """`{spec}-{role}-{target}`, `-{LEVEL}` after it for kernels built for a CPU level above
    the baseline (on targets that describe it), and `-mutant-NAME` for a mutant's plan."""
    from alphac.image.image import executable_name as name

    return name(plan, role, target, cpu_level_for(target, cpu))


def build(plan: "Plan", role: str, target: str, out_dir: "str | os.PathLike",
          shared: bool = False, cpu: str = "baseline", sanitize: bool = False, faults: bool = False) -> Path:
    """Build the executable of `role` on `target` into `out_dir`; its path. The kernel
    module (programs, arithmetic, record) is compiled by llvmlite for the CPU level `cpu`
    (alphac.targets.levels: the executable refuses `cpu-unsupported` at startup on a CPU
    lacking what that level requires), the runtime by the
    target's C compiler (cached), the role image assembled as data (`.incbin`), and all
    three are linked under fixed names, so builds are byte-reproducible; the executable appears under its name only once whole. It is linked
    in a private directory beside it (`.NAME.RANDOM.partial/`) and moved into place;
    that directory is removed whatever happens (an error, Ctrl-C or another signal raised
    as KeyboardInterrupt), so an interrupted build leaves no partial file, even from a
    linker process that outlives the interrupt (its directory is gone).

    With `shared`, the same objects (the runtime compiled as position-independent code)
    become `lib{spec}-{role}-{target}.so` instead, a library whose runtime functions can
    be called in-process (tests/runtime). With `sanitize` (a test build, `make
    test-sanitize`; targets that run natively), the runtime is compiled and the whole
    linked with AddressSanitizer and UBSan (alphac.targets.runtime.SANITIZE). With `faults`
    (a test build), the runtime has the fault-injection hooks of docs/runtime.md, which no
    other build compiles; a mutant's executables that need them (the unweighted-mean,
    deliver-to-next and stale-replica mutants: `Mutation.test_build`) are test builds
    whatever `faults` says."""
    from dataclasses import replace

    from alphac.codegen.module import IMAGE, KERNEL_FIELDS, METADATA, kernel_module
    from alphac.image.metadata import SECTION as METADATA_SECTION
    from alphac.image.metadata import encode as encode_metadata
    from alphac.image.metadata import metadata_for
    from alphac.targets import TargetError, levels, libraries_object, link_bytes, load_target, runtime_object
    from alphac.targets.llvm import compile_kept
    from alphac.targets.runtime import SANITIZE, data_object

    the_target = levels.at_level(load_target(target), cpu)
    if sanitize and (the_target.runner or the_target.host):
        raise TargetError("target-not-buildable", f"{target}: a sanitized build runs natively only")
    _check_evidence(plan)
    the_image = image(plan, role, target, cpu)
    meta = metadata_for(plan, role, target, the_target.triple, levels.record(the_target))
    kernel_key = hashlib.sha256(pickle.dumps([getattr(the_image, f) for f in KERNEL_FIELDS], protocol=5)).hexdigest()
    obj = compile_kept(kernel_key, lambda: kernel_module(the_image), the_target)
    # three executed mutants compute in a test build's runtime only (Mutation.test_build)
    runtime = runtime_object(target, pic=shared, sanitize=sanitize, faults=faults or plan.mutation.test_build)
    libraries = libraries_object(the_target, runtime)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = executable_name(plan, role, target, cpu)
    exe = out / (f"lib{name}.so" if shared else name)
    if shared:
        the_target = replace(the_target, linker=(*the_target.cc, "-shared", "-o", "{exe}", "{objs}"))
    if sanitize:
        the_target = replace(the_target, linker=(the_target.linker[0], *SANITIZE, *the_target.linker[1:]))
    # named before it is made, so that an interrupt at any point finds it in `finally`
    staging = out / f".{exe.name}.{os.urandom(8).hex()}.partial"
    try:
        os.mkdir(staging, 0o700)
        partial = staging / exe.name
        data = staging / "image"
        data.mkdir()
        parts = {IMAGE: (the_image.encode(), ".rodata"), METADATA: (encode_metadata(meta), METADATA_SECTION)}
        if the_target.host:
            parts.update(_device_parts(plan, the_image, the_target))
        blob = data_object(the_target, parts, data)
        link_bytes(obj, the_target, partial, extra=(runtime, blob, *libraries))
        os.replace(partial, exe)
    finally:
        _remove_staging(staging)
    return exe


def _check_evidence(plan: "Plan") -> None:
    """A bounded contract's evidence must have measured the kernels this tree builds (the
    sha256 of their IR): a record of other kernels says nothing of these. ImageError
    (numerical-evidence-stale)."""
    contract, dep = plan.deployment.contract, plan.deployment
    if contract.relation == "exact":
        return
    from alphac.codegen.elementary import ir_sha256
    from alphac.image import ImageError
    from alphac.plan.evidence import EvidenceError, measured_kernels

    declared_in = contract.span.file if contract.span.line > 0 else dep.span.file
    try:
        measured = measured_kernels(contract.relation, declared_in)
    except (EvidenceError, OSError) as exc:
        raise ImageError("numerical-evidence-corrupt", f"the contract's evidence changed since "
                         f"it was checked: {getattr(exc, 'message', exc)}") from None
    if measured is not None and measured != ir_sha256():
        raise ImageError("numerical-evidence-stale",
                         f"the contract's conformance evidence measured kernels of IR sha256 "
                         f"{measured[:16]}..., these executables' are {ir_sha256()[:16]}...: run "
                         "`alphac conform` with this alphac and name the record it prints")


def _device_parts(plan: "Plan", the_image: "RoleImage", target) -> "dict[str, tuple[bytes, str]]":
    """A device target's kernels as PTX, its cubin, and the device table, as data parts."""
    from alphac.codegen.device import check_supported, device_module, device_table
    from alphac.targets.llvm import compile_assembly
    from alphac.targets.sm86 import assemble, device_parts

    check_supported(the_image)
    module, segs = device_module(the_image)
    ptx = compile_assembly(module, target)
    table = device_table(the_image, segs, plan.deployment.placement)
    return device_parts(ptx, assemble(ptx, target), table)


def _remove_staging(staging: Path) -> None:
    # a linker killed a moment ago may still be closing its output: retry briefly
    for _ in range(20):
        shutil.rmtree(staging, ignore_errors=True)
        if not staging.exists():
            return
        time.sleep(0.05)


def buildable_targets() -> tuple[str, ...]:
    """The targets executables can be built for today, sorted."""
    from alphac.targets.registry import buildable

    return buildable()

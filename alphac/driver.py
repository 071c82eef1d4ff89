"""The stages, one function each: what the commands, the launcher and the demo call.

    spec_path(arg) -> str                           `-` names standard input
    spec_files(path) -> list[str]                   the spec and every module it imports
    load(path) -> CheckedSpec                       parse, check, lower; CompileError
    deployment(path, name=None) -> Deployment       the file's deployment NAME, or its one;
                                                    CompileError
    check(path) -> CheckResult                      the checker, then the planner on every
                                                    deployment: all diagnostics at once
    plan(dep, mutant=None) -> Plan                  CompileError; MutantError (a mutant that
                                                    does not apply)
    image(plan, role, target, cpu) -> RoleImage     the plan as plain data for one executable;
                                                    ImageError
    build(plan, role, target, out_dir, cpu=LEVEL)   {out_dir}/{spec}-{role}-{target}[-LEVEL]: the
                                                    image's kernels (llvmlite, for the CPU
                                                    level) and the C runtime, linked
                                                    (-mutant-NAME appended for a mutant's
                                                    plan); its path; TargetError,
                                                    ImageError, CompileError
    cpu_levels(), cpu_level_for(target, level)      the CPU levels builds may ask for; the one
                                                    a target builds for when asked for LEVEL
    oracle(dep, rounds=None, mutant=None, key=None) OracleResult; Refusal; from dep.resume's
                                                    checkpoint when it resumes (its tag
                                                    checked under a run's `key`)
    MUTANTS                                         the executed mutants: name -> what it
                                                    computes instead
    resumed(dep, path, new_contract=False)          dep resuming from the checkpoint at path
    describe(exe) -> dict                           an executable's .alphac record and ELF
                                                    facts; TargetError
    inspect_checkpoint(path, key=None) -> dict      a checkpoint directory, verified;
                                                    CheckpointError
    checkpoint_words(path, key=None) -> dict        its logical words by region, verified
    read_key(path) -> bytes                         a key file's bytes, checked as the
                                                    executables check theirs
    path_kind(path) -> str                          "checkpoint", "output" or "executable"
    buildable_targets(), target_names()             the targets known and those buildable
    explain(code), explain_listing(), code_names()  `alphac explain`: the code catalogue

The driver owns which stage runs after which and what each one is handed; it prints
nothing and parses no command line (alphac.commands does both). Stages are imported when
first used, so a command loads only the stages it runs. `CompileError`, `TargetError` and
`Refusal` (the oracle's) and `CheckpointError` are the errors a caller catches; the other
stages' errors (image, mutants, launch) carry a `code` and a one-line `message`.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from alphac.diagnostics import CompileError, Diagnostic, DiagnosticBag, SourceCache, hinted
from alphac.ir.mutants import MUTANTS
from alphac.targets.target import TargetError

if TYPE_CHECKING:
    from alphac.image import RoleImage
    from alphac.ir.nodes import CheckedSpec, Deployment
    from alphac.oracle import OracleResult
    from alphac.plan import Plan

__all__ = ["CheckResult", "CheckpointError", "CompileError", "MUTANTS", "MutantError", "Refusal",
           "TargetError",
           "buildable_targets", "build", "check", "cpu_level_for", "cpu_levels", "deployment",
           "describe", "executable_name",
           "image", "inspect_checkpoint", "load", "oracle", "path_kind", "plan", "resumed",
           "target_names"]


def __getattr__(name: str):
    # The oracle's refusal, without loading the oracle for commands that never run it.
    if name == "Refusal":
        from alphac.oracle.refusal import Refusal

        return Refusal
    if name == "CheckpointError":
        from alphac.checkpoint import CheckpointError

        return CheckpointError
    if name == "MutantError":
        from alphac.plan.mutants import MutantError

        return MutantError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def spec_path(arg: str) -> str:
    """The spec a command line names: `-` is standard input (alphac.syntax.parse.STDIN)."""
    from alphac.syntax.parse import STDIN

    return STDIN if arg == "-" else arg


def spec_files(path: str) -> list[str]:
    """Every file a check of `path` reads: the spec and the modules it imports."""
    from alphac.check import module_files

    return module_files(path)


def load(path: str) -> "CheckedSpec":
    """The checked spec of `path`; CompileError holding every checker diagnostic."""
    from alphac.check import load_spec

    return load_spec(path)


# The most updates a command line may ask for (--rounds), the most a deployment may declare
# (deploymentUpdates, refused `updates-limit`): a typo of a few digits more must not start a
# run that never ends.
# alphac.check.values.MAX_UPDATES is the same number (tests/unit/test_bounds.py keeps them equal).
MAX_ROUNDS = 10**7


def deployment(path: str, name: str | None = None) -> "Deployment":
    """The deployment `name` of `path`, or its single one; CompileError (no-deployment if
    none, or several and none is named)."""
    from alphac.check import load_deployment

    return load_deployment(path, name)


@dataclass(frozen=True)
class CheckResult:
    """What `check` found: the checked spec (None when the checker refused the file), the
    diagnostics of the checker or else of the planner (capped: at most MAX_PER_CODE of one
    code, MAX_KEPT in all, alphac.diagnostics), the source texts to render them, and how
    many more of each code were found than kept."""

    spec: "CheckedSpec | None"
    diagnostics: tuple[Diagnostic, ...]
    sources: SourceCache
    suppressed: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.diagnostics


def check(path: str, name: str | None = None) -> CheckResult:
    """Check `path`, then plan each of its deployments (with `name`, that one alone, which
    must exist: no-deployment), so that what only the planner can see (tree coverage,
    separability, contracts, shard maps) is reported here too. Planner diagnostics come
    only once the checker has none, in deployment order."""
    from alphac.check import check_file, select_deployment

    spec, diagnostics, sources = check_file(path)
    if spec is None:
        return CheckResult(None, tuple(diagnostics), sources,
                           dict(getattr(diagnostics, "suppressed", {})))
    found = DiagnosticBag()
    try:
        chosen = spec.deployments if name is None else (select_deployment(spec, path, name),)
    except CompileError as err:
        found.extend(err.diagnostics)
        chosen = ()
    for dep in chosen:
        try:
            plan(dep)
        except CompileError as err:
            found.extend(err.diagnostics)
    for d in found.items:  # spans in files the checker did not read (IR built by hand)
        if sources.line(d.span.file, d.span.line) is None:
            _add_source(sources, d.span.file)
    return CheckResult(spec, tuple(found.items), sources, dict(found.suppressed))


def _add_source(sources: SourceCache, name: str) -> None:
    try:
        with open(name, encoding="utf-8") as fh:
            sources.add(name, fh.read())
    except (OSError, UnicodeDecodeError, ValueError):
        pass


def plan(dep: "Deployment", mutant: str | None = None) -> "Plan":
    """The plan of one deployment; CompileError carrying every planner diagnostic. A
    deployment that resumes from a checkpoint is planned, then its checkpoint's manifest is
    compared with the plan's learner and contract (alphac.image.resume). With `mutant` (one
    of MUTANTS), the plan of that executed mutant: executables built from it complete their
    communication but compute other words (alphac.plan.mutants; MutantError, with code
    `mutant-not-applicable`, when it does not apply to `dep`)."""
    from alphac.plan import plan as make_plan

    made = make_plan(dep, mutant)
    if dep.resume is not None:
        from alphac.image.resume import resume_diagnostics

        found = resume_diagnostics(made)
        if found:
            raise CompileError(found)
    return made


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
    other build compiles."""
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
    runtime = runtime_object(target, pic=shared, sanitize=sanitize, faults=faults)
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


def resumed(dep: "Deployment", path: "str | os.PathLike", new_contract: bool = False) -> "Deployment":
    """`dep` resuming from the checkpoint directory `path` (as given, e.g. on a command line:
    relative to the working directory), continuing its contract or, with `new_contract`,
    starting a new one on its state; it replaces a declared resume (keeping its span)."""
    from dataclasses import replace

    from alphac.ir.nodes import Resume

    span = dep.resume.span if dep.resume is not None else dep.span
    return replace(dep, resume=Resume(str(path), "new" if new_contract else "same", span))


def oracle(dep: "Deployment", rounds: int | None = None, mutant: str | None = None,
           tick=None, key: bytes | None = None, start=None) -> "OracleResult":
    """The independent binary64 evaluation of `rounds` updates (default: the deployment's);
    with `mutant`, of that executed mutant instead of the declared program (ValueError when
    it does not apply). A resumed deployment (`dep.resume`, declared or `resumed`) starts
    from its checkpoint's words and version u, verified, and evaluates updates u, u+1, ...:
    by default up to the deployment's update count. A checkpoint that does not verify, or
    of another learner (its learner line, programs included), or, continuing the same
    contract, taken on other inputs (its inputs line: samples and rate), refuses with the
    checkpoint's codes; with `key` (a run's key bytes) one whose root manifest is not tagged
    under it refuses `checkpoint-auth`. `start`: the checkpoint's Start already read (the
    words a launch verified), checked here like a fresh read. `tick(u)` hears each update u
    as the oracle finishes it."""
    from alphac.oracle import evaluate

    if dep.resume is None:
        return evaluate(dep, rounds, mutant=mutant, tick=tick)
    from alphac.image.ckpt import inputs_line, learner_line
    from alphac.oracle import Refusal, start_of
    from alphac.plan.storage import format_of

    start = start if start is not None else start_of(dep.resume.path, dep.learner, key)
    start.check_learner(dep.learner)
    if start.learner != learner_line(dep.learner, format_of(dep)):
        raise Refusal("checkpoint-learner-mismatch", f"{dep.resume.path} holds the words of another "
                      f"learner (programs) than deployment {dep.name}'s: learner {start.learner}")
    if dep.resume.mode == "same" and start.inputs != inputs_line(dep.learner):
        raise Refusal("checkpoint-learner-mismatch", f"{dep.resume.path} was taken on inputs {start.inputs}; "
                      f"deployment {dep.name} reads {inputs_line(dep.learner)} (a new contract goes on from "
                      "its state with these)")
    return evaluate(dep, rounds, start, mutant=mutant, tick=tick)


def inspect_checkpoint(path: "str | os.PathLike", key: bytes | None = None) -> dict:
    """A checkpoint directory, verified as a restore verifies it (with a run's `key`, its
    tag; every hash, file, header, version and the coverage of each region; CheckpointError
    otherwise): its version, identity, learner, inputs, contract, layout, regions, the
    manifest tree, every shard and fragment, what it resumed from, whether it is tagged and
    whether the tag was checked, and how many hashes were verified."""
    from alphac.checkpoint.inspect import describe_checkpoint

    return describe_checkpoint(path, key)


def checkpoint_words(path: "str | os.PathLike", key: bytes | None = None) -> dict:
    """A checkpoint's logical words by region ("parameters", "state"), as uint64 arrays,
    after verifying it whole (with `key`, its tag too); CheckpointError."""
    from alphac.checkpoint import logical_words, verify

    return logical_words(path, verify(path, key))


def read_key(path: "str | os.PathLike") -> bytes:
    """The bytes of a key file, checked as the executables check theirs; CheckpointError
    (key-file)."""
    from alphac.checkpoint.manifest import read_key as read

    return read(path)


def path_kind(path: "str | os.PathLike") -> str:
    """What `alphac inspect PATH` looks at: "checkpoint" (a directory), "output" (a file
    starting with the ALHAOUT1 magic) or "executable" (anything else)."""
    import struct

    from alphac.wire import OUTPUT_MAGIC

    p = Path(path)
    if p.is_dir():
        return "checkpoint"
    try:
        with p.open("rb") as f:
            head = f.read(8)
    except OSError:
        return "executable"
    if len(head) == 8 and struct.unpack("<Q", head)[0] == OUTPUT_MAGIC:
        return "output"
    return "executable"


def describe(exe: "str | os.PathLike") -> dict:
    """An executable's embedded record plus machine, elf_type, static and size."""
    from alphac.targets.elf import describe as describe_elf

    return describe_elf(exe)


def buildable_targets() -> tuple[str, ...]:
    """The targets executables can be built for today, sorted."""
    from alphac.targets.registry import buildable

    return buildable()


def target_names() -> tuple[str, ...]:
    """Every described target (targets/*.toml), buildable or not."""
    from alphac.targets.target import target_names as names

    return names()


def explain(code: str):
    """The explanation of a catalogued code (alphac.explain.Explanation), or None."""
    from alphac.explain import explain as find

    return find(code)


def explain_listing() -> str:
    """Every catalogued code by stage, one line each."""
    from alphac.explain import listing

    return listing()


def code_names() -> tuple[str, ...]:
    """Every catalogued code."""
    from alphac.codes import CATALOGUE

    return tuple(CATALOGUE)

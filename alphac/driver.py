"""The stages, one function each: what the commands, the launcher and the demo call.

    spec_path(arg) -> str                           `-` names standard input
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
    needed(dep) -> list[(role, target)]             what the placement needs, in owner order
    build_order(plan, cpu, pairs=None) -> BuildOrder  the executables a build at that level
                                                    makes (role, target, level, file name,
                                                    CPU record) and the files it reads: the
                                                    spec, its modules, its data files
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
first used, so a command loads only the stages it runs. `image`, `build`, `build_order` and
the CPU levels are alphac.executables', handed on here. `CompileError`, `TargetError` and
`Refusal` (the oracle's) and `CheckpointError` are the errors a caller catches; the other
stages' errors (image, mutants, launch) carry a `code` and a one-line `message`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from alphac.diagnostics import CompileError, Diagnostic, DiagnosticBag, SourceCache
from alphac.executables import (BuildOrder, build, build_order, buildable_targets, cpu_level_for, cpu_levels,
                                executable_name, image, needed)
from alphac.ir.mutants import MUTANTS
from alphac.targets.target import TargetError

if TYPE_CHECKING:
    from alphac.ir.nodes import CheckedSpec, Deployment
    from alphac.oracle import OracleResult
    from alphac.plan import Plan

__all__ = ["BuildOrder", "CheckResult", "CheckpointError", "CompileError", "MUTANTS", "MutantError", "Refusal",
           "TargetError",
           "buildable_targets", "build", "build_order", "check", "cpu_level_for", "cpu_levels", "deployment",
           "describe", "executable_name", "needed",
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


def resumed(dep: "Deployment", path: "str | os.PathLike", new_contract: bool = False) -> "Deployment":
    """`dep` resuming from the checkpoint directory `path` (as given, e.g. on a command line:
    relative to the working directory), continuing its contract or, with `new_contract`,
    starting a new one on its state; it replaces a declared resume (keeping its span)."""
    from dataclasses import replace

    from alphac.ir.nodes import Resume

    span = dep.resume.span if dep.resume is not None else dep.span
    return replace(dep, resume=Resume(str(path), "new" if new_contract else "same", span))


def oracle(dep: "Deployment", rounds: int | None = None, mutant: str | None = None,
           tick=None, key: bytes | None = None, start=None, schedule=None) -> "OracleResult":
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
    as the oracle finishes it. `schedule`: a bounded-staleness run's recorded reads
    (alphac.oracle.schedule)."""
    from alphac.oracle import evaluate

    if dep.resume is None:
        return evaluate(dep, rounds, mutant=mutant, tick=tick, schedule=schedule)
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
    return evaluate(dep, rounds, start, mutant=mutant, tick=tick, schedule=schedule)


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

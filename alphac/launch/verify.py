"""The outputs of a run that any launcher started (the files `alphac launch --emit` writes,
or a script of one's own), against the oracle: `alphac verify RUN_DIR SPEC`. The run is
judged by its commit record exactly as a local launch settles it, but nothing is linked or
removed (its owners may still be running); the report is a local launch's.

A run directory holds `owner-I.out` per owner (`--out-dir RUN`, or `--out RUN/owner-I.out`),
the root owner's commit record `owner-R.out.commit`, and, where the launcher wrote them,
`owner-I.stderr`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from alphac.launch.beside import OracleProgress, evaluate
from alphac.launch.checkpoints import changed_since, resume_of, resume_start
from alphac.launch.commit import commit_path
from alphac.launch.errors import LaunchError
from alphac.launch.interrupts import doing
from alphac.launch.plan_run import PlanRun, run_outputs, settled
from alphac.launch.report import LaunchReport, compare, resumed, unmatched
from alphac.launch.runner import stderr_name
from alphac.wire import output_name


@dataclass(frozen=True)
class Verification:
    report: LaunchReport
    unlinked: tuple[Path, ...]  # committed outputs their owners had not linked yet (still PATH.tmp)
    staged: tuple[Path, ...]    # files an uncommitted run staged (it may still be running)
    foreign: tuple[Path, ...] = ()  # files of a committed run that none of its owners writes there

    def foreign_error(self) -> str | None:
        """The message of `run-foreign-files`, or None when the run holds none."""
        if not self.foreign:
            return None
        names = ", ".join(p.name for p in self.foreign[:5])
        more = f" and {len(self.foreign) - 5} more" if len(self.foreign) > 5 else ""
        return (f"{self.foreign[0].parent} holds {len(self.foreign)} file(s) no owner of this committed "
                f"run of {len(self.report.rows)} owners writes there: {names}{more}")

    @property
    def notes(self) -> list[str]:
        out = []
        if self.unlinked:
            out.append(f"{len(self.unlinked)} committed output(s) are still staged ({self.unlinked[0].name}, ...): "
                       "read there; their owners stopped after the commit, or are finishing")
        if self.staged:
            out.append(f"{len(self.staged)} staged file(s) remain ({self.staged[0].name}, ...): the run is "
                       "still going, or it ended before its commit")
        return out


# The names an owner's outputs, staged files and commit records have (alphac.wire, commit.py).
_OUTPUT_NAME = re.compile(r"owner-(\d+)\.out(\.commit)?(\.tmp)?")


def foreign_files(run_dir: Path, owners: int, root: int, unlinked) -> list[Path]:
    """In a committed run of `owners` owners whose root is `root`, the files that look like
    an output, a staged file or a commit record and that none of its owners leaves there:
    another owner's output (owner-4.out of a 4-owner run), a staged file beside a published
    output, a second commit record, any other *.tmp or *.commit. Sorted by name."""
    expected = {output_name(o) for o in range(owners)} | {f"{output_name(root)}.commit"}
    expected |= {Path(p).name for p in unlinked}
    out = []
    for p in run_dir.iterdir():
        name = p.name
        if name in expected:
            continue
        published = run_dir / name[:-len(".tmp")]
        if name.endswith(".tmp") and published.name in expected and _same(p, published):
            continue  # linked, not yet removed: its owner is finishing
        if _OUTPUT_NAME.fullmatch(name) or name.endswith((".tmp", ".commit")):
            out.append(p)
    return sorted(out, key=lambda p: p.name)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _tag(start, key_file) -> str:
    """What the report says of the resumed checkpoint's tag."""
    if start is None or key_file is not None:
        return "checked"
    from alphac.checkpoint import CheckpointError, read_manifest

    try:
        return "none" if read_manifest(start.path).auth == "none" else "unchecked"
    except CheckpointError:
        return "unchecked"


def _stderr(run_dir: Path, report: LaunchReport) -> dict[int, str]:
    """What each owner that published nothing wrote to its stderr file, where there is one."""
    out = {}
    for r in report.rows:
        path = run_dir / stderr_name(r.owner)
        if r.params is None and path.is_file() and path.stat().st_size:
            out[r.owner] = path.read_text(errors="replace")
    return out


def verify(dep, run_dir: str | Path, rounds: int | None = None, spec: str = "", plan=None,
           resume=None, new_contract: bool = False, key_file=None) -> Verification:
    """Compare the owners' outputs in run_dir with the oracle's evaluation of `dep`: of the
    update count the commit record names (`rounds` overrides it), from `resume` (or the
    spec's resume declaration) when the run resumed a checkpoint, its tag checked under
    `key_file` when given (else reported "unchecked", or "none" when it has none).
    LaunchError `run-protocol-mismatch` when the record names another plan."""
    from alphac import driver

    plan = plan if plan is not None else driver.plan(dep)
    run_dir = Path(run_dir)
    outs = run_outputs(run_dir, dep.owners)
    run = settled(PlanRun(run_dir, None, None), outs, plan.tree.owner, settle=False)
    record = run.resolution.record
    if run.resolution.invalid is not None:
        raise LaunchError("commit-record-invalid", f"{run.resolution.invalid}; the run cannot be "
                          "judged: restore the root's record or verify a copy of the run")
    if record is not None and (record.protocol, record.owners) != (plan.protocol_id, dep.owners):
        raise LaunchError("run-protocol-mismatch", f"{commit_path(outs[plan.tree.owner])} names protocol "
                          f"{record.protocol:016x} of {record.owners} owners; {spec or dep.name} plans "
                          f"{plan.protocol_hex} of {dep.owners}")
    if rounds is not None and record is not None and rounds != record.updates:
        # checked before the oracle runs: its evaluation could only tell every owner apart
        raise LaunchError("run-rounds-mismatch", f"{commit_path(outs[plan.tree.owner])} commits "
                          f"{record.updates} updates; --rounds asks for {rounds} (leave it out to "
                          "verify the run's own count)")
    n = rounds if rounds is not None else record.updates if record is not None else dep.updates
    resume, new_contract = resume_of(dep, resume, new_contract)
    start = resume_start(resume, key_file) if resume is not None else None
    first = 0 if start is None else int(start.version)
    counted = OracleProgress(first, max(first, n) - 1)
    doing(counted)
    from alphac.launch.results import recorded_schedule

    schedule = recorded_schedule(run.outputs, dep.owners) if dep.consistency.bound else None
    oracle, refusal = evaluate(dep, n, start, resume, new_contract, tick=counted.tick, schedule=schedule)
    doing("comparing the owners' words with the oracle's")
    report = resumed(compare(plan, run, oracle, n, spec, refusal), resume, first, n, new_contract,
                     _tag(start, key_file))
    if start is not None:
        report = unmatched(report, changed_since(start))
    foreign = () if record is None else tuple(foreign_files(run_dir, dep.owners, plan.tree.owner,
                                                            run.resolution.unlinked.values()))
    return Verification(replace(report, stderr=_stderr(run_dir, report)),
                        tuple(run.resolution.unlinked.values()), tuple(run.resolution.staged), foreign)

"""What `alphac check` and `alphac plan` check of a declared resume, once the deployment is
planned: the checkpoint's manifest against the plan's checkpoint lines (`ckpt.py`), in the
restore's order (docs/checkpoints.md): its learner line (`checkpoint-learner-mismatch`),
its profile and relation (`numerical-profile-mismatch`), and, continuing the same
contract, its ordered operation list's digest (`numerical-order-mismatch`), then its
inputs line: the samples and rate (`checkpoint-learner-mismatch`). Each is
located at the resume declaration, with notes naming both values and the manifest's line.
The shards are not read here: the restore verifies them (`alphac inspect CKPT` does too).
"""

from __future__ import annotations

from alphac.checkpoint import CheckpointError, read_manifest
from alphac.diagnostics import Diagnostic
from alphac.image.ckpt import checkpoint_lines

PROFILE = ("format", "rounding", "subnormals", "exceptional", "relation")


def resume_diagnostics(plan) -> list[Diagnostic]:
    """Why the plan's deployment cannot resume from its declared checkpoint; [] if it can
    (or it declares none)."""
    dep = plan.deployment
    resume = dep.resume
    if resume is None:
        return []
    span = resume.span if resume.span.line > 0 else dep.span
    try:
        m = read_manifest(resume.path)
    except CheckpointError as err:
        note = (f"the deployment resumes from the checkpoint {resume.path}" if err.line == 0 else
                f"the resume declaration at {span} names this checkpoint")
        return [err.diagnostic(span, (note,))]
    lines = checkpoint_lines(plan)

    def at(item: str) -> str:
        return f"{m.path}:{m.line_of.get(item, 1)}"

    if m.learner != lines.learner:
        return [Diagnostic("checkpoint-learner-mismatch",
                           f"the checkpoint {resume.path} holds another learner than deployment "
                           f"{dep.name}'s", span, (
                               f"the checkpoint's learner: {m.learner} ({at('learner')})",
                               f"this deployment's learner: {lines.learner}",
                               *_learner_diffs(m.learner, lines.learner)))]
    theirs, ours = m.contract.split(" ", 6), lines.contract_fields()
    diffs = [f"{name}: {a!r} in the checkpoint, {b!r} here"
             for name, a, b in zip(PROFILE, theirs[:5], ours[:5]) if a != b]
    if diffs:
        return [Diagnostic("numerical-profile-mismatch",
                           f"the checkpoint {resume.path} was written under another numeric "
                           "profile or relation than this deployment's", span, (
                               *diffs,
                               f"the checkpoint's contract: {m.contract} ({at('contract')})",
                               f"this deployment's contract: {lines.contract}"))]
    if resume.mode == "same" and theirs[5] != ours[5]:
        notes = [f"the checkpoint's order sha256: {theirs[5]} ({at('contract')})",
                 f"this deployment's order sha256: {ours[5]}"]
        if theirs[6] != ours[6]:
            notes.append(f"topology: {theirs[6]} in the checkpoint, {ours[6]} here")
        notes.append("ResumeNewContract starts a new contract on the checkpoint's state")
        return [Diagnostic("numerical-order-mismatch",
                           f"the checkpoint {resume.path} continues another ordered operation "
                           f"list than deployment {dep.name}'s (ResumeSameContract)", span,
                           tuple(notes))]
    if resume.mode == "same" and m.inputs != lines.inputs:
        return [Diagnostic("checkpoint-learner-mismatch",
                           f"the checkpoint {resume.path} was taken on other inputs than deployment "
                           f"{dep.name}'s (ResumeSameContract)", span, (
                               f"the checkpoint's inputs: {m.inputs} ({at('inputs')})",
                               f"this deployment's inputs: {lines.inputs}",
                               *_learner_diffs(m.inputs, lines.inputs),
                               "ResumeNewContract goes on from the checkpoint's state with these inputs"))]
    return []


def _learner_diffs(theirs: str, ours: str) -> list[str]:
    a, b = theirs.split(" "), ours.split(" ")
    if len(a) != len(b):
        return []
    return [f"{a[i]}: {a[i + 1]} in the checkpoint, {b[i + 1]} here"
            for i in range(0, len(a) - 1, 2) if a[i] == b[i] and a[i + 1] != b[i + 1]]


"""The gate suite of a qualification run: what each gate launches and what it must show
(docs/qualify.md). A gate returns a Verdict: passed, failed or not run, a one-line detail,
and the digests it saw; the executables it ran are recorded by the Context it launches
through. Controls are gates whose failure makes the whole run invalid rather than failed:
they show that the checks would have caught a wrong result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from alphac.resources import data_path, sha256_file

PASSED, FAILED, NOT_RUN = "passed", "failed", "not-run"
GATE, CONTROL = "gate", "control"
# the executed mutant the refusal control runs, and the deployment it runs it on: data
# where the swapped tree gives other words (specs/order10_hierarchy.alpha)
CONTROL_MUTANT = "swap-branch"
CONTROL_SPEC = "order10_hierarchy"


def default_specs() -> Path:
    """The runnable learners of the gate suite: `specs/` beside the package in a checkout."""
    return Path(data_path("alphac")).parent / "specs"


class GateFailed(Exception):
    """A gate saw a result other than the one it must show; the message says which."""


@dataclass(frozen=True)
class Verdict:
    status: str
    detail: str = ""
    digests: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    """What gates share: where they build and run, where the gate specs are, the GPUs
    present, whether --gpu asks for the GPU gates, and the executables run so far
    (name -> sha256)."""

    work: Path
    specs: Path
    gpus: tuple = ()
    gpu_required: bool = False
    log: Callable[[str], None] = lambda message: None
    executables: dict[str, str] = field(default_factory=dict)

    def deployment(self, stem: str):
        from alphac import driver

        return driver.deployment(str(self.specs / f"{stem}.alpha"))

    def launch(self, dep, key: str, **options):
        """Build `dep` into work/key (what is missing), run every owner, compare with the
        oracle (alphac.launch.launcher.launch); the executables are recorded."""
        from alphac import driver
        from alphac.launch.cache import ensure_built
        from alphac.launch.launcher import launch

        plan = driver.plan(dep, options.get("mutant"))
        out = self.work / key
        for exe in ensure_built(plan, out, log=self.log).values():
            self.executables[exe.name] = sha256_file(exe)
        return launch(dep, out_dir=out, plan=plan, deadline_s=120.0, **options)


def _failures(report) -> str:
    more = len(report.failures) - 2
    return "; ".join(report.failures[:2]) + (f" (and {more} more)" if more > 0 else "")


def _matched(ctx: Context, dep, key: str, **options):
    """The launch's report; GateFailed unless every owner matched the oracle."""
    report = ctx.launch(dep, key, **options)
    if not report.match:
        raise GateFailed(f"{key}: {_failures(report)}")
    return report


def order(ctx: Context) -> Verdict:
    """The 10-owner order gate: the star and the hierarchy each equal their own oracle, on
    data where the two orders give different bits."""
    digests = {}
    for stem in ("order10_star", "order10_hierarchy"):
        digests[stem] = _matched(ctx, ctx.deployment(stem), stem).rows[0].digest
    if digests["order10_star"] == digests["order10_hierarchy"]:
        return Verdict(FAILED, "the star and the hierarchy gave the same words: the order is not shown", digests)
    return Verdict(PASSED, "star and hierarchy each equal their oracle, and differ", digests)


def mixed_isa(ctx: Context) -> Verdict:
    """The demo: x86-64 and AArch64 owners in one run, every one equal to the oracle."""
    dep = ctx.deployment("demo")
    targets = sorted(set(dep.placement))
    report = _matched(ctx, dep, "demo")
    digests = {f"demo owner {r.owner} ({r.target})": r.digest for r in report.rows}
    if len(targets) < 2:
        return Verdict(FAILED, f"the demo is placed on {targets[0]} alone", digests)
    return Verdict(PASSED, f"{dep.owners} owners on {' and '.join(targets)} equal the oracle", digests)


def assembled(report, k: int, m: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The logical (params, state) the owners' output files hold together: every word held
    by some owner, and alike by every owner holding it (else GateFailed)."""
    from alphac.launch.plan_run import run_outputs
    from alphac.launch.results import read_result

    params: list = [None] * k
    state: list = [None] * m
    for out in run_outputs(report.run_dir, len(report.rows)).values():
        res = read_result(out)
        for words, positions, into in ((res.params, res.param_coords, params), (res.state, res.state_offsets, state)):
            for i, w in zip(range(len(into)) if positions is None else positions, words):
                if into[i] not in (None, w):
                    raise GateFailed(f"owners hold word {i} differently")
                into[i] = w
    if None in params or None in state:
        raise GateFailed("a word is held by no owner")
    return tuple(params), tuple(state)


def partitioned(ctx: Context) -> Verdict:
    """Partitioned equivalence: the momentum star with everything partitioned equals its
    oracle, and its owners' words assembled are the replicated learner's words."""
    from alphac.oracle.words import digest

    part = ctx.deployment("lsq_momentum_partitioned_star")
    report = _matched(ctx, part, "partitioned")
    replicated = _matched(ctx, ctx.deployment("lsq_momentum_star"), "replicated")
    digests = {"partitioned, assembled": digest(*assembled(report, part.learner.k, part.learner.m)),
               "replicated": replicated.rows[0].digest}
    if digests["partitioned, assembled"] != digests["replicated"]:
        return Verdict(FAILED, "the partitioned owners' words are not the replicated learner's", digests)
    return Verdict(PASSED, "partitioned owners hold, between them, the replicated learner's words", digests)


def resume(ctx: Context) -> Verdict:
    """A checkpoint resumed on the other instruction set: the Adam hierarchy checkpoints at
    update 2 of 5; every owner restarted on the other ISA from it ends with the
    uninterrupted run's words."""
    dep = ctx.deployment("lsq_adam_hierarchy_ckpt")
    swap = {"x86_64": "aarch64", "aarch64": "x86_64"}
    other = dataclasses.replace(dep, placement=tuple(swap[t] for t in dep.placement))
    first = _matched(ctx, dep, "resume-first", checkpoint_dir=ctx.work / "resume-ckpt")
    ckpt = ctx.work / "resume-ckpt" / "ckpt-2"
    again = _matched(ctx, other, "resume-other-isa", resume=ckpt, checkpoint_dir=ctx.work / "resume-ckpt2")
    digests = {"uninterrupted": first.rows[0].digest, "resumed on the other ISA": again.rows[0].digest,
               "ckpt-2 manifest.txt": sha256_file(ckpt / "manifest.txt")}
    if [r.digest for r in again.rows] != [r.digest for r in first.rows]:
        return Verdict(FAILED, "the resumed owners' words are not the uninterrupted run's", digests)
    placed = "/".join(dict.fromkeys(other.placement))
    return Verdict(PASSED, f"ckpt-2 resumed on {placed} ends with the uninterrupted run's words", digests)


# The SM86 learners the sm86 gate launches on the GPU present (every owner on SM86).
SM86_SPECS = ("partitioned_regression_sm86", "coordinate_device", "coordinate_memory")


def sm86(ctx: Context) -> Verdict:
    """SM86 owners on the GPU present: each SM86 learner equals its oracle."""
    if not ctx.gpus:
        return Verdict(FAILED if ctx.gpu_required else NOT_RUN, "no GPU on this host")
    digests = {stem: _matched(ctx, ctx.deployment(stem), stem).rows[0].digest for stem in SM86_SPECS}
    return Verdict(PASSED, f"{', '.join(SM86_SPECS)}: every SM86 owner equals its oracle", digests)


def refusal_control(ctx: Context) -> Verdict:
    """An executed mutant (the combine tree's branches swapped) completes its run, and
    every owner is refused by the comparison with the declared program's oracle."""
    report = ctx.launch(ctx.deployment(CONTROL_SPEC), f"control-{CONTROL_MUTANT}", mutant=CONTROL_MUTANT)
    digests = {f"{CONTROL_SPEC} as {CONTROL_MUTANT}": report.rows[0].digest or "-"}
    accepted = [r.owner for r in report.rows if r.match]
    if accepted:
        return Verdict(FAILED, f"owners {accepted} of the mutant were accepted", digests)
    if not report.mutant_match:
        return Verdict(FAILED, "the mutant's owners did not compute the mutant's evaluation: "
                       + _failures(report), digests)
    return Verdict(PASSED, f"mutant {CONTROL_MUTANT} ran to the end and every owner was refused", digests)


def host_shadow_control(ctx: Context) -> Verdict:
    """On GPUs: device-resident state differs from its host shadow, and the run must
    publish the device's words, not the shadow's. Shown through the stand-in driver
    (tests/device), which can corrupt the shadow; a real run offers no hook to do so yet."""
    if not ctx.gpus:
        return Verdict(NOT_RUN, "no GPU on this host")
    return Verdict(NOT_RUN, "no hook corrupts the host shadow of a real GPU run yet "
                   "(shown through the stand-in driver: tests/device)")


@dataclass(frozen=True)
class Gate:
    name: str
    kind: str
    run: Callable[[Context], Verdict]
    needs: str = ""  # a control applies only when this gate ran

    @property
    def summary(self) -> str:
        return (self.run.__doc__ or "").split("\n\n")[0].replace("\n", " ")


GATES = (Gate("order", GATE, order), Gate("mixed-isa", GATE, mixed_isa), Gate("partitioned", GATE, partitioned),
         Gate("resume", GATE, resume), Gate("sm86", GATE, sm86),
         Gate("refusal", CONTROL, refusal_control), Gate("host-shadow", CONTROL, host_shadow_control, needs="sm86"))
BY_NAME = {g.name: g for g in GATES}

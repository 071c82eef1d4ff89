"""Launching a deployment: build what is missing, run every owner, compare with the oracle.

The API other tools call (the CLI, the demo, the gate tests, benchmarks), each in its module
under alphac.launch:

    exes   = cache.ensure_built(plan, out_dir, cpu="host")        # {(role, target): Path}
    run    = plan_run.run_plan(dep, exes, run_dir, root=plan.tree.owner)  # start owners, deadline, cleanup
    report = report.compare(plan, run, oracle, rounds)            # per-owner rows, word for word
    report = launcher.launch(dep, out_dir=.., rounds=..)          # all three

Owners run on 127.0.0.1, each from its (role, target) executable, AArch64 ones under the
target's runner (qemu-aarch64); results go to a fresh run directory every time. Every owner
runs on this machine, so the x86-64 kernels are built for its own CPU (level `host`)
unless the caller asks for another level. Where the run's checkpoints go and what it
resumes is alphac.launch.checkpoints; the oracle evaluates beside the owners
(alphac.launch.beside).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from alphac.launch.beside import Beside, OracleProgress, evaluate
from alphac.launch.cache import LOCAL_CPU, ensure_built
from alphac.launch.checkpoints import (changed_since, checkpoint_key_file, checkpoint_place, resume_of, resume_start,
                                       run_arguments)
from alphac.launch.errors import LaunchError
from alphac.launch.interrupts import doing, interruptible
from alphac.launch.plan_run import owner_timeout_ms, run_plan
from alphac.launch.report import LaunchReport, compare, resumed, unmatched
from alphac.launch.runs import new_run_dir, spec_stem


@interruptible()
def launch(dep, out_dir: str | Path = "out", rounds: int | None = None,
           deadline_s: float = 120.0, timeout_ms: int | None = None, spec: str = "",
           plan=None, log=None, checkpoint_dir=None, resume=None,
           new_contract: bool = False, mutant: str | None = None,
           transport: str | None = None, cpu: str = LOCAL_CPU, progress=None,
           oracle_cache: bool = True) -> LaunchReport:
    """Plan, build what is missing (the x86-64 kernels for the CPU level `cpu`), run every
    owner while the oracle evaluates beside them (a thread: the numba engine and numpy
    release the interpreter's lock), compare. With
    `resume` (or the spec's resume declaration) every owner restores the checkpoint at that
    path, verified whole first, and the oracle continues from its words; `checkpoint_dir`
    overrides where the deployment's checkpoints go; `transport` is what the owners may use
    (run_plan). With `mutant`, the owners are that executed mutant's executables, compared
    with the declared program's oracle (so every owner should mismatch); the report also
    says whether they computed the oracle's evaluation of the mutant. SIGINT, SIGTERM and
    SIGHUP raise interrupts.Interrupted in any of these steps, after every owner is stopped
    (interrupts.interruptible; the previous handlers are restored). `progress`
    (alphac.launch.progress.Progress) shows the builds, the owners and their updates as
    they happen."""
    from alphac import driver

    ends = time.monotonic() + deadline_s
    if mutant is not None and (resume is not None or checkpoint_dir is not None):
        raise LaunchError("mutant-not-applicable", f"mutant {mutant}: a mutant's words are not the "
                          "declared program's; it neither writes nor resumes checkpoints")
    doing("planning")
    plan = plan if plan is not None else driver.plan(dep, mutant)
    n = dep.updates if rounds is None else rounds
    resume, new_contract = resume_of(dep, resume, new_contract)
    start = resume_start(resume, checkpoint_key_file()) if resume is not None else None
    first = 0 if start is None else int(start.version)
    home = None
    if mutant is None:  # a mutant neither writes nor resumes checkpoints
        checkpoint_dir, home = checkpoint_place(dep, checkpoint_dir, first, n)
    doing("building the executables")
    exes = ensure_built(plan, out_dir, log=log, cpu=cpu, progress=progress)
    left = max(0.001, ends - time.monotonic())
    if timeout_ms is None:
        timeout_ms = owner_timeout_ms(left)
    run_dir = new_run_dir(out_dir, spec_stem(dep))
    if home is not None:  # the run's own: RUN/D
        checkpoint_dir = run_dir / home
    args = run_arguments(checkpoint_dir, resume, new_contract)

    # the oracle (and a mutant's) evaluates while the owners run, unless an earlier launch
    # of this plan kept its words (never for a resumed run)
    from alphac.launch import oracle_cache as kept

    # (bounded staleness: once they have ended, replaying the schedule their outputs record)
    declared = kept.key(dep, plan.protocol_hex, n, None) if oracle_cache and start is None else None
    counted = OracleProgress(first, max(first, n) - 1)
    recorded = dep.consistency.bound > 0
    mutated = OracleProgress(0, n - 1, f"the oracle of mutant {mutant}")
    theirs = kept.key(dep, plan.protocol_hex, n, mutant) if oracle_cache and mutant else None

    def oracles(schedule=None) -> tuple[Beside, Beside | None]:
        """The declared program's oracle and the mutant's, each in its thread."""
        expected = Beside(lambda: evaluate(dep, n, start, resume, new_contract, tick=counted.tick,
                                           kept=declared, schedule=schedule))
        return expected, Beside(lambda: evaluate(dep, n, None, None, False, mutant, tick=mutated.tick,
                                                 kept=theirs, schedule=schedule)) if mutant else None
    expected, as_mutant = oracles() if not recorded else (None, None)
    doing(lambda: f"the owners ran ({counted()})")
    run = run_plan(dep, exes, run_dir, updates=rounds,
                   timeout_ms=timeout_ms, deadline_s=left, root=plan.tree.owner,
                   extra_argv={o: args for o in range(dep.owners)}, transport=transport,
                   progress=progress)
    latest = None
    if home is not None:
        from alphac.launch.runs import point_latest

        latest = point_latest(out_dir, home, checkpoint_dir)
    if progress is not None:
        progress.say(f"comparing with the oracle's {n} updates")
    if recorded:
        from alphac.launch.results import recorded_schedule

        expected, as_mutant = oracles(recorded_schedule(run.outputs, dep.owners))
    doing(lambda: f"{counted()} (the owners had ended)")
    oracle, refusal = expected.result()
    doing("comparing the owners' words with the oracle's")
    report = resumed(compare(plan, run, oracle, n, spec, refusal), resume, first, n, new_contract)
    if start is not None:
        report = unmatched(report, changed_since(start))
    if checkpoint_dir is not None:
        report = replace(report, checkpoint_dir=Path(checkpoint_dir), latest=latest)
    if as_mutant is None:
        return report
    doing(lambda: f"{mutated()} (the owners had ended)")
    oracle, refusal = as_mutant.result()
    theirs = compare(plan, run, oracle, n, spec, refusal)
    return replace(report, mutant=mutant, mutant_match=theirs.match or theirs.refusals_agree)

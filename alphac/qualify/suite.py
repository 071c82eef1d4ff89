"""One qualification run: the selected gates and every control, on this host, judged and
recorded in the tracker (alphac.qualify.tracker) once they have all ended."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Sequence

from alphac.qualify.gates import (BY_NAME, CONTROL, FAILED, GATE, GATES, NOT_RUN, PASSED, Context, GateFailed,
                                  Verdict, default_specs)
from alphac.qualify.host import this_build, this_host
from alphac.qualify.tracker import GateRecord, RunRecord, record


def gate_names() -> list[str]:
    """The gates a run may select (the controls run in every run)."""
    return [g.name for g in GATES if g.kind == GATE]


def verdict(gates: Sequence[GateRecord]) -> str:
    """`invalid` when a control that applies did not pass (it applies unless it needs a gate
    that did not run), else `failed` when a gate failed, else `passed`."""
    ran = {g.name for g in gates if g.status != NOT_RUN}
    for g in gates:
        needs = BY_NAME[g.name].needs
        if g.kind == CONTROL and (not needs or needs in ran) and g.status != PASSED:
            return "invalid"
    return "failed" if any(g.status == FAILED for g in gates) else "passed"


def _one_line(exc: Exception) -> str | None:
    """A stage's error as `code: message`; None for anything else (a bug, raised again)."""
    from alphac.diagnostics import CompileError

    if isinstance(exc, GateFailed):
        return str(exc)
    if isinstance(exc, CompileError):
        d = exc.diagnostics[0]
        return f"{d.code}: {d.message}"
    code = getattr(exc, "code", None)
    return None if code is None else f"{code}: {getattr(exc, 'message', str(exc))}"


def run_gate(name: str, ctx: Context) -> GateRecord:
    gate = BY_NAME[name]
    ctx.executables = {}
    start = time.monotonic()
    try:
        v = gate.run(ctx)
    except Exception as exc:
        line = _one_line(exc)
        if line is None:
            raise
        v = Verdict(FAILED, line)
    return GateRecord(gate.name, gate.kind, v.status, v.detail, time.monotonic() - start, dict(v.digests),
                      dict(ctx.executables))


def qualify(db: str | Path, selection: Iterable[str] | None = None, gpu_required: bool = False,
            work: str | Path | None = None, specs: str | Path | None = None,
            log: Callable[[str], None] = lambda m: None) -> RunRecord:
    """Run the selected gates (default: all) and every control, in the suite's order, then
    record the run in `db`. Executables are built into `work` (default: a temporary
    directory, removed afterwards); the gate specs are read from `specs` (default: the
    checkout's specs/)."""
    chosen = set(gate_names() if selection is None else selection)
    unknown = sorted(chosen - set(gate_names()))
    assert not unknown, unknown
    host, build = this_host(), this_build()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.monotonic()
    temp = work is None
    work = Path(tempfile.mkdtemp(prefix="alphac-qualify-") if temp else work)
    ctx = Context(work, Path(specs) if specs is not None else default_specs(), host.gpus, gpu_required, log)
    try:
        gates = []
        for g in GATES:
            if g.kind == CONTROL or g.name in chosen:
                log(f"{g.kind} {g.name}")
                gates.append(run_gate(g.name, ctx))
    finally:
        if temp:
            shutil.rmtree(work, ignore_errors=True)
    run = RunRecord(secrets.token_hex(8), started, time.monotonic() - t0, verdict(gates), build, host, tuple(gates))
    record(db, run)
    return run

"""One run of a plan's owners on this machine, and its settling: `run_plan` starts them from
their executables with the run's peers file, key file and options, waits up to a deadline,
stops and reaps what is left, then settles the run by its commit record (`settled`) and
reads the committed outputs, the owners' connections reports and their stats into a
`PlanRun`. The run's files are named here: RUN/owner-I.out (`run_outputs`), RUN/run.key
(`write_key`), RUN/owner-I.connections and RUN/owner-I.stats.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from alphac.launch.commit import Resolution, resolve
from alphac.launch.errors import LaunchError
from alphac.launch.results import Connection, OwnerResult, ResultError, read_connections, read_result
from alphac.launch.roles import role_table
from alphac.launch.runs import spec_stem
from alphac.launch.stats import OwnerStats, StatsError, read_stats
from alphac.launch.ports import free_ports
from alphac.launch.runner import OwnerCommand, RunResult, owner_argv, run_owners, write_peers
from alphac.wire import output_name


@dataclass
class PlanRun:
    """One execution of every owner: where things went and how each owner ended (`result`
    and `peers` are None when another launcher started the owners: alphac.launch.verify)."""

    run_dir: Path
    peers: Path | None
    result: RunResult | None
    outputs: dict[int, OwnerResult] = field(default_factory=dict)
    output_errors: dict[int, str] = field(default_factory=dict)
    output_codes: dict[int, str] = field(default_factory=dict)  # an output error's code, where not bad-output
    resolution: Resolution | None = None  # what the commit record decided
    stats: dict[int, OwnerStats] = field(default_factory=dict)  # each owner's measured bytes
    # each owner's connections report (None: it wrote none)
    connections: dict[int, tuple[Connection, ...] | None] = field(default_factory=dict)

    @property
    def committed(self) -> bool:
        return self.resolution is not None and self.resolution.committed


KEY_BYTES = 32
KEY_NAME = "run.key"  # in the run directory


def run_outputs(run_dir: str | Path, owners: int) -> dict[int, Path]:
    """Where each owner of a run writes its output: RUN/owner-I.out (alphac.wire)."""
    return {o: Path(run_dir) / output_name(o) for o in range(owners)}


def write_key(path: Path) -> Path:
    """A fresh run key: KEY_BYTES random bytes in a new file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(KEY_BYTES))
    return path


def owner_timeout_ms(deadline_s: float) -> int:
    """The owners' socket and connect bound for a launch deadline: well inside it, so owners
    refuse by name before the launcher has to kill them."""
    return max(1000, min(30000, int(deadline_s * 1000 / 3)))


def run_plan(dep, exes: Mapping[tuple[str, str], Path] | list[Path], run_dir: str | Path,
             updates: int | None = None, timeout_ms: int | None = None,
             deadline_s: float = 120.0, owners: list[int] | None = None,
             extra_argv: Mapping[int, tuple[str, ...]] | None = None,
             ports: list[int] | None = None, authenticate: bool = True, *,
             root: int, stats: bool = True, transport: str | None = None,
             progress=None) -> PlanRun:
    """Start owners (all, or `owners`) of `dep` from `exes` ({(role, target): exe}, or one
    exe per owner), wait up to `deadline_s`, kill and reap what is left, then settle the run
    by its commit record (`root`: the owner at the root of the plan's tree, `plan.tree.owner`) and read
    the committed outputs and every owner's connections report; a run stopped by a --timeout
    or a signal is settled too before `Interrupted` goes on. With `authenticate`, every
    owner gets the run's fresh key file (`run.key` in the run directory), so every frame
    carries an HMAC-SHA-256 tag. With `stats`, every owner writes its measured bytes
    (`--stats RUN/owner-I.stats`), read into `PlanRun.stats` for the owners that wrote them.
    `transport` is what the peers file lets every owner use (runner.default_transport():
    shared memory unless $ALPHAC_TRANSPORT says otherwise). With an enabled `progress`
    (alphac.launch.progress), every owner reports each update on its status channel and
    the counts are shown as they come."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    table = role_table(dep, exes)
    ports = ports if ports is not None else free_ports(dep.owners)
    try:
        peers = write_peers(run_dir / f"{spec_stem(dep)}.peers", ports, transport=transport)
    except ValueError as exc:  # $ALPHAC_TRANSPORT names no transport
        raise LaunchError("usage", str(exc)) from None
    key = write_key(run_dir / KEY_NAME) if authenticate else None
    cmds = []
    outs = run_outputs(run_dir, dep.owners)
    reports = {o: run_dir / f"owner-{o}.connections" for o in range(dep.owners)}
    started = list(owners if owners is not None else range(dep.owners))
    status = _status_channel(progress, started, dep.updates if updates is None else updates)
    for o in started:
        e = table[o]
        argv = owner_argv(e.exe, o, peers, outs[o], e.runner, updates, timeout_ms, reports[o], key)
        if stats:
            argv += ("--stats", str(_stats_path(run_dir, o)))
        argv += tuple((extra_argv or {}).get(o, ())) + (status.argv(o) if status else ())
        cmds.append(OwnerCommand(o, argv, outs[o], e.label, status.child_fds(o) if status else ()))
    if progress is not None:
        progress.started(len(cmds), run_dir)
    try:
        result = run_owners(cmds, deadline_s, run_dir, tick=status.poll if status else None)
    except OSError as exc:
        _settle_stopped(outs, root)  # the owners that did start staged their outputs
        raise LaunchError("owner-failed", f"cannot start an owner: {exc}") from None
    except BaseException:
        _settle_stopped(outs, root)
        raise
    finally:
        if status is not None:
            status.close()
    run = PlanRun(run_dir, peers, result, stats=_read_stats(run_dir, cmds) if stats else {})
    run.connections = {oc.owner: read_connections(reports[oc.owner]) for oc in result.outcomes}
    return settled(run, outs, root)


def _settle_stopped(outs: dict[int, Path], root: int) -> None:
    """Settle a run its launcher stopped (a --timeout, a signal, an owner that could not be
    started): its owners are reaped, so the commit record decides what they staged, as after
    any run; a file that cannot be settled stays and does not hide why the run stopped."""
    try:
        resolve(outs, root)
    except OSError:
        pass


def settled(run: PlanRun, outs: dict[int, Path], root: int, settle: bool = True) -> PlanRun:
    """`run` once its commit record has decided (commit.resolve; `settle` False changes
    nothing on disk), with every committed output read."""
    run.resolution = resolve(outs, root, settle)
    run.output_errors.update(run.resolution.errors)
    run.output_codes.update(run.resolution.codes)
    if run.committed:
        for o, out in outs.items():
            if o in run.output_errors:
                continue
            try:
                run.outputs[o] = read_result(run.resolution.output(o, out))
            except (OSError, ResultError) as exc:
                run.output_errors[o] = str(exc)
    return run


def _status_channel(progress, owners, total: int):
    from alphac.launch.progress import StatusChannel

    if progress is None or not progress.enabled:
        return None
    return StatusChannel(owners, progress, total)


def _stats_path(run_dir: Path, owner: int) -> Path:
    return run_dir / f"owner-{owner}.stats"


def _read_stats(run_dir: Path, cmds) -> dict[int, OwnerStats]:
    """The stats files the owners wrote (one killed before it could write has none)."""
    out = {}
    for cmd in cmds:
        try:
            out[cmd.owner] = read_stats(_stats_path(run_dir, cmd.owner))
        except (OSError, StatsError):
            continue
    return out

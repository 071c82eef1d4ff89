"""Launching a deployment: build what is missing, run every owner, compare with the oracle.

The API other tools call (the CLI, the demo, the gate tests, benchmarks):

    exes   = ensure_built(plan, out_dir, cpu="host")      # {(role, target): Path}
    run    = run_plan(plan, exes, run_dir, updates=..)    # start owners, deadline, cleanup
    report = compare(plan, run, oracle, rounds)           # per-owner rows, word for word
    report = launch(dep, out_dir=.., rounds=..)           # all three

Owners run on 127.0.0.1, each from its (role, target) executable, AArch64 ones under the
target's runner (qemu-aarch64); results go to a fresh run directory every time. Every owner
runs on this machine, so the x86-64 kernels are built for its own CPU (level `host`)
unless the caller asks for another level.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from alphac.codes import CATALOGUE as CODE_NAMES
from alphac.launch.commit import Resolution, resolve
from alphac.launch.results import (Connection, OwnerResult, ResultError, read_connections, read_result,
                                   transport_summary)
from alphac.launch.roles import role_table
from alphac.launch.stats import OwnerStats, StatsError, read_stats
from alphac.launch.ports import free_ports
from alphac.launch.runner import OwnerCommand, RunResult, owner_argv, run_owners, write_peers
from alphac.launch.interrupts import (INTERRUPT_SIGNALS, TIMEOUT_SIGNAL, Interrupted, doing, interruptible,
                                      stop_mark, stopping)
from alphac.wire import output_name


class LaunchError(Exception):
    """A one-line launch failure with a stable code (TOOLING section of alphac/codes.py)."""

    def __init__(self, code: str, message: str):
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, code
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def spec_stem(dep) -> str:
    return Path(dep.source_file).stem if dep.source_file else dep.name


def needed(dep) -> list[tuple[str, str]]:
    """Every (role, target) the placement needs, in owner order, each once."""
    out: list[tuple[str, str]] = []
    for o in range(dep.owners):
        key = (dep.role_of(o).name, dep.placement[o])
        if key not in out:
            out.append(key)
    return out


LOCAL_CPU = "host"  # every owner of a launch runs on this machine


def ensure_built(plan, out_dir: str | Path, force: bool = False, log=None,
                 cpu: str = LOCAL_CPU, progress=None, faults: bool = False) -> dict[tuple[str, str], Path]:
    """Build each needed (role, target) into out_dir unless an up-to-date one is there
    (alphac.driver.build; `faults`: a test build's), the kernels for the CPU level `cpu` (on
    targets that describe it: AArch64 ones for its baseline); `log` hears why each one is
    built, `progress` how long it took. A mutant's executables have their own names
    (`-mutant-NAME`) and identity, so they never stand in for a normal build's, nor it for theirs."""
    from alphac import driver
    from alphac.launch.cache import data_files, record_inputs

    dep = plan.deployment
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exes: dict[tuple[str, str], Path] = {}
    for role, target in needed(dep):
        level = driver.cpu_level_for(target, cpu)
        path, why = built_state(plan, role, target, out, level)
        why = "forced" if force else why
        if why is not None:
            if log:
                log(f"build {path.name}: {why}")
            t0 = time.perf_counter()
            path = driver.build(plan, role, target, out, cpu=level, faults=faults)
            record_inputs(path, dep.source_file or None, data_files(dep))
            if progress is not None:
                progress.built(path.name, time.perf_counter() - t0)
        exes[(role, target)] = path
    return exes


def built_state(plan, role: str, target: str, out_dir: str | Path, level: str) -> tuple[Path, str | None]:
    """Where the executable of (role, target) for CPU level `level` goes in out_dir, and why
    it must be built (None: the one there is up to date: alphac.launch.cache.stale_reason)."""
    from alphac import driver
    from alphac.launch.cache import cpu_wanted, data_files, stale_reason

    dep = plan.deployment
    path = Path(out_dir) / driver.executable_name(plan, role, target, level)
    return path, stale_reason(path, plan.protocol_hex, role, target, cpu_wanted(target, level),
                              dep.source_file or None, data_files(dep))


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


def new_run_dir(out_dir: str | Path, stem: str) -> Path:
    """A fresh `OUT/runs/<stem>-XXXXXXXX/`; only the newest KEEP_RUNS run directories are
    kept (alphac.launch.runs)."""
    from alphac.launch.runs import prune_runs

    base = Path(out_dir) / "runs"
    base.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=f"{stem}-", dir=base))
    prune_runs(out_dir)
    return made


KEY_BYTES = 32
KEY_NAME = "run.key"  # in the run directory


def run_outputs(run_dir: str | Path, owners: int) -> dict[int, Path]:
    """Where each owner of a run writes its output: RUN/owner-I.out (alphac.wire)."""
    return {o: Path(run_dir) / output_name(o) for o in range(owners)}



CHECKPOINT_KEY_NAME = "checkpoint.key"  # in cache_dir(): the key a launch's checkpoints are tagged under


def checkpoint_key_file() -> Path:
    """The key file the launcher's runs tag their checkpoints with and check them by
    (`--checkpoint-key`): cache_dir()/checkpoint.key, this user's alone, made with KEY_BYTES
    random bytes the first time it is needed. A run's frame key is fresh; this one lasts, so
    that a later launch resumes what an earlier one wrote (docs/checkpoints.md, "Tags")."""
    from alphac.resources import cache_dir

    path = cache_dir() / CHECKPOINT_KEY_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            write_key(path)
        except FileExistsError:  # another launch made it a moment ago
            pass
    return path


def write_key(path: Path) -> Path:
    """A fresh run key: KEY_BYTES random bytes in a new file only its owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(KEY_BYTES))
    return path


def run_plan(dep, exes: Mapping[tuple[str, str], Path] | list[Path], run_dir: str | Path,
             updates: int | None = None, timeout_ms: int | None = None,
             deadline_s: float = 120.0, owners: list[int] | None = None,
             extra_argv: Mapping[int, tuple[str, ...]] | None = None,
             ports: list[int] | None = None, authenticate: bool = True,
             root: int | None = None, stats: bool = True, transport: str | None = None,
             progress=None) -> PlanRun:
    """Start owners (all, or `owners`) of `dep` from `exes` ({(role, target): exe}, or one
    exe per owner), wait up to `deadline_s`, kill and reap what is left, then settle the run
    by its commit record (`root`: the owner at the tree's root, default the plan's) and read
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
    if root is None:
        from alphac import driver

        root = driver.plan(dep).tree.owner
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


def _words(x) -> tuple[int, ...]:
    if hasattr(x, "as_tuple"):
        return x.as_tuple()
    return tuple(int(w) for w in x)


@dataclass(frozen=True)
class OwnerRow:
    owner: int
    role: str
    target: str
    version: int | None
    params: tuple[int, ...] | None
    state: tuple[int, ...] | None
    match: bool
    why: str = ""  # when not matched: the refusal, timeout, or first differing word
    stats: OwnerStats | None = None  # its measured bytes, when it wrote them
    connections: tuple[Connection, ...] | None = None  # its report: which transport each peer

    @property
    def transport(self) -> str:
        """shm, tcp, shm+tcp, or "-" (no connections report)."""
        return transport_summary(self.connections)

    @property
    def digest(self) -> str | None:
        """The digest `alphac oracle` reports: sha256 of the little-endian bytes of the
        parameter words, then the state words."""
        if self.params is None:
            return None
        from alphac.oracle.words import digest

        return digest(self.params, self.state)


@dataclass(frozen=True)
class LaunchReport:
    spec: str
    deployment: str
    rounds: int
    protocol: str
    rows: tuple[OwnerRow, ...]
    failures: tuple[str, ...]  # one-line `code: message` per failed owner or mismatch
    stderr: Mapping[int, str]
    seconds: float | None  # None: another launcher ran the owners
    run_dir: Path
    oracle_refusal: str = ""  # `code: detail` when the oracle refuses the deployment itself
    mutant: str | None = None  # the executed mutant the owners were built as
    mutant_match: bool = False  # ... and they computed the oracle's evaluation of it
    checkpoint_dir: Path | None = None  # where the run's checkpoints went
    latest: Path | None = None  # OUT/D/latest, when it now points at the run's newest one
    # a resumed run: {"path", "version", "contract"} as `alphac oracle --json` has it
    # (`rounds` then counts the updates after the checkpoint's version)
    resumed_from: dict | None = None
    storage: str = "binary64"  # the words' format (alphac/plan/storage.py): binary32 packs pairs

    @property
    def refusals_agree(self) -> bool:
        """Every owner refused with the code the oracle refuses with (nothing published)."""
        if not self.oracle_refusal:
            return False
        code = self.oracle_refusal.split(":", 1)[0]
        return all(r.params is None and f"refused: {code}:" in r.why for r in self.rows)

    @property
    def match(self) -> bool:
        return bool(self.rows) and all(r.match for r in self.rows)

    def causes(self) -> list[tuple[str, str, int | None]]:
        """What went wrong, as (code, message, owner or None): one per failed owner, or,
        when every owner refused by the same code, that code once for them all (`N owners
        refused CODE: the first one's line`), the root cause rather than N owner-failed."""
        failed = [r for r in self.rows if not r.match]
        refused = [_REFUSED.match(r.why) for r in failed]
        codes = {m.group(2) if m else None for m in refused}
        if len(failed) > 1 and len(failed) == len(self.rows) and len(codes) == 1 and None not in codes:
            code, (owner, detail) = codes.pop(), refused[0].group(1, 3)
            return [(code, f"{len(failed)} owners refused {code}; the first, {owner}: {detail}", None)]
        out = []
        for r in failed:
            code, _, message = r.why.partition(": ")
            out.append((code if code in CODE_NAMES else "owner-failed", message, r.owner))
        return out

    @property
    def checkpoints(self) -> list[int]:
        """The versions published in the run's checkpoint directory."""
        from alphac.launch.runs import published

        return [] if self.checkpoint_dir is None else published(self.checkpoint_dir)

    def as_json(self) -> dict:
        return {
            "spec": self.spec, "deployment": self.deployment, "rounds": self.rounds,
            "protocol": self.protocol, "match": self.match,
            **({"oracle_refusal": self.oracle_refusal} if self.oracle_refusal else {}),
            **({"resumed_from": self.resumed_from} if self.resumed_from is not None else {}),
            **({"mutant": self.mutant, "mutant_match": self.mutant_match} if self.mutant else {}),
            **({"checkpoint_dir": str(self.checkpoint_dir), "checkpoints": self.checkpoints,
                "latest": None if self.latest is None else str(self.latest)}
               if self.checkpoint_dir is not None else {}),
            "owners": [{
                "owner": r.owner, "role": r.role, "target": r.target, "version": r.version,
                "params": None if r.params is None else [f"{w:016x}" for w in r.params],
                "state": None if r.state is None else [f"{w:016x}" for w in r.state],
                "digest": r.digest, "match": r.match, "transport": r.transport,
                "connections": None if r.connections is None else [c.as_json() for c in r.connections],
                "persistent_bytes": r.stats.persistent if r.stats else None,
                "peak_bytes": r.stats.peak if r.stats else None,
                **({"error": r.why} if not r.match else {}),
            } for r in self.rows],
        }


# An owner's row when it refused by name: its label, the code and the detail.
_REFUSED = re.compile(r"^owner-failed: (owner \d+ \([^)]*\)) exited \d+: refused: "
                      r"([a-z0-9]+(?:-[a-z0-9]+)*): (.*)$")


def _first_difference(got: tuple[int, ...], want: tuple[int, ...], what: str) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} {what} words, the oracle has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"{what}[{i}] = {g:016x}, the oracle has {w:016x}"
    return None


def _unpublished(run: PlanRun, o: int, placed: str, oc) -> str:
    """`code: message` for owner o, which published nothing; `oc` is how its process ended
    (None: another launcher ran it, and only the run's files tell)."""
    if oc is not None and oc.timed_out:
        return f"launch-timeout: owner {o} ({placed}) still running at the deadline"
    if not run.committed and (oc is None or oc.ok):
        ended = ":" if oc is None else " exited 0, but"
        return f"run-not-committed: owner {o} ({placed}){ended} the run has no commit record: nothing is published"
    if oc is None or oc.ok or o in run.output_errors:
        return f"{run.output_codes.get(o, 'bad-output')}: owner {o}: {run.output_errors.get(o, 'no output')}"
    line = oc.refusal() or (oc.stderr.strip().splitlines() or ["no message"])[-1]
    return f"owner-failed: owner {o} ({placed}) exited {oc.returncode}: {line}"


def compare(plan, run: PlanRun, oracle, rounds: int, spec: str = "",
            oracle_refusal: str = "") -> LaunchReport:
    """Each owner's words and version against the oracle's, word for word. `oracle` is None
    when the oracle refused (`oracle_refusal`): then no owner may have published."""
    dep = plan.deployment
    rows, failures = [], []
    outcomes = None if run.result is None else {oc.owner: oc for oc in run.result.outcomes}
    for o in range(dep.owners):
        role, target = dep.role_of(o).name, dep.placement[o]
        res = run.outputs.get(o)
        stats = run.stats.get(o)
        if outcomes is not None and o not in outcomes:
            rows.append(OwnerRow(o, role, target, None, None, None, False, "not started"))
            continue
        if res is None:
            why = _unpublished(run, o, f"{role} on {target}", None if outcomes is None else outcomes[o])
            rows.append(OwnerRow(o, role, target, None, None, None, False, why, stats))
            failures.append(why)
            continue
        why = None
        if oracle is None:
            why = f"published, but the oracle refuses: {oracle_refusal}"
            failures.append(f"oracle-mismatch: owner {o} ({role} on {target}): {why}")
            rows.append(OwnerRow(o, role, target, res.version, res.params, res.state, False,
                                 failures[-1], stats))
            continue
        want = oracle.owners[o]
        if res.owner != o:
            why = f"output names owner {res.owner}"
        elif res.version != int(want.version):
            why = f"version {res.version}, the oracle has {want.version}"
        else:
            why = (_first_difference(res.params, _words(want.params), "params")
                   or _first_difference(res.state, _words(want.state), "state"))
        if why is not None:
            why = f"oracle-mismatch: owner {o} ({role} on {target}): {why}"
            failures.append(why)
        rows.append(OwnerRow(o, role, target, res.version, res.params, res.state,
                             why is None, why or "", stats))
    result = run.result
    stderr = {} if result is None else {oc.owner: oc.stderr for oc in result.outcomes if not oc.ok and oc.stderr}
    rows = [replace(r, connections=run.connections.get(r.owner)) for r in rows]
    return LaunchReport(spec or spec_stem(dep), dep.name, rounds, plan.protocol_hex,
                        tuple(rows), tuple(failures), stderr, None if result is None else result.seconds,
                        run.run_dir, oracle_refusal, storage=dep.contract.profile.format)


def resume_start(path: str | Path, key_file: str | Path | None = None):
    """Verify the checkpoint at `path` whole (with `key_file`, its tag first; every hash,
    header, version and coverage) and return the oracle's starting point, read this once
    (alphac.oracle.Start: it unpacks as parameter words, state words, version)."""
    from alphac.checkpoint import CheckpointError, logical_words, read_key, verify
    from alphac.oracle.resume import Start

    try:
        key = read_key(key_file) if key_file is not None else None
        manifest = verify(path, key)
        words = logical_words(path, manifest)
    except CheckpointError as exc:
        where = f"{exc.path}:{exc.line}: " if exc.line else ""
        raise LaunchError(exc.code, f"{where}{exc.message}") from None
    # the path the owners are given (checkpoint_arguments): a link like OUT/D/latest resolved now
    return Start(words["parameters"], words["state"], manifest.version, str(Path(path).resolve()), manifest.learner,
                 manifest.sha256, manifest.inputs, key is not None)


def changed_since(start) -> str:
    """Why the checkpoint `start` was read from is no longer what was read ("" if it is):
    its root manifest's sha256 now. The owners restored it while the oracle evaluated from
    `start`; a checkpoint replaced in between would have them start from other words."""
    from alphac.checkpoint import CheckpointError, read_manifest

    try:
        now = read_manifest(start.path).sha256
    except CheckpointError as exc:
        now = f"unreadable ({exc.code}: {exc.message})"
    if now == start.sha256:
        return ""
    return (f"checkpoint-hash-mismatch: {start.path}/manifest.txt changed while the run was under way "
            f"(sha256 {start.sha256[:16]} when the oracle read it, now {now[:16]}): the oracle did not "
            "evaluate the inputs the owners restored")


def checkpoint_arguments(checkpoint_dir=None, resume=None, new_contract: bool = False,
                         key_file=None) -> tuple[str, ...]:
    """The owners' options for where checkpoints go, what they resume and, with
    `key_file`, the key their checkpoints are tagged and checked under (absolute paths)."""
    args: list[str] = []
    if checkpoint_dir is not None:
        args += ["--checkpoint-dir", str(Path(checkpoint_dir).resolve())]
    if resume is not None:
        args += ["--resume", str(Path(resume).resolve())] + (["--new-contract"] if new_contract else [])
    if key_file is not None and (checkpoint_dir is not None or resume is not None):
        args += ["--checkpoint-key", str(Path(key_file).resolve())]
    return tuple(args)


def run_arguments(checkpoint_dir=None, resume=None, new_contract: bool = False) -> tuple[str, ...]:
    """What every owner of a run is given beside its own options: a fresh run id (naming
    the run's partial checkpoint directories), where checkpoints go, what it resumes, and
    the launcher's checkpoint key (checkpoint_key_file) when it writes or resumes one."""
    import secrets

    key = checkpoint_key_file() if checkpoint_dir is not None or resume is not None else None
    return ("--run-id", secrets.token_hex(8)) + checkpoint_arguments(checkpoint_dir, resume, new_contract, key)


def resumed(report: LaunchReport, resume, first: int, last: int, new_contract: bool,
            tag: str = "checked") -> LaunchReport:
    """`report` of a run that resumed checkpoint `resume` at version `first` and ran to
    `last`: its rounds and resumed_from as `alphac oracle --json` reports them (`tag`:
    "checked" under a key, "unchecked" or "none", untagged)."""
    if resume is None:
        return report
    return replace(report, rounds=max(0, last - first), resumed_from={
        "path": str(resume), "version": first, "contract": "new" if new_contract else "same",
        "tag": tag})


def checkpoint_place(dep, checkpoint_dir, first: int, last: int) -> tuple[Path | None, Path | None]:
    """Where a launch of `dep` from version `first` to `last` checkpoints, as (a directory
    of the user's, a path inside the run's directory): with `checkpoint_dir`, or an
    absolute checkpointDirectory, there, refused `checkpoint-exists` now (before anything is
    built or started) when it holds a version the run would write; otherwise RUN/D for the
    relative D (the pointer OUT/D/latest then names the newest one); (None, None) when
    `dep` never checkpoints."""
    from alphac.launch.runs import checkpoint_home, existing, scheduled

    every = dep.checkpoint.every
    if not every:
        if checkpoint_dir is not None:  # nothing is silently ignored
            raise LaunchError("usage", f"--checkpoint-dir {checkpoint_dir}: deployment {dep.name} never "
                              "checkpoints (CheckpointNever)")
        return None, None
    if checkpoint_dir is None:
        try:
            home = checkpoint_home(dep.checkpoint.directory)
        except ValueError as exc:
            raise LaunchError("usage", str(exc)) from None
        if home is not None:
            return None, home
        checkpoint_dir = dep.checkpoint.directory
    taken = existing(checkpoint_dir, scheduled(first, last, every))
    if taken:
        more = f" (and {len(taken) - 1} more of the versions this run writes)" if len(taken) > 1 else ""
        raise LaunchError("checkpoint-exists", f"{taken[0]} exists{more}; checkpoints are never "
                          "overwritten: give another --checkpoint-dir, or leave it out and the run "
                          "checkpoints into its own run directory (OUT/runs/RUN/D)")
    return Path(checkpoint_dir), None


def owner_timeout_ms(deadline_s: float) -> int:
    """The owners' socket and connect bound for a launch deadline: well inside it, so owners
    refuse by name before the launcher has to kill them."""
    return max(1000, min(30000, int(deadline_s * 1000 / 3)))


def resume_of(dep, resume, new_contract: bool) -> tuple:
    """The checkpoint a run resumes from (the one given, else the spec's resume declaration,
    else None) and whether under a new contract."""
    declared = getattr(dep, "resume", None)
    if resume is None and declared is not None:
        return declared.path, declared.mode == "new"
    return resume, new_contract


def _evaluate(dep, n: int, start, resume, new_contract: bool, mutant: str | None = None, tick=None,
              kept: str | None = None):
    """The oracle's words for the run (or None) and its refusal (or ""); `tick(u)` hears
    each update it finishes. With `kept` (a key of alphac.launch.oracle_cache) the words
    an earlier launch kept under it, else evaluated and kept."""
    from alphac import driver
    from alphac.launch import oracle_cache
    from alphac.oracle import Refusal

    try:
        if start is None:
            got = oracle_cache.load(kept) if kept else None
            if got is None:
                got = driver.oracle(dep, n, mutant, tick=tick)
                if kept:
                    oracle_cache.store(kept, got)
            return got, ""
        # the owners run from the checkpoint's version up to update n, the oracle from the
        # words the launcher verified (read once: the same inputs)
        return driver.oracle(driver.resumed(dep, resume, new_contract), max(0, n - start.version), tick=tick,
                             start=start), ""
    except Refusal as exc:
        return None, f"{exc.code}: {exc.detail}"


class OracleProgress:
    """How far an oracle evaluating beside the owners is: for the report of a --timeout
    that runs out while the launcher waits for it. Its tick also ends the evaluation once
    the command is interrupted (interrupts.stopping), so that the cleanup does not wait for the
    interpreter's lock the oracle's thread would otherwise keep taking."""

    def __init__(self, first: int, last: int, what: str = "the oracle") -> None:
        self.first, self.last, self.what, self.at, self.since = first, last, what, None, stop_mark()

    def tick(self, u: int) -> None:
        self.at = u
        if stopping(self.since):
            raise Interrupted(signal.SIGTERM)

    def __call__(self) -> str:
        done = "" if self.at is None else f", {self.at + 1 - self.first:,} done"
        return f"{self.what} evaluated updates {self.first:,} to {self.last:,}{done}"


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

    declared = kept.key(dep, plan.protocol_hex, n, None) if oracle_cache and start is None else None
    counted = OracleProgress(first, max(first, n) - 1)
    expected = Beside(lambda: _evaluate(dep, n, start, resume, new_contract, tick=counted.tick, kept=declared))
    mutated = OracleProgress(0, n - 1, f"the oracle of mutant {mutant}")
    theirs = kept.key(dep, plan.protocol_hex, n, mutant) if oracle_cache and mutant else None
    as_mutant = Beside(lambda: _evaluate(dep, n, None, None, False, mutant, tick=mutated.tick,
                                         kept=theirs)) if mutant else None
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


def unmatched(report: LaunchReport, why: str) -> LaunchReport:
    """`report` with no owner matching, for `why` (`code: message`), when there is one: the
    oracle's words are then not those of the run's inputs."""
    if not why:
        return report
    rows = tuple(replace(r, match=False, why=r.why or why) for r in report.rows)
    return replace(report, rows=rows, failures=report.failures + (why,))


class Beside:
    """`work()` in a daemon thread, started at once: the launcher's own work (the oracle)
    beside the owners'. The thread blocks SIGINT, SIGTERM and SIGHUP, so the kernel hands
    them to the main thread, whose waits they interrupt; `result()` waits on an event in
    short steps, so a signal interrupts it at once. An interrupted launch leaves the thread
    to die with the process (`busy` says whether one still works: see `leave`)."""

    _running = 0
    _count_lock = threading.Lock()
    _interval = sys.getswitchinterval()
    # While the oracle runs pure Python, the main thread waits for the interpreter's lock
    # after each system call it makes (reaping owners, removing segments, reading /proc in a
    # signal handler) for as long as the switch interval: at the default 5 ms a cleanup of a
    # few hundred calls took seconds. 0.2 ms bounds it; the oracle only yields when asked.
    SWITCH_INTERVAL_S = 0.0002

    def __init__(self, work):
        self._done: list = []
        self._ended = threading.Event()
        with Beside._count_lock:
            if Beside._running == 0:
                Beside._interval = sys.getswitchinterval()
                sys.setswitchinterval(min(Beside._interval, Beside.SWITCH_INTERVAL_S))
            Beside._running += 1
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True,
                                        name="alphac-oracle")
        self._thread.start()

    def _run(self, work) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPT_SIGNALS + (TIMEOUT_SIGNAL,))
        try:
            self._done.append((work(), None))
        except BaseException as exc:  # raised again in the waiting thread
            self._done.append((None, exc))
        finally:
            with Beside._count_lock:
                Beside._running -= 1
                if Beside._running == 0:
                    sys.setswitchinterval(Beside._interval)
            self._ended.set()

    def result(self):
        while not self._ended.wait(0.05):
            pass
        value, exc = self._done[0]
        if exc is not None:
            raise exc
        return value

    @staticmethod
    def busy() -> bool:
        return Beside._running > 0


def leave(status: int) -> None:
    """Exit with `status`. While an interrupted launch's oracle still evaluates in its
    thread, the process ends as soon as its streams are flushed (every owner is stopped
    and every partial file removed by then): the interpreter's shutdown is not left to
    race a thread it cannot stop."""
    if Beside.busy():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)

"""A run's owners against the oracle, word for word: `compare` makes the `LaunchReport`, one
`OwnerRow` per owner (its version and words, whether they match, and why not), what went
wrong as one-line `code: message` failures, and the report as `alphac launch --json` prints
it; `unmatched` and `resumed` adjust a report for a run from a checkpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from alphac.codes import CATALOGUE as CODE_NAMES
from alphac.launch.plan_run import PlanRun
from alphac.launch.results import Connection, transport_summary
from alphac.launch.runs import published, spec_stem
from alphac.launch.stats import OwnerStats


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


def unmatched(report: LaunchReport, why: str) -> LaunchReport:
    """`report` with no owner matching, for `why` (`code: message`), when there is one: the
    oracle's words are then not those of the run's inputs."""
    if not why:
        return report
    rows = tuple(replace(r, match=False, why=r.why or why) for r in report.rows)
    return replace(report, rows=rows, failures=report.failures + (why,))


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

"""Bounded staleness replayed (docs/oracle.md "Bounded staleness"): a run records, per owner
and update, the parameter version its contributions read (`schedule[o][i]` for update
first + i); the oracle checks that every read is one the contract allows, max(u - S, 0) ..
u, and evaluates each owner's contributions at the version it read.
"""

from __future__ import annotations

from alphac.oracle.refusal import Refusal, Site


def check_schedule(schedule, owners: int, first: int, rounds: int, bound: int) -> tuple[tuple[int, ...], ...]:
    """The schedule as tuples, refused `oracle-schedule` unless it names a version for each
    of `owners` owners and `rounds` updates from `first`, and `data-parallel-stale-read`
    at the first read outside max(u - bound, first) .. u (in update order, then owner
    order): a run resumed at version `first` holds no version before it."""
    if schedule is None:
        raise Refusal("oracle-schedule", f"bounded staleness {bound}: each contribution reads the version "
                      "its owner had, which the run records; the oracle replays a run's schedule "
                      "(alphac verify RUN SPEC, or alphac oracle --schedule RUN)")
    got = tuple(tuple(int(r) for r in reads) for reads in schedule)
    if len(got) != owners or any(len(reads) != rounds for reads in got):
        raise Refusal("oracle-schedule", f"the schedule names {[len(r) for r in got]} reads for "
                      f"{len(got)} owners; the run has {owners} owners of {rounds} updates each")
    for i in range(rounds):
        u = first + i
        for o, reads in enumerate(got):
            if not max(u - bound, first) <= reads[i] <= u:
                raise Refusal("data-parallel-stale-read", f"update {u}: owner {o}'s contributions read "
                              f"version {reads[i]}; bounded staleness {bound} allows versions "
                              f"{max(u - bound, first)} to {u}", site=Site(u, "contribution"))
    return got


def scheduled_sums(sums_at, versions: dict, schedule, i: int, owners: int) -> list:
    """Each owner's sums for update first + i: `sums_at(params)[o]` at the version owner o
    read (`versions`: the parameters of each version still read), each version's
    contributions evaluated once."""
    at: dict[int, list] = {}
    out = []
    for o in range(owners):
        r = schedule[o][i]
        if r not in at:
            at[r] = sums_at(versions[r])
        out.append(at[r][o])
    return out

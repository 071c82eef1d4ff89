"""Which parameter version each contribution reads, where it is not the update's own.
Bounded staleness replayed (docs/oracle.md "Bounded staleness"): a run records, per owner
and update, the parameter version its contributions read (`schedule[o][i]` for update
first + i); the oracle checks that every read is one the contract allows, max(u - S, 0) ..
u, and evaluates each owner's contributions at the version it read. Fixed staleness from a
checkpoint: the versions before it that the next updates read.
"""

from __future__ import annotations

import numpy as np

from alphac.oracle.words import storage_floats

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
    """Each owner's sums for update first + i: `sums_at(params, o)` (owner o's alone:
    `alphac.oracle.localsteps.owner_sums`) at the version owner o read (`versions`: the
    parameters of each version still read)."""
    return [sums_at(versions[schedule[o][i]], o) for o in range(owners)]


def versions_before(history, params: np.ndarray, first: int, S: int, k: int, fmt: str) -> dict:
    """Versions max(first - S, 0) .. first - 1 from a checkpoint's history region (block j
    of its words: version max(first - S + j, 0)); without one (a new contract on a
    checkpoint of another learner), each is the start's words."""
    if history is None:
        return {max(w, 0): params.copy() for w in range(first - S, first)}
    blocks = np.asarray(history, dtype=np.uint64).reshape(S, -1)
    return {max(first - S + j, 0): storage_floats(blocks[j], k, fmt) for j in range(S)}

"""The independent-state learner's updates (docs/learners.md), evaluated on their own.

Owner o holds region o, the logical words [o*r, o*r + r) (`Learner.region` = r). In update
u every owner applies the rule (the learner's `contribution` program, over region | pair |
scale) to its region once per input pair, in pair order, each pair's run reading the words
the previous run wrote. No owner reads another owner's region or inputs, nothing is
combined and no mean is formed, so an owner's words depend on nothing but its own region
and pairs. The rule runs on Python floats (oracle/scalar.py) for every engine: its work is
one short program per pair.

The mutant `foreign-inputs` applies owner o's rule to the pairs of owner (o + 1) mod n.
"""

from __future__ import annotations

import numpy as np

from alphac.ir.nodes import Deployment
from alphac.oracle import scalar
from alphac.oracle.refusal import Refusal, Site
from alphac.ir.words import to_float

MUTANT = "foreign-inputs"


def problems(dep: Deployment) -> list[str]:
    """The shapes an independent-state learner must have (the checker refuses these first)."""
    L = dep.learner
    out = []
    if L.region < 1 or L.k != L.region * dep.owners or L.m != 0:
        out.append(f"k = {L.k}, m = {L.m} for {dep.owners} regions of r = {L.region} words")
    if L.contribution.slots != L.region + L.s + 1 or L.s != 2:
        out.append(f"a rule over {L.contribution.slots} slots for r = {L.region}, pairs of {L.s}")
    return out


def check_mutant(dep: Deployment, mutant: str | None) -> None:
    """`foreign-inputs` applies to an independent-state learner of two owners or more, and
    no other mutant does (they all change a combine)."""
    if mutant is None:
        return
    why = ""
    if not dep.learner.independent:
        why = ("needs an independent-state learner (each owner applying a rule to its own "
               "inputs)") if mutant == MUTANT else ""
    elif mutant != MUTANT:
        why = "needs a combine; an independent-state learner combines nothing"
    elif dep.owners < 2:
        why = "needs at least two owners (with one, the next owner is the owner itself)"
    if why:
        raise Refusal("mutant-not-applicable", f"mutant {mutant} {why}")


def evolve(dep: Deployment, params: np.ndarray, first: int, rounds: int,
           mutant: str | None, tick=None) -> np.ndarray:
    """The logical words after updates first .. first + rounds - 1, from `params`; `tick(u)`,
    if given, hears each update u as it is done (and may end the evaluation by raising), as
    in the data-parallel path."""
    L, n, r = dep.learner, dep.owners, dep.learner.region
    pairs = np.asarray(L.samples.words, dtype=np.uint64).reshape(-1, L.s).view(np.float64)
    starts = np.concatenate([[0], np.cumsum(L.samples.shares)]).astype(np.int64)
    scale = to_float(int(L.rate))
    regions = [params[o * r:(o + 1) * r].tolist() for o in range(n)]
    # each owner's rows of `pairs`, made Python floats one pair at a time: no copy of the inputs
    inputs = []
    for o in range(n):
        source = (o + 1) % n if mutant == MUTANT else o
        inputs.append((int(starts[source]), int(starts[source + 1])))
    for u in range(first, first + rounds):
        for o in range(n):
            region = regions[o]
            a, b = inputs[o]
            for j in range(b - a):
                slots = region + pairs[a + j].tolist() + [scale]
                scalar.run_program(L.contribution, slots, Site(u, "rule", owner=o, sample=j))
                region = slots[:r]
            regions[o] = region
        if tick is not None:
            tick(u)
    return np.array([w for region in regions for w in region], dtype=np.float64)

"""The executed mutants as plan data (names and meanings: alphac.ir.mutants; semantics:
docs/oracle.md). A mutant is a property of the plan the executables are built from, never
a flag of a normal executable: the tree the owners combine along, whom each reduction is
delivered to, the count each leaf reports and whether it reports its own mean, which
delivered sum each word of an owner's mean reads, and whether an owner keeps its first
read replica. The protocol identity covers the mutant's name (alphac.plan.identity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphac.ir import nodes as ir
from alphac.ir.mutants import REWRITES, check_name
from alphac.plan.layout import OwnerLayout

# A word of the mean read from no delivered sum: the sum +0.0 (mean_from below).
ZERO = -1


class MutantError(Exception):
    """A mutant that does not apply to the deployment: one line with the TOOLING code
    `mutant-not-applicable`, reported by `alphac build` and `alphac launch`."""

    code = "mutant-not-applicable"

    def __init__(self, name: str, why: str):
        self.message = f"mutant {name}: {why}"
        super().__init__(f"{self.code}: {self.message}")


@dataclass(frozen=True)
class Mutation:
    """What a plan's executables compute instead of the declared program (`name` None:
    nothing; every other field then says so)."""

    name: str | None
    leaf_counts: tuple[int, ...]   # per owner: the sample count its local value reports
    leaf_mean: bool                # an owner with samples reports sum / share, count 1
    targets: tuple[int, ...]       # per coordinate owner t: who t's reduction is delivered to
    mean_from: tuple[tuple[int, ...], ...]  # per owner: for each word its mean reads, the
                                   # delivered sum it reads (ZERO: +0.0); (): as delivered
    stale_replica: bool            # an owner keeps the read replica of its first update
    inputs_from: tuple[int, ...] = ()  # per owner: whose inputs its rule runs on (independent
                                   # state; (): its own)

    @property
    def test_build(self) -> bool:
        """Whether the executables need a test build of the runtime: a leaf's own mean, a
        mapped mean and a kept replica are computed only by the runtime compiled with its
        test hooks (alphac.targets.runtime.FAULTS), never by a product executable's."""
        return self.leaf_mean or self.stale_replica or any(self.mean_from)


def declared(dep: ir.Deployment) -> Mutation:
    """The declared program: every owner's share, its own reduction, its own sums."""
    n = dep.owners
    return Mutation(None, tuple(int(s) for s in dep.learner.samples.shares), False,
                    tuple(range(n)), ((),) * n, False)


def mutant_tree(root: ir.TreeNode, name: str | None) -> ir.TreeNode:
    """The tree the owners combine along: swap-branch's ((A + B) + C) -> ((A + C) + B), where
    C is the root's right subtree and B the right subtree of the root's left branch; for
    every other mutant the declared tree."""
    if name != "swap-branch":
        return root
    left = root.left
    return ir.TreeBranch(root.owner, ir.TreeBranch(left.owner, left.left, root.right), left.right)


def mutant_deployment(dep: ir.Deployment, name: str | None) -> ir.Deployment:
    """The deployment a mutant's executables run: a rewrite's (alphac.ir.mutants.REWRITES:
    foreign-accumulator's update and replicated accumulators, fresher-read's staleness
    S - 1); for every other mutant the declared one. MutantError when a rewrite does not
    apply."""
    if name not in REWRITES or isinstance(dep.topology, ir.SampleTree):
        return dep  # (check_applies refuses every mutant on the sample tree)
    got = REWRITES[name](dep)
    if isinstance(got, str):
        raise MutantError(name, got)
    return got


def check_applies(dep: ir.Deployment, root: ir.TreeNode, name: str | None) -> None:
    """MutantError when mutant `name` cannot be built for `dep` (ValueError: no such name)."""
    check_name(name)
    if name is None:
        return
    if dep.checkpoint.every or dep.resume is not None:
        raise MutantError(name, "the deployment checkpoints or resumes; a mutant's words are not "
                          "the declared program's and must never be restored as its state")
    why = _inapplicable(dep, root, name)
    if why:
        raise MutantError(name, why)


def _inapplicable(dep: ir.Deployment, root: ir.TreeNode, name: str) -> str:
    if isinstance(dep.topology, ir.SampleTree):
        return "the mutants are defined on trees over owners, not on the sample tree"
    if dep.contract.profile.format != "binary64":
        return "the mutants are built for binary64 storage only"
    if name in REWRITES:
        return ""  # mutant_deployment decided
    if dep.learner.independent and name != "foreign-inputs":
        return "an independent-state learner combines nothing; only foreign-inputs applies to it"
    if name == "foreign-inputs" and not dep.learner.independent:
        return "it needs an independent-state learner (each owner's rule on its own inputs)"
    if name == "foreign-inputs" and dep.owners < 2:
        return "a single owner's next owner is itself"
    if name == "swap-branch" and not (isinstance(root, ir.TreeBranch)
                                      and isinstance(root.left, ir.TreeBranch)):
        return "the combine tree's root has no branch on its left (fewer than three leaves)"
    if name == "duplicate-mass" and not any(dep.learner.samples.shares):
        return "no leaf holds samples"
    if name == "deliver-to-next" and dep.owners < 2:
        return "a single owner's next owner is itself"
    if name == "stale-replica" and dep.consistency.staleness:
        return "under a fixed staleness the read replicas are kept by version (fresher-read applies)"
    if name == "stale-replica" and not dep.partitioning.parameters.sharded:
        return ("the deployment's parameters are not partitioned: there is no read replica "
                "to go stale")
    return ""


def mutation(dep: ir.Deployment, leaf_order, layout: OwnerLayout, name: str | None) -> Mutation:
    """The plan data of mutant `name` (`leaf_order`: the tree's leaves, left to right)."""
    base = declared(dep)
    n = dep.owners
    counts = list(base.leaf_counts)
    if name == "duplicate-mass":
        first = next(o for o in leaf_order if counts[o] > 0)
        counts[first] *= 2
    elif name == "unweighted-mean":
        counts = [min(c, 1) for c in counts]
    targets, mean_from = base.targets, base.mean_from
    if name == "deliver-to-next":
        targets = tuple((t + 1) % n for t in range(n))
        mean_from = _next_sources(layout)
    inputs_from = tuple((o + 1) % n for o in range(n)) if name == "foreign-inputs" else ()
    return Mutation(name, tuple(counts), name == "unweighted-mean", targets, mean_from,
                    name == "stale-replica", inputs_from)


def _next_sources(layout: OwnerLayout) -> tuple[tuple[int, ...], ...]:
    """deliver-to-next: owner o's j-th coordinate reads the sum of owner (o - 1) mod n's
    j-th coordinate, +0.0 past the end of that owner's coordinates. Under gradient
    partitioning an owner receives that owner's slice, so word j reads the slice's word j;
    otherwise every owner receives all k sums and applies the same map over them."""
    n, k = layout.n, layout.k
    if layout.gradients.sharded:
        return tuple(tuple(j if j < layout.owned_count((o - 1) % n) else ZERO
                           for j in range(layout.owned_count(o))) for o in range(n))
    source = np.full(k, ZERO, dtype=np.int64)
    for o in range(n):
        mine, theirs = layout.coordinates(o), layout.coordinates((o - 1) % n)
        held = min(len(mine), len(theirs))
        source[mine[:held]] = theirs[:held]
    full = tuple(int(x) for x in source)
    return (full,) * n

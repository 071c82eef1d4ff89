"""Memory laws: persistent and peak bytes per owner, exactly what its executable allocates.

Persistent bytes are the learner state an owner holds between updates and checkpoints:
its parameter and optimizer-state words as the owner layout gives them (all of them when
replicated, its coordinates' and the shared words when partitioned), stored compactly.
Peak adds what exists only for the run's updates: the register pool of its protocol
(plan/registers.py: slots shared by registers whose lifetimes do not overlap, each a frame
buffer), the scratch: the contribution buffer (k words, only for an owner of two or more
samples: the first contribution is written straight into the local sum) and the programs'
vector temporaries (`let z[i] = e`: the words of the larger program's, stack scratch of
the kernel that runs, one at a time, the contribution's eight times over where it runs
over eight samples at once; `temporaries`), and, under parameter
partitioning, the read replica of the gathered parameters (k words, allocated by
`replica-install` and freed by `replica-release`). Under a fixed staleness S with
replicated parameters, S + 1 versions of the parameters beside them (none for S = 1 computed
ahead: the thread reads the parameters before the update changes them), and the scratch of the
contribution computed ahead (`computes_ahead`): its sum, its contribution buffer and its
thread's temporaries. Under local steps, the shared version beside the owner's parameters,
and with an outer momentum its k words as state. A read replica never counts toward
persistent state. Samples are reported apart: they are read in place from the image.

The executables count these buffers as they allocate them and report the high-water mark
(`EXE --stats FILE`, docs/runtime.md); tests/e2e/test_memory.py holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.ir import nodes as ir
from alphac.ir.lanes import LANES, lanes_ok
from alphac.plan.layout import OwnerLayout
from alphac.plan.registers import RegisterSlots
from alphac.plan.storage import format_of, word_counts

WORD = 8
# The categories an executable counts its learner buffers by (`EXE --stats`), in the order
# of the C enum (alphac_gen.h MEM_*). "samples" are not allocated: the owner's rows are read
# in place from the image, and counted for the report.
CATEGORIES = ("parameters", "state", "replica", "registers", "scratch", "samples")


@dataclass(frozen=True)
class OwnerBytes:
    parameters: int
    state: int
    replica: int       # transient read replica (peak only)
    registers: int     # the register pool (peak only)
    scratch: int       # the contribution buffer and the vector temporaries (peak only)
    samples: int       # immutable inputs, reported apart from learner state

    @property
    def persistent(self) -> int:
        return self.parameters + self.state

    @property
    def peak(self) -> int:
        return self.persistent + self.replica + self.registers + self.scratch


def temporaries(contribution: ir.Program, update: ir.Program, lanes: bool = False) -> int:
    """The words of vector temporaries an owner's kernels hold at once: the larger of its
    two programs' (each kernel's are stack scratch while it runs; they never run together),
    the contribution's LANES times over where it runs over LANES samples at once (`lanes`:
    `alphac.ir.lanes.lanes_ok`, on a CPU target: an SM86 owner sums on its GPU)."""
    return max(ir.temporary_words(contribution) * (LANES if lanes else 1), ir.temporary_words(update))


def lanes_held(contribution: ir.Program, k: int, s: int, fmt: str, target: str) -> bool:
    """Whether an owner on `target` runs a data-parallel contribution (fmt "none": an
    independent-state rule) over LANES samples at once."""
    return target != "sm86" and lanes_ok(contribution, k, s, fmt)


def computes_ahead(dep: ir.Deployment, layout: OwnerLayout) -> int:
    """D >= 1 where the owners (those with samples, on a CPU target) compute the
    contributions of up to D updates ahead on a thread while this update combines, else 0:
    under a fixed staleness S >= 1, D = 1 (the contributions to update u + 1 read version
    max(u + 1 - S, 0), which exists before update u combines); under bounded staleness S,
    D = S (each reads the newest version its owner has, at least u - S; with partitioned
    parameters, the newest read replica installed). A fixed staleness computes ahead with
    replicated parameters only (a partitioned read replica of version u + 1 - S is gathered
    by update u + 1's own ops); neither on the sample tree (its contributions are blocks)."""
    c = dep.consistency
    if dep.learner.independent or isinstance(dep.topology, ir.SampleTree):
        return 0
    if c.bound:  # (partitioned: the newest read replica installed)
        return c.bound
    return 1 if c.staleness and not layout.parameters.sharded else 0


def bytes_per_owner(dep: ir.Deployment, layout: OwnerLayout, slots: list[RegisterSlots],
                    leaf_tags: int) -> list[OwnerBytes]:
    """Each owner's bytes: the words the layout says it holds, the read replica under
    parameter partitioning, its register pool (`slots`, with `leaf_tags` words after each
    register's data) and its contribution buffer. An independent-state learner's rule
    reads only its owner's region and runs in place: no read replica, no buffer."""
    k, s, _ = word_counts(dep)
    independent = dep.learner.independent
    stale = dep.consistency.staleness
    # the read replica; under a fixed staleness S or bounded by S, those of S + 1 versions
    replica = k * (max(stale, dep.consistency.bound) + 1) if layout.parameters.sharded and not independent else 0
    shares = dep.learner.samples.shares
    ahead = computes_ahead(dep, layout)
    out = []
    for o in range(dep.owners):
        share = shares[o] if o < len(shares) else 0
        lanes = lanes_held(dep.learner.contribution, k, s, "none" if independent else format_of(dep), dep.placement[o])
        temps = temporaries(dep.learner.contribution, dep.learner.update, lanes)
        # fixed staleness S, replicated parameters: S + 1 versions beside them
        # (S = 1 computed ahead without checkpoints or a resume: none, the thread reads the
        # parameters before the update)
        bare = stale == 1 and ahead and not dep.checkpoint.every and dep.resume is None
        history = (stale + 1) * layout.params_count(o) if stale and not layout.parameters.sharded and not bare else 0
        # the contributions computed ahead: D sums, a buffer, the thread's temporaries; under
        # bounded staleness the schedule, a word per update
        early = ahead * k + (k if share >= 2 else 0) + temps if ahead and share > 0 and dep.placement[o] != "sm86" else 0
        early += dep.updates if dep.consistency.bound else 0
        # local steps: the shared version beside the owner's own parameters
        history += layout.params_count(o) if dep.consistency.local_steps else 0
        # local steps' outer momentum: k words of state
        outer = layout.params_count(o) if dep.consistency.outer is not None else 0
        out.append(OwnerBytes(WORD * (layout.params_count(o) + history), WORD * (layout.state_count(o) + outer),
                              WORD * replica, WORD * slots[o].pool_words(leaf_tags),
                              WORD * ((k if share >= 2 and not independent else 0) + temps + early),
                              WORD * s * share))
    return out

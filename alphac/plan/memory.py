"""Memory laws: persistent and peak bytes per owner.

Persistent bytes are the learner state an owner holds between updates and checkpoints:
its parameters and optimizer-state words as the owner layout gives them (all of them when
replicated, its coordinates' and the shared words when partitioned). Peak adds what lives
only during an update: the combine registers of its protocol and, under parameter
partitioning, the read replica of the gathered parameters (k words). A read replica never
counts toward persistent state. The shard maps are built from the same layout, so these
are also the words of each owner's persistent fragments.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.ir import nodes as ir
from alphac.plan.layout import OwnerLayout

WORD = 8


@dataclass(frozen=True)
class OwnerBytes:
    parameters: int
    state: int
    replica: int       # transient read replica (peak only)
    registers: int     # transient combine registers (peak only)
    samples: int       # immutable inputs, reported apart from learner state

    @property
    def persistent(self) -> int:
        return self.parameters + self.state

    @property
    def peak(self) -> int:
        return self.persistent + self.replica + self.registers


def bytes_per_owner(dep: ir.Deployment, layout: OwnerLayout, register_words) -> list[OwnerBytes]:
    """Each owner's bytes: the words the layout says it holds, the read replica under
    parameter partitioning, and its protocol's registers."""
    n = dep.owners
    # an independent-state learner's rule reads only its own region: no read replica
    replica = dep.learner.k if layout.parameters and not dep.learner.independent else 0
    shares = dep.learner.samples.shares
    out = []
    for o in range(n):
        samples = dep.learner.s * (shares[o] if o < len(shares) else 0)
        out.append(OwnerBytes(WORD * layout.params_count(o), WORD * layout.state_count(o),
                              WORD * replica, WORD * register_words[o], WORD * samples))
    return out

"""Memory laws: persistent and peak bytes per owner.

Persistent bytes are the learner state an owner holds between updates and checkpoints:
its parameters and optimizer-state words (all of them when replicated, its coordinates'
and the shared words when partitioned). Peak adds what lives only during an update: the
combine registers of its protocol and, under parameter partitioning, the read replica of
the gathered parameters. A read replica never counts toward persistent state.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.ir import nodes as ir

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


def bytes_per_owner(dep: ir.Deployment, maps, register_words) -> list[OwnerBytes]:
    """Each owner's bytes, read off the shard maps (persistent fragments: state; fragments
    living one update: the read replica) and its protocol's registers."""
    n = dep.owners
    held = {"parameters": [0] * n, "state": [0] * n}
    replica = [0] * n
    for shard_map in maps:
        for f in shard_map.fragments:
            if f.lifetime == "persistent":
                held[shard_map.region.field][f.owner] += f.words
            else:
                replica[f.owner] += f.words
    shares = dep.learner.samples.shares
    out = []
    for o in range(n):
        samples = dep.learner.s * (shares[o] if o < len(shares) else 0)
        out.append(OwnerBytes(WORD * held["parameters"][o], WORD * held["state"][o], WORD * replica[o],
                              WORD * register_words[o], WORD * samples))
    return out

"""The protocol identity: a stable 64-bit hash of everything that determines the words.

Frames and checkpoints carry it; two executables interoperate only if their identities are
equal. It is the first 8 bytes (big-endian) of the sha256 of a canonical JSON document, so
it is the same on every run and every machine. It covers the programs, contract, tree and
partitioning (its block size and the combine's placement where not the default), the
executed mutant a plan is built as (if any: mutant executables interoperate only with the
same mutant), the wire format version, and a sha256 of the data: the samples with their
shares, the initial parameter and state words, the rate and the update count. So an
executable built from other data refuses the hello of one built from this data. Roles,
placement and the checkpoint policy do not take part: they change neither the messages nor
any word. A resumed deployment (`dep.resume`) starts from a checkpoint's words instead of
the initial ones: the sha256 of that checkpoint's manifest.txt and the resume's mode
("same" or "new") take part in the data digest.
"""

from __future__ import annotations

import hashlib

import numpy as np

from alphac.ir import nodes as ir
from alphac.plan.canon import canonical_json, flat, sha256_hex, tree_table
from alphac.plan.contract import PROFILE_FIELDS
from alphac.plan.protocol import WIRE_FORMAT


def data_digest(dep: ir.Deployment, resumed: str | None = None) -> str:
    """sha256 (hex) of the words the learner starts from and reads: the sample matrix
    (little-endian u64, owner then sample order) with its shares, the initial parameters,
    the initial state, the rate and the update count; for a resumed deployment also
    `resumed`, the sha256 of the resumed checkpoint's manifest.txt, and the resume's mode."""
    learner = dep.learner
    h = hashlib.sha256(b"alphac-data-1\0")

    def words(a) -> None:
        arr = np.ascontiguousarray(np.asarray(a, dtype=np.uint64), dtype="<u8").reshape(-1)
        h.update(len(arr).to_bytes(8, "little"))
        h.update(memoryview(arr).cast("B"))

    words(learner.samples.shares)
    words(learner.samples.words)
    words(learner.initial.as_array())
    words(learner.initial_state.as_array())
    words([learner.rate, dep.updates])
    if dep.resume is not None:
        if resumed is None:
            raise ValueError("a resumed deployment's data digest needs its checkpoint's manifest sha256")
        h.update(f"resume {resumed} {dep.resume.mode}\0".encode("ascii"))
    return h.hexdigest()


def identity_document(dep: ir.Deployment, nodes, resumed: str | None = None,
                      mutant: str | None = None) -> dict:
    learner = dep.learner
    topo = dep.topology
    if isinstance(topo, ir.Star):
        topology = {"kind": "star"}
    elif isinstance(topo, ir.Hierarchy):
        topology = {"kind": "hierarchy", "fanout": topo.fanout}
    elif isinstance(topo, ir.SampleTree):
        topology = {"kind": "sample-tree"}
    else:
        topology = {"kind": "explicit", "coverage": topo.coverage, "members": list(topo.members)}
    part = dep.partitioning
    doc = {
        "format": "alphac-protocol-1",
        "wire": WIRE_FORMAT,
        "owners": dep.owners,
        "topology": topology,
        "tree": tree_table(nodes),
        "learner": {"k": learner.k, "s": learner.s, "m": learner.m, **(
            {"shape": learner.shape, "region": learner.region} if learner.independent else {})},
        "data": data_digest(dep, resumed),
        "programs": {"contribution": flat(learner.contribution), "update": flat(learner.update)},
        "contract": {"profile": {f: getattr(dep.contract.profile, f) for f in PROFILE_FIELDS},
                     "relation": dep.contract.relation},
        "partitioning": {"optimizer_state": part.optimizer_state.sharded,
                         "parameters": part.parameters.sharded,
                         "gradients": part.gradients.sharded,
                         "words_per_coordinate": part.words_per_coordinate,
                         "shared_state": list(part.shared_state)},
    }
    # present only when not the default, so the identities of deployments that declare
    # neither stay what they were
    if part.block_words != 1:
        doc["partitioning"]["block_words"] = part.block_words
    if dep.combine_placement is not ir.CombinePlacement.BRANCH_OWNERS:
        doc["combine_placement"] = dep.combine_placement.value
    if dep.consistency.kind is not ir.ConsistencyKind.SYNCHRONOUS:
        doc["consistency"] = {"kind": dep.consistency.kind.value, "value": dep.consistency.value}
        if dep.consistency.outer is not None:  # (present only when declared: averaging's identities stay)
            doc["consistency"]["outer"] = {"rate": f"{dep.consistency.outer.rate:016x}",
                                           "momentum": f"{dep.consistency.outer.momentum:016x}"}
    if mutant is not None:
        doc["mutant"] = mutant
    return doc


def protocol_identity(dep: ir.Deployment, nodes, resumed: str | None = None,
                      mutant: str | None = None) -> int:
    """`resumed`: the resumed checkpoint's manifest sha256 when `dep.resume` is set;
    `mutant`: the executed mutant the plan builds (alphac.plan.mutants), if any."""
    digest = sha256_hex(canonical_json(identity_document(dep, nodes, resumed, mutant)))
    return int(digest[:16], 16)

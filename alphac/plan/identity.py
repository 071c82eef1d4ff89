"""The protocol identity: a stable 64-bit hash of plan, topology and contract.

Frames and checkpoints carry it; two executables interoperate only if their identities are
equal. It is the first 8 bytes (big-endian) of the sha256 of a canonical JSON document, so
it is the same on every run and every machine. Samples, initial words, the rate, roles,
placement, update count and checkpoint policy do not take part: they change neither the
messages nor the order of any operation. The wire format version does.
"""

from __future__ import annotations

from alphac.ir import nodes as ir
from alphac.plan.canon import canonical_json, flat, sha256_hex, tree_table
from alphac.plan.contract import PROFILE_FIELDS
from alphac.plan.protocol import WIRE_FORMAT


def identity_document(dep: ir.Deployment, nodes) -> dict:
    learner = dep.learner
    topo = dep.topology
    if isinstance(topo, ir.Star):
        topology = {"kind": "star"}
    elif isinstance(topo, ir.Hierarchy):
        topology = {"kind": "hierarchy", "fanout": topo.fanout}
    else:
        topology = {"kind": "explicit", "coverage": topo.coverage, "members": list(topo.members)}
    part = dep.partitioning
    return {
        "format": "alphac-protocol-1",
        "wire": WIRE_FORMAT,
        "owners": dep.owners,
        "topology": topology,
        "tree": tree_table(nodes),
        "learner": {"k": learner.k, "s": learner.s, "m": learner.m},
        "programs": {"contribution": flat(learner.contribution), "update": flat(learner.update)},
        "contract": {"profile": {f: getattr(dep.contract.profile, f) for f in PROFILE_FIELDS},
                     "relation": dep.contract.relation},
        "partitioning": {"optimizer_state": part.optimizer_state, "parameters": part.parameters,
                         "gradients": part.gradients,
                         "words_per_coordinate": part.words_per_coordinate,
                         "shared_state": list(part.shared_state)},
    }


def protocol_identity(dep: ir.Deployment, nodes) -> int:
    digest = sha256_hex(canonical_json(identity_document(dep, nodes)))
    return int(digest[:16], 16)

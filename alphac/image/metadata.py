"""The `.alphac` record of an executable: its plan, contract and target as sorted UTF-8 JSON
(format FORMAT, in the ELF section SECTION). Built here from the plan; linked in as
data by the build (alphac.targets.runtime.data_object), read back by alphac.targets.elf."""

from __future__ import annotations

import json
from pathlib import Path

SECTION = ".alphac"
FORMAT = 1


def topology_tag(topology) -> str:
    from alphac.ir import nodes as n

    if isinstance(topology, n.Star):
        return "star"
    if isinstance(topology, n.Hierarchy):
        return f"hierarchy:{topology.fanout}"
    if isinstance(topology, n.SampleTree):
        return "sample-tree"
    return "explicit"


def metadata_for(plan, role: str, target: str, triple: str, cpu: dict) -> dict:
    """What one (role, target) executable records about itself (`triple`: the target's;
    `cpu`: the level its kernels are built for, alphac.targets.levels.record)."""
    dep = plan.deployment
    members = next((list(r.owners) for r in dep.roles if r.name == role), [])
    contract = plan.contract
    source = dep.source_file or dep.name
    return {
        "format": FORMAT,
        "spec": Path(source).stem,
        "deployment": dep.name,
        "role": role,
        "role_owners": members,
        "target": target,
        "triple": triple,
        "cpu": cpu,
        "owners": dep.owners,
        "topology": topology_tag(dep.topology),
        "protocol": plan.protocol_hex,
        "contract": {
            **contract.profile_data(),
            "relation": contract.relation,
            "order_digest": contract.order_digest,
            "operations": len(contract.ops),
        },
        "placement": list(dep.placement),
        "updates": dep.updates,
        "learner": {"k": dep.learner.k, "m": dep.learner.m, "s": dep.learner.s},
        "mutant": plan.mutant,  # the executed mutant it was built as; None: the declared program
    }


def encode(meta: dict) -> bytes:
    """Canonical bytes: sorted keys, no spaces, so equal metadata gives equal executables."""
    return json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

"""The `.alphac` ELF section's contents: the plan, contract and target of an executable as
sorted UTF-8 JSON, built and embedded at build time. Reading it back (and the section name
and record format) belongs to alphac.targets.elf."""

from __future__ import annotations

import json
from pathlib import Path

from llvmlite import ir

from alphac.targets.elf import FORMAT, SECTION

SYMBOL = "alphac_metadata"
I8 = ir.IntType(8)


def topology_tag(topology) -> str:
    from alphac.ir import nodes as n

    if isinstance(topology, n.Star):
        return "star"
    if isinstance(topology, n.Hierarchy):
        return f"hierarchy:{topology.fanout}"
    return "explicit"


def metadata_for(plan, role: str, target: str) -> dict:
    """What one (role, target) executable records about itself."""
    from alphac.targets import load_target

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
        "triple": load_target(target).triple,
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
    }


def encode(meta: dict) -> bytes:
    """Canonical bytes: sorted keys, no spaces, so equal metadata gives equal executables."""
    return json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def embed_metadata(module: ir.Module, plan_or_meta, role: str | None = None,
                   target: str | None = None) -> ir.GlobalVariable:
    """Add the section holding `metadata_for(plan, role, target)` (or a ready dict) to
    `module`, kept alive through optimisation and linking by `llvm.used`."""
    meta = plan_or_meta if isinstance(plan_or_meta, dict) else metadata_for(plan_or_meta, role, target)
    data = bytearray(encode(meta))
    arr = ir.ArrayType(I8, len(data))
    g = ir.GlobalVariable(module, arr, SYMBOL)
    g.global_constant = True
    g.section = SECTION
    g.initializer = ir.Constant(arr, data)
    # Default linkage (see TOOLCHAIN.md); `llvm.used` stops the optimiser dropping it.
    ptr = I8.as_pointer()
    used_t = ir.ArrayType(ptr, 1)
    used = ir.GlobalVariable(module, used_t, "llvm.used")
    used.linkage = "appending"
    used.section = "llvm.metadata"
    used.initializer = ir.Constant(used_t, [g.bitcast(ptr)])
    return g


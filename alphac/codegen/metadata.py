"""The `.alphac` ELF section: the plan, contract and target of an executable as sorted UTF-8
JSON, embedded at build time and read back (pyelftools) by `alphac inspect`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from llvmlite import ir

SECTION = ".alphac"
SYMBOL = "alphac_metadata"
FORMAT = 1
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


def read_metadata(path: "str | os.PathLike") -> dict:
    """The embedded JSON of an executable; `not-an-alphac-executable` / `bad-metadata`."""
    return describe(path)["metadata"]


def describe(path: "str | os.PathLike") -> dict:
    """Metadata plus what the ELF file itself says: machine, static or dynamic, size."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    from alphac.targets.target import TargetError

    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as f:
            try:
                elf = ELFFile(f)
                machine = elf["e_machine"]
                elf_type = elf["e_type"]
                interp = any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
                section = elf.get_section_by_name(SECTION)
                raw = section.data() if section is not None else None
            except (ELFError, ValueError, KeyError) as exc:
                raise TargetError("not-an-alphac-executable", f"{p}: not an ELF file ({exc})") from None
    except OSError as exc:
        raise TargetError("io-error", f"{p}: {exc.strerror or exc}") from None
    if raw is None:
        raise TargetError("not-an-alphac-executable", f"{p}: no {SECTION} section")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TargetError("bad-metadata", f"{p}: {SECTION} is not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise TargetError("bad-metadata", f"{p}: {SECTION} has no format {FORMAT} record")
    return {
        "metadata": meta,
        "machine": machine,
        "elf_type": elf_type,
        "static": not interp,
        "size": size,
    }

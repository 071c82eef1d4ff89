"""Assembling one executable per (role, target): the two program kernels, the role runtime
and the embedded metadata in one llvmlite module, verified, compiled and linked.

    build_module(plan, role, target) -> ir.Module
    build_executable(plan, role, target, out_dir) -> Path     ({out_dir}/{spec}-{role}-{target})

Builds are reproducible: nothing in the module depends on time or on where files lie, and
the object is linked under a fixed name (alphac.targets.link_bytes).
"""

from __future__ import annotations

import os
from pathlib import Path

from llvmlite import ir

from alphac.codegen.program import emit_program, program_regions
from alphac.codegen.runtime import emit_runtime

CONTRIBUTION = "alphac_contribution"
UPDATE = "alphac_update"


def spec_stem(plan) -> str:
    source = plan.deployment.source_file or plan.deployment.name
    return Path(source).stem


def executable_name(plan, role: str, target: str) -> str:
    return f"{spec_stem(plan)}-{role}-{target}"


def build_module(plan, role: str, target: str) -> ir.Module:
    """The whole executable as one module (not yet stamped with a triple)."""
    learner = plan.deployment.learner
    k, s, m = learner.k, learner.s, learner.m
    module = ir.Module(name=executable_name(plan, role, target))
    contribution = emit_program(module, learner.contribution, CONTRIBUTION,
                                program_regions("contribution", k, s, m))
    if plan.deployment.partitioning.any:
        # a partitioned learner: the owned update kernel and the partitioned runtime
        from alphac.codegen.owned import emit_owned_update
        from alphac.codegen.runtime import emit_owned_runtime

        update, owner_g = emit_owned_update(module, learner, plan.deployment.partitioning,
                                            plan.deployment.owners, UPDATE)
        emit_owned_runtime(module, plan, role, target, contribution, update, owner_g)
    else:
        update = emit_program(module, learner.update, UPDATE, program_regions("update", k, s, m))
        emit_runtime(module, plan, role, target, contribution, update)
    _embed_metadata(module, plan, role, target)
    return module


def _embed_metadata(module: ir.Module, plan, role: str, target: str) -> None:
    try:
        from alphac.codegen.metadata import embed_metadata
    except ImportError:  # the section is optional for running; `inspect` needs it
        return
    embed_metadata(module, plan, role, target)


def build_executable(plan, role: str, target: str, out_dir: "str | os.PathLike") -> Path:
    """Build `{out_dir}/{spec}-{role}-{target}`; raises TargetError / RuntimeUnsupported."""
    from alphac.targets import compile_object, link_bytes

    module = build_module(plan, role, target)
    obj = compile_object(module, target)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exe = out / executable_name(plan, role, target)
    # link to a temporary name, then rename: a half-written executable is never run
    tmp = exe.with_name(exe.name + ".partial")
    link_bytes(obj, target, tmp)
    os.replace(tmp, exe)
    return exe

"""One role executable's llvmlite module, from its role image: the two program kernels
(the owned update kernel for a partitioned learner), the arithmetic between them
(arith.py), the image itself as the read-only `alphac_image` words the C runtime reads,
and the `.alphac` metadata section.

    kernel_module(image, metadata) -> ir.Module

Symbols the runtime links against: alphac_contribution, alphac_update (and their
`_labels`), alphac_update_owner (partitioned learners), the arith kernels, alphac_image.
"""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.arith import emit_arith
from alphac.codegen.owned import emit_owned_update
from alphac.codegen.program import emit_program, program_regions
from alphac.codegen.types import I64, I8

CONTRIBUTION = "alphac_contribution"
UPDATE = "alphac_update"
IMAGE = "alphac_image"


def emit_bytes(module: ir.Module, name: str, data: bytes) -> ir.GlobalVariable:
    """A read-only, exported, 16-byte aligned global holding `data`."""
    ty = ir.ArrayType(I8, max(len(data), 8))
    g = ir.GlobalVariable(module, ty, name)
    g.initializer = ir.Constant(ty, bytearray(data) if any(data) else None)
    g.global_constant = True
    g.align = 16
    return g


def kernel_module(image, metadata: dict | None = None) -> ir.Module:
    """Everything of the executable that llvmlite emits (not yet stamped with a triple)."""
    from alphac.codegen.metadata import embed_metadata

    k, s, m = image.k, image.s, image.m
    module = ir.Module(name=f"{image.spec}-{image.role}-{image.target}")
    emit_program(module, image.contribution, CONTRIBUTION, program_regions("contribution", k, s, m))
    if image.owned:
        emit_owned_update(module, image.update, k, s, m, image.update_layout, image.n, UPDATE)
    else:
        emit_program(module, image.update, UPDATE, program_regions("update", k, s, m))
        # the runtime sets the owner of the next owned update; replicated kernels ignore it
        owner = ir.GlobalVariable(module, I64, f"{UPDATE}_owner")
        owner.initializer = ir.Constant(I64, 0)
    emit_arith(module)
    emit_bytes(module, IMAGE, image.encode())
    if metadata is not None:
        embed_metadata(module, metadata)
    return module

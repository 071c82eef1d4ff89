"""One role executable's llvmlite module, from its role image: the two program kernels
(the owned update kernel for a partitioned learner) and the arithmetic between them
(arith.py). The image's own bytes and the `.alphac` metadata record are linked in as data
(alphac.targets.runtime.data_object, symbols IMAGE and METADATA), so the module holds
nothing of the role: images alike in KERNEL_FIELDS have one module and one cached object.
`kernel_module(image) -> ir.Module`. Symbols the runtime links against: alphac_contribution,
alphac_update (and their `_labels`), alphac_contribution_lanes and its `_width` (lanes.py),
alphac_update_owner (partitioned learners), the arith kernels. For an independent-state learner (docs/learners.md)
alphac_contribution is its rule, the program run once per input over (region, pair, scale),
and alphac_update the empty update program, which its protocol never runs.
"""

from __future__ import annotations

from llvmlite import ir

from alphac.codegen.arith import emit_arith
from alphac.codegen.lanes import emit_lanes
from alphac.codegen.owned import emit_owned_update
from alphac.codegen.program import emit_program, program_regions
from alphac.codegen.types import I64

CONTRIBUTION = "alphac_contribution"
UPDATE = "alphac_update"
IMAGE = "alphac_image"
METADATA = "alphac_metadata"
KERNEL_FIELDS = ("k", "s", "m", "region", "fmt", "owned", "n", "partitioning", "update_layout", "contribution",
                 "update")  # what kernel_module reads of the image


def kernel_module(image) -> ir.Module:
    """Everything of the executable that llvmlite emits (not yet stamped with a triple); its
    name is fixed, so that its text is its kernels' alone."""
    k, s, m = image.k, image.s, image.m
    module = ir.Module(name="alphac_kernels")
    per_input = "rule" if image.region else "contribution"
    emit_program(module, image.contribution, CONTRIBUTION,
                 program_regions(per_input, k, s, m, image.region), image.fmt)
    # an independent-state rule runs once per input, in place: its lanes kernel is never built
    emit_lanes(module, image.contribution, k, s, "none" if image.region else image.fmt)
    if image.owned and not image.region:
        emit_owned_update(module, image.update, k, s, m, image.update_layout, image.n, image.partitioning,
                          UPDATE, image.fmt)
    else:
        emit_program(module, image.update, UPDATE, program_regions("update", k, s, m), image.fmt)
        # the runtime sets the owner of the next owned update; replicated kernels ignore it
        owner = ir.GlobalVariable(module, I64, f"{UPDATE}_owner")
        owner.initializer = ir.Constant(I64, 0)
    emit_arith(module, image.fmt)
    return module

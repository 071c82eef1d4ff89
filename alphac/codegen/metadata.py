"""Embedding the `.alphac` record (alphac.image.metadata) in a module: a constant in the
section, kept alive through optimisation and linking by `llvm.used`."""

from __future__ import annotations

from llvmlite import ir

from alphac.image.metadata import SECTION, encode

SYMBOL = "alphac_metadata"
I8 = ir.IntType(8)


def embed_metadata(module: ir.Module, meta: dict) -> ir.GlobalVariable:
    """Add the section holding the record `meta` to `module`."""
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

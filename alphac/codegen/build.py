"""Assembling one executable per (role, target): the role image, the kernel module
(kernels, image, metadata) compiled by llvmlite, and the C runtime object, linked.

    build_executable(plan, role, target, out_dir) -> Path     ({out_dir}/{spec}-{role}-{target})

Builds are reproducible: nothing depends on time or on where files lie, and objects are
linked under fixed names (alphac.targets.link_bytes).
"""

from __future__ import annotations

import os
from pathlib import Path


def executable_name(plan, role: str, target: str) -> str:
    source = plan.deployment.source_file or plan.deployment.name
    return f"{Path(source).stem}-{role}-{target}"


def build_executable(plan, role: str, target: str, out_dir: "str | os.PathLike") -> Path:
    """Build `{out_dir}/{spec}-{role}-{target}`; raises TargetError / ImageError."""
    from alphac.codegen.metadata import metadata_for
    from alphac.codegen.module import kernel_module
    from alphac.image import build_image
    from alphac.targets import compile_object, link_bytes, runtime_object

    image = build_image(plan, role, target)
    obj = compile_object(kernel_module(image, metadata_for(plan, role, target)), target)
    rt = runtime_object(target)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exe = out / executable_name(plan, role, target)
    # link to a temporary name, then rename: a half-written executable is never run
    tmp = exe.with_name(exe.name + ".partial")
    link_bytes(obj, target, tmp, extra=(rt,))
    os.replace(tmp, exe)
    return exe

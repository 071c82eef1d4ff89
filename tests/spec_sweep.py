"""Every deployment of every spec under specs/, for the sweeps over them: a file may declare
several (the elementary-function and binary32 gates declare a replicated and a partitioned
one), and seed_dataparallel.alpha declares none."""

from __future__ import annotations

import glob
from pathlib import Path

SPECS = Path(__file__).resolve().parents[1] / "specs"


def every_deployment() -> list[tuple[str, object]]:
    """(name, deployment) for every deployment of every spec: `stem`, or `stem:name` where
    a file declares several."""
    from alphac.check import load_spec

    out = []
    for path in sorted(glob.glob(str(SPECS / "*.alpha"))):
        deps = load_spec(path).deployments
        for dep in deps:
            out.append((Path(path).stem if len(deps) == 1 else f"{Path(path).stem}:{dep.name}", dep))
    return out


def spec_files() -> int:
    """How many spec files there are (each declares one deployment or more, but one)."""
    return len(glob.glob(str(SPECS / "*.alpha")))

"""Every test runs as if no engine had started it: the variables an executable takes its
owner index and hosts from (alphac.wire.ENGINE_VARIABLES) are removed, so the suite runs
the same inside a Slurm job or an mpirun. Tests that mean to set them do so themselves."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from alphac.wire import ENGINE_VARIABLES

# The tiers (unit: no executable; runtime: the runtime and kernels in-process; e2e: real
# executables and owners; faults: kills, signals and corrupted peers; device: the GPU) share
# the helper modules here and import each other's builders by module name.
_HERE = Path(__file__).resolve().parent
for _tier in ("", "unit", "runtime", "e2e", "faults", "device"):
    if str(_HERE / _tier) not in sys.path:
        sys.path.insert(0, str(_HERE / _tier))

for _name in ENGINE_VARIABLES:
    os.environ.pop(_name, None)

"""Every test runs as if no engine had started it: the variables an executable takes its
owner index and hosts from (alphac.wire.ENGINE_VARIABLES) are removed, so the suite runs
the same inside a Slurm job or an mpirun. Tests that mean to set them do so themselves."""

from __future__ import annotations

import os

from alphac.wire import ENGINE_VARIABLES

for _name in ENGINE_VARIABLES:
    os.environ.pop(_name, None)

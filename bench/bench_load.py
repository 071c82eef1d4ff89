"""Peak memory and wall time of `alphac check` on a spec whose samples are a large `.npy`.

Writes a float64 `.npy` of rows of 2 words (default 64 MiB) and a small learner and
deployment reading it, then checks that spec and a tiny one (the same spec with a one-row
file) each in a fresh interpreter, which prints its peak resident size (VmHWM). The figure
that matters is the peak above the tiny spec's, as a multiple of the file's size: word
files are memory-mapped and reinterpreted in place, so it should stay near 1 (the target
is below 1.3). Usage: python bench/bench_load.py [--mib N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SPEC = """import Learning.Deployment

value learner : (family DataParallelSystem 4 3) = DataParallelSystemOf {
  dataParallelParameterCount = 1,
  dataParallelSampleWidth = 2,
  dataParallelContribution = [slot 3 := (slot 0 * slot 1 - slot 2) * slot 1],
  dataParallelUpdate = [slot 0 := slot 0 - slot 2 * slot 1],
  dataParallelInitial = [0.5],
  dataParallelInitialState = [],
  dataParallelRate = 0.01,
  dataParallelSamples = load "SAMPLES" shares [ROWS, 0],
}

value run : Deployment = DeploymentOf {
  deploymentLearner = learner,
  deploymentOwners = 2,
  deploymentTopology = DataParallelStar,
  deploymentPartitioning = DataParallelReplicated,
  deploymentRoles = [RoleOf { roleName = "coordinator", roleOwners = [0] },
                     RoleOf { roleName = "worker", roleOwners = [1] }],
  deploymentPlacement = [TargetX86_64, TargetX86_64],
  deploymentUpdates = 1,
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}
"""

# Run in the child: check the spec in process, then report the peak resident size.
CHILD = """
import json, sys, time
t = time.monotonic()
from alphac import driver
result = driver.check(sys.argv[1])
seconds = time.monotonic() - t
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"ok": result.ok, "codes": [d.code for d in result.diagnostics],
                  "hwm_kib": hwm, "seconds": seconds}))
"""


def write_spec(directory: Path, name: str, rows: int) -> Path:
    """A spec whose samples are `rows` rows of 2 words in {name}.npy, both in `directory`."""
    data = np.linspace(-1.0, 1.0, rows * 2, dtype="<f8").reshape(rows, 2)
    np.save(directory / f"{name}.npy", data)
    spec = directory / f"{name}.alpha"
    spec.write_text(SPEC.replace("SAMPLES", f"{name}.npy").replace("ROWS", str(rows)))
    return spec


def child_peak(spec: Path, root: Path = ROOT) -> dict:
    """Check `spec` in a fresh interpreter importing alphac from `root`: ok, codes, VmHWM
    in KiB, seconds."""
    env = dict(os.environ, PYTHONPATH=str(root))
    # run beside the spec: `-c` puts the working directory first on sys.path
    out = subprocess.run([sys.executable, "-c", CHILD, spec.name], env=env, check=True,
                         capture_output=True, text=True, cwd=spec.parent).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(directory: Path, mib: int, root: Path = ROOT, repeat: int = 1) -> dict:
    """The file's size, the tiny and the big spec's best peaks (KiB) and check times, and
    the peak above the tiny spec's as a multiple of the file's size."""
    rows = mib * (1 << 20) // 16
    tiny, big = write_spec(directory, "tiny", 1), write_spec(directory, "big", rows)
    size = (directory / "big.npy").stat().st_size
    runs = {"tiny": [child_peak(tiny, root) for _ in range(repeat)],
            "big": [child_peak(big, root) for _ in range(repeat)]}
    for name, got in runs.items():
        assert all(r["ok"] for r in got), (name, got)
    base = min(r["hwm_kib"] for r in runs["tiny"])
    peak = min(r["hwm_kib"] for r in runs["big"])
    return {"file_bytes": size, "tiny_hwm_kib": base, "big_hwm_kib": peak,
            "tiny_seconds": min(r["seconds"] for r in runs["tiny"]),
            "big_seconds": min(r["seconds"] for r in runs["big"]),
            "ratio": (peak - base) * 1024 / size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64, help="size of the samples file in MiB")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each spec; the best counts")
    ap.add_argument("--root", default=str(ROOT), help="the alphac tree to measure")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        got = measure(Path(tmp), args.mib, Path(args.root), args.repeat)
    print(f"samples file          {got['file_bytes'] / (1 << 20):8.1f} MiB")
    print(f"tiny spec: peak       {got['tiny_hwm_kib'] / 1024:8.1f} MiB   check {got['tiny_seconds']:.3f} s")
    print(f"big spec:  peak       {got['big_hwm_kib'] / 1024:8.1f} MiB   check {got['big_seconds']:.3f} s")
    print(f"peak above tiny       {got['ratio']:8.2f} x the file (target < 1.3)")


if __name__ == "__main__":
    main()

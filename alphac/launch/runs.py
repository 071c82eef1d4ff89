"""The output directory's housekeeping: each launch runs in a fresh `OUT/runs/<spec>-XXXX/`,
and only the newest KEEP_RUNS of them are kept (older ones are removed when a launch
starts); `alphac clean` removes the runs and the executables alphac built there."""

from __future__ import annotations

import shutil
from pathlib import Path

KEEP_RUNS = 20


def runs_of(out_dir: str | Path) -> list[Path]:
    """The run directories under OUT/runs/, newest first."""
    base = Path(out_dir) / "runs"
    if not base.is_dir():
        return []
    found = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def prune_runs(out_dir: str | Path, keep: int = KEEP_RUNS) -> list[Path]:
    """Remove all but the newest `keep` run directories; the ones removed."""
    old = runs_of(out_dir)[keep:]
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    return old


def built_here(out_dir: str | Path) -> list[Path]:
    """The executables (and shared libraries) alphac built in OUT, known by their `.alphac`
    section, with their records of inputs (EXE.deps), and the staging directories an
    interrupted build may have left."""
    from alphac.launch.cache import deps_path
    from alphac.targets.elf import read_metadata
    from alphac.targets.target import TargetError

    found = []
    base = Path(out_dir)
    for p in sorted(base.iterdir()) if base.is_dir() else ():
        if p.is_dir() and p.name.startswith(".") and p.name.endswith(".partial"):
            found.append(p)
            continue
        if not p.is_file() or p.is_symlink():
            continue
        try:
            read_metadata(p)
        except (TargetError, OSError):
            continue
        found.append(p)
        if deps_path(p).is_file():
            found.append(deps_path(p))
    return found


def clean(out_dir: str | Path, runs_only: bool = False) -> list[Path]:
    """Remove OUT/runs/ and, unless `runs_only`, what built_here finds; what was removed.
    Nothing else in OUT is touched."""
    removed = []
    runs = Path(out_dir) / "runs"
    if runs.is_dir() and not runs.is_symlink():
        shutil.rmtree(runs)
        removed.append(runs)
    for p in [] if runs_only else built_here(out_dir):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
        removed.append(p)
    return removed

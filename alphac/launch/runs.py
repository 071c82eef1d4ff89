"""The output directory's housekeeping: each launch runs in a fresh `OUT/runs/<spec>-XXXX/`
(`new_run_dir`; <spec> is the deployment's `spec_stem`), and only the newest KEEP_RUNS of
them are kept (older ones are removed when a launch starts, but for a run a checkpoint
pointer names); a launch's checkpoints go into its run directory, `RUN/D` for the
deployment's relative checkpointDirectory D, and `OUT/D/latest` points at the newest one
published; `alphac clean` removes the runs, the pointers and the executables alphac built
there."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

KEEP_RUNS = 20
POINTER = "latest"  # OUT/D/latest: the newest checkpoint a launch published under RUN/D
POINTER_DEPTH = 8   # how deep below OUT a pointer is looked for (D's components)


def spec_stem(dep) -> str:
    """The name a deployment's files go under: its spec file's stem, else its own name."""
    return Path(dep.source_file).stem if dep.source_file else dep.name


def new_run_dir(out_dir: str | Path, stem: str) -> Path:
    """A fresh `OUT/runs/<stem>-XXXXXXXX/`; only the newest KEEP_RUNS run directories are
    kept (prune_runs)."""
    base = Path(out_dir) / "runs"
    base.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=f"{stem}-", dir=base))
    prune_runs(out_dir)
    return made


def checkpoint_home(declared: str) -> Path | None:
    """Where a launch's checkpoints go inside its run directory: the declared relative
    checkpointDirectory D, normalized (`RUN/D`); None for an absolute D, which is used as
    it is. ValueError for a D that is empty or climbs out of the run directory (`..`)."""
    path = PurePosixPath(declared)
    if path.is_absolute():
        return None
    parts = [x for x in path.parts if x != "."]
    if not parts or ".." in parts:
        raise ValueError(f"checkpointDirectory {declared!r} does not name a directory inside the "
                         "run directory: give --checkpoint-dir DIR, or a D without '..'")
    return Path(*parts)


def scheduled(start: int, last: int, every: int) -> list[int]:
    """The checkpoint versions a run from version `start` to `last` writes, every `every`."""
    return list(range((start // every + 1) * every, last + 1, every)) if every > 0 else []


def existing(directory: str | Path, versions) -> list[Path]:
    """Those of `directory`/ckpt-<u> for u in versions that exist already (a link too)."""
    d = Path(directory)
    return [d / f"ckpt-{u}" for u in versions if os.path.lexists(d / f"ckpt-{u}")]


def published(directory: str | Path) -> list[int]:
    """The versions published in `directory` (its `ckpt-<u>` directories), ascending."""
    d = Path(directory)
    found = []
    for p in d.iterdir() if d.is_dir() else ():
        tail = p.name[len("ckpt-"):]
        if p.name.startswith("ckpt-") and tail.isdigit() and p.is_dir() and not p.is_symlink():
            found.append(int(tail))
    return sorted(found)


def point_latest(out_dir: str | Path, home: Path, directory: str | Path) -> Path | None:
    """Make OUT/home/latest a relative link to the newest checkpoint published in
    `directory` (replaced at once: a new link renamed over the old one); None when the run
    published none, and the pointer is left as it was."""
    versions = published(directory)
    if not versions:
        return None
    pointer = Path(out_dir) / home / POINTER
    pointer.parent.mkdir(parents=True, exist_ok=True)
    target = os.path.relpath(Path(directory) / f"ckpt-{versions[-1]}", pointer.parent)
    fresh = pointer.with_name(f".{POINTER}.{os.getpid()}")
    if os.path.lexists(fresh):
        fresh.unlink()
    os.symlink(target, fresh)
    os.replace(fresh, pointer)
    return pointer


def pointers(out_dir: str | Path) -> list[Path]:
    """The checkpoint pointers under OUT: links named `latest` that lead into OUT/runs/
    (looked for at most POINTER_DEPTH levels down, never inside OUT/runs/)."""
    base = Path(out_dir)
    runs = (base / "runs").resolve()
    found = []
    for top, dirs, files in os.walk(base):
        here = Path(top)
        depth = len(here.relative_to(base).parts)
        dirs[:] = [] if depth >= POINTER_DEPTH else [
            d for d in dirs if not (here / d).is_symlink() and (here / d).resolve() != runs]
        link = here / POINTER
        if here != base and link.is_symlink() and runs in Path(os.path.realpath(link)).parents:
            found.append(link)
    return sorted(found)


def _pointed_runs(out_dir: str | Path) -> set[Path]:
    runs = (Path(out_dir) / "runs").resolve()
    out = set()
    for link in pointers(out_dir):
        rel = Path(os.path.realpath(link)).relative_to(runs)
        out.add(runs / rel.parts[0])
    return out


def runs_of(out_dir: str | Path) -> list[Path]:
    """The run directories under OUT/runs/, newest first."""
    base = Path(out_dir) / "runs"
    if not base.is_dir():
        return []
    found = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def prune_runs(out_dir: str | Path, keep: int = KEEP_RUNS) -> list[Path]:
    """Remove every run directory but the newest `keep` and those a checkpoint pointer
    leads into; the ones removed."""
    kept = _pointed_runs(out_dir)
    old = [p for p in runs_of(out_dir)[keep:] if p.resolve() not in kept]
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
    """Remove OUT/runs/, the checkpoint pointers into it (and the directories they leave
    empty) and, unless `runs_only`, what built_here finds; what was removed. Nothing else
    in OUT is touched."""
    removed = []
    base = Path(out_dir)
    for link in pointers(out_dir):
        link.unlink()
        removed.append(link)
        d = link.parent
        while d != base and d.is_dir() and not any(d.iterdir()):
            d.rmdir()
            d = d.parent
    runs = Path(out_dir) / "runs"
    if runs.is_dir() and not runs.is_symlink():
        shutil.rmtree(runs)
        removed.append(runs)
    for p in [] if runs_only else built_here(out_dir):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
        removed.append(p)
    return removed

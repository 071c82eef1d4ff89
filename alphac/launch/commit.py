"""The commit record of a run, and what it decides once every owner has ended.

The root owner writes `ROOT_OUT.commit` (docs/runtime.md "Publication") after every owner
has staged its output and said so; the run is published exactly when that record is
durable. It is text:

    alphac-commit 1
    protocol 3f8a0c1d22e4b5a6
    updates 5
    owners 4
    owner 0 <sha256 of owner 0's output file, 64 hex digits>
    ...

`resolve(outs, root)` is what a launcher does after a run: with a record, every owner's
output is committed — a staged `PATH.tmp` an owner did not get to link (it died after the
commit) is linked now — and each output must have the recorded digest; without one, nothing
was published and every staged file of the run is removed.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from alphac.launch.results import ResultError

HEAD = "alphac-commit 1"


@dataclass(frozen=True)
class CommitRecord:
    protocol: int
    updates: int
    owners: int
    digests: dict[int, str]  # owner -> sha256 hex of its output file


def commit_path(root_out: str | Path) -> Path:
    return Path(f"{root_out}.commit")


def staged_path(out: str | Path) -> Path:
    return Path(f"{out}.tmp")


def parse_commit(text: str, where: str = "<commit>") -> CommitRecord:
    lines = text.splitlines()
    fields = {}
    digests: dict[int, str] = {}
    if not lines or lines[0] != HEAD:
        raise ResultError(f"{where}: not an alphac commit record (first line {lines[0] if lines else ''!r})")
    for i, line in enumerate(lines[1:], start=2):
        m = re.fullmatch(r"owner (\d+) ([0-9a-f]{64})", line)
        if m:
            digests[int(m.group(1))] = m.group(2)
            continue
        m = re.fullmatch(r"(protocol) ([0-9a-f]{16})|(updates|owners) (\d+)", line)
        if not m:
            raise ResultError(f"{where}:{i}: malformed line {line!r}")
        if m.group(1):
            fields["protocol"] = int(m.group(2), 16)
        else:
            fields[m.group(3)] = int(m.group(4))
    missing = [k for k in ("protocol", "updates", "owners") if k not in fields]
    if missing:
        raise ResultError(f"{where}: no {', '.join(missing)} line")
    if sorted(digests) != list(range(fields["owners"])):
        raise ResultError(f"{where}: names owners {sorted(digests)}, not 0..{fields['owners'] - 1}")
    return CommitRecord(fields["protocol"], fields["updates"], fields["owners"], digests)


def read_commit(path: str | Path) -> CommitRecord:
    p = Path(path)
    return parse_commit(p.read_text(encoding="utf-8"), str(p))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class Resolution:
    record: CommitRecord | None           # None: the run was not committed
    finalized: list[int] = field(default_factory=list)   # staged outputs linked here
    removed: list[Path] = field(default_factory=list)    # staged files of an uncommitted run
    errors: dict[int, str] = field(default_factory=dict)  # owner -> why its output is not the recorded one

    @property
    def committed(self) -> bool:
        return self.record is not None


def _remove_staged(path: Path, res: Resolution) -> None:
    # the owners create staged files O_EXCL|O_NOFOLLOW: a link there is not theirs
    if path.is_file() and not path.is_symlink():
        path.unlink()
        res.removed.append(path)


def resolve(outs: dict[int, Path], root: int) -> Resolution:
    """Settle a run whose owners have all ended: roll forward (committed) or back."""
    record_path = commit_path(outs[root])
    try:
        record = read_commit(record_path) if record_path.is_file() else None
    except (OSError, ResultError) as exc:
        res = Resolution(None)
        res.errors[root] = f"unreadable commit record: {exc}"
        record = None
    else:
        res = Resolution(record)
    if record is None:
        for out in outs.values():
            _remove_staged(staged_path(out), res)
        _remove_staged(staged_path(record_path), res)
        return res
    for o, out in outs.items():
        staged = staged_path(out)
        if not out.exists() and staged.is_file() and not staged.is_symlink():
            os.link(staged, out)  # the owner died after the commit, before linking its output
            res.finalized.append(o)
        if staged.is_file() and out.exists() and os.path.samefile(staged, out):
            staged.unlink()
        if not out.exists():
            res.errors[o] = "committed, but its output is gone"
        elif sha256_file(out) != record.digests.get(o):
            res.errors[o] = f"its output's sha256 is not the one the commit record names"
    return res

"""The commit record of a run, and what it decides once every owner has ended.

The root owner writes `ROOT_OUT.commit` (docs/runtime.md "Publication") after every owner
has staged its output and said so; the run is committed from the moment that record is
linked to its name (in a run directory the root links every output with it). It is text:

    alphac-commit 1
    protocol 3f8a0c1d22e4b5a6
    updates 5
    owners 4
    owner 0 <sha256 of owner 0's output file, 64 hex digits>
    ...

`resolve(outs, root)` is what a launcher does after a run: with a record, every owner's
output is committed — a staged `PATH.tmp` nobody got to link (an owner outside the root's
run directory died after the commit, or a crash kept the record's link and lost another)
is linked now — and each output must have the recorded digest; without one, nothing was
published and every staged file of the run is removed, with any final name linked to it.
`resolve(outs, root, settle=False)` comes to the same decision and changes nothing
(`alphac verify`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from alphac.launch.results import ResultError
from alphac.resources import NotRegular, open_regular, sha256_file

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
    """The commit record at `path`; ResultError when it is not UTF-8 or not a record,
    NotRegular when it is no regular file, OSError when it cannot be read."""
    with open_regular(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultError(f"{path}: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x}); "
                          "not an alphac commit record") from None
    return parse_commit(text, str(path))


@dataclass
class Resolution:
    record: CommitRecord | None           # None: the run was not committed
    finalized: list[int] = field(default_factory=list)   # staged outputs linked here
    removed: list[Path] = field(default_factory=list)    # staged files of an uncommitted run
    errors: dict[int, str] = field(default_factory=dict)  # owner -> why its output is not the recorded one
    codes: dict[int, str] = field(default_factory=dict)   # owner -> the code of its error, where not bad-output
    invalid: str | None = None  # why the commit record that is there is no record (None: it is one, or absent)
    # without settling: the committed outputs still only staged (owner -> PATH.tmp), and the
    # staged files an uncommitted run left
    unlinked: dict[int, Path] = field(default_factory=dict)
    staged: list[Path] = field(default_factory=list)

    @property
    def committed(self) -> bool:
        return self.record is not None

    def output(self, owner: int, out: Path) -> Path:
        """Where owner's committed output is: its path, or its staged file not yet linked."""
        return self.unlinked.get(owner, out)


def _one_file(staged: Path, final: Path) -> bool:
    """Whether `final` is a link of the staged file (the root linked it)."""
    return (staged.is_file() and not staged.is_symlink() and final.is_file() and not final.is_symlink()
            and os.path.samefile(staged, final))


def _remove_staged(path: Path, res: Resolution, settle: bool, final: Path | None = None) -> None:
    # the owners create staged files O_EXCL|O_NOFOLLOW: a link there is not theirs. A final
    # name linked to the staged file without a durable commit record (the root's links went
    # to disk, its record did not: a crash of the machine) goes with it.
    if path.is_file() and not path.is_symlink():
        if settle:
            if final is not None and _one_file(path, final):
                final.unlink()
                res.removed.append(final)
            path.unlink()
            res.removed.append(path)
        else:
            res.staged.append(path)


def _roll_forward(o: int, out: Path, res: Resolution, settle: bool) -> None:
    """A committed owner's output: link a staged one it did not get to link (it died after
    the commit), or, without settling, take the staged file as the output."""
    staged = staged_path(out)
    if not out.exists() and staged.is_file() and not staged.is_symlink():
        if settle:
            os.link(staged, out)
            res.finalized.append(o)
        else:
            res.unlinked[o] = staged
    if settle and staged.is_file() and out.exists() and os.path.samefile(staged, out):
        staged.unlink()
    path = res.output(o, out)
    if not path.exists():
        res.errors[o] = "committed, but its output is gone"
        return
    try:
        digest = sha256_file(path)
    except NotRegular as exc:
        res.errors[o], res.codes[o] = f"its output {exc}", "run-output-not-file"
        return
    except OSError as exc:
        res.errors[o] = f"its output cannot be read: {exc.strerror or exc}"
        return
    if digest != res.record.digests.get(o):
        res.errors[o] = "its output's sha256 is not the one the commit record names"


def resolve(outs: dict[int, Path], root: int, settle: bool = True) -> Resolution:
    """Settle a run whose owners have all ended: roll forward (committed) or back. With
    `settle` False nothing is linked or removed (`alphac verify`: the owners may not have
    ended): a committed output still staged is read where it is (`Resolution.unlinked`),
    and an uncommitted run's staged files are listed (`Resolution.staged`)."""
    record_path = commit_path(outs[root])
    try:
        record = read_commit(record_path) if os.path.lexists(record_path) else None
    except (OSError, ResultError) as exc:
        res = Resolution(None)
        why = str(exc) if isinstance(exc, (ResultError, NotRegular)) else f"{record_path}: {exc.strerror or exc}"
        res.errors[root] = f"unreadable commit record: {why}"
        res.invalid = why
        record = None
    else:
        res = Resolution(record)
    if record is None:
        for out in outs.values():  # a record that is there but invalid leaves the final names alone
            _remove_staged(staged_path(out), res, settle, out if res.invalid is None else None)
        _remove_staged(staged_path(record_path), res, settle)
        return res
    for o, out in outs.items():
        _roll_forward(o, out, res, settle)
    if settle and _one_file(staged_path(record_path), record_path):  # the root died before removing it
        staged_path(record_path).unlink()
    return res

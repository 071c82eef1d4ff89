"""The role table: one row per owner (its role, its target, its executable and the runner
in front of it, e.g. `qemu-aarch64`), the one table the local launcher starts owners from
and the Slurm and mpirun emitters write their lines from; and its ranges, the runs of
consecutive owners started by the same command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping


@dataclass(frozen=True)
class OwnerEntry:
    owner: int
    role: str
    target: str
    exe: Path
    runner: tuple[str, ...] = ()  # prefixes the executable (empty: it runs natively)

    @property
    def command(self) -> tuple[str, ...]:
        """The runner and the executable: what the owner's command line starts with."""
        return (*self.runner, str(self.exe))

    @property
    def label(self) -> str:
        return f"{self.role}/{self.target}"


@dataclass(frozen=True)
class OwnerRange:
    """Owners first..last (inclusive), consecutive, with one role, target and command."""

    first: int
    last: int
    entry: OwnerEntry

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    @property
    def ranks(self) -> str:
        """Slurm's spelling of the range: `3`, `1-3`."""
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


def runner_for(target: str) -> tuple[str, ...]:
    """The target's runner (alphac/targets/{target}.toml): `qemu-aarch64` for AArch64."""
    from alphac.targets import load_target

    return tuple(load_target(target).runner)


def role_table(dep, exes: Mapping[tuple[str, str], Path] | list[Path],
               native: Iterable[str] = ()) -> tuple[OwnerEntry, ...]:
    """Every owner of `dep` with its executable: `exes` is {(role, target): exe} or one exe
    per owner. Owners on a target in `native` run without the target's runner (on a node
    of that instruction set)."""
    native = set(native)
    rows = []
    for o in range(dep.owners):
        role, target = dep.role_of(o).name, dep.placement[o]
        exe = exes[o] if isinstance(exes, list) else exes[(role, target)]
        rows.append(OwnerEntry(o, role, target, Path(exe), () if target in native else runner_for(target)))
    return tuple(rows)


def owner_ranges(table: tuple[OwnerEntry, ...]) -> list[OwnerRange]:
    """The table as maximal runs of consecutive owners with one role, target and command
    (an mpirun app context, an srun --multi-prog line)."""
    out: list[OwnerRange] = []
    for e in table:
        last = out[-1] if out else None
        if last is not None and last.last == e.owner - 1 and (last.entry.role, last.entry.target,
                                                               last.entry.command) == (e.role, e.target, e.command):
            out[-1] = OwnerRange(last.first, e.owner, last.entry)
        else:
            out.append(OwnerRange(e.owner, e.owner, e))
    return out

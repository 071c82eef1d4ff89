"""Reading an owner's stats file (`EXE --stats FILE`, docs/runtime.md "Measured bytes"): the
bytes of the learner's buffers the executable counted as it allocated them.

    alphac-stats 1
    owner 3
    status ok                      (or the refusal's code)
    bytes parameters 16 16         (per category: bytes at exit, then the high-water mark)
    ...
    persistent 48                  (parameters + state)
    peak 616                       (high-water mark of every category but samples together)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alphac.plan.memory import CATEGORIES

MAGIC = "alphac-stats 1"


class StatsError(ValueError):
    """A stats file that does not follow the format; the message says where."""


@dataclass(frozen=True)
class OwnerStats:
    owner: int
    status: str                 # "ok" or the refusal's code
    current: dict[str, int]     # bytes by category at exit
    high: dict[str, int]        # bytes by category at their highest
    persistent: int
    peak: int


def parse_stats(text: str, where: str = "<stats>") -> OwnerStats:
    lines = text.splitlines()
    if not lines or lines[0] != MAGIC:
        raise StatsError(f"{where}: not an alphac stats file (first line {lines[:1]!r})")
    items: dict[str, list[str]] = {}
    current, high = {}, {}
    for n, line in enumerate(lines[1:], 2):
        key, *rest = line.split() or ("",)
        if key == "bytes" and len(rest) == 3 and rest[0] in CATEGORIES:
            current[rest[0]], high[rest[0]] = _int(rest[1], where, n), _int(rest[2], where, n)
        elif key in ("owner", "status", "persistent", "peak") and len(rest) == 1 and key not in items:
            items[key] = rest
        else:
            raise StatsError(f"{where}:{n}: unexpected line {line!r}")
    missing = [c for c in CATEGORIES if c not in current] + [k for k in ("owner", "status", "persistent", "peak")
                                                              if k not in items]
    if missing:
        raise StatsError(f"{where}: no {', '.join(missing)}")
    return OwnerStats(_int(items["owner"][0], where, 2), items["status"][0], current, high,
                      _int(items["persistent"][0], where, 0), _int(items["peak"][0], where, 0))


def _int(text: str, where: str, line: int) -> int:
    if not text.isdigit():
        raise StatsError(f"{where}:{line}: {text!r} is not a byte count")
    return int(text)


def read_stats(path: str | Path) -> OwnerStats:
    p = Path(path)
    return parse_stats(p.read_text(), str(p))

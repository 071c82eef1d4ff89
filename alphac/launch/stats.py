"""Reading an owner's stats file (`EXE --stats FILE`, docs/runtime.md "Measured bytes"): the
bytes of the learner's buffers the executable counted as it allocated them.

    alphac-stats 1
    owner 3
    status ok                      (or the refusal's code)
    bytes parameters 16 16         (per category: bytes at exit, then the high-water mark)
    ...
    persistent 48                  (parameters + state)
    peak 616                       (high-water mark of every category but samples together)
    rss_kb 1400 1436               (resident kilobytes the kernel reports: idle at the start,
                                    and at its highest; 0 where /proc/self/status is unreadable)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alphac.plan.memory import CATEGORIES

MAGIC = "alphac-stats 1"
_ITEMS = {"owner": 1, "status": 1, "persistent": 1, "peak": 1, "rss_kb": 2}  # the words after each key


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
    rss_start_kb: int           # resident size before the learner's buffers, as the kernel reports it
    rss_peak_kb: int            # ... and at its highest (VmHWM)


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
        elif key in _ITEMS and len(rest) == _ITEMS[key] and key not in items:
            items[key] = rest
        else:
            raise StatsError(f"{where}:{n}: unexpected line {line!r}")
    missing = [c for c in CATEGORIES if c not in current] + [k for k in _ITEMS if k not in items]
    if missing:
        raise StatsError(f"{where}: no {', '.join(missing)}")
    number = {key: [_int(x, where, 0) for x in words] for key, words in items.items() if key != "status"}
    return OwnerStats(number["owner"][0], items["status"][0], current, high, number["persistent"][0],
                      number["peak"][0], *number["rss_kb"])


def _int(text: str, where: str, line: int) -> int:
    if not text.isdigit():
        raise StatsError(f"{where}:{line}: {text!r} is not a byte count")
    return int(text)


def read_stats(path: str | Path) -> OwnerStats:
    p = Path(path)
    return parse_stats(p.read_text(), str(p))

"""Whether a contribution program runs over LANES samples at once (the kernel:
alphac/codegen/lanes.py; its stack scratch: alphac/plan/memory.py).

It does where every contribution word is assigned exactly once (so the word stored is the
sample's contribution, and can be added to the local sum as it is stored), by assignments
whose words the program's text tells, binary64 or binary32 storage. The kernel's own lowering may
still decline (a view across regions, a read of the contribution): its width is then 0.
"""

from __future__ import annotations

import itertools

from alphac.ir import nodes as n

LANES = 8


def _writes(stmts, ranges: dict):
    """Each word an assignment writes, once per write; None for one the text does not tell."""
    for s in stmts:
        if isinstance(s, n.Loop):
            yield from _writes(s.body, {**ranges, s.var: range(s.lo, s.hi)})
        elif isinstance(s, n.Assign):
            idx = s.target
            if any(v not in ranges for v in idx.variables()):
                yield None
                continue
            for values in itertools.product(*(ranges[v] for v in idx.variables())):
                yield idx.at(dict(zip(idx.variables(), values)))


def lanes_ok(program: n.Program, k: int, s: int, fmt: str) -> bool:
    """Whether the contribution program (params [0, k), sample [k, k + s), contribution
    [k + s, 2k + s)) may run over LANES samples at once."""
    if fmt not in ("binary64", "binary32"):  # "none": an independent-state rule
        return False
    writes = [w for w in _writes(program.body, {}) if w is None or k + s <= w < 2 * k + s]
    return None not in writes and sorted(writes) == list(range(k + s, 2 * k + s))

"""Whether a contribution program runs over LANES samples at once (the kernel:
alphac/codegen/lanes.py; its stack scratch: alphac/plan/memory.py).

It does where every contribution word is assigned exactly once (so the word stored is the
sample's contribution, and can be added to the local sum as it is stored), by assignments
whose words the program's text tells, binary64 or binary32 storage. The kernel's own
lowering may still decline (a view across regions, a read of the contribution): its width
is then 0. The words are told as intervals, one an assignment, in time linear in the
program's statements, whatever their loops' trip counts.
"""

from __future__ import annotations

from alphac.ir import nodes as n

LANES = 8


def _interval(idx: n.Index, ranges: dict) -> tuple[int, int] | None:
    """The words [lo, hi) the index reaches once each over its variables' ranges, or None
    where they are no such interval (a stride that leaves gaps or reaches a word twice)."""
    lo, span = idx.base, 1
    for var, stride in sorted(idx.strides, key=lambda t: abs(t[1])):
        a, b = ranges[var]
        if b <= a:
            return idx.base, idx.base
        if abs(stride) != span:
            return None
        lo += min(stride * a, stride * (b - 1))
        span *= b - a
    return lo, lo + span


def _writes(stmts, ranges: dict):
    """(lo, hi) for each assignment's words, each reached once; None for an assignment whose
    words are not one interval reached once (a loop around it that it does not index)."""
    for s in stmts:
        if isinstance(s, n.Loop):
            yield from _writes(s.body, {**ranges, s.var: (s.lo, s.hi)})
        elif isinstance(s, n.Assign):
            used = s.target.variables()
            if any(v not in ranges for v in used):
                yield None
                continue
            others = [hi - lo for v, (lo, hi) in ranges.items() if v not in used]
            if any(t <= 0 for t in others):
                continue  # never executed
            yield None if any(t > 1 for t in others) else _interval(s.target, ranges)


def lanes_ok(program: n.Program, k: int, s: int, fmt: str) -> bool:
    """Whether the contribution program (params [0, k), sample [k, k + s), contribution
    [k + s, 2k + s)) may run over LANES samples at once."""
    if fmt not in ("binary64", "binary32"):  # "none": an independent-state rule
        return False
    spans = []
    for w in _writes(program.body, {}):
        if w is None:
            return False
        if w[0] < w[1] and w[1] > k + s and w[0] < 2 * k + s:  # reaches the contribution
            if w[0] < k + s or w[1] > 2 * k + s:
                return False
            spans.append(w)
    at = k + s
    for lo, hi in sorted(spans):  # one after another, each word once, to the end
        if lo != at:
            return False
        at = hi
    return at == 2 * k + s

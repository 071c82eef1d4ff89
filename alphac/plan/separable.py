"""`dataParallelSeparable`: may the update be partitioned by coordinate?

Decided by data dependence on the update program, in both its per-slot and its indexed
(loop) form. Each update slot has a class: the coordinate it belongs to (parameter i,
the mean of i, a per-coordinate state word of i) or shared (a declared shared state word,
the rate). A word of coordinate i may be computed only from words of coordinate i and
shared words; a shared word only from shared words. Checking every assignment against
the *positional* class of what it reads is enough: by induction every slot then holds a
value of its own class. Loops are checked as vectors over the loop variable (numpy), so
a million-coordinate update is checked without unrolling. An affine index of several
variables (a 2-D view's element) is read as every slot it may reach, a range, and written
as the exact set of its slots; a vector temporary's element reads what its `let` read at
that element (through a loop or constant index), else everything it read over its range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphac.diagnostics import DiagnosticBag, Span
from alphac.ir import nodes as ir
from alphac.plan.tree import NOTE_LIMIT

SHARED = -1     # a shared word: any owner may read it
UNCLAIMED = -2  # a state word no claim covers: held by no owner when the state is partitioned
                # (shard-coverage-missing), never written when it is replicated
                # (data-parallel-words-unclaimed)


@dataclass(frozen=True)
class Layout:
    """The update program's slot classes under a partitioning claim."""

    k: int
    m: int
    classes: np.ndarray  # int64 per update slot: coordinate, SHARED or UNCLAIMED
    shared: frozenset[int]

    def describe(self, slot: int) -> str:
        k, m = self.k, self.m
        if slot < k:
            return f"slot {slot} (parameter {slot})"
        if slot < k + m:
            j = slot - k
            if j in self.shared:
                return f"slot {slot} (state word {j}, declared shared)"
            c = int(self.classes[slot])
            if c == UNCLAIMED:
                return f"slot {slot} (state word {j}, unclaimed)"
            return f"slot {slot} (state word {j}, of coordinate {c})"
        if slot < 2 * k + m:
            return f"slot {slot} (mean of coordinate {slot - k - m})"
        return f"slot {slot} (the rate)"


def state_classes(k: int, m: int, w: int, shared: frozenset[int]) -> np.ndarray:
    """Coordinate (or SHARED / UNCLAIMED) of each of the m state words: the r-th word not
    shared belongs to coordinate r mod k while r < w*k."""
    out = np.full(m, UNCLAIMED, dtype=np.int64)
    is_shared = np.zeros(m, dtype=bool)
    is_shared[[j for j in shared if 0 <= j < m]] = True
    claimed = np.flatnonzero(~is_shared)[:max(w, 0) * k]
    out[claimed] = np.arange(len(claimed), dtype=np.int64) % k
    out[is_shared] = SHARED
    return out


def layout_of(learner: ir.Learner, part: ir.Partitioning) -> Layout:
    k, m = learner.k, learner.m
    shared = frozenset(part.shared_state)
    classes = np.concatenate([
        np.arange(k, dtype=np.int64),
        state_classes(k, m, part.words_per_coordinate, shared),
        np.arange(k, dtype=np.int64),
        np.array([SHARED], dtype=np.int64),
    ])
    return Layout(k, m, classes, shared)


def check_claim(learner: ir.Learner, part: ir.Partitioning, span: Span, bag: DiagnosticBag) -> bool:
    """Words per coordinate and shared words must not claim more than the state holds."""
    k, m, w = learner.k, learner.m, part.words_per_coordinate
    outside = sorted({j for j in part.shared_state if not 0 <= j < m})
    # distinct offsets: a word listed twice is a duplicated shard, refused by the shard map
    shared = len(set(part.shared_state))
    claimed = w * k + shared
    notes = []
    if claimed > m:
        notes.append(f"{w} words per coordinate x {k} coordinates + {shared} shared "
                     f"words = {claimed} words, but the state holds m = {m}")
    if outside:
        notes.append(f"shared state offsets outside 0..{m - 1}: "
                     + ", ".join(str(j) for j in outside[:NOTE_LIMIT]))
    if w < 0:
        notes.append(f"words per coordinate must be at least 0, not {w}")
    if notes:
        bag.error("data-parallel-words-overclaimed",
                  "the partitioning claims optimizer-state words the learner does not have", span, notes)
        return False
    return True


# ----------------------------------------------------------------------------- dependence

@dataclass(frozen=True)
class _Read:
    """What an expression reads: a fixed slot, `base + var` for a loop var, or a slot range."""

    lo: int
    hi: int = -1         # exclusive end of a range read; -1: a single slot
    var: str | None = None


def _reads(expr, loop_vars: dict[str, tuple[int, int]], lets: dict[str, tuple[_Read, ...]],
           vectors: dict | None = None) -> set[_Read]:
    out: set[_Read] = set()
    ranges: dict[str, tuple[int, int]] = {}
    stack: list = [(expr, ranges)]
    while stack:
        e, sums = stack.pop()
        if isinstance(e, ir.SlotRef):
            idx = e.index
            if idx.terms:  # every slot it may reach
                scope = {**loop_vars, **sums}
                if all(v in scope for v in idx.variables()):
                    lo, hi = idx.bounds(scope)
                    if hi > lo:
                        out.add(_Read(lo, hi))
            elif idx.var is None:
                out.add(_Read(idx.base))
            elif idx.var in sums:
                lo, hi = sums[idx.var]
                if hi > lo:
                    out.add(_Read(idx.base + lo, idx.base + hi))
            elif idx.var in loop_vars:
                out.add(_Read(idx.base, var=idx.var))
        elif isinstance(e, ir.Local):
            out.update(lets.get(e.name, ()))
        elif isinstance(e, ir.VectorLocal):
            out.update(_element_reads((vectors or {}).get(e.name), e.index, {**loop_vars, **sums},
                                      loop_vars))
        elif isinstance(e, ir.Sum):
            stack.append((e.body, {**sums, e.var: (e.lo, e.hi)}))
        else:
            stack.extend((c, sums) for c in ir.children(e))
    return out


def _element_reads(vector, index: ir.Index, scope: dict, loop_vars: dict) -> set[_Read]:
    """What element `index` of a vector temporary reads: `vector` is (its loop variable, lo,
    hi, what its `let` reads), None when unknown (then nothing is known to be read)."""
    if vector is None:
        return set()
    var, vlo, vhi, reads = vector
    out: set[_Read] = set()
    at = None if not index.simple or (index.var is not None and index.var not in scope) else (
        index.base, index.var)
    for r in reads:
        if r.var != var:
            out.add(r)
        elif at is not None and at[1] is None:  # a constant element
            out.add(_Read(r.lo + at[0]))
        elif at is not None and at[0] == 0 and at[1] in loop_vars:  # z[j]: the let's reads at j
            out.add(_Read(r.lo, var=at[1]))
        else:  # anything it read over its range
            lo, hi = index.bounds(scope) if all(v in scope for v in index.variables()) else (vlo, vhi)
            lo, hi = max(lo, vlo), min(hi, vhi)
            if hi > lo:
                out.add(_Read(r.lo + lo, r.lo + hi))
    return out


def _slots_of(index: ir.Index, ranges: dict, cap: int = 1 << 22) -> np.ndarray:
    """Every slot an affine index reaches over `ranges`, ascending (its bounding range when
    they are more than `cap`)."""
    total = 1
    for v, _ in index.strides:
        a, b = ranges[v]
        total *= max(0, b - a)
    if total == 0:
        return np.empty(0, dtype=np.int64)
    if total > cap:
        lo, hi = index.bounds(ranges)
        return np.arange(lo, hi, dtype=np.int64)
    slots = np.array([index.base], dtype=np.int64)
    for v, s in index.strides:
        a, b = ranges[v]
        slots = (slots[:, None] + s * np.arange(a, b, dtype=np.int64)[None, :]).reshape(-1)
    return np.unique(slots)


def _classes(layout: Layout, lo: int, hi: int) -> np.ndarray:
    n = len(layout.classes)
    lo, hi = max(lo, 0), min(hi, n)
    return layout.classes[lo:hi] if hi > lo else np.empty(0, dtype=np.int64)


def _violations(layout: Layout, stmt: ir.Assign, reads: set[_Read],
                loop_vars: dict[str, tuple[int, int]]) -> list[str]:
    """Why `stmt` breaks separability (empty if it does not)."""
    tgt = stmt.target
    if tgt.terms:  # a 2-D element: its exact slots, and every read as a range over its loops
        tslots = _slots_of(tgt, loop_vars)
        tslots = tslots[(tslots >= 0) & (tslots < len(layout.classes))]
        target = layout.classes[tslots]
        vlo = vhi = 0
        reads = {_Read(r.lo + loop_vars[r.var][0], r.lo + loop_vars[r.var][1])
                 if r.var is not None and r.hi < 0 and r.var in loop_vars else r for r in reads}
    elif tgt.var is not None and tgt.var in loop_vars:
        vlo, vhi = loop_vars[tgt.var]
        target = _classes(layout, tgt.base + vlo, tgt.base + vhi)
        tslots = np.arange(tgt.base + vlo, tgt.base + vlo + len(target))
    else:
        target = _classes(layout, tgt.base, tgt.base + 1)
        tslots = np.arange(tgt.base, tgt.base + len(target))
        vlo = vhi = 0
    out: list[str] = []
    for r in sorted(reads, key=lambda r: (r.lo, r.hi, r.var or "")):
        if r.hi >= 0 or (r.var is not None and r.var != tgt.var):
            # a range (or another loop's index): every target element reads all of it
            if r.hi >= 0:
                lo, hi = r.lo, r.hi
            else:
                olo, ohi = loop_vars[r.var]
                lo, hi = r.lo + olo, r.lo + ohi
            cls = _classes(layout, lo, hi)
            coords = np.unique(cls[cls >= 0])
            if len(coords) == 0:
                continue  # only shared words: any target may read them
            # a target may read a range only if the range's coordinates are its own one
            own = (target >= 0) & (len(coords) == 1) & (target == coords[0])
            bad = np.flatnonzero(~own & (target != UNCLAIMED))
            if len(bad):
                t_i = int(bad[0])
                shown = ", ".join(str(int(c)) for c in coords[:4]) + (" ..." if len(coords) > 4 else "")
                out.append(f"{layout.describe(int(tslots[t_i]))} reads slots {lo} .. {hi - 1}, "
                           f"which hold words of coordinates {shown}")
            continue
        if r.var is not None:
            rcls = _classes(layout, r.lo + vlo, r.lo + vhi)
            rslots = np.arange(r.lo + vlo, r.lo + vlo + len(rcls))
        else:
            rcls = np.broadcast_to(_classes(layout, r.lo, r.lo + 1), target.shape)
            rslots = np.full(target.shape, r.lo)
        if rcls.shape != target.shape:
            continue  # out of range: the checker reports it
        ok = (rcls == SHARED) | (rcls == UNCLAIMED) | (target == UNCLAIMED) | ((target >= 0) & (rcls == target))
        bad = np.flatnonzero(~ok)
        if len(bad):
            i = int(bad[0])
            more = f" (and {len(bad) - 1} more words)" if len(bad) > 1 else ""
            out.append(f"{layout.describe(int(tslots[i]))} reads {layout.describe(int(rslots[i]))}{more}")
    return out


def check_separable(learner: ir.Learner, part: ir.Partitioning, n: int, span: Span,
                    bag: DiagnosticBag) -> bool:
    """Admit or refuse a partitioning claim (its word counts, then the update's data
    dependence); True when admitted."""
    return check_claim(learner, part, span, bag) and check_dependence(learner, part, span, bag)


def check_dependence(learner: ir.Learner, part: ir.Partitioning, span: Span, bag: DiagnosticBag) -> bool:
    """The update's data dependence under a claim that `check_claim` accepted."""
    layout = layout_of(learner, part)
    notes: list[str] = []
    # stack of (statements, index, loop vars, lets): iterative over nested loops; vector
    # temporaries outlive their loop (a program names each once)
    frames = [(learner.update.body, 0, {}, {})]
    vectors: dict = {}
    while frames:
        body, i, loop_vars, lets = frames.pop()
        if i >= len(body):
            continue
        frames.append((body, i + 1, loop_vars, lets))
        stmt = body[i]
        if isinstance(stmt, ir.Let):
            lets[stmt.name] = tuple(_reads(stmt.value, loop_vars, lets, vectors))
        elif isinstance(stmt, ir.VectorLet):
            vectors[stmt.name] = (stmt.var, stmt.lo, stmt.hi,
                                  tuple(_reads(stmt.value, loop_vars, lets, vectors)))
        elif isinstance(stmt, ir.Loop):
            frames.append((stmt.body, 0, {**loop_vars, stmt.var: (stmt.lo, stmt.hi)}, dict(lets)))
        elif isinstance(stmt, ir.Assign):
            why = _violations(layout, stmt, _reads(stmt.value, loop_vars, lets, vectors), loop_vars)
            where = f" at {stmt.span}" if stmt.span.line > 0 else ""
            notes.extend(f"{w}{where}" for w in why)
    if notes:
        shown = notes[:NOTE_LIMIT]
        if len(notes) > NOTE_LIMIT:
            shown.append(f"and {len(notes) - NOTE_LIMIT} more")
        bag.error("data-parallel-not-separable",
                  "the update is not separable by coordinate: a partitioned word depends on another "
                  "owner's words", span,
                  shown + ["a word of coordinate i may read only coordinate i's words and shared words; "
                           "a shared word only shared words"])
        return False
    return True


def check_unclaimed_writes(learner: ir.Learner, part: ir.Partitioning, span: Span,
                           bag: DiagnosticBag) -> bool:
    """Under any partitioning, each owner updates only its coordinates' words and the shared
    words (`update-owned`), and the selection assembly installs only those. A state word that
    is neither (the claim leaves it unclaimed) is written by no owner: with a replicated
    state, an update writing one could not be run. True when the update writes none.
    (With a partitioned state, unclaimed words are refused as missing shard coverage.)"""
    layout = layout_of(learner, part)
    notes: list[str] = []
    frames = [(learner.update.body, 0, {})]
    while frames:
        body, i, loop_vars = frames.pop()
        if i >= len(body):
            continue
        frames.append((body, i + 1, loop_vars))
        stmt = body[i]
        if isinstance(stmt, ir.Loop):
            frames.append((stmt.body, 0, {**loop_vars, stmt.var: (stmt.lo, stmt.hi)}))
            continue
        if not isinstance(stmt, ir.Assign):
            continue
        tgt = stmt.target
        if tgt.terms:
            slots = _slots_of(tgt, loop_vars)
            slots = slots[(slots >= 0) & (slots < len(layout.classes))]
            bad = slots[layout.classes[slots] == UNCLAIMED]
            first = int(bad[0]) if len(bad) else 0
        else:
            lo, hi = (tgt.base, tgt.base + 1) if tgt.var not in loop_vars else \
                (tgt.base + loop_vars[tgt.var][0], tgt.base + loop_vars[tgt.var][1])
            bad = np.flatnonzero(_classes(layout, lo, hi) == UNCLAIMED)
            first = max(lo, 0) + int(bad[0]) if len(bad) else 0
        if len(bad):
            where = f" at {stmt.span}" if stmt.span.line > 0 else ""
            more = f" (and {len(bad) - 1} more words)" if len(bad) > 1 else ""
            notes.append(f"{layout.describe(first)}{more} is written{where}")
    if notes:
        shown = notes[:NOTE_LIMIT]
        if len(notes) > NOTE_LIMIT:
            shown.append(f"and {len(notes) - NOTE_LIMIT} more")
        w, k = part.words_per_coordinate, learner.k
        bag.error("data-parallel-words-unclaimed",
                  "the partitioned update writes optimizer-state words that belong to no owner",
                  span, shown + [
                      f"the claim covers {w} words per coordinate x {k} coordinates + "
                      f"{len(set(part.shared_state))} shared words of the state's m = {learner.m}",
                      "each owner updates only its coordinates' words and the shared words: claim "
                      "the word with partitionWordsPerCoordinate or list it in partitionSharedState"])
        return False
    return True

"""Selection assembly: a full vector gathered from owners' disjoint coordinates, no arithmetic.

Each word comes from exactly the owner that offers it. A coordinate offered twice refuses
as `data-parallel-assembly-overlap`, one offered by nobody as
`data-parallel-assembly-coverage`. Offers follow the combine tree's leaf order; the result
does not depend on it (selection has no rounding), but the refusal names owners in it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphac.diagnostics import NO_SPAN, Diagnostic, Span
from alphac.plan.layout import OwnerLayout
from alphac.plan.tree import owner_list


@dataclass(frozen=True, eq=False)
class Offer:
    """One owner's coordinates (ascending or not) and their words, in the same order."""

    owner: int
    coordinates: np.ndarray
    words: np.ndarray


def owned_by(k: int, n: int, owner: int) -> np.ndarray:
    """Coordinates of owner `owner` among k coordinates over n owners (the owner layout's)."""
    return OwnerLayout(k, 0, n).coordinates(owner)


def offers_of(vector, n: int, layout: OwnerLayout | None = None) -> list[Offer]:
    """Every owner's offer of its own coordinates of `vector` under `layout` (default: the
    layout of len(vector) coordinates over n owners)."""
    words = np.asarray(vector, dtype=np.uint64)
    layout = OwnerLayout(len(words), 0, n) if layout is None else layout
    assert (layout.k, layout.n) == (len(words), n), "the owner layout is not this vector's"
    out = []
    for o in range(n):
        coords = layout.coordinates(o)
        out.append(Offer(o, coords, words[coords]))
    return out


def assemble(k: int, offers: list[Offer], span: Span = NO_SPAN) -> tuple[np.ndarray | None, list[Diagnostic]]:
    """The k-word vector assembled from `offers`, or None and the refusals."""
    out = np.zeros(k, dtype=np.uint64)
    source = np.full(k, -1, dtype=np.int64)
    overlap: dict[int, set[int]] = {}
    outside: list[int] = []
    for offer in offers:
        coords = np.asarray(offer.coordinates, dtype=np.int64)
        inside = (coords >= 0) & (coords < k)
        outside.extend(int(c) for c in coords[~inside][:12])
        coords = coords[inside]
        words = np.asarray(offer.words, dtype=np.uint64)[inside]
        # coordinates offered twice within one offer, or already taken by an earlier offer
        uniq, counts = np.unique(coords, return_counts=True)
        taken = uniq[(source[uniq] >= 0) | (counts > 1)]
        for c in taken[:12]:
            overlap.setdefault(int(c), set()).update({int(source[c]), offer.owner} - {-1})
        free = source[coords] < 0
        out[coords[free]] = words[free]
        source[coords[free]] = offer.owner
    diags: list[Diagnostic] = []
    if overlap or outside:
        notes = [f"coordinate {c} offered by owners {owner_list(sorted(o))}" for c, o in sorted(overlap.items())]
        if outside:
            notes.append(f"coordinates outside 0..{k - 1}: {owner_list(outside)}")
        diags.append(Diagnostic("data-parallel-assembly-overlap",
                                "a selection assembly receives coordinates from more than one owner", span,
                                tuple(notes)))
    missing = np.flatnonzero(source < 0)
    if len(missing):
        diags.append(Diagnostic("data-parallel-assembly-coverage",
                                f"a selection assembly leaves {len(missing)} of {k} coordinates without an owner",
                                span, (f"coordinates: {owner_list(missing.tolist())}",)))
    return (None, diags) if diags else (out, [])

"""Logical regions, physical fragments and the shard-map laws.

A logical region (schema, field, word domain, representation, version) is held as
physical fragments (owner, address space, layout, lifetime). A shard map is lawful when
  coverage(mutable fragments) = the region's whole domain            (shard-coverage-missing)
  mutable fragments are pairwise disjoint                            (shard-coverage-duplicated)
  decode(assemble(fragments)) = the logical state                    (shard-decode-mismatch)
Each is decided on the words themselves, never on byte totals. Replicas are read-only,
carry the version they mirror and never count as an owner. Empty shards are legal.
Layouts are arithmetic runs of word positions, so a 10,000-owner map stays small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphac.checkpoint.manifest import Run, positions
from alphac.diagnostics import NO_SPAN, Diagnostic, Span
from alphac.ir import nodes as ir
from alphac.plan.layout import OwnerLayout
from alphac.plan.storage import format_of
from alphac.plan.tree import owner_list


@dataclass(frozen=True)
class LogicalRegion:
    schema: str          # the learner
    field: str           # "parameters" or "state"
    domain: int          # word positions 0..domain-1
    representation: str = "binary64"  # or "binary32 pairs": two binary32 values a word
    version: int = 0


@dataclass(frozen=True)
class Fragment:
    owner: int
    address_space: str               # "host" or "device"
    layout: tuple[Run, ...]          # the positions held, in the fragment's word order
    lifetime: str = "persistent"     # "persistent" or "update" (a read replica)
    mutable: bool = True             # an authority; False: a replica
    mirrors: int | None = None       # the version a replica mirrors

    @property
    def words(self) -> int:
        return sum(c for _, _, c in self.layout)

    def positions(self) -> np.ndarray:
        return positions(self.layout)


@dataclass(frozen=True)
class ShardMap:
    region: LogicalRegion
    fragments: tuple[Fragment, ...]

    def of(self, owner: int) -> tuple[Fragment, ...]:
        return tuple(f for f in self.fragments if f.owner == owner)


def runs_of(positions) -> tuple[Run, ...]:
    """Compress a position sequence into maximal arithmetic runs, greedily from the left."""
    pos = np.asarray(positions, dtype=np.int64)
    diffs = np.diff(pos)
    out: list[Run] = []
    i, n = 0, len(pos)
    while i < n:
        if i + 1 == n:
            out.append((int(pos[i]), 1, 1))
            break
        step = diffs[i]
        differ = diffs[i:] != step
        same = int(np.argmax(differ)) if differ.any() else len(differ)
        out.append((int(pos[i]), int(step), same + 1))
        i += same + 1
    return tuple(out)


# ----------------------------------------------------------------------------- laws

def _words(count: int) -> str:
    return f"{count} word" if count == 1 else f"{count} words"


def _describe(positions, limit: int = 12) -> str:
    return owner_list([int(p) for p in positions], limit)


def check_shard_map(shard_map: ShardMap, span: Span = NO_SPAN, logical=None, contents=None) -> list[Diagnostic]:
    """Every law the map breaks. `logical` (the region's words) and `contents` (each
    fragment's words, in fragment order) enable the decode(assemble(...)) law."""
    region = shard_map.region
    name = f"{region.schema}.{region.field}"
    out: list[Diagnostic] = []
    count = np.zeros(region.domain, dtype=np.int64)
    holders: dict[int, list[int]] = {}
    for f in shard_map.fragments:
        if not f.mutable:
            if f.mirrors is None:
                out.append(Diagnostic("shard-replica-unversioned",
                                      f"owner {f.owner}'s replica of {name} does not carry the version "
                                      "it mirrors", span))
            continue
        if f.mirrors is not None:
            out.append(Diagnostic("shard-replica-not-read-only",
                                  f"owner {f.owner}'s replica of {name} (version {f.mirrors}) is writable",
                                  span, ("a replica is a read-only copy, never a second authority",)))
            continue
        pos = f.positions()
        outside = pos[(pos < 0) | (pos >= region.domain)]
        if len(outside):
            out.append(Diagnostic("shard-coverage-outside",
                                  f"owner {f.owner}'s fragment of {name} holds positions outside the "
                                  f"region's {region.domain} words", span,
                                  (f"positions: {_describe(outside)}",)))
            pos = pos[(pos >= 0) & (pos < region.domain)]
        np.add.at(count, pos, 1)
        for p in pos[count[pos] > 1][:4]:
            holders.setdefault(int(p), []).append(f.owner)
    missing = np.flatnonzero(count == 0)
    twice = np.flatnonzero(count > 1)
    if len(missing):
        out.append(Diagnostic("shard-coverage-missing",
                              f"no owner holds {len(missing)} of the {_words(region.domain)} of {name}", span,
                              (f"words without an owner: {_describe(missing)}",)))
    if len(twice):
        owners = sorted({f.owner for f in shard_map.fragments if f.mutable and f.mirrors is None
                         and np.isin(f.positions(), twice[:64]).any()})
        out.append(Diagnostic("shard-coverage-duplicated",
                              f"{_words(len(twice))} of {name} held by more than one mutable owner", span,
                              (f"words held twice: {_describe(twice)}", f"owners: {owner_list(owners)}")))
    if logical is not None and contents is not None and not out:
        assembled = assemble(shard_map, contents)
        want = np.asarray(logical, dtype=np.uint64)
        wrong = np.flatnonzero(assembled != want)
        if len(wrong):
            out.append(Diagnostic("shard-decode-mismatch",
                                  f"assembling the fragments of {name} does not give its logical words", span,
                                  (f"words that differ: {_describe(wrong)}",
                                   f"first: word {int(wrong[0])} is 0x{int(assembled[wrong[0]]):016X}, "
                                   f"the state holds 0x{int(want[wrong[0]]):016X}")))
    return out


def assemble(shard_map: ShardMap, contents) -> np.ndarray:
    """The region's words from its mutable fragments' words (by selection, no arithmetic);
    `contents[i]` are fragment i's words in its layout order. binary64 decodes as itself."""
    out = np.zeros(shard_map.region.domain, dtype=np.uint64)
    for f, words in zip(shard_map.fragments, contents):
        if f.mutable and f.mirrors is None:
            out[f.positions()] = np.asarray(words, dtype=np.uint64)
    return out


def fragment_contents(shard_map: ShardMap, logical) -> list[np.ndarray]:
    """What each fragment holds when the region holds `logical`."""
    words = np.asarray(logical, dtype=np.uint64)
    return [words[f.positions()] for f in shard_map.fragments]


# ----------------------------------------------------------------------------- the learner's maps

def _space(dep: ir.Deployment, owner: int) -> str:
    return "device" if owner < len(dep.placement) and dep.placement[owner] == "sm86" else "host"


def _slice(runs, lo: int, hi: int) -> tuple[Run, ...]:
    """The runs of the lo-th to the (hi-1)-th positions of `runs`, in their order (no arrays:
    a region of 10**7 words split among 10,000 owners stays a few runs each)."""
    out, at = [], 0
    for start, step, count in runs:
        a, b = max(lo - at, 0), min(hi - at, count)
        if a < b:
            out.append((start + a * step, step, b - a))
        at += count
    return tuple(out)


def _replicated(dep: ir.Deployment, region: LogicalRegion, runs, writers) -> list[Fragment]:
    """Every owner holds all of `runs`' positions; the owners in `writers` split them into
    contiguous blocks of ceil(W / len(writers)) positions in the runs' order, the j-th writer
    the authority of the j-th block (the words its checkpoint shard holds) and every owner a
    persistent read-only mirror, of the same version, of the positions it does not write."""
    total = sum(c for _, _, c in runs)
    block = -(-total // len(writers))
    out = []
    for o in range(dep.owners):
        lo = hi = 0
        if o in writers:
            j = writers.index(o)
            lo, hi = min(j * block, total), min((j + 1) * block, total)
            out.append(Fragment(o, _space(dep, o), _slice(runs, lo, hi)))
        if o not in writers or hi - lo < total:
            out.append(Fragment(o, _space(dep, o), _slice(runs, 0, lo) + _slice(runs, hi, total),
                                "persistent", False, region.version))
    return out


def learner_shard_maps(dep: ir.Deployment, authority: int = 0,
                       layout: OwnerLayout | None = None) -> tuple[ShardMap, ...]:
    """The parameters' and the optimizer state's shard maps under the deployment's partitioning.

    A replicated region is held whole by every owner, and written by all of them: owner o
    is the authority of its block of ceil(W / n) consecutive words (docs/checkpoints.md),
    so each owner writes and hashes about 1/n of a checkpoint, and mirrors the rest; the
    replicas hold the same words because the tree's root compares their digest before
    publishing. The few shared words of a partitioned state (an optimizer's powers) have
    one authority (`authority`, the tree's root), every other owner a mirror: split, they
    would cost fragments and save nothing. Partitioned regions give
    each owner the words the owner layout (`layout`, else the deployment's) says it holds;
    under parameter partitioning every owner also holds a read replica of the whole
    parameter vector for the length of one update."""
    layout = OwnerLayout.of(dep) if layout is None else layout
    learner, n = dep.learner, dep.owners
    k, m = layout.k, layout.m  # words: a binary32 learner's pack two values each
    rep = "binary64" if format_of(dep) == "binary64" else f"{format_of(dep)} pairs"
    params = LogicalRegion(learner.name, "parameters", k, rep)
    frags: list[Fragment] = []
    if layout.parameters.sharded:
        for o in range(n):
            frags.append(Fragment(o, _space(dep, o), layout.coordinate_runs(o)))
            if learner.independent:  # its rule reads only its own region: no read replica
                continue
            frags.append(Fragment(o, _space(dep, o), ((0, 1, k),) if k else (), "update", False,
                                  params.version))
    else:
        frags = _replicated(dep, params, ((0, 1, k),) if k else (), range(n))
    maps = [ShardMap(params, tuple(frags))]
    if m == 0:
        return tuple(maps)
    state = LogicalRegion(learner.name, "state", m, rep)
    if not layout.optimizer_state.sharded:
        maps.append(ShardMap(state, tuple(_replicated(dep, state, ((0, 1, m),), range(n)))))
        return tuple(maps)
    frags = []
    for o in range(n):
        pos = layout.coordinate_state(o)
        frags.append(Fragment(o, _space(dep, o), runs_of(pos) if len(pos) else ()))
    if layout.shared_state:
        # the shared words as listed: a word listed twice is held twice
        shared_runs = runs_of(list(layout.shared_state))
        frags.extend(_replicated(dep, state, shared_runs, (authority,)))
    maps.append(ShardMap(state, tuple(frags)))
    return tuple(maps)

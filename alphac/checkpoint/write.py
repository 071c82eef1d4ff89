"""Writing a checkpoint directory in the formats of docs/checkpoints.md, from plain data:
the manifest's learner, inputs, contract and layout lines, the regions, the version, and
every owner's fragments with their words. Nothing here knows a plan; `alphac.image.ckpt` turns a
plan and words into these arguments.

    write_checkpoint(directory, version=..., learner=..., inputs=..., contract=..., layout=...,
                     regions=..., fragments={owner: [(region, runs, words), ...]},
                     children=None, resumed=None, key=None) -> Manifest (the root's)

Every owner writes a shard (`shard-<o>.bin`; header only when it has no fragments). With
`children` (each owner's children on the report tree, `plan.tree.report_edges`), every owner with
children writes the manifest of its subtree, the root's being `manifest.txt`; without it,
`manifest.txt` alone lists every shard. The root manifest's `auth` line is `none`, or,
with a run's `key`, its tag (manifest.manifest_tag). Files are created exclusively: nothing
is overwritten. The bytes depend on the arguments only.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import replace
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from alphac.checkpoint.manifest import (REGION_NAMES, REGIONS, ROOT_MANIFEST, SHARD_FORMAT,
                                        SHARD_MAGIC, FragmentEntry, Manifest, Run, ShardEntry,
                                        identity_of, manifest_tag, parse, positions, render,
                                        shard_digest)

Fragment = tuple  # (region: "parameters" | "state" | 1 | 2, runs, words)


def region_name(region) -> str:
    if isinstance(region, str):
        if region not in REGIONS:
            raise ValueError(f"unknown region {region!r}")
        return region
    return REGION_NAMES[int(region)]


def select(words: Mapping[str, np.ndarray], region, runs: Sequence[Run]) -> np.ndarray:
    """The words of `region` at the runs' positions, in the runs' order."""
    return np.asarray(words[region_name(region)], dtype=np.uint64)[positions(runs)]


def shard_file(identity: int, owner: int, version: int,
               fragments: Sequence[Fragment]) -> tuple[bytes, tuple[FragmentEntry, ...]]:
    """The bytes of owner `owner`'s shard and its fragment entries (offsets and sha256)."""
    head = [SHARD_MAGIC, SHARD_FORMAT, identity, owner, version, len(fragments)]
    bodies = []
    for region, runs, words in fragments:
        data = np.ascontiguousarray(np.asarray(words, dtype=np.uint64), dtype="<u8").reshape(-1)
        runs = tuple(tuple(int(x) for x in r) for r in runs)
        if len(data) != sum(c for _, _, c in runs):
            raise ValueError(f"owner {owner}'s {region_name(region)} fragment has {len(data)} words "
                             f"for runs holding {sum(c for _, _, c in runs)}")
        head += [REGIONS[region_name(region)], len(data), len(runs)]
        head += [x for r in runs for x in r]
        bodies.append((region_name(region), runs, data.tobytes()))
    out = bytearray(struct.pack(f"<{len(head)}Q", *head))
    entries = []
    for region, runs, raw in bodies:
        entries.append(FragmentEntry(owner, region, len(out), len(raw) // 8, runs,
                                     hashlib.sha256(raw).hexdigest()))
        out += raw
    return bytes(out), tuple(entries)


def owner_subtrees(owners: Sequence[int], children: Mapping[int, Sequence[int]]) -> tuple[int, dict]:
    """The root (the one owner no other names as a child) and each owner's subtree, its own
    index and those below it, ascending; ValueError unless `children` is one tree over
    `owners` (a cycle or a second root is found in one bounded pass, never walked forever)."""
    named = {c for cs in children.values() for c in cs}
    roots = [o for o in owners if o not in named]
    if len(roots) != 1:
        raise ValueError(f"the children do not form one tree over owners {list(owners)} "
                         f"(roots: {roots})")
    subtree: dict[int, list[int]] = {}
    order: list[int] = []
    stack = [roots[0]]
    while stack:  # pre-order; filled bottom-up below
        o = stack.pop()
        if o in subtree:
            raise ValueError(f"owner {o} is reached twice")
        subtree[o] = []
        order.append(o)
        stack.extend(children.get(o, ()))
    if sorted(order) != sorted(owners):
        raise ValueError(f"the tree reaches owners {sorted(order)}, not {sorted(owners)}")
    for o in reversed(order):
        subtree[o] = sorted([o] + [x for c in children.get(o, ()) for x in subtree[c]])
    return roots[0], subtree


def write_checkpoint(directory: str | Path, *, version: int, learner: str, inputs: str, contract: str,
                     layout: str, regions: Mapping[str, int],
                     fragments: Mapping[int, Sequence[Fragment]],
                     children: Mapping[int, Sequence[int]] | None = None,
                     resumed: tuple[str, int, str] | None = None, key: bytes | None = None) -> Manifest:
    """Write checkpoint `version` into `directory` (created if need be; files already there
    are never overwritten) and return its root manifest. `fragments` maps every owner to its
    fragments (region, runs, words); `resumed` is the `resumed-from` line's (manifest
    sha256, version, "same" | "new"); `key`, a run's key, tags the root manifest."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    identity = identity_of(learner, inputs, contract, layout)
    owners = sorted(fragments)
    shards: dict[int, ShardEntry] = {}
    entries: dict[int, tuple[FragmentEntry, ...]] = {}
    for o in owners:
        data, entries[o] = shard_file(identity, o, version, fragments[o])
        name = f"shard-{o}.bin"
        _create(d / name, data)
        head = entries[o][0].offset if entries[o] else len(data)
        shards[o] = ShardEntry(o, name, len(data), shard_digest(data[:head], [f.sha256 for f in entries[o]]))
    if children and any(children.values()):
        root, subtree = owner_subtrees(owners, children)
    else:
        root, subtree, children = (owners[0] if owners else 0), {}, {}
        subtree[root] = owners

    written: dict[int, tuple[str, str]] = {}  # owner -> (file, sha256) of its manifest
    result: Manifest | None = None
    for o in _bottom_up(root, children):
        if o != root and not children.get(o):
            continue
        listed = subtree[o]
        m = Manifest(
            path=str(d / (ROOT_MANIFEST if o == root else f"manifest-{o}.txt")), version=version,
            identity=identity, learner=learner, inputs=inputs, contract=contract, layout=layout,
            regions=dict(regions), owners=tuple(listed),
            manifests={x: written[x] for x in listed if x in written},
            shards=tuple(shards[x] for x in listed),
            fragments=tuple(f for x in listed for f in entries[x]), resumed=resumed, sha256="",
            auth="none" if o == root else None)
        if o == root and key is not None:
            m = replace(m, auth="hmac-sha256 " + manifest_tag(replace(m, text=render(m)), key))
        text = render(m).encode("utf-8")
        _create(Path(m.path), text)
        written[o] = (Path(m.path).name, hashlib.sha256(text).hexdigest())
        if o == root:
            result = parse(text.decode("utf-8"), m.path)
    assert result is not None
    return result


def _bottom_up(root: int, children: Mapping[int, Sequence[int]]) -> list[int]:
    order, stack = [], [root]
    while stack:
        o = stack.pop()
        order.append(o)
        stack.extend(children.get(o, ()))
    return order[::-1]


def _create(path: Path, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)

"""A checkpoint directory checked as a restore checks it (docs/checkpoints.md, "Restoring"):
every manifest, shard, fragment and schedule file by its hash, headers, versions and the
coverage of each region; then its words assembled by selection.

    verify(ckpt_dir, key=None) -> Manifest every hash, file, header, version and coverage; the tag
    child_manifests(ckpt_dir, root)        every manifest below the root, each checked
    logical_words(ckpt_dir, manifest)      {region: uint64 words}, assembled by selection
    schedule(ckpt_dir, manifest)           bounded staleness: each owner's recorded reads
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np

from alphac.checkpoint.manifest import (LEARNER_ITEMS, ROOT_MANIFEST, SCHEDULE_MAGIC, SHARD_FORMAT, SHARD_MAGIC,
                                        CheckpointError, FragmentEntry, Manifest, ReadsEntry, ShardEntry, _parsed,
                                        check_tag, read_manifest, read_regular, shard_digest)
from alphac.resources import NotRegular


def _head_bytes(p: Path, s: ShardEntry, m: Manifest, frags: list[FragmentEntry]) -> int:
    """The length of the shard's header and fragment table: the manifest lays the fragments'
    words one after another from there to the end of the file."""
    at = head = s.bytes - 8 * sum(f.words for f in frags)
    if not frags and head < 48:
        raise CheckpointError("checkpoint-manifest", f"{p}: shorter than a shard's header", m.path,
                              m.line_of.get(f"shard {s.owner}", 0))
    for f in frags:
        if f.offset != at or head < 48:
            raise CheckpointError("checkpoint-manifest", f"{p}: owner {f.owner}'s {f.region} fragment lies "
                                  "outside its shard", m.path, m.line_of.get(f"fragment {f.owner} {f.region}", 0))
        at += 8 * f.words
    return head


def _read_shard(d: Path, s: ShardEntry, m: Manifest) -> bytes:
    """The shard's bytes, checked as a restore checks them: its size and sha256 (over its
    header and its fragments' sha256), its header, then each fragment's sha256."""
    p = d / s.file
    line = m.line_of.get(f"shard {s.owner}", 0)
    try:
        data = read_regular(p)
    except NotRegular as exc:
        raise CheckpointError("checkpoint-shard-missing", f"{exc} (owner {s.owner}'s shard)", m.path, line) from None
    except OSError:
        raise CheckpointError("checkpoint-shard-missing", f"{p} is missing (owner {s.owner}'s shard)",
                              m.path, line) from None
    frags = [f for f in m.fragments if f.owner == s.owner]
    if len(data) != s.bytes:
        raise CheckpointError("checkpoint-hash-mismatch", f"{p}: its sha256 is not the manifest's", m.path,
                              line)
    head = _head_bytes(p, s, m, frags)
    shas = [hashlib.sha256(memoryview(data)[f.offset:f.offset + 8 * f.words]).hexdigest() for f in frags]
    if shard_digest(data[:head], shas) != s.sha256:
        raise CheckpointError("checkpoint-hash-mismatch", f"{p}: its sha256 is not the manifest's", m.path,
                              line)
    head = struct.unpack_from("<6Q", data, 0)
    if head[0] != SHARD_MAGIC or head[1] != SHARD_FORMAT or head[3] != s.owner:
        raise CheckpointError("checkpoint-manifest", f"{p} is not owner {s.owner}'s shard", m.path, line)
    if head[4] != m.version or head[2] != m.identity:
        raise CheckpointError("checkpoint-version", f"{p} holds version {head[4]} of identity {head[2]:016x}, "
                              f"the manifest version {m.version} of {m.identity:016x}", m.path, line)
    for f, sha in zip(frags, shas):
        if sha != f.sha256:
            raise CheckpointError("checkpoint-hash-mismatch", f"{p}: owner {f.owner}'s {f.region} fragment does "
                                  "not match its sha256", m.path, m.line_of.get(f"fragment {f.owner} {f.region}", 0))
    return data


def verify(ckpt_dir: str | Path, key: bytes | None = None) -> Manifest:
    """Every check of a restore (docs/checkpoints.md), on the whole checkpoint: the root
    manifest (with a run's `key`, its tag first), every child manifest, every shard and
    fragment hash, headers, versions and the coverage of each region. Returns the root
    manifest."""
    d = Path(ckpt_dir)
    root = read_manifest(d)
    if key is not None:
        check_tag(root, key)
    child_manifests(d, root)
    for s in root.shards:
        _read_shard(d, s, root)
    for r in root.reads:
        _read_schedule(d, r, root)
    check_coverage(root)
    return root


def _read_schedule(d: Path, r: ReadsEntry, m: Manifest) -> tuple[int, ...]:
    """Owner r.owner's schedule file, checked: its sha256, then its header (magic, owner,
    version, first update, count) against the manifest's line; its reads."""
    p = d / r.file
    line = m.line_of.get(f"reads {r.owner}", 0)
    try:
        data = read_regular(p)
    except (NotRegular, OSError) as exc:
        raise CheckpointError("checkpoint-shard-missing", f"{p} cannot be read ({exc}: owner {r.owner}'s "
                              "schedule)", m.path, line) from None
    if hashlib.sha256(data).hexdigest() != r.sha256:
        raise CheckpointError("checkpoint-hash-mismatch", f"{p}: its sha256 is not the manifest's", m.path, line)
    head = struct.unpack_from("<5Q", data, 0) if len(data) >= 40 else ()
    if head != (SCHEDULE_MAGIC, r.owner, m.version, r.first, r.count) or len(data) != 8 * (5 + r.count):
        raise CheckpointError("checkpoint-manifest", f"{p} is not owner {r.owner}'s schedule of {r.count} reads "
                              f"from update {r.first} at version {m.version}", m.path, line)
    return struct.unpack_from(f"<{r.count}Q", data, 40)


def schedule(ckpt_dir: str | Path, m: Manifest | None = None) -> dict[int, tuple[int, tuple[int, ...]]]:
    """Bounded staleness: owner -> (first update, the version each of its contributions to
    updates first, first + 1, ... read), from the checkpoint's schedule files (after
    `verify`); empty for another consistency."""
    d = Path(ckpt_dir)
    m = m or verify(d)
    return {r.owner: (r.first, _read_schedule(d, r, m)) for r in m.reads}


def child_manifests(d: Path, root: Manifest) -> list[Manifest]:
    """Every manifest below the root, each checked against the sha256 the root names and the
    root's version and identity. A manifest names the manifest of every owner of its subtree
    that has children (the manifest tree, flattened): the root names them all, and each
    one a child manifest names must be one the root names, with the same sha256."""
    out: list[Manifest] = []
    named = root.manifests
    for owner, (name, sha) in sorted(named.items()):
        p = d / name
        where = (root.path, root.line_of.get(f"manifest {owner}", 0))
        if name == ROOT_MANIFEST or name != f"manifest-{owner}.txt":
            raise CheckpointError("checkpoint-manifest", f"{p} is not owner {owner}'s manifest file", *where)
        try:
            data = read_regular(p)
        except NotRegular as exc:
            raise CheckpointError("checkpoint-shard-missing", f"{exc} (owner {owner}'s manifest)", *where) from None
        except OSError:
            raise CheckpointError("checkpoint-shard-missing", f"{p} is missing (owner {owner}'s manifest)",
                                  *where) from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise CheckpointError("checkpoint-hash-mismatch", f"{p}: its sha256 is not the manifest's",
                                  *where)
        child = _parsed(data, p)
        if child.version != root.version or child.identity != root.identity:
            raise CheckpointError("checkpoint-version", f"{p} is version {child.version} of "
                                  f"{child.identity:016x}, the root's {root.version} of "
                                  f"{root.identity:016x}", *where)
        for item in LEARNER_ITEMS:  # what the identity stands for, the same line for line
            if getattr(child, item) != getattr(root, item):
                raise CheckpointError("checkpoint-manifest", f"{p}: its {item} line is not the root's",
                                      str(p), child.line_of.get(item, 0))
        out.append(child)
    for child in out:
        for owner, entry in sorted(child.manifests.items()):
            if named.get(owner) != entry:
                raise CheckpointError("checkpoint-manifest", f"{child.path} names owner {owner}'s manifest "
                                      f"{entry[0]} as the root's {ROOT_MANIFEST} does not",
                                      child.path, child.line_of.get(f"manifest {owner}", 0))
    return out


def check_coverage(m: Manifest) -> None:
    """Each region's fragments hold every word exactly once and nothing outside it."""
    for region, domain in m.regions.items():
        count = np.zeros(domain, dtype=np.int64)
        at_region = m.line_of.get(f"region {region}", 0)
        for f in (f for f in m.fragments if f.region == region):
            pos = f.positions()
            at = m.line_of.get(f"fragment {f.owner} {region}", 0)
            if len(pos) != f.words:
                raise CheckpointError("checkpoint-manifest", f"owner {f.owner}'s {region} fragment lists "
                                      f"{len(pos)} positions for {f.words} words", m.path, at)
            outside = pos[(pos < 0) | (pos >= domain)]
            if len(outside):
                raise CheckpointError("shard-coverage-outside", f"owner {f.owner}'s {region} fragment holds "
                                      f"position {int(outside[0])} outside the region's {domain} words",
                                      m.path, at)
            np.add.at(count, pos, 1)
        if (count == 0).any():
            raise CheckpointError("shard-coverage-missing", f"no fragment holds {int((count == 0).sum())} of the "
                                  f"{domain} {region} words (first: {int(np.argmax(count == 0))})", m.path,
                                  at_region)
        if (count > 1).any():
            raise CheckpointError("shard-coverage-duplicated", f"{int((count > 1).sum())} {region} words are held "
                                  f"by two fragments (first: {int(np.argmax(count > 1))})", m.path, at_region)


def logical_words(ckpt_dir: str | Path, m: Manifest | None = None) -> dict[str, np.ndarray]:
    """Every region's words, assembled from the fragments by selection (after `verify`)."""
    d = Path(ckpt_dir)
    m = m or verify(d)
    out = {region: np.zeros(words, dtype=np.uint64) for region, words in m.regions.items()}
    for s in m.shards:
        data = (d / s.file).read_bytes()
        for f in (f for f in m.fragments if f.owner == s.owner):
            out[f.region][f.positions()] = np.frombuffer(data, dtype="<u8", count=f.words, offset=f.offset)
    return out

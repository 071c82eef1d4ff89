"""A checkpoint directory as plain data (`alphac inspect CKPT`), after verifying it as a
restore does (`verify`): nothing is described that did not verify."""

from __future__ import annotations

from pathlib import Path

from alphac.checkpoint.directory import child_manifests, schedule, verify
from alphac.checkpoint.manifest import ROOT_MANIFEST, Manifest, runs_text
from alphac.resources import sha256_file

PROFILE = ("format", "rounding", "subnormals", "exceptional", "relation", "order_digest")


def inputs_fields(line: str) -> dict:
    f = line.split(" ")
    return {"line": line, "samples": f[1], "rate": f[3]}


def learner_fields(line: str) -> dict:
    """The learner line's fields; `storage` is binary64 unless the line names binary32."""
    f = line.split(" ")
    storage = "binary64"
    if f[4] == "storage":
        storage, f = f[5], f[:4] + f[6:]
    return {"line": line, "contribution": f[1], "update": f[3], "k": int(f[5]), "m": int(f[7]),
            "s": int(f[9]), "storage": storage}


def contract_fields(line: str) -> dict:
    f = line.split(" ", 6)
    out = dict(zip(PROFILE, f[:6]))
    out.update({"line": line, "topology": f[6]})
    return out


def layout_fields(line: str) -> dict:
    """The layout line's fields; a line without `block-words B` has B = 1."""
    f = line.split(" ")
    return {"line": line, "owners": int(f[1]), "parameters": f[3], "state": f[5],
            "words_per_coordinate": int(f[7]),
            "shared": [] if f[9] == "-" else [int(x) for x in f[9].split(",")],
            "block_words": int(f[11]) if len(f) > 11 else 1}


def _manifest(d: Path, m: Manifest, owner: int | None) -> dict:
    name = Path(m.path).name
    return {"file": name, "owner": owner, "owners": list(m.owners),
            "children": [{"owner": o, "file": f, "sha256": h} for o, (f, h) in sorted(m.manifests.items())],
            "sha256": m.sha256, "file_sha256": sha256_file(d / name)}


def describe_checkpoint(path, key: bytes | None = None) -> dict:
    """Everything `alphac inspect CKPT --json` prints; CheckpointError when it does not verify
    (with a run's `key`, when its root manifest is not tagged under it: checkpoint-auth)."""
    d = Path(path)
    root = verify(d, key)
    children = child_manifests(d, root)
    owner_of = {f: o for m in [root, *children] for o, (f, _) in m.manifests.items()}
    manifests = [_manifest(d, root, None)] + [_manifest(d, c, owner_of[Path(c.path).name])
                                             for c in children]
    shards = [{"owner": s.owner, "file": s.file, "bytes": s.bytes, "sha256": s.sha256,
               "fragments": [{"region": f.region, "offset": f.offset, "words": f.words,
                              "runs": runs_text(f.runs), "sha256": f.sha256}
                             for f in root.fragments if f.owner == s.owner]}
              for s in root.shards]
    reads = schedule(d, root)
    resumed = None
    if root.resumed:
        resumed = {"sha256": root.resumed[0], "version": root.resumed[1], "contract": root.resumed[2]}
    return {
        "checkpoint": str(d),
        "manifest": str(d / ROOT_MANIFEST),
        "version": root.version,
        "identity": f"{root.identity:016x}",
        "learner": learner_fields(root.learner),
        "inputs": inputs_fields(root.inputs),
        "contract": contract_fields(root.contract),
        "layout": layout_fields(root.layout),
        "regions": dict(root.regions),
        "manifests": manifests,
        "shards": shards,
        "resumed_from": resumed,
        # bounded staleness: each owner's schedule file, the versions its contributions read
        **({"schedule": [{"owner": r.owner, "file": r.file, "first": r.first, "reads": list(reads[r.owner][1]),
                          "sha256": r.sha256} for r in root.reads]} if root.reads else {}),
        # whether the root manifest is tagged, and whether that tag was checked (under a key)
        "auth": {"tagged": root.auth != "none", "checked": key is not None},
        "sha256": root.sha256,
        "verified": {"ok": True, "manifests": len(manifests), "shards": len(root.shards),
                     "fragments": len(root.fragments),
                     "hashes": len(manifests) + len(children) + len(root.shards) + len(root.fragments)
                     + len(root.reads)},
    }

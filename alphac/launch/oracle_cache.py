"""The oracle's results kept between launches: a launch of a plan the oracle has already
evaluated, for as many updates, by the same compiler, compares with the kept words instead
of evaluating again.

    key(dep, protocol_hex, rounds, mutant) -> str     sha256 of what the result depends on
    load(key) -> OracleResult | None                  None: absent, unreadable or damaged
    store(key, result) -> None                        best effort; a result over MAX_WORDS is not kept

What a result depends on is the plan's protocol identity (which covers the programs, the
contract, the tree, the partitioning and the data: samples, shares, initial words, rate),
the number of updates, the executed mutant if any, and the compiler's own files (the
oracle among them: alphac.launch.cache.compiler_digest). A resumed run is never served
from here. Refusals are not kept. A file is `alphac-oracle-result 1`, a JSON header line
holding the sha256 of the words that follow, then the words (little-endian u64): every
owner's parameter words then state words, in owner order, then the logical parameters and
state. The newest KEPT files stay, under cache_dir()/oracle-results (docs/launch.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from alphac.resources import cache_dir, store_kept

HEAD = "alphac-oracle-result 1"
KEPT = 64
MAX_WORDS = 1 << 22  # 32 MiB of words at most per result


def directory() -> Path:
    return cache_dir() / "oracle-results"


def key(dep, protocol_hex: str, rounds: int, mutant: str | None) -> str:
    """The key of `dep`'s result: also its roles and placement, which the result names and
    the identity leaves out (owners of any instruction set interoperate)."""
    from alphac.launch.cache import compiler_digest

    roles = [(r.name, list(r.owners)) for r in dep.roles]
    text = (f"{HEAD}\ncompiler {compiler_digest()}\nprotocol {protocol_hex}\nrounds {rounds}\n"
            f"mutant {mutant or '-'}\nroles {json.dumps(roles)}\nplacement {json.dumps(list(dep.placement))}\n")
    return hashlib.sha256(text.encode()).hexdigest()


def _words(result) -> np.ndarray:
    parts = [w for o in result.owners for w in (o.params, o.state)] + [result.params, result.state]
    return np.concatenate([np.asarray(p, dtype="<u8").reshape(-1) for p in parts]) if parts else np.zeros(0, "<u8")


def store(key_: str, result) -> None:
    words = _words(result)
    if len(words) > MAX_WORDS:
        return
    body = words.tobytes()
    head = {"format": HEAD, "sha256": hashlib.sha256(body).hexdigest(), "deployment": result.deployment,
            "rounds": result.rounds, "version": result.version, "start": result.start,
            "storage": result.storage, "params": len(result.params), "state": len(result.state),
            "owners": [{"owner": o.owner, "role": o.role, "target": o.target, "version": o.version,
                        "params": len(o.params), "state": len(o.state), "digest": o.digest}
                       for o in result.owners]}
    store_kept(directory() / f"{key_}.bin", json.dumps(head, sort_keys=True).encode() + b"\n" + body, KEPT)


def load(key_: str):
    from alphac.oracle.driver import OracleResult, OwnerResult

    path = directory() / f"{key_}.bin"
    try:
        data = path.read_bytes()
        line, body = data.split(b"\n", 1)
        head = json.loads(line)
        if head.get("format") != HEAD or hashlib.sha256(body).hexdigest() != head["sha256"]:
            return None
        words = np.frombuffer(body, dtype="<u8")
        at, owners = 0, []

        def take(n: int) -> tuple[int, ...]:
            nonlocal at
            out = tuple(int(w) for w in words[at:at + n])
            at += n
            return out

        for o in head["owners"]:
            params, state = take(o["params"]), take(o["state"])
            owners.append(OwnerResult(o["owner"], o["role"], o["target"], o["version"], params, state, o["digest"]))
        params, state = take(head["params"]), take(head["state"])
        if at != len(words):
            return None
        os.utime(path)  # the newest used stays longest
        return OracleResult(head["deployment"], head["rounds"], params, state, tuple(owners),
                            head["version"], head["start"], head.get("storage", "binary64"))
    except (OSError, ValueError, KeyError, TypeError):
        return None

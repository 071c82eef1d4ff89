"""What a checkpoint of a plan says about its learner, inputs, contract and layout — the
manifest's `learner`, `inputs`, `contract`, `layout` and `region` lines and the checkpoint identity
(docs/checkpoints.md) — and each owner's fragments: its persistent, mutable fragments in
the plan's shard maps. The executables write these lines and compare them on restore;
`alphac check` compares them with a declared resume's checkpoint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from alphac.checkpoint.manifest import REGIONS, Run, identity_of
from alphac.plan import storage
from alphac.plan.canon import canonical_json, flat, sha256_hex
from alphac.plan.tree import report_edges


@dataclass(frozen=True)
class CheckpointLines:
    learner: str
    inputs: str
    contract: str
    layout: str
    regions: dict[str, int]
    identity: int

    def contract_fields(self) -> list[str]:
        """profile (4 fields), relation, order digest, topology."""
        return self.contract.split(" ", 6)


def program_sha(program) -> str:
    return sha256_hex(canonical_json(flat(program)))


def learner_line(learner, fmt: str = "binary64") -> str:
    """The manifest's `learner` line (after "learner "): what a checkpoint holds words of;
    a binary32 learner's names its storage (its words pack two values each), so neither
    format's words are ever read as the other's."""
    storage_ = "" if fmt == "binary64" else f"storage {fmt} "
    return (f"contribution {program_sha(learner.contribution)} update {program_sha(learner.update)} "
            f"{storage_}k {learner.k} m {learner.m} s {learner.s}")


def samples_sha(samples) -> str:
    """sha256 (hex) of the sample matrix the learner reads: its width and row count, then its
    words (little-endian u64) in owner-then-sample order. How the rows are dealt to owners
    (the shares) is left out: the contract's order digest says what that changes."""
    words = np.ascontiguousarray(np.asarray(samples.words, dtype=np.uint64), dtype="<u8").reshape(-1)
    h = hashlib.sha256(b"alphac-samples-1\0")
    h.update(int(samples.width).to_bytes(8, "little"))
    h.update(sum(samples.shares).to_bytes(8, "little"))
    h.update(memoryview(words).cast("B"))
    return h.hexdigest()


def inputs_line(learner) -> str:
    """The manifest's `inputs` line (after "inputs "): what the run read besides the words it
    holds, the samples' sha256 and the rate (the update program's one input besides the
    words; its other constants are in the program, which the learner line names)."""
    return f"samples {samples_sha(learner.samples)} rate {learner.rate & (2**64 - 1):016x}"


def _placed(region) -> str:
    """A region's placement as the manifest's layout line names it."""
    return "partitioned" if region.sharded else "replicated"


def checkpoint_lines(plan) -> CheckpointLines:
    dep = plan.deployment
    learner, part, contract = dep.learner, dep.partitioning, plan.contract
    learner_text = learner_line(learner, storage.format_of(dep))
    profile = contract.profile_data()
    contract_line = " ".join([profile["format"], profile["rounding"], profile["subnormals"],
                              profile["exceptional"], contract.relation, contract.order_digest,
                              contract.topology])
    shared = ",".join(str(j) for j in part.shared_state) if part.shared_state else "-"
    layout_line = (f"owners {dep.owners} parameters {_placed(part.parameters)} "
                   f"state {_placed(part.optimizer_state)} "
                   f"words-per-coordinate {part.words_per_coordinate} shared {shared}")
    if part.block_words != 1:
        # appended only where not the default: a line without it is B = 1, so the lines
        # (and checkpoint identities) of deployments without coordinate blocks stay as they were
        layout_line += f" block-words {part.block_words}"
    regions = {"parameters": plan.layout.k, "state": plan.layout.m, **extra_regions(plan)}  # words
    if own_states(plan):
        regions["states"] = plan.deployment.owners * plan.layout.m
    inputs = inputs_line(learner)
    return CheckpointLines(learner_text, inputs, contract_line, layout_line, regions,
                           identity_of(learner_text, inputs, contract_line, layout_line))


def extra_regions(plan) -> dict[str, int]:
    """A checkpoint's regions beside the parameters and the state, each held whole by every
    owner, with their words: under a fixed staleness S `history`,
    the S versions before the checkpoint's, which the next S updates read (docs/checkpoints.md
    "The history region"); under local steps with an outer momentum `outer`, its k words.
    None without checkpoints. (Local steps' `states`: `own_states`.)"""
    dep = plan.deployment
    if not dep.checkpoint.every:
        return {}
    S, k = dep.consistency.staleness, plan.layout.k
    out = {"history": S * k} if S else {}
    return out | ({"outer": k} if dep.consistency.outer is not None else {})


def own_states(plan) -> bool:
    """Whether a checkpoint holds every owner's own optimizer state (local steps with one,
    checkpointed): its `states` region, owner o's m words at [o m, (o + 1) m), and its
    `state` region owner 0's alone, which a new contract reads."""
    dep = plan.deployment
    return bool(dep.checkpoint.every and dep.consistency.local_steps and plan.layout.m)


def owner_fragments(plan) -> dict[int, tuple[tuple[int, tuple[Run, ...]], ...]]:
    """Every owner's checkpoint fragments: (region code, runs) of its persistent, mutable
    fragments, parameters first (a region with no words has no fragment); then each of
    `extra_regions`, held whole by every owner, written a block of ceil(W / n) words each,
    as a replicated region is."""
    n = plan.deployment.owners
    out: dict[int, list] = {o: [] for o in range(n)}
    for shard_map in plan.shard_maps:
        region = REGIONS[shard_map.region.field]
        for f in shard_map.fragments:
            if f.mutable and f.mirrors is None and f.lifetime == "persistent" and f.words:
                out[f.owner].append((region, tuple(f.layout)))
    for name, W in extra_regions(plan).items():
        block = -(-W // n)
        for o in range(n):
            lo, hi = min(o * block, W), min((o + 1) * block, W)
            if hi > lo:
                out[o].append((REGIONS[name], ((lo, 1, hi - lo),)))
    if own_states(plan):  # each owner's own state, the state region owner 0's
        m, state = plan.layout.m, REGIONS["state"]
        for o in range(n):
            out[o] = [f for f in out[o] if f[0] != state] + [(REGIONS["states"], ((o * m, 1, m),))]
        out[0].append((state, ((0, 1, m),)))
    return {o: tuple(sorted(frags, key=lambda x: x[0])) for o, frags in out.items()}


def tree_children(plan) -> dict[int, tuple[int, ...]]:
    """Each owner's children on the plan's report tree (`tree.report_edges`: the reduce
    edges toward the root, one per owner, from its highest node): who sends
    its subtree's digests to whom when a checkpoint is published."""
    out: dict[int, list[int]] = {o: [] for o in range(plan.deployment.owners)}
    for t in report_edges(plan.tree, list(plan.shape.nodes)):
        out[t.receiver].append(t.sender)
    return {o: tuple(cs) for o, cs in out.items()}


def write_plan_checkpoint(plan, directory, version: int, params, state, *, manifests: bool = True,
                          resumed: tuple[str, int, str] | None = None, key: bytes | None = None):
    """Write checkpoint `version` of `plan` holding the logical words `params` (k) and `state`
    (m) into `directory`, as the plan's owners would: every owner's shard of its fragments,
    and (with `manifests`) every inner owner's manifest of its subtree; without, the root's
    manifest.txt alone; with a run's `key`, the root manifest tagged. Returns the root manifest."""
    from alphac.checkpoint.write import select, write_checkpoint

    lines = checkpoint_lines(plan)
    words = {"parameters": params, "state": state}
    fragments = {o: [(region, runs, select(words, region, runs)) for region, runs in frags]
                 for o, frags in owner_fragments(plan).items()}
    return write_checkpoint(directory, version=version, learner=lines.learner, inputs=lines.inputs,
                            contract=lines.contract, layout=lines.layout, regions=lines.regions,
                            fragments=fragments,
                            children=tree_children(plan) if manifests else None, resumed=resumed,
                            key=key)

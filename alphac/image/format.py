"""The byte layout of a role image: a flat array of little-endian u64 words, a fixed header
of scalar fields, then (offset, count) pairs naming each section, then the sections.

The C runtime reads the image through the field and section indices that
`alphac.image.cheader` generates from these two tuples, so the two sides cannot drift.
"""

from __future__ import annotations

import numpy as np

IMAGE_MAGIC = 0x31474D4941484C41  # "ALHAIMG1"
IMAGE_FORMAT = 1

# scalar fields, in word order
FIELDS = (
    "magic", "format", "protocol", "k", "m", "s", "n", "updates", "rate",
    "tag_words",        # words after a register's count that frames carry (leaf tags)
    "output_format",    # wire.OUTPUT_REPLICATED or wire.OUTPUT_OWNED
    "part_parameters", "part_state", "part_gradients",
    "w",                # optimizer-state words per coordinate
    "leaves",           # leaves of the combine tree
    "max_payload",      # the largest frame payload the protocol sends
    "small_payload",    # the largest payload of a frame that is no register (hello, prepared, report)
    "block_words",      # B: coordinate block b (coordinates bB .. bB + B - 1) belongs to owner b mod n
    "role_size",        # owners of this role
    "root",             # the owner at the root of the combine tree (it commits the run)
    "digest_params",    # 1: the replica digest covers the parameters
    "state_alike",      # the state words every owner holds alike (all m, or the shared words),
                        # which lead every owner's compact state; the digest covers them too
    "ckpt_interval",    # checkpoint after every this many updates (0: never)
    "ckpt_identity",    # the checkpoint identity (docs/checkpoints.md)
    "run_id",           # the default run id (names a checkpoint's partial directory)
    "resume_mode",      # a declared resume: 0 none, 1 the same contract, 2 a new contract
    "leaf_mean",        # mutant unweighted-mean: an owner with samples reports sum / share
    "stale_replica",    # mutant stale-replica: an owner keeps its first read replica
    "staleness",        # S of a fixed staleness: update u's contributions read version max(u - S, 0)
    "ahead",            # D >= 1: an owner with samples computes the contributions of up to D updates
                        # ahead on a thread while this update combines (alphac.plan.memory.computes_ahead)
    "bound",            # S of a bounded staleness: each contribution reads the newest version its owner
                        # has, at least u - S, and records which (0: another consistency)
    "local_steps",      # H of local steps: each owner applies H updates on its own samples, then
                        # the tree combines the weighted parameter deltas (0: another consistency)
    "outer",            # 1: local steps' outer update keeps a momentum b (0: it averages)
    "outer_rate", "outer_momentum",  # its rate and momentum, a storage word each (binary32: the
                        # value in the word's first half)
    "region",           # an independent-state learner's words per owner (r); 0: data-parallel
    "cpu_required",     # bit i: the kernels need the target's i-th cpu_checks feature
    "temporaries",      # words of the programs' vector temporaries: the larger program's
                        # (stack scratch of the kernel that runs), counted as scratch
    "str_usage", "str_version", "str_role", "str_deployment", "str_owners",  # text offsets
    "str_ckpt_learner", "str_ckpt_contract", "str_ckpt_layout",  # the manifest's lines
    "str_ckpt_inputs",  # the manifest's inputs line (the samples' sha256 and the rate)
    "str_ckpt_dir",     # the declared checkpoint directory ("" if none)
    "str_resume",       # the declared resume's checkpoint ("" if none)
    "str_cpu",          # the CPU level the kernels are built for, as the executable names it
)

# sections, in word order; per-role-owner tables are indexed by the owner's position in
# its role, flat lists by the `*_start` entry of that position
SECTIONS = (
    "role_owners", "op_start", "n_update", "n_finish", "n_checkpoint", "ops",
    "peer_start", "peer_count", "peers",
    "sample_row", "share",
    "leaf_count",       # the sample count the owner's local value reports (its share but in a mutant)
    "mean_start", "mean_count", "mean_from",  # per role owner: for each word its mean reads,
                        # the delivered sum it is read from (MEAN_ZERO: +0.0); none: as delivered
    "reg_start", "reg_count", "reg_words",
    "reg_off",          # per register (indexed like reg_words): its buffer's word offset in the pool
    "reg_pool",         # per role owner: words of its register pool
    "params_count", "state_count",  # per role owner: the parameter and state words it holds
    "init_params",      # per role owner: where its initial parameters start in `initial`
    "init_state",       # per role owner: where its own initial state words start in
                        # `initial_state` (after the `state_alike` words every owner copies)
    "run_start", "run_count", "runs",  # per owner (all n): its coordinates as (start, step, count)
    "frag_start", "frag_count", "frags",  # per owner (all n): its checkpoint fragments, each
                        # region, words, run count, then the runs (start, step, count)
    "shared",           # the shared state offsets, ascending (empty unless the state is partitioned)
    "leaf_order", "leaf_pos",
    "samples",          # the role's owners' sample rows
    "initial", "initial_state",  # the role's owners' initial words, compact (alphac.image.image)
    "text",             # NUL-terminated strings; its count is in bytes
)

HEADER_WORDS = len(FIELDS) + 2 * len(SECTIONS)


def encode(fields: dict[str, int], sections: dict[str, object]) -> bytes:
    """The image's bytes: `fields` by name (every one given), `sections` by name (u64
    sequences or numpy arrays; `text` as bytes)."""
    assert set(fields) == set(FIELDS), set(fields) ^ set(FIELDS)
    assert set(sections) == set(SECTIONS), set(sections) ^ set(SECTIONS)
    head = np.zeros(HEADER_WORDS, dtype="<u8")
    for i, name in enumerate(FIELDS):
        head[i] = np.uint64(fields[name] & (2**64 - 1))
    parts = [head]
    at = HEADER_WORDS
    for j, name in enumerate(SECTIONS):
        data = sections[name]
        if name == "text":
            raw = bytes(data)
            count = len(raw)
            words = np.frombuffer(raw + b"\0" * (-len(raw) % 8), dtype="<u8")
        else:
            words = np.ascontiguousarray(np.asarray(data, dtype=np.uint64).reshape(-1), dtype="<u8")
            count = len(words)
        head[len(FIELDS) + 2 * j] = at
        head[len(FIELDS) + 2 * j + 1] = count
        parts.append(words)
        at += len(words)
    return b"".join(p.tobytes() for p in parts)

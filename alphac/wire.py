"""The executables' wire vocabulary, written once: frame magic and header words, frame kinds,
the checksum's constants, output-file magic, and the order in which a receiver checks a
frame. The C runtime gets it as a generated header (`alphac.image.cheader`); the Python
codec (`alphac.testing.frames`) and the planner's identity read it here, so they cannot drift.

docs/runtime.md is the contract these words implement.
"""

from __future__ import annotations

# The frame layout and checksum version. It is part of the protocol identity, so executables
# built for different wire formats refuse each other's hello as `frame-protocol` instead of
# failing later on a checksum.
WIRE_FORMAT = 5

FRAME_MAGIC = 0x31454D4152464C41  # "ALFRAME1" read as a little-endian word
# an authenticated frame ("ALFRAMEA"): after the checksum, TAG_WORDS words of HMAC-SHA-256
# over the header, the checksum and the payload's MAC, PAYLOAD_MAC_BYTES of AES-256-GMAC
# (docs/security.md, "How a frame is tagged")
FRAME_MAGIC_AUTH = 0x41454D4152464C41
TAG_WORDS = 4
PAYLOAD_MAC_BYTES = 16
# header words, in order (all u64 little-endian)
HEADER = ("magic", "protocol", "sender", "receiver", "version", "step", "kind", "length")
HEADER_WORDS = len(HEADER)

# frame kinds (header word `kind`): "digest" carries "prepared" (the replica digest and the
# output digests of a subtree), "publish" the commit verdict, "checkpoint" a subtree's
# checkpoint digests (docs/checkpoints.md), "transport" the shared-memory offer and its
# answer that follow the hellos of a pair on one host (docs/runtime.md, "Transports")
KINDS = {"hello": 1, "combine": 2, "digest": 3, "publish": 4, "checkpoint": 5, "transport": 6}

# a hello's payload: the run's update count, the version it starts from (0, or the
# version of the checkpoint it resumed), the run id (naming its partial checkpoint
# directories), then a 128-bit nonce of the connection
HELLO_WORDS = 5
# A transport frame's payload: the sender's boot id (2 words: the 16 bytes of
# /proc/sys/kernel/random/boot_id), a status (TRANSPORT_STATUS), then, in an offer, the
# segment's device, inode and size in bytes and its name (SHM_NAME_WORDS words, NUL-padded)
SHM_NAME_WORDS = 8
TRANSPORT_WORDS = 6 + SHM_NAME_WORDS
TRANSPORT_STATUS = {"offer": 1, "mapped": 2, "declined": 3, "mismatch": 4}
# the peers file's third column: what an owner may use with each peer (docs/runtime.md)
TRANSPORTS = ("tcp", "shm", "shm-only")
# a pair's segment: a header page, then one ring per direction of SHM_RING_BYTES or less
# (the smallest power of two from 64 KiB that holds the largest frame of the protocol)
SHM_HEADER_BYTES = 4096
SHM_RING_MIN = 1 << 16
SHM_RING_MAX = 1 << 22
SHM_MAGIC = 0x314D485343484C41  # "ALHCSHM1"
SHM_PREFIX = "alphac-"  # a segment is /dev/shm/alphac-PID-RANDOM (PID: its creator's)

# "prepared" from a subtree of c owners: the replica digest, c, then c entries of the owner
# and the sha256 of its staged output (4 words, the digest's bytes in order)
PREPARED_ENTRY_WORDS = 5


def prepared_words(owners: int) -> int:
    return 2 + PREPARED_ENTRY_WORDS * owners

# the checksum: FNV-1a steps on whole words, the payload in LANES independent lanes
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
LANES = 4
# a sender hashes and writes payloads longer than this in chunks of this many words, so
# the receiver (which hashes as bytes arrive) works on one chunk while the next is hashed
SEND_CHUNK_WORDS = 1 << 15

# A receiver checks the header in this order and refuses with the first failing code;
# `frame-oversized` is decided before the payload is read, `frame-checksum` after.
FRAME_CHECKS = ("frame-magic", "frame-protocol", "frame-sender", "frame-receiver",
                "frame-version", "frame-step", "frame-kind", "frame-oversized",
                "frame-length", "frame-checksum", "frame-auth")
# `frame-auth` also refuses, at the magic word, a frame with no tag in an authenticated run
# and a tagged frame in a run without a key. After the checks, a receive of a sum refuses
# `frame-count` when its count is not the plan's.

# output files (docs/runtime.md, "Output file")
OUTPUT_MAGIC = 0x3154554F41484C41  # "ALHAOUT1"
OUTPUT_REPLICATED = 1   # every word of the learner
OUTPUT_OWNED = 2        # the words an owner holds, with their positions
OUTPUT_SCHEDULED = 3    # every word of the learner, then the version each contribution read
OUTPUT_OWNED_SCHEDULED = 4  # the words an owner holds, then the version each contribution read

# what an executable does when started with no --timeout-ms, and the bound on it (poll(2)
# takes an int of milliseconds)
DEFAULT_TIMEOUT_MS = 30000
MAX_TIMEOUT_MS = 2**31 - 1

# exit statuses of an executable
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

# An executable's options (its getopt table, generated: alphac.image.cheader), each with
# whether it takes a value; its --help names every one (tests/runtime/test_rt_peers.py).
OPTIONS = (("owner", True), ("peers", True), ("out", True), ("updates", True), ("timeout-ms", True),
           ("key", True), ("listen-any", False), ("insecure", False), ("checkpoint-dir", True),
           ("resume", True), ("checkpoint-key", True), ("new-contract", False), ("run-id", True),
           ("stats", True), ("connections", True), ("status-fd", True), ("gpu", True), ("help", False),
           ("version", False), ("base-port", True), ("nodelist", True), ("hostfile", True),
           ("out-dir", True))

# An owner's output file in a run directory: the launcher's, the emitted Slurm and mpirun
# files' (`--out-dir DIR` of the executables) and `alphac verify`'s name for owner I.
OUTPUT_NAME = "owner-{owner}.out"


def output_name(owner: int | str) -> str:
    return OUTPUT_NAME.format(owner=owner)


# Existing engines (docs/runtime.md "Owner and peers from an engine"): per engine, the
# variable of an owner's index and the variable of its rank among the tasks on its node.
# The index is taken from --owner, then from these in order, and every one present must
# agree; with peers from a node list, each local rank present must be the owner's place
# among the owners of its host. The local launcher removes every ENGINE_VARIABLES name from
# its owners' environment (it gives them --owner and --peers).
ENGINE_RANKS = (("SLURM_PROCID", "SLURM_LOCALID"),
                ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"))
SLURM_NODELIST = "SLURM_STEP_NODELIST"              # the step's nodes, in hostlist syntax
SLURM_TASKS_PER_NODE = "SLURM_STEP_TASKS_PER_NODE"  # their task counts, e.g. `2(x3),1`
ENGINE_VARIABLES = tuple(v for pair in ENGINE_RANKS for v in pair) + (SLURM_NODELIST,
                                                                      SLURM_TASKS_PER_NODE)
# a node list expands to at most this many hosts (as many as a deployment may have owners)
MAX_HOSTS = 65536

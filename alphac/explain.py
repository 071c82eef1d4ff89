"""`alphac explain CODE`: what each catalogued code means (alphac/codes.py), how to fix it,
and its example, the bad spec under tests/errors/ with its golden rendering.

FIXES holds one fix per code of the catalogue, nothing else (tests/unit/test_explain.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alphac import codes

# The stages, in the order `alphac explain` lists them, with their sections.
STAGES = (
    ("input and syntax", codes.SYNTAX), ("checker", codes.CHECK), ("planner", codes.PLAN),
    ("oracle", codes.ORACLE), ("executables at run time", codes.RUNTIME),
    ("checkpoints", codes.CHECKPOINT), ("build and launch", codes.TOOLING),
)

# The bad specs live in the source tree; an installed copy has none.
EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "errors"
EXAMPLE_LIMIT = 4000  # bytes of a bad spec shown in full

FIXES = {
    # input and syntax
    "io-error": "Give the path of a readable regular file (not a directory); check its permissions.",
    "file-too-large": "Split the spec into modules, or load large word arrays with `load \"FILE\"` "
                      "instead of writing them inline (ALPHAC_MAX_SPEC_BYTES sets the limit).",
    "invalid-encoding": "Save the file as UTF-8.",
    "syntax-error": "Correct the text at the caret; docs/language.md gives the grammar.",
    "nesting-too-deep": "Name intermediate values with `value` instead of nesting brackets.",
    # checker
    "unknown-module": "Check the import's spelling; a module A.B is the file A/B.alpha in the std "
                      "library (alphac/std/) or beside the importing file.",
    "module-name-mismatch": "Make the `module` line of the file agree with its path, or import it "
                            "by the name it declares.",
    "duplicate-definition": "Rename or remove one of the two definitions.",
    "misplaced-member": "Declare the constructor first, then its fields, inside the family.",
    "unknown-name": "Check the spelling (the diagnostic suggests the nearest names in scope), or "
                    "import the module that defines the name.",
    "unknown-type": "Check the family's spelling, or import the module that defines it.",
    "ambiguous-name": "Qualify the name with its module: Module.Name.",
    "cyclic-definition": "Define the value from other values, not from itself.",
    "type-mismatch": "Give an expression of the expected type (the message names both).",
    "wrong-arity": "Give the family as many arguments as it declares parameters.",
    "pow-exponent": "Write the exponent as an integer literal between -64 and 64, not 0: pow(x, 3) "
                    "is (x * x) * x. For a real exponent y write exp(y * log(x)); pow(x, 0) is 1.0.",
    "unknown-field": "Use one of the constructor's fields (listed in the note); a misspelt field "
                     "is suggested.",
    "duplicate-field": "Give each field once.",
    "missing-field": "Give every field without a default (the message names them).",
    "nat-range": "Use a Nat between 0 and 2**62.",
    "size-limit": "Load large lists from a file, or shrink them.",
    "invalid-range": "Write the range low .. high with low <= high.",
    "misplaced-program-expression": "Use slots, views and sums only inside a `pointwise` program.",
    "non-finite-literal": "Write a finite number (binary64 holds magnitudes below about 1.8e308); "
                          "for a loaded file, fix the NaN or infinity at the word named.",
    "non-finite-constant": "Change the constant expression so that it stays finite (no division "
                           "by zero, no overflow).",
    "inexact-conversion": "Use a Nat below 2**53, or one binary64 holds exactly.",
    "word-out-of-range": "Write a raw word of at most 16 hex digits.",
    "load-file": "Check the path (relative to the spec) and the file: raw little-endian binary64, "
                 "or a float64 .npy of one or two dimensions.",
    "learner-too-large": "Give the learner at most 4194304 (2**22) parameter and state words "
                         "in all.",
    "samples-too-large": "Load large sample sets from a word file (`load \"PATH\" shares [...]`), or "
                         "shrink the repeats.",
    "length-mismatch": "Give exactly k initial parameter words (one row of k for a 2-D array).",
    "slot-count-mismatch": "Set the erased slot count to 2k+s (contribution) or 2k+m+1 (update).",
    "invalid-index": "Index with N, i, i+N or i-N, where i is a loop or sum variable and N a "
                     "constant; write a vector temporary as `let z[i] = e` directly inside `for i`.",
    "index-out-of-range": "Keep every access and view inside the program's slots.",
    "region-straddle": "Split the access or view at the region boundary (parameters, sample, "
                       "contribution, state).",
    "slot-write-out-of-range": "Write only the slots the program may write (the message names them).",
    "slot-read-out-of-range": "Write the contribution slot before reading it.",
    "loop-carried-dependence": "Read and write the same index in a loop, or split the loop in two "
                               "(a vector temporary carries values from one loop to the next).",
    "view-shape-mismatch": "Give the view h * d slots, `slot a .. a + h * d as h by d`, or correct "
                           "h and d.",
    "index-rank-mismatch": "Index a 2-D view as W[i, j] and a 1-D view or vector temporary as v[i].",
    "temporary-out-of-range": "Read the vector temporary at indices of its loop's range, or widen "
                              "the loop that writes it.",
    "temporary-unwritten": "Read the vector temporary after the loop that writes it, in the block "
                           "that holds that loop (inside the loop, at its own index after the `let`).",
    "sample-width": "Give every sample s words (rows of s in a 2-D array).",
    "sample-file": "Check the sample file's path and that it is readable.",
    "sample-shares": "Make the shares add up to the number of rows in the file.",
    "owner-count": "Give between 1 and 65536 owners, as many as the learner has sample lists.",
    "invalid-fanout": "Give a fan-out between 1 and the owner count.",
    "checkpoint-interval": "Checkpoint every I >= 1 updates, or write CheckpointNever.",
    "consistency-value": "Declare localSteps >= 1.",
    "updates-limit": "Declare at most 10 000 000 updates (a typo of a few digits more would "
                     "run without end).",
    "placement-length": "Name one target per owner in the placement.",
    "role-owner-out-of-range": "Name owners 0 .. owners-1 in the role.",
    "role-coverage": "Give every owner exactly one role.",
    "role-name-invalid": "Name the role [a-z][a-z0-9_-]*, at most 64 characters.",
    "role-name-duplicate": "Give the roles distinct names.",
    "partition-block-words": "Set partitionBlockWords to 1 to 4194304 (2**22); a block larger "
                             "than k is one block.",
    "no-deployment": "Declare a deployment value, or name one with --deployment NAME when the "
                     "file has several.",
    "resume-duplicate": "Keep one resume declaration per deployment.",
    "resume-foreign-deployment": "Declare the resume in the file that declares the deployment.",
    # planner
    "combine-leaf-missing": "Add a leaf for every owner holding a contribution.",
    "combine-leaf-duplicated": "Give each owner one leaf, and list each member once.",
    "combine-leaf-foreign": "Use only owners of the deployment (and of the declared coverage).",
    "combine-leaf-order": "Order the tree's leaves as the member list orders them.",
    "combine-branch-owner": "Place each branch at an owner with a leaf beneath it.",
    "combine-delivery-partial": "Deliver the combined result to every owner (drop CombineDeliverTo).",
    "assembler-missing": "Install ptxas (the CUDA toolkit's PTX assembler) on the PATH to build SM86 "
                         "executables.",
    "assemble-failed": "Report the spec: ptxas refused PTX the code generator wrote; its message names "
                       "the line.",
    "device-unsupported": "Place the owners of this learner on x86-64 or AArch64: SM86 does not build "
                          "it (the message says why, e.g. the sample tree).",
    "cuda-unavailable": "Run SM86 owners where the NVIDIA driver (libcuda.so.1) is installed and a GPU "
                        "is visible.",
    "gpu-not-found": "Give --gpu one of the UUIDs the message lists (nvidia-smi -L prints them), or "
                     "leave it out to bind by placement index.",
    "memory-admission": "Free GPU memory, place fewer SM86 owners on one GPU, or give them other GPUs "
                        "with --gpu.",
    "cuda-module": "Run on a GPU and driver that load sm_86 code or JIT the embedded PTX (a newer "
                   "driver).",
    "cuda-error": "Check the driver and the GPU (nvidia-smi); the message names the CUDA call and its "
                  "result.",
    "combine-delivery-law": "The planner built a delivery its laws forbid: report the spec; no spec "
                            "change should be needed (the planned transfers are checked, not written).",
    "independent-state-region-length": "Give every owner's initial region exactly the rule's r words, "
                                       "with r at least 1.",
    "independent-state-owners": "List one region and one input list per owner, for the deployment's "
                                "owner count.",
    "independent-state-foreign-region": "Write the rule over its own region, its input pair and its "
                                        "scale only; another owner's region is not in reach.",
    "consistency-not-built": "Declare ConsistencySynchronous (the default), fixed staleness on a "
                             "data-parallel learner on CPU targets, local steps on a replicated "
                             "learner on a star or a hierarchy of CPU owners, or bounded staleness "
                             "on a star or a hierarchy of CPU owners (docs/learners.md, "
                             "\"Consistency\").",
    "independent-state-partitioning": "Build the deployment through the independent-state families, "
                                      "which hold each owner's region alone.",
    "coordinate-not-held": "Update each coordinate from its own words and accumulator only.",
    "numerical-profile-mismatch": "Declare a profile that runs: binary64 or binary32, "
                                  "nearest-even, subnormals kept, finite-or-refuse.",
    "binary32-narrowing": "Write round32(...) around the value stored (or store a slot, a "
                          "binary32 constant, or min/max/abs/select of such values).",
    "binary32-inexact": "Write binary32 values (the note names the nearest), or load float32 "
                        "data; or keep the binary64 profile and narrow with round32.",
    "binary32-unsupported": "Partition in blocks of an even number of coordinates (and, with "
                            "partitioned state, an even k and shared values in pairs); otherwise "
                            "run under the binary64 profile, with round32 where values narrow.",
    "numerical-order-mismatch": "Declare the order the deployment runs, or resume with "
                                "--new-contract to start another one.",
    "numerical-relation-unverified": "Run `alphac conform` on the host and name the sha256 it "
                                     "prints in numericalEvidence (or a path to the record, "
                                     "relative to the spec), or declare the exact relation.",
    "numerical-evidence-corrupt": "Name an unaltered record: run `alphac conform` again and name "
                                  "the sha256 it prints; a record's file is named by the sha256 "
                                  "of its bytes.",
    "numerical-bound-below-evidence": "Declare a bound at least the measured error the message "
                                      "names (its note gives the least), or use functions the "
                                      "evidence bounds more tightly.",
    "data-parallel-not-separable": "Make every partitioned word depend only on its own "
                                   "coordinate's words, or replicate the state instead.",
    "data-parallel-words-overclaimed": "Lower the words per coordinate or the shared words to "
                                       "what the learner's state holds.",
    "data-parallel-words-unclaimed": "Claim the written state word as a word per coordinate or "
                                     "as shared.",
    "data-parallel-assembly-overlap": "An internal planner law: report it with the spec.",
    "data-parallel-assembly-coverage": "An internal planner law: report it with the spec.",
    "shard-coverage-missing": "Give every word of the region a mutable owner (check the "
                              "partitioning's claim).",
    "shard-coverage-duplicated": "Give each word of the region one mutable owner.",
    "shard-coverage-outside": "An internal planner law: report it with the spec.",
    "shard-decode-mismatch": "An internal planner law: report it with the spec.",
    "shard-replica-not-read-only": "An internal planner law: report it with the spec.",
    "shard-replica-unversioned": "An internal planner law: report it with the spec.",
    # oracle
    "oracle-profile": "Declare the binary64 nearest-even finite-or-refuse profile.",
    "oracle-consistency": "Evaluate a fixed or bounded staleness, or local steps with optimizer state "
                          "or an outer momentum, from the initial words, on a tree over owners "
                          "(docs/learners.md \"Consistency\").",
    "oracle-schedule": "Verify the run with `alphac verify RUN SPEC` (it reads each owner's recorded "
                       "reads), or give `alphac oracle --schedule RUN` the run directory of a whole run.",
    "oracle-inconsistent": "Run `alphac check SPEC`: it names the inconsistent shape.",
    # executables at run time
    "frame-magic": "Something other than an owner of this run reached the port: use --key, "
                   "and check the peers file.",
    "frame-protocol": "Rebuild every owner from the same spec and compiler (`alphac build --all`).",
    "frame-sender": "Check the peers file: every owner must list the same endpoints.",
    "frame-receiver": "Check the peers file: every owner must list the same endpoints.",
    "frame-version": "Start every owner of a run together, with the same --updates and --resume.",
    "frame-step": "Rebuild every owner from the same spec (`alphac build --all`).",
    "frame-kind": "Rebuild every owner from the same spec (`alphac build --all`).",
    "frame-length": "Rebuild every owner from the same spec (`alphac build --all`).",
    "frame-oversized": "Rebuild every owner from the same spec; a peer sends what this plan "
                       "never allows.",
    "frame-checksum": "The connection corrupted a frame: check the network, and rerun.",
    "frame-auth": "Give every owner the same --key file, or none to all.",
    "frame-count": "Rebuild every owner from the same spec (`alphac build --all`).",
    "key-file": "Give a private (chmod 600) file of 32 to 4096 bytes.",
    "peer-closed": "Look at the peer's own refusal (`alphac launch` prints every owner's stderr).",
    "peer-timeout": "Raise --timeout-ms, or find why the peer stalled.",
    "connect-timeout": "Start every owner within the deadline, and check the peers file's "
                       "addresses and firewalls (raise --timeout-ms for a slow start).",
    "non-finite": "Change the learner or its data so that every value stays finite (a smaller "
                  "step size, scaled samples); the oracle refuses the same way.",
    "replica-divergence": "Rebuild every owner from the same spec; replicas computed other words.",
    "data-parallel-replica-released": "An internal runtime law: report it with the spec.",
    "data-parallel-replica-version": "An internal runtime law: report it with the spec.",
    "data-parallel-stale-read": "The run's executables read further behind than the declared bound (an "
                                "executed mutant such as looser-bound, or executables of another bound): "
                                "rebuild them from the spec and run again.",
    "data-parallel-replica-retained": "An internal runtime law: report it with the spec.",
    "owner-not-in-role": "Start the executable of the owner's role (`alphac inspect EXE` lists "
                         "its owners).",
    "owner-ambiguous": "Give --owner only where the engine sets no rank, or the same index it "
                       "sets (SLURM_PROCID, OMPI_COMM_WORLD_RANK).",
    "local-rank-mismatch": "Start the owners as the emitted files do (`alphac launch --emit`): "
                           "the node list or hostfile must place them as the engine does.",
    "output-exists": "Give a fresh --out path; results are never overwritten.",
    "usage": "Correct the command line (EXE --help) or the peers file (one `OWNER HOST:PORT` "
             "line per owner).",
    "corrupt-executable": "Rebuild the executable.",
    "cpu-unsupported": "Rebuild for a lower level (`alphac build --cpu baseline`), or run it on "
                       "a CPU with the level's features.",
    "transport-unavailable": "Say shm (shared memory where it can be set up, else TCP) or tcp "
                             "for the pair in the peers file, or run both owners on one host.",
    "shm-segment": "Another process replaced or damaged the segment: rerun, and keep /dev/shm "
                   "private to the run's user.",
    # checkpoints
    "checkpoint-manifest": "Name a published checkpoint directory (ckpt-<u>/ with its "
                           "manifest.txt); `alphac inspect` verifies one.",
    "checkpoint-hash-mismatch": "The checkpoint was changed after it was written: use another one.",
    "checkpoint-shard-missing": "Restore the missing shard, or use another checkpoint.",
    "checkpoint-learner-mismatch": "Resume with the learner (and, continuing its contract, the samples and "
                                   "rate) the checkpoint holds, or declare a new contract.",
    "checkpoint-version": "The checkpoint mixes parts of two runs: use another one.",
    "checkpoint-exists": "Give a fresh --checkpoint-dir; checkpoints are never overwritten.",
    "checkpoint-timeout": "Put the checkpoint on storage that answers, or give the owners a larger "
                          "--timeout-ms.",
    "checkpoint-auth": "Resume with the key the checkpoint was written under (--checkpoint-key), or "
                       "use a checkpoint you trust without a key.",
    # build and launch
    "unknown-cpu-level": "Use a level the target describes: baseline, x86-64-v2, x86-64-v3, "
                         "x86-64-v4 or host.",
    "unknown-target": "Use one of the targets listed (alphac/targets/*.toml).",
    "numerical-evidence-stale": "Run `alphac conform` with the alphac that builds, and name the "
                                "sha256 it prints in numericalEvidence.",
    "target-not-buildable": "Use a buildable target (x86_64, aarch64).",
    "bad-target-file": "Fix the target description: the message names the key.",
    "unknown-role": "Use one of the roles listed (`alphac plan SPEC` shows them).",
    "role-not-placed": "Ask for a target the role's owners are placed on (`alphac plan SPEC`).",
    "linker-missing": "Install the target's linker (make setup installs gcc-aarch64-linux-gnu).",
    "library-missing": "Install the library the target's toml lists under `libs` (make setup installs "
                       "libssl-dev, and libssl-dev:arm64 for AArch64).",
    "link-failed": "Read the linker's message; check the target's toolchain.",
    "build-usage": "Give --role and/or --target, or --all alone.",
    "not-an-alphac-executable": "Give an executable `alphac build` wrote, a checkpoint "
                                "directory or an owner's output file.",
    "bad-metadata": "Rebuild the executable.",
    "program-unsupported": "Rewrite the program without the construct named (docs/targets.md).",
    "build-failed": "Report it with the spec: the plan needs an operation the runtime lacks.",
    "compiler-missing": "Install the target's C compiler (make setup installs it).",
    "compile-failed": "Read the compiler's message; check the target's toolchain.",
    "mutant-not-applicable": "Choose a mutant that applies to the deployment (the message says "
                             "why this one does not).",
    "owner-failed": "Read the owner's refusal (printed below the table): its code says why.",
    "launch-timeout": "Raise --timeout, or lower --rounds; the message names the part that ran "
                      "out (an owner that stalled, the oracle, a build).",
    "oracle-mismatch": "The executables computed other words than the declared order: report it "
                       "with the spec (or, with --mutant, this is what is expected).",
    "bad-output": "Rerun the launch; an owner's output file is damaged.",
    "run-not-committed": "Read the root owner's refusal; nothing of the run is published.",
    "qualify-db": "Give --db a tracker this alphac wrote, or a new path (it is created).",
    "run-protocol-mismatch": "Verify the run against the spec it was built from.",
    "run-rounds-mismatch": "Leave --rounds out: the run's commit record names its update count.",
    "commit-record-invalid": "Restore the root owner's commit record as its owner wrote it (a "
                             "copy of the run), or rerun: a damaged record publishes nothing.",
    "run-output-not-file": "Put back the owner's output file the commit record names (a copy of "
                           "the run), or rerun.",
    "run-foreign-files": "Remove the files the message lists, or verify a clean copy of the run: "
                         "they are of another run or were added after it.",
    "conform-kernels-unavailable": "Install alphac with its dependencies (llvmlite), and for "
                                   "--target the target's toolchain and runner (make setup "
                                   "installs gcc-aarch64-linux-gnu and qemu-user); the message "
                                   "names what failed.",
    "unknown-code": "Use a code `alphac explain` lists (the error suggests the nearest).",
    "internal-error": "Report it with the spec and the message: alphac itself failed.",
    "out-of-memory": "Run it where more memory is free, or make the learner smaller (k, the "
                     "samples); report the spec if it passed `alphac check`'s bounds.",
}


@dataclass(frozen=True)
class Explanation:
    code: str
    stage: str
    meaning: str
    fix: str
    example: Path | None  # the bad spec, when the source tree holds one
    rendering: str | None  # its golden diagnostic

    def text(self) -> str:
        return render(self)

    def as_json(self) -> dict:
        return {"code": self.code, "stage": self.stage, "meaning": self.meaning, "fix": self.fix,
                "example": None if self.example is None else str(self.example),
                "example_text": example_text(self.example), "rendering": self.rendering}


def stage_of(code: str) -> str | None:
    return next((name for name, section in STAGES if code in section), None)


def explain(code: str) -> Explanation | None:
    """The explanation of a catalogued code, or None for an unknown one."""
    stage = stage_of(code)
    if stage is None:
        return None
    example = EXAMPLES / f"{code}.alpha"
    golden = example.with_suffix(".expected")
    rendering = golden.read_text(encoding="utf-8") if golden.is_file() else None
    return Explanation(code, stage, codes.CATALOGUE[code], FIXES[code],
                       example if example.exists() else None, rendering)


def example_text(path: Path | None) -> str | None:
    """A bad spec's text when it is a small UTF-8 file (not a directory, not binary)."""
    if path is None or not path.is_file() or path.stat().st_size > EXAMPLE_LIMIT:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def render(e: Explanation) -> str:
    lines = [f"{e.code} ({e.stage}): {e.meaning}", "", f"fix: {e.fix}"]
    if e.example is None:
        lines += ["", "example: none; no single spec produces it" if EXAMPLES.is_dir() else
                  "example: the bad specs are in alphac's source tree (tests/errors/)"]
        return "\n".join(lines)
    text = example_text(e.example)
    lines += ["", f"example: {e.example.relative_to(EXAMPLES.parents[1])}"]
    if text is not None:
        lines += ["  " + line for line in text.rstrip("\n").splitlines()]
    if e.rendering:
        lines += ["", "gives:"] + ["  " + line for line in e.rendering.rstrip("\n").splitlines()]
    return "\n".join(lines)


def listing() -> str:
    """Every code by stage, with its meaning, cut to one line each."""
    width = max(len(c) for c in codes.CATALOGUE)
    lines = []
    for name, section in STAGES:
        lines.append(f"{name}:")
        for code, meaning in section.items():
            short = meaning if len(meaning) <= 72 else meaning[:69].rstrip() + "..."
            lines.append(f"  {code.ljust(width)}  {short}")
    return "\n".join(lines)

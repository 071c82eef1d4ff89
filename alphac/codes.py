"""The one catalogue of diagnostic and refusal codes: stable kebab-case names and what they mean.

Each stage owns one section. A code used anywhere must be listed here; `tests/unit/test_codes.py`
checks that every check/plan code has a bad spec under `tests/errors/`.
"""

# -- input and syntax (alphac/syntax) ------------------------------------------------------
SYNTAX = {
    "io-error": "the spec file cannot be read (missing, a directory, permissions)",
    "file-too-large": "the spec file exceeds the size limit",
    "invalid-encoding": "the spec file is not UTF-8 text",
    "syntax-error": "the text does not follow the grammar",
    "nesting-too-deep": "brackets nest deeper than the parser accepts",
}

# -- checker (alphac/check) -----------------------------------------------------------------
CHECK = {
    # modules and names
    "unknown-module": "an imported module is in neither the std library nor beside the file",
    "module-name-mismatch": "a file declares another module name than it is imported by",
    "duplicate-definition": "a name is defined twice in one scope",
    "misplaced-member": "a family member is out of order (a field before any constructor, ...)",
    "unknown-name": "no value, constructor, view, temporary or program function of that name is in scope",
    "unknown-type": "no family of that name is in scope",
    "ambiguous-name": "an unqualified name is defined by two imported modules",
    "cyclic-definition": "a value is defined in terms of itself",
    # typing of values
    "type-mismatch": "an expression does not have the type its context expects",
    "wrong-arity": "a family or a program's function is applied to the wrong number of arguments",
    "pow-exponent": "pow's exponent is not an integer literal n with 1 <= |n| <= 64",
    "unknown-field": "a constructor is given a field it does not declare",
    "duplicate-field": "a field is given twice",
    "missing-field": "a constructor's field is not given",
    "nat-range": "a Nat is negative or larger than accepted",
    "size-limit": "a list is larger than the checker accepts",
    "invalid-range": "a range ends before it starts",
    "misplaced-program-expression": "slots, views, sums, comparisons or a program's functions "
                                    "(min, max, select, ...) are used outside a pointwise program",
    # binary64 words
    "non-finite-literal": "a literal or loaded word is not a finite binary64 number",
    "non-finite-constant": "constant arithmetic gives a non-finite binary64 result",
    "inexact-conversion": "f64(n) of a Nat that binary64 cannot hold exactly",
    "word-out-of-range": "a raw word does not fit in 64 bits",
    "load-file": "a word file is missing or unreadable, or is neither raw binary64 nor a 1-D "
                 "or 2-D row-major float64 .npy whose header agrees with the file's size",
    # learner and programs
    "learner-too-large": "a learner's parameter and state words (k + m; an independent-state "
                         "learner's n regions of r words) exceed 2**22, the most the oracle "
                         "evaluates within its memory bound (about 1.6 GiB)",
    "samples-too-large": "a learner's samples written in the spec hold more than 2**26 words, or "
                         "more than 2**26 samples, in all (as many as one word file loads)",
    "length-mismatch": "the initial parameters do not hold k words (a loaded 2-D array: one "
                       "row of k)",
    "slot-count-mismatch": "an erased slot count disagrees with 2k+s or 2k+m+1",
    "invalid-index": "an index is not N, i, i+N or i-N, a bound is not constant, or a vector "
                     "temporary is written elsewhere than directly inside its loop at its index",
    "index-out-of-range": "an access or view reaches outside the program's slots or the view",
    "region-straddle": "an access or view spans two regions of the slot layout",
    "slot-write-out-of-range": "a program writes outside its writable slots",
    "slot-read-out-of-range": "a contribution reads one of its own slots before writing it",
    "loop-carried-dependence": "a loop reads what it writes at another index than its own "
                               "(in another iteration, or where the checker cannot prove it is not)",
    "view-shape-mismatch": "a 2-D view `slot a .. b as h by d` does not hold h * d slots",
    "index-rank-mismatch": "a 2-D view is indexed with one index, or a 1-D view or vector "
                           "temporary with two",
    "temporary-out-of-range": "a vector temporary is read at an index outside the range of the "
                              "loop that writes it",
    "temporary-unwritten": "a vector temporary is read where it has not been written: before the "
                           "loop that writes it, or outside the block that holds that loop",
    "sample-width": "a sample does not hold s words (a loaded 2-D array: rows of s)",
    "sample-file": "a sample file is missing or unreadable",
    "sample-shares": "the shares of loaded samples do not add up to the rows in the file",
    # independent-state learners (docs/learners.md)
    "independent-state-region-length": "an owner's initial region does not hold the rule's r "
                                       "words, or r is 0",
    "independent-state-owners": "an independent-state learner lists its regions and its inputs "
                                "for different numbers of owners",
    "independent-state-foreign-region": "an independent-state rule reads or writes a slot beyond "
                                        "its own region, pair and scale: another owner's region",
    # coordinate-owned learners (docs/learners.md)
    "coordinate-not-held": "a coordinate-owned update writes one coordinate from another "
                           "coordinate's words, which another owner holds",
    # deployment structure
    "owner-count": "the deployment's owner count is zero, above 65536, or disagrees with the "
                   "learner's samples",
    "invalid-fanout": "a hierarchy's fan-out is zero or larger than the deployment's owner count",
    "checkpoint-interval": "CheckpointEvery's interval is 0 (it would never checkpoint)",
    "consistency-value": "ConsistencyLocalSteps declares 0 local steps (it would never update)",
    "updates-limit": "deploymentUpdates is above 10 000 000, the most updates a deployment "
                     "makes (and --rounds asks for)",
    "placement-length": "the placement does not name one target per owner",
    "role-owner-out-of-range": "a role names an owner outside 0 .. owners-1",
    "role-coverage": "an owner holds no role, or more than one (a role lists more owners than "
                     "the deployment has)",
    "role-name-invalid": "a role name is not [a-z][a-z0-9_-]* of at most 64 characters "
                         "(executables are named after their role)",
    "role-name-duplicate": "two roles of one deployment have the same name",
    "partition-block-words": "a partitioning's partitionBlockWords (coordinates per block) is "
                             "below 1 or above 2**22",
    "no-deployment": "a command needs exactly one deployment and the file has none or several",
    # resume declarations (Learning.Deployment.DeploymentResume)
    "resume-duplicate": "two resume declarations name the same deployment",
    "resume-foreign-deployment": "a resume declaration names a deployment that is not a value of "
                                 "the file it is declared in",
}

# -- planner (alphac/plan) ------------------------------------------------------------------
PLAN = {
    # combine trees (Runtime.OrderedCombine)
    "combine-leaf-missing": "an owner or member has no leaf in the combine tree (its contribution is never combined)",
    "combine-leaf-duplicated": "an owner has two leaves in the combine tree, or is listed twice as a member",
    "combine-leaf-foreign": "a leaf or member names an owner outside the deployment or the declared coverage",
    "combine-leaf-order": "the tree's leaves are not in the order of its ordered member list",
    "combine-branch-owner": "a branch combines at an owner holding no contribution beneath it",
    "combine-delivery-partial": "a deployment's combine declares CombineDeliverTo, but every owner needs the result",
    "combine-delivery-law": "a planned delivery breaks a law of Runtime.NativeCombine's "
                            "NativeCombineDeliveryLaws (an owner receives the result twice, "
                            "before its sender holds it, off the path to the target, or never)",
    "consistency-not-built": "a deployment declares a consistency that is not built yet: fixed "
                             "staleness with an SM86 owner or independent state, local steps "
                             "outside replicated learners on a star or a hierarchy of CPU owners, "
                             "or bounded staleness outside a star or a hierarchy of CPU owners",
    "independent-state-partitioning": "an independent-state learner's deployment holds other "
                                      "words per owner than its own region (IR built by hand)",
    # numerical contracts (Learning.Numerics)
    "numerical-profile-mismatch": "another numeric profile (format, rounding, subnormals, exceptional values) than the one that runs",
    "numerical-order-mismatch": "another ordered operation list (another tree or program) than the one that runs",
    "numerical-relation-unverified": "the contract's relation is a bound that names no conformance "
                                     "evidence, or evidence that is not found or does not measure "
                                     "a function the programs call",
    "numerical-evidence-corrupt": "the conformance evidence a bound names does not hash to its "
                                  "name, or is not an alphac-evidence-1 record",
    "numerical-bound-below-evidence": "the declared bound in ulps is below the largest error the "
                                      "conformance evidence measured for a function the programs "
                                      "call (for any function it holds, when they call none)",
    # binary32 storage (alphac/plan/storage.py)
    "binary32-narrowing": "a binary32 learner's program stores a value that may not be a "
                          "binary32 number (no explicit round32): narrowing is never inferred",
    "binary32-inexact": "a binary32 learner's initial words, rate or samples hold a value "
                        "binary32 cannot hold",
    "binary32-unsupported": "binary32 storage is not built for the deployment (independent-state, "
                            "an SM86 owner, more than 2^24 samples, or a partitioning that would "
                            "put two owners' values in one word)",
    # partitioning (dataParallelSeparable) and selection assembly
    "data-parallel-not-separable": "a partitioned word of the update depends on another coordinate's words",
    "data-parallel-words-overclaimed": "words per coordinate and shared words claim more state than the learner has",
    "data-parallel-words-unclaimed": "a partitioned update writes a replicated state word that is neither "
                                     "a word per coordinate nor shared (no owner updates it)",
    "data-parallel-assembly-overlap": "a selection assembly receives a coordinate from two owners",
    "data-parallel-assembly-coverage": "a selection assembly leaves coordinates without any owner",
    # shard maps (logical regions and physical fragments)
    "shard-coverage-missing": "words of a logical region are held by no mutable owner",
    "shard-coverage-duplicated": "words of a logical region are held by two mutable owners",
    "shard-coverage-outside": "a fragment holds positions outside its region's domain",
    "shard-decode-mismatch": "decode(assemble(fragments)) differs from the region's logical words",
    "shard-replica-not-read-only": "a replica (a fragment mirroring a version) is writable",
    "shard-replica-unversioned": "a read-only replica does not carry the version it mirrors",
}
# Planner laws that guard what a single spec cannot express (a peer's contract, offered
# fragments, manifests, the deliveries the planner derives itself; a checkpoint's
# contract is reached by a resume declaration):
# their tests build the offending data, so they have no bad spec under tests/errors/.
PLAN_API_ONLY = frozenset({
    "data-parallel-assembly-overlap", "data-parallel-assembly-coverage",
    "shard-coverage-outside", "shard-decode-mismatch", "shard-replica-not-read-only",
    "shard-replica-unversioned", "combine-delivery-law", "independent-state-partitioning",
})

# -- oracle (alphac/oracle) -----------------------------------------------------------------
ORACLE = {
    # the oracle's finite-or-refuse failures use `non-finite` (listed under RUNTIME)
    "oracle-profile": "the contract's numeric profile is not the binary64 nearest-even "
                      "finite-or-refuse profile the oracle evaluates",
    "oracle-consistency": "the deployment declares a consistency the oracle does not evaluate "
                          "yet (from a checkpoint: fixed or bounded staleness, local steps with optimizer state "
                          "or outer momentum)",
    "oracle-schedule": "bounded staleness: the oracle was given no recorded schedule, or one of "
                       "another shape than the run's owners and updates",
    "oracle-inconsistent": "the deployment's shapes disagree (sample shares per owner, word "
                           "or slot counts, tree coverage, partitioning claim); the checker "
                           "refuses these first",
}

# -- executables at run time (alphac/runtime): `refused: CODE: detail` --------------
RUNTIME = {
    "frame-magic": "a frame does not start with the ALFRAME1 magic word",
    "frame-protocol": "a frame carries another protocol identity (another plan, topology, "
                      "contract or wire format)",
    "frame-sender": "a frame names a sender other than the peer expected on this connection",
    "frame-receiver": "a frame is addressed to another owner",
    "frame-version": "a frame belongs to another update (stale or early version)",
    "frame-step": "a frame's step is not the sender's op index this owner expects",
    "frame-kind": "a frame has another kind than the one the protocol expects here",
    "frame-length": "a frame's payload length differs from the expected one",
    "frame-oversized": "a frame's payload length exceeds the largest this protocol allows",
    "frame-checksum": "a frame's checksum word does not match its header and payload",
    "frame-auth": "a frame's HMAC-SHA-256 tag does not verify under the run's key (forged, replayed "
                  "or another key), or one side of a connection authenticates and the other not",
    "frame-count": "a combined value carries another sample count than the plan declares beneath it",
    "key-file": "the --key file is missing, unreadable, not private to its owner (mode 0600) "
                "or not 32 to 4096 bytes",
    "peer-closed": "a peer closed its connection (or it failed) before the protocol finished",
    "peer-timeout": "a socket read or write to a peer did not complete within the timeout",
    "connect-timeout": "a peer could not be connected, or did not connect, within the deadline",
    "transport-unavailable": "the peers file says shm-only for one of a pair, and the pair cannot use "
                             "shared memory (another host, a line saying tcp, or no segment)",
    "shm-segment": "the shared-memory segment a peer offered is not what its name opens (another "
                   "device, inode, owner, mode, size or control page), or an offer is malformed",
    "non-finite": "an arithmetic operation had a non-finite operand or result",
    "replica-divergence": "a replica's state digest differs from this owner's after the last update",
    # partitioned parameters: the short-lived read replica (selection assembly refusals use
    # the planner's data-parallel-assembly-* codes)
    "data-parallel-replica-released": "a contribution reads the parameters' read replica after it was released (or before it was installed)",
    "data-parallel-replica-version": "a contribution reads a read replica of another version than the update's",
    "data-parallel-stale-read": "a recorded contribution read a version more than the bound S behind "
                                "its update (or one after it)",
    "data-parallel-replica-retained": "the version would advance while the read replica is still held",
    "owner-not-in-role": "the executable was started as an owner outside its role",
    "owner-ambiguous": "two sources of the owner index (--owner, SLURM_PROCID, "
                       "OMPI_COMM_WORLD_RANK) disagree",
    "local-rank-mismatch": "an engine's rank of the owner on its node (SLURM_LOCALID, "
                           "OMPI_COMM_WORLD_LOCAL_RANK) is not its place among the owners the "
                           "node list or hostfile puts on that host",
    "output-exists": "the output path, its staged PATH.tmp or the commit record exists already; "
                     "results are never overwritten",
    # io-error (listed under SYNTAX) also names a file or socket the executable cannot use
    "usage": "the command line, the peers file, a node list or a hostfile is malformed",
    "corrupt-executable": "the executable's embedded op table holds an op kind it cannot run",
    "cpu-unsupported": "the executable's kernels were built for a CPU level (`alphac build --cpu`) "
                       "whose features this CPU lacks",
    # SM86 owners (alphac/runtime/device/cuda.c)
    "cuda-unavailable": "an SM86 owner found no CUDA driver: libcuda.so.1 is missing or lacks an "
                        "entry point, or cuInit or the device count failed (no GPU, a driver too old)",
    "gpu-not-found": "no GPU the driver reports has the UUID given with --gpu (the detail lists those seen)",
    "memory-admission": "the plan's device bytes exceed the GPU's free memory, or its total with "
                        "what other alphac owners hold on it (the GPU's ledger), or an allocation failed",
    "cuda-module": "neither the embedded cubin nor the embedded PTX loads on the GPU, or a kernel is missing",
    "cuda-error": "a CUDA driver call failed (the detail names the call and its CUresult)",
}

# -- checkpoints (alphac/checkpoint, the executables' restore, `alphac inspect CKPT`) ------
CHECKPOINT = {
    "checkpoint-manifest": "a checkpoint manifest is missing, truncated or malformed (or the path "
                           "is not a published checkpoint)",
    "checkpoint-hash-mismatch": "a manifest, shard or fragment does not have the sha256 its manifest names",
    "checkpoint-shard-missing": "a shard or child manifest the checkpoint names is not there",
    "checkpoint-learner-mismatch": "the checkpoint holds another learner (programs, k, m or s), or was taken "
                                   "on other inputs (samples, rate) by a resume of the same contract",
    "checkpoint-version": "parts of a checkpoint (manifests, shards) are of different versions or identities",
    "checkpoint-exists": "the checkpoint of this version exists already (or its partial directory): "
                         "checkpoints are never overwritten",
    "checkpoint-timeout": "an executable's restore did not finish reading the checkpoint within its "
                          "--timeout-ms (from the restore's start)",
    "checkpoint-auth": "a keyed reader's checkpoint is not tagged, or not tagged under its key",
}

# -- build and launch (alphac/targets, alphac/launch) ---------------------------------------
TOOLING = {
    # targets, build, inspect
    "unknown-target": "no <name>.toml in the targets directory describes this target",
    "target-not-buildable": "the target is described but executables cannot be built for it yet",
    "bad-target-file": "a target description <name>.toml is malformed or misses a key",
    "unknown-role": "the deployment has no role of this name",
    "role-not-placed": "no owner of the requested role is placed on the requested target",
    "linker-missing": "the target's linker command is not installed",
    "link-failed": "the target's linker exited with an error",
    "library-missing": "a static library the target links (OpenSSL's libcrypto) is not installed",
    "build-usage": "`alphac build` needs --role and/or --target, or --all",
    "not-an-alphac-executable": "the file is not an ELF executable with an .alphac section",
    "bad-metadata": "the .alphac section of an executable is not the expected JSON",
    "program-unsupported": "a pointwise program uses a construct code generation does not lower",
    "build-failed": "the plan needs an operation the role runtime does not execute",
    "compiler-missing": "the target's C compiler (for the role runtime) is not installed",
    "compile-failed": "the target's C compiler failed on the role runtime",
    "assembler-missing": "the device target's assembler (ptxas) is not installed",
    "device-unsupported": "the plan asks SM86 owners for something their device kernels do not run "
                          "(the sample tree's blocks)",
    "assemble-failed": "the device target's assembler failed on the kernels' PTX",
    "mutant-not-applicable": "the executed mutant asked for cannot be built for (or evaluated "
                             "on) this deployment: stale-replica without partitioned parameters, "
                             "swap-branch on fewer than three leaves, deliver-to-next on one "
                             "owner, duplicate-mass without samples, any mutant with checkpoints",
    "unknown-cpu-level": "the CPU level is none the target describes (baseline, its [levels], host)",
    "numerical-evidence-stale": "a bounded contract's conformance evidence measured other "
                                "kernels (another IR sha256) than the ones the build compiles",
    # launch
    "owner-failed": "an owner process exited non-zero or could not be started",
    "launch-timeout": "the command's --timeout ran out (owners still running were killed; "
                      "the message names the part that ran out: planning, building, the "
                      "owners or the oracle)",
    "oracle-mismatch": "an owner's final words or version differ from the oracle's",
    "bad-output": "an owner exited 0 but its output file is missing or malformed",
    "run-not-committed": "the run ended without the root's commit record: no owner's output is published",
    # qualify
    "qualify-db": "the qualification tracker cannot be opened, read or written, or is not a "
                  "tracker of the format this alphac writes",
    # verify
    "run-protocol-mismatch": "a run's commit record names another protocol identity or owner count "
                             "than the spec's plan (`alphac verify` of another spec's run)",
    "run-rounds-mismatch": "`alphac verify --rounds N` of a run whose commit record names another "
                           "update count (refused before the oracle runs)",
    "commit-record-invalid": "the root's commit record is there but is no alphac commit record: "
                             "not UTF-8, a malformed line, or not a regular file (a directory, a FIFO)",
    "run-output-not-file": "a committed owner's output is a directory, a FIFO, a socket or a device, "
                           "not a regular file",
    "run-foreign-files": "a committed run's directory holds files none of its owners writes there: "
                         "another owner's output, a staged file, a second commit record",
    # conform
    "conform-kernels-unavailable": "`alphac conform` cannot compile or run the "
                                   "elementary-function kernels (the code generator, llvmlite, "
                                   "the target's compiler or its runner is missing or failed)",
    # any command
    "unknown-code": "`alphac explain` was given a code the catalogue does not list",
    "internal-error": "a stage failed with an unexpected exception (a bug in alphac); the message "
                      "names it",
    "out-of-memory": "a command ran out of memory (a MemoryError) where no bound of its own "
                     "refused the work first",
}

CATALOGUE: dict[str, str] = {}
for _section in (SYNTAX, CHECK, PLAN, ORACLE, RUNTIME, CHECKPOINT, TOOLING):
    for _code, _text in _section.items():
        assert _code not in CATALOGUE, f"code {_code} listed twice"
        CATALOGUE[_code] = _text

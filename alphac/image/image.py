"""`build_image(plan, role, target)`: what one role executable needs from the plan, as plain
data — each owner's op table with the steps its frames carry, peers, samples and register
sizes and slots, the plan's owner layout (every owner's coordinates as runs, how many
parameter and state words each of the role's owners holds, the shared state offsets), the
initial words those owners hold, the programs and the texts the executable prints. The
kernels (alphac.codegen) and the C runtime read nothing else.

Compact storage: an owner keeps exactly the words it holds. Its parameters are its
coordinates' parameters in ascending order when parameters are partitioned, else all k;
its state, when the optimizer state is partitioned, is the shared words in ascending
offset order, then block 0's word of each of its coordinates (ascending), then block 1's,
... (w blocks), else all m in offset order. The image carries each role owner's initial
words in that order, each word once: all k (or m) once when replicated, else the shared
words once and then every role owner's own words.

Every op's row is its words, then its step and what it expects, as the planner derives them
(alphac/plan/steps.py); an op that expects nothing carries NO_EXPECT.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from alphac import wire
from alphac.image import format as fmt
from alphac.image.ckpt import checkpoint_lines, owner_fragments
from alphac.ir import nodes as ir
from alphac.plan import separable, storage
from alphac.plan.mutants import ZERO
from alphac.plan.ops import EXPECT_CHECKPOINT, EXPECT_PREPARED, OP_TABLE, WORD_INDEX
from alphac.plan.protocol import LEAF_TAG_WORDS, peers
from alphac.plan.memory import computes_ahead, lanes_held, temporaries
from alphac.plan.registers import register_sizes
from alphac.plan.steps import op_checks

OP_WORDS = 7  # kind, peer, dst, a, b, step, expect
NO_EXPECT = 2**64 - 1  # an op's `expect` word when there is nothing to check
MEAN_ZERO = ZERO & (2**64 - 1)  # a `mean_from` word: this word of the mean reads the sum +0.0

_DIGEST = tuple(k.code for k in OP_TABLE if k.expect == EXPECT_PREPARED)
_CKPT = tuple(k.code for k in OP_TABLE if k.expect == EXPECT_CHECKPOINT)
# the ops that move a register in a frame, and the word of that register
_MOVED = {k.code: k.moved.word for k in OP_TABLE if k.moved}


class ImageError(Exception):
    """The plan asks for something the role runtime does not execute: a one-line error with
    a TOOLING code, reported by `alphac build` like the targets' errors."""

    def __init__(self, code: str, message: str):
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, code
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CpuNeeds:
    """What an executable's kernels need of its CPU: how it names their level, and the bits
    of the target's `cpu_checks` features they require (0 at the baseline)."""

    label: str = "baseline"
    required: int = 0
    level: str = "baseline"  # the level's name, which a non-baseline executable's name carries


@dataclass(frozen=True)
class OwnerImage:
    owner: int
    ops: tuple[tuple[int, ...], ...]  # OP_WORDS each: update, finish, then checkpoint ops
    n_update: int
    n_finish: int
    n_checkpoint: int
    peers: tuple[int, ...]
    sample_row: int        # first row of this owner's samples in the image's sample table
    share: int
    leaf_count: int        # the sample count its local value reports (a mutant's, or share)
    mean_from: tuple[int, ...]  # the delivered sum each word of its mean reads; (): as delivered
    reg_words: tuple[int, ...]  # data words of each register (sums and count, or assembled words)
    reg_off: tuple[int, ...]    # word offset of each register's buffer in the register pool
    reg_pool: int               # words of the register pool (plan/registers.py)
    params_count: int           # parameter words held (compact storage)
    state_count: int            # state words held
    init_params: int            # where its initial parameters start in the `initial` section
    init_state: int             # where its own (not alike) initial state words start


@dataclass(frozen=True, eq=False)
class RoleImage:
    spec: str
    deployment: str
    role: str
    target: str
    protocol_id: int
    n: int
    k: int
    s: int
    m: int
    updates: int
    rate: int
    contribution: ir.Program
    update: ir.Program
    partitioning: ir.Partitioning
    update_layout: object | None  # separable.layout_of for an owned update kernel, else None
    owners: tuple[OwnerImage, ...]  # the role's owners, in role order
    runs: tuple[tuple[tuple[int, int, int], ...], ...]  # every owner's coordinates, as runs
    tag_words: int
    root: int                       # the owner at the combine tree's root, which commits a run
    fragments: tuple                # every owner's checkpoint fragments ((region, runs), ...)
    ckpt_interval: int
    ckpt_dir: str
    ckpt_lines: object              # alphac.image.ckpt.CheckpointLines
    run_id: int
    resume: tuple[str, int] | None  # a declared resume: (checkpoint path, 1 same / 2 new contract)
    mutation: object                # alphac.plan.mutants.Mutation: the executed mutant, if any
    leaf_order: tuple[int, ...]
    block_words: int                # B: coordinate block b belongs to owner b mod n
    shared: tuple[int, ...]         # the shared state offsets, ascending (partitioned state)
    region: int                     # an independent-state learner's r (0: data-parallel)
    state_alike: int                # state words every owner holds alike: they lead its state
    samples: np.ndarray             # the role's owners' sample rows, in role order
    initial: np.ndarray             # the role's owners' initial parameters (compact, once each)
    initial_state: np.ndarray       # the alike state words, then each role owner's own
    usage: str
    version: str
    cpu: CpuNeeds = CpuNeeds()
    fmt: str = "binary64"           # the storage format (alphac/plan/storage.py)
    staleness: int = 0              # S: update u's contributions read version max(u - S, 0)
    ahead: int = 0                  # D: the contributions of up to D updates computed ahead on a thread
    bound: int = 0                  # S of a bounded staleness (its outputs record the versions read)
    local_steps: int = 0            # H: each owner's H updates on its own samples between combines
    outer: tuple[int, int] | None = None  # local steps' outer momentum: (rate, momentum) storage words

    @property
    def words(self) -> tuple[int, int, int]:
        """(k, s, m) in words: what the runtime allocates, moves and writes (k, s, m: values)."""
        return tuple(storage.words(c, self.fmt) for c in (self.k, self.s, self.m))

    @property
    def owned(self) -> bool:
        return self.partitioning.any

    @property
    def small_payload(self) -> int:
        """The longest payload of a frame that is no register: a hello, a transport frame,
        "prepared", a checkpoint report."""
        prepared = max([wire.prepared_words(op[6]) for o in self.owners for op in o.ops
                        if op[0] in _DIGEST] + [wire.prepared_words(1)])
        ckpt = max([op[6] for o in self.owners for op in o.ops if op[0] in _CKPT] + [0])
        return max(wire.HELLO_WORDS, wire.TRANSPORT_WORDS, prepared, ckpt)

    @property
    def max_payload(self) -> int:
        """The longest frame payload of the protocol: a register sent or received, or
        `small_payload` (a sample-block register, never sent, may be longer)."""
        regs = max([o.reg_words[op[WORD_INDEX[_MOVED[op[0]]]]] for o in self.owners for op in o.ops
                    if op[0] in _MOVED] + [1]) + self.tag_words
        return max(regs, self.small_payload)

    def encode(self) -> bytes:
        """The bytes the executable embeds as `alphac_image` (layout: alphac.image.format)."""
        part = self.partitioning
        pos = np.zeros(self.n, dtype=np.uint64)
        for i, o in enumerate(self.leaf_order):
            pos[o] = i
        text = bytearray()

        def string(s: str) -> int:
            at = len(text)
            text.extend(s.encode("utf-8") + b"\0")
            return at

        k, s, m = self.words
        fields = {
            "magic": fmt.IMAGE_MAGIC, "format": fmt.IMAGE_FORMAT, "protocol": self.protocol_id,
            "k": k, "m": m, "s": s, "n": self.n, "updates": self.updates,
            "rate": self.rate, "tag_words": self.tag_words,
            "output_format": (wire.OUTPUT_OWNED_SCHEDULED if self.bound else wire.OUTPUT_OWNED) if self.owned else
            wire.OUTPUT_SCHEDULED if self.bound else wire.OUTPUT_REPLICATED,
            "part_parameters": int(part.parameters.sharded), "part_state": int(part.optimizer_state.sharded),
            "part_gradients": int(part.gradients.sharded), "w": part.words_per_coordinate,
            "leaves": len(self.leaf_order), "max_payload": self.max_payload,
            "small_payload": self.small_payload, "block_words": self.block_words,
            "role_size": len(self.owners), "root": self.root,
            "digest_params": int(not part.parameters.sharded), "state_alike": self.state_alike,
            "str_usage": string(self.usage), "str_version": string(self.version),
            "str_role": string(self.role), "str_deployment": string(self.deployment),
            "str_owners": string(", ".join(str(o.owner) for o in self.owners)),
            "ckpt_interval": self.ckpt_interval, "ckpt_identity": self.ckpt_lines.identity,
            "run_id": self.run_id, "resume_mode": self.resume[1] if self.resume else 0,
            "cpu_required": self.cpu.required, "str_cpu": string(self.cpu.label),
            "str_ckpt_learner": string(self.ckpt_lines.learner),
            "str_ckpt_contract": string(self.ckpt_lines.contract),
            "str_ckpt_layout": string(self.ckpt_lines.layout),
            "str_ckpt_inputs": string(self.ckpt_lines.inputs),
            "str_ckpt_dir": string(self.ckpt_dir),
            "str_resume": string(self.resume[0] if self.resume else ""),
            "leaf_mean": int(self.mutation.leaf_mean),
            "stale_replica": int(self.mutation.stale_replica),
            "staleness": self.staleness,
            "ahead": self.ahead,
            "bound": self.bound,
            "local_steps": self.local_steps,
            "outer": int(self.outer is not None),
            "outer_rate": self.outer[0] if self.outer else 0,
            "outer_momentum": self.outer[1] if self.outer else 0,
            "region": self.region,
            "temporaries": temporaries(self.contribution, self.update, lanes_held(
                self.contribution, self.k, self.s, "none" if self.region else self.fmt, self.target)),
        }
        mask = 2**64 - 1

        def flat(rows):
            starts, out = [], []
            for r in rows:
                starts.append(len(out))
                out.extend(w & mask for w in r)
            return starts, out

        op_starts, ops = flat([w for op in o.ops for w in op] for o in self.owners)
        peer_starts, peer_list = flat(o.peers for o in self.owners)
        reg_starts, reg_words = flat(o.reg_words for o in self.owners)
        mean_starts, mean_from = flat(o.mean_from for o in self.owners)
        _, reg_off = flat(o.reg_off for o in self.owners)
        run_starts, runs = flat([w for run in r for w in run] for r in self.runs)
        frag_starts, frags = flat([w for region, fruns in f
                                   for w in (region, sum(c for _, _, c in fruns), len(fruns),
                                             *(x for run in fruns for x in run))]
                                  for f in self.fragments)
        sections = {
            "role_owners": [o.owner for o in self.owners],
            "op_start": [s // OP_WORDS for s in op_starts], "ops": ops,
            "n_update": [o.n_update for o in self.owners],
            "n_finish": [o.n_finish for o in self.owners],
            "n_checkpoint": [o.n_checkpoint for o in self.owners],
            "peer_start": peer_starts, "peer_count": [len(o.peers) for o in self.owners],
            "peers": peer_list,
            "sample_row": [o.sample_row for o in self.owners],
            "share": [o.share for o in self.owners],
            "leaf_count": [o.leaf_count for o in self.owners],
            "mean_start": mean_starts, "mean_count": [len(o.mean_from) for o in self.owners],
            "mean_from": mean_from,
            "reg_start": reg_starts, "reg_count": [len(o.reg_words) for o in self.owners],
            "reg_words": reg_words, "reg_off": reg_off, "reg_pool": [o.reg_pool for o in self.owners],
            "params_count": [o.params_count for o in self.owners],
            "state_count": [o.state_count for o in self.owners],
            "init_params": [o.init_params for o in self.owners],
            "init_state": [o.init_state for o in self.owners],
            "run_start": [s // 3 for s in run_starts], "run_count": [len(r) for r in self.runs],
            "runs": runs,
            "frag_start": frag_starts, "frag_count": [len(f) for f in self.fragments], "frags": frags,
            "shared": self.shared, "leaf_order": self.leaf_order, "leaf_pos": pos,
            "samples": self.samples, "initial": self.initial,
            "initial_state": self.initial_state, "text": bytes(text),
        }
        return fmt.encode(fields, sections)


def run_id_of(plan) -> int:
    """The run id every owner of `plan` uses when started without --run-id or --resume."""
    return default_run_id(checkpoint_lines(plan), plan.deployment)


def checkpoint_dir(dep) -> str:
    """The declared checkpoint directory, relative to the spec file's directory, made
    absolute ("" when the deployment never checkpoints)."""
    d = dep.checkpoint.directory
    if not dep.checkpoint.every or not d:
        return ""
    base = Path(dep.source_file).parent if dep.source_file else Path(".")
    return str((base / d).resolve())


def declared_resume(dep) -> tuple[str, int] | None:
    resume = getattr(dep, "resume", None)
    if resume is None:
        return None
    return (str(Path(resume.path).resolve()), 1 if resume.mode == "same" else 2)


def default_run_id(lines, dep) -> int:
    """A run id for a run started without --run-id: the same for every owner of the run
    (`run_id_of(plan)` gives it for a plan)."""
    import hashlib

    h = hashlib.sha256(f"{lines.identity:016x} {dep.updates}".encode()).hexdigest()
    return int(h[:16], 16)


def executable_name(plan, role: str, target: str, level: str = "baseline") -> str:
    """`{spec}-{role}-{target}`, then `-{level}` for kernels built for a CPU level above the
    baseline (`-host`, `-x86-64-v3`: one artifact per configuration, so a portable build is
    never replaced by one for this machine alone), then `-mutant-NAME` for an executed
    mutant's executable, so that it never takes a normal build's place."""
    dep = plan.deployment
    name = f"{Path(dep.source_file or dep.name).stem}-{role}-{target}"
    if level != "baseline":
        name += f"-{level}"
    return name if plan.mutant is None else f"{name}-mutant-{plan.mutant}"


def mutant_note(plan) -> str:
    """What a mutant executable's --help and --version say it is ("" for a normal one)."""
    if plan.mutant is None:
        return ""
    return (f"mutant {plan.mutant}: a testing aid; it completes its communication but computes "
            "other words than the declared program\n")


# an SM86 executable's GPU (docs/targets.md, "SM86")
GPU_USAGE = ("  --gpu UUID       the GPU to run on, by its UUID (GPU-...); default: this owner's index\n"
             "                   among the placement's SM86 owners, modulo the GPUs the driver reports\n")


def usage_text(plan, role: str, target: str, role_owners) -> str:
    dep = plan.deployment
    owners = ", ".join(str(o) for o in role_owners)
    return (
        "usage: EXE --owner I --peers FILE --out PATH (--key FILE | --insecure) [--updates N]\n"
        "           [--timeout-ms MS] [--listen-any] [--checkpoint-dir DIR] [--resume CKPT [--new-contract]]\n"
        "           [--checkpoint-key FILE] [--run-id HEX] [--stats FILE] [--connections FILE] [--status-fd FD]"
        f"{' [--gpu UUID]' if target == 'sm86' else ''}\n"
        "           [--help] [--version]\n"
        "       EXE [--owner I] [--nodelist LIST | --hostfile FILE] --base-port P\n"
        "           (--out PATH | --out-dir DIR) (--key FILE | --insecure) ...   (started by srun or mpirun)\n"
        f"  deployment {dep.name}, role {role} (owners {owners}) of {dep.owners}, "
        f"target {target}, protocol {plan.protocol_hex}\n"
        f"{'  ' if plan.mutant else ''}{mutant_note(plan)}"
        "  --owner I        this process's owner index (must belong to the role); without it,\n"
        "                   SLURM_PROCID or OMPI_COMM_WORLD_RANK (every one present must agree)\n"
        "  --peers FILE     one line per owner: 'OWNER HOST:PORT [tcp|shm|shm-only]' (IPv4, [IPv6]\n"
        "                   or a host name; shm: shared memory with the owners of this host that\n"
        "                   allow it too, TCP where it cannot be set up; shm-only: refuse then)\n"
        "  --nodelist LIST  owner i on the i-th host of LIST (Slurm hostlist syntax: node[1-3,7]);\n"
        "                   without --peers, --nodelist or --hostfile: SLURM_STEP_NODELIST with\n"
        "                   SLURM_STEP_TASKS_PER_NODE (owners from a node list speak TCP)\n"
        "  --hostfile FILE  owner i in the i-th slot of an Open MPI hostfile ('HOST [slots=N]')\n"
        "  --base-port P    with a node list: an owner listens on P + its place among the owners\n"
        "                   of its host\n"
        "  --out PATH       where the final words are written (never overwritten); PATH.tmp is\n"
        "                   staged from the start, and the root commits the run in PATH.commit\n"
        f"  --out-dir DIR    --out DIR/{wire.output_name('I')}\n"
        f"  --updates N      number of updates (default {dep.updates})\n"
        f"  --timeout-ms MS  bound on connecting and on every socket read/write "
        f"(default {wire.DEFAULT_TIMEOUT_MS})\n"
        "  --key FILE       authenticate every frame with HMAC-SHA-256 under this key (a file of\n"
        "                   32 to 4096 bytes, mode 0600, this user's or root's); every owner of a run\n"
        "                   needs the same key\n"
        "  --insecure       run without a key: no frame is authenticated, and anyone who can reach\n"
        "                   an owner's port can play an owner (one of --key and --insecure is needed)\n"
        "  --listen-any     allow the peers file to name the wildcard address for this owner\n"
        "  --checkpoint-dir DIR  where checkpoints go (every owner of the run the same)\n"
        "  --resume CKPT    restore from the checkpoint directory CKPT (ckpt-<u>) and run on\n"
        "  --new-contract   with --resume: start a new contract on its state (another owner count\n"
        "                   or tree, other samples or rate); without it the checkpoint's order of\n"
        "                   operations and inputs must be this run's\n"
        "  --checkpoint-key FILE  tag the checkpoints written, and refuse one resumed that is not\n"
        "                   tagged, under this key (default: --key; with neither, no tag is checked)\n"
        "  --run-id HEX     the run's id, 1 to 16 hex digits, not 0 (every owner the same; names\n"
        "                   partial checkpoint directories)\n"
        "  --stats FILE     write the bytes of the learner's buffers (now and at their highest, by\n"
        "                   category) to FILE at exit, on a refusal too\n"
        "  --connections FILE  write which transport each connection uses, once all are set up\n"
        "  --status-fd FD   write 'update V' to descriptor FD after each update (never blocking)\n"
        f"{GPU_USAGE if target == 'sm86' else ''}"
        "  --version        what this executable was built for\n"
        "  exit 0: output written; 1: refused (stderr: 'refused: CODE: detail'); 2: usage\n")


@dataclass(frozen=True)
class InitialWords:
    """The role owners' initial words in compact order, each word once (see the module's
    docstring), and where each owner's own words start."""

    params: np.ndarray
    param_starts: tuple[int, ...]
    state: np.ndarray            # the `alike` words every owner holds, then each owner's own
    state_starts: tuple[int, ...]
    alike: int


def initial_words(layout, learner, role_owners, fmt: str = "binary64", own_state: bool = False) -> InitialWords:
    """The initial words of `role_owners` in their storage order (`OwnerLayout.params_held`,
    `OwnerLayout.state_stored`): what every owner holds alike once, then each owner's own;
    in storage format `fmt`. With `own_state` (local steps: each owner's optimizer state is
    its own from the first round on) no state word is held alike."""
    p0 = storage.pack(learner.initial.as_array(), fmt)
    s0 = storage.pack(learner.initial_state.as_array(), fmt)
    if layout.parameters.sharded:
        params, param_starts = _concatenated([p0[layout.params_held(o)] for o in role_owners])
    else:
        params, param_starts = p0, (0,) * len(role_owners)
    alike = 0 if own_state else len(layout.replicated_state())
    own = [s0[layout.state_stored(o)[alike:]] for o in role_owners]
    rest, state_starts = _concatenated(own, alike)
    return InitialWords(params, param_starts, np.concatenate([s0[layout.replicated_state()[:alike]], rest]),
                        state_starts, alike)


def _concatenated(parts, base: int = 0) -> tuple[np.ndarray, tuple[int, ...]]:
    starts, at = [], base
    for part in parts:
        starts.append(at)
        at += len(part)
    words = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
    return words.astype(np.uint64, copy=False), tuple(starts)


def build_image(plan, role: str, target: str, cpu: CpuNeeds = CpuNeeds()) -> RoleImage:
    """The image of `role`'s executable for `target`, its kernels built for the CPU `cpu`
    describes; ImageError if the plan needs an op the runtime does not execute or has no
    such role."""
    dep = plan.deployment
    learner = dep.learner
    k, s, m, n = learner.k, learner.s, learner.m, dep.owners
    role_v = next((r for r in dep.roles if r.name == role), None)
    if role_v is None:
        raise ImageError("unknown-role", f"the deployment has no role {role!r}")
    part = dep.partitioning
    protocols = tuple(o.protocol for o in plan.owners)
    for p in protocols:  # every op is of a kind of the op table (alphac.plan.ops.Op)
        if part.any and not learner.independent and not p.register_words:
            raise ImageError("build-failed", f"owner {p.owner}'s partitioned protocol has no register sizes")
    layout = plan.layout
    tags = LEAF_TAG_WORDS if part.any else 0
    shares = learner.samples.shares
    mutated = plan.mutation
    fragments = owner_fragments(plan)
    try:
        checks = op_checks(protocols, mutated.leaf_counts, fragments, role_v.owners, dep.consistency.bound > 0)
    except ValueError as err:
        raise ImageError("build-failed", f"the publication reports: {err}") from None
    fmt_ = storage.format_of(dep)
    init = initial_words(layout, learner, role_v.owners, fmt_, own_state=dep.consistency.local_steps > 0)
    # whose inputs each owner reads: its own, or (mutant foreign-inputs) another owner's
    inputs = mutated.inputs_from or tuple(range(n))
    owners, row = [], 0
    for j, o in enumerate(role_v.owners):
        proto, slots = protocols[o], plan.owners[o].registers
        ops = tuple(op.words() + (step, NO_EXPECT if expect is None else expect) for op, (step, expect)
                    in zip(proto.update_ops + proto.finish_ops + proto.checkpoint_ops, checks[o]))
        owners.append(OwnerImage(o, ops, len(proto.update_ops), len(proto.finish_ops),
                                 len(proto.checkpoint_ops), peers(proto), row, shares[inputs[o]],
                                 mutated.leaf_counts[o], mutated.mean_from[o],
                                 register_sizes(proto, layout.k), slots.offsets(tags), slots.pool_words(tags),
                                 layout.params_count(o), layout.state_count(o),
                                 init.param_starts[j], init.state_starts[j]))
        row += shares[inputs[o]]
    rows = [learner.samples.owner_rows(inputs[o]) for o in role_v.owners]
    samples = (np.concatenate([storage.pack_rows(r, fmt_).reshape(-1) for r in rows])
               if rows else np.zeros(0, dtype=np.uint64))
    lines = checkpoint_lines(plan)
    spec = Path(dep.source_file or dep.name).stem
    version = (f"{executable_name(plan, role, target, cpu.level)}: deployment {dep.name}, role {role} of {n} "
               f"owners, target {target}, cpu {cpu.label}, protocol {plan.protocol_hex}, "
               f"wire format {wire.WIRE_FORMAT}\n{mutant_note(plan)}")
    return RoleImage(
        spec=spec, deployment=dep.name, role=role, target=target, protocol_id=plan.protocol_id,
        n=n, k=k, s=s, m=m, updates=dep.updates, rate=storage.pack_word(int(learner.rate), fmt_),
        contribution=learner.contribution, update=learner.update, partitioning=part,
        update_layout=separable.layout_of(learner, part) if part.any else None,
        owners=tuple(owners), runs=tuple(layout.coordinate_runs(o) for o in range(n)),
        tag_words=tags, root=plan.tree.owner,
        fragments=tuple(fragments[o] for o in range(n)), ckpt_interval=dep.checkpoint.every,
        ckpt_dir=checkpoint_dir(dep), ckpt_lines=lines, run_id=default_run_id(lines, dep),
        resume=declared_resume(dep), mutation=mutated, leaf_order=plan.shape.leaf_order,
        block_words=layout.block_words, region=learner.region,
        shared=(tuple(int(j) for j in layout.replicated_state())
                if layout.optimizer_state.sharded else ()),
        state_alike=init.alike, samples=samples, initial=init.params, initial_state=init.state,
        usage=usage_text(plan, role, target, role_v.owners), version=version, cpu=cpu, fmt=fmt_,
        staleness=dep.consistency.staleness, ahead=computes_ahead(dep, layout), bound=dep.consistency.bound,
        local_steps=dep.consistency.local_steps,
        outer=None if dep.consistency.outer is None else (
            storage.pack_word(dep.consistency.outer.rate, fmt_), storage.pack_word(dep.consistency.outer.momentum, fmt_)))

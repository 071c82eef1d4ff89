"""The projection of a combine tree onto owners: the op lists the runtime interprets.

A global schedule is built from the tree (post-order reduce, then replicate, update,
replica comparison and publication) with every send immediately followed by its matching
receive; projecting it onto each owner is deadlock-free even when sends block. The tree,
its walks and the transfers along its edges are alphac/plan/tree.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.ir.nodes import CombinePlacement, TreeLeaf, TreeNode
from alphac.plan.blocks import block_gather, block_reduce
from alphac.plan.layout import OwnerLayout
from alphac.plan.ops import OP_CODE, OP_KINDS, REGION_PARAMETERS, REGION_STATE, TALKING, Op  # noqa: F401
from alphac.plan.sampletree import PlacedSampleTree, stack_depth
from alphac.plan.tree import Transfer, delivery_path, leaves, postorder, replicate_edges, report_edges
from alphac.wire import WIRE_FORMAT  # noqa: F401  (the identity covers the wire format)

# A partitioned protocol's register carries, after its words, the leaf range [lo, hi) it
# covers (selection registers; sum registers carry zeros there), in frames too.
LEAF_TAG_WORDS = 2


@dataclass(frozen=True)
class OwnerProtocol:
    """What one owner does: `update_ops` once per update, then `finish_ops` once before
    publishing (replica comparison and the publish verdict)."""

    owner: int
    update_ops: tuple[Op, ...]
    finish_ops: tuple[Op, ...]
    # words held by each register (partitioned protocols; empty: every register holds k + 1)
    register_words: tuple[int, ...] = ()
    # once after every checkpointed update (the same for every checkpoint)
    checkpoint_ops: tuple[Op, ...] = ()


def project(root: TreeNode, n: int, partitioning=None, k: int = 0,
            nodes: list[TreeNode] | None = None,
            layout: OwnerLayout | None = None,
            targets: tuple[int, ...] | None = None,
            sample_tree: PlacedSampleTree | None = None,
            placement: CombinePlacement = CombinePlacement.BRANCH_OWNERS) -> tuple[OwnerProtocol, ...]:
    """Each owner's protocol. Registers: 0 = own local value; one register per received or
    combined value otherwise. With a `Partitioning` that partitions anything, the protocol
    of `project_partitioned` (k = the learner's parameter count, `layout` the owner layout
    if the caller has it, `targets` whom each coordinate owner's reduction is delivered
    to); otherwise the replicated learner's. `nodes` is the tree's post-order, if the
    caller has it already. With `sample_tree` (the placed sample tree; `root` is then its
    owner tree), the protocol of `project_sample_tree`. `placement`: where the tree's
    branches run (`CombinePlacement`; BLOCK_OWNERS: `block_reduce`)."""
    nodes = postorder(root) if nodes is None else nodes
    if sample_tree is not None:
        return project_sample_tree(root, n, sample_tree, partitioning, k, nodes, layout, placement)
    if partitioning is not None and partitioning.any:
        return project_partitioned(root, n, partitioning, k, nodes, layout, targets, placement=placement)
    return project_replicated(root, n, k, nodes, layout, _OwnerLeaves(root, nodes), placement)


def _finish_ops(root: TreeNode, n: int, nodes: list[TreeNode]) -> list[tuple[Op, ...]]:
    """The publication of a run, a two-phase commit along the reduce edges (each child owner
    once): every owner stages its output; "prepared" goes up with the replica digest and the
    subtree's output digests (`digest-send`/`digest-recv`, which compare the digests); the
    root commits; the verdict comes back down (`publish-send`/`publish-recv`); every owner
    finalizes its output."""
    fin: list[list[Op]] = [[Op("stage")] for _ in range(n)]
    up = report_edges(root, nodes)
    for t in up:
        fin[t.sender].append(Op("digest-send", peer=t.receiver))
        fin[t.receiver].append(Op("digest-recv", peer=t.sender))
    fin[root.owner].append(Op("commit"))
    for t in reversed(up):
        fin[t.receiver].append(Op("publish-send", peer=t.sender))
        fin[t.sender].append(Op("publish-recv", peer=t.receiver))
    for f in fin:
        f.append(Op("finalize"))
    return [tuple(f) for f in fin]


def _checkpoint_ops(root: TreeNode, n: int, nodes: list[TreeNode]) -> list[tuple[Op, ...]]:
    """One checkpoint: every owner stages its shard; digests go up the same edges as
    "prepared"; an owner with children writes its subtree's manifest before reporting up;
    the root publishes the directory."""
    ops: list[list[Op]] = [[Op("ckpt-stage")] for _ in range(n)]
    up = report_edges(root, nodes)
    children: dict[int, list[int]] = {}
    parent: dict[int, int] = {}
    for t in up:
        children.setdefault(t.receiver, []).append(t.sender)
        parent[t.sender] = t.receiver
    for t in up:  # children's edges come before their parent's: receives precede the send
        if t.sender in children:
            ops[t.sender].append(Op("ckpt-manifest"))
        ops[t.sender].append(Op("ckpt-send", peer=t.receiver))
        ops[t.receiver].append(Op("ckpt-recv", peer=t.sender))
    if root.owner in children or n == 1:
        ops[root.owner].append(Op("ckpt-manifest"))
    ops[root.owner].append(Op("ckpt-publish"))
    return [tuple(o) for o in ops]


def project_independent(root: TreeNode, n: int,
                        nodes: list[TreeNode] | None = None) -> tuple[OwnerProtocol, ...]:
    """Each owner's protocol for an independent-state learner: one `evolve` per update (its
    rule on its own region and inputs; nothing moves between owners), then the publication
    and checkpoints of every learner, along the tree's reduce edges. It names no register."""
    nodes = postorder(root) if nodes is None else nodes
    finish = _finish_ops(root, n, nodes)
    ckpt = _checkpoint_ops(root, n, nodes)
    return tuple(OwnerProtocol(o, (Op("evolve"),), finish[o], (), ckpt[o]) for o in range(n))


def register_count(proto: OwnerProtocol) -> int:
    """Registers the update ops name (0 for a protocol that names none: independent state)."""
    regs = [r for op in proto.update_ops for r in op.registers()]
    return max(regs) + 1 if regs else 0


def peers(proto: OwnerProtocol) -> tuple[int, ...]:
    """The owners this owner exchanges frames with, in its update, finish and checkpoint
    ops: exactly those it connects to or accepts."""
    ops = proto.update_ops + proto.finish_ops + proto.checkpoint_ops
    return tuple(sorted({op.peer for op in ops if op.kind in TALKING}))


def owned_count(k: int, n: int, owner: int) -> int:
    """How many of coordinates 0..k-1 belong to `owner` (the owner layout's answer)."""
    return OwnerLayout(k, 0, n).owned_count(owner)


class _Schedule:
    """A global schedule under construction: per-owner op lists and register sizes (words)."""

    def __init__(self, n: int) -> None:
        self.ops: list[list[Op]] = [[] for _ in range(n)]
        self.words: list[list[int]] = [[] for _ in range(n)]

    def reg(self, owner: int, words: int) -> int:
        self.words[owner].append(words)
        return len(self.words[owner]) - 1

    def emit(self, owner: int, op: Op) -> None:
        self.ops[owner].append(op)

    def move(self, src: int, r: int, dst_owner: int) -> int:
        """Send register r from src to dst_owner (send, then its receive); the new register."""
        dst = self.reg(dst_owner, self.words[src][r])
        self.emit(src, Op.of("send", peer=dst_owner, src=r))
        self.emit(dst_owner, Op("recv", peer=src, dst=dst))
        return dst

    def received(self, owner: int, r: int) -> Op | None:
        """The lone receive of register r that is owner's last op, taken off its list (its
        reader is to take it over: a receive and the op that reads it, as one), or None."""
        last = self.ops[owner][-1] if self.ops[owner] else None
        if last is None or last.kind != "recv" or last.dst != r:
            return None
        return self.ops[owner].pop()

    def reduce(self, nodes, leaf_reg, kind: str, at: int | None = None) -> int:
        """Run a tree over leaf registers with `kind` ("combine" or "select"): `nodes` in
        post-order, `leaf_reg(node)` a leaf's register at its owner (None for a branch);
        the root's register at the root's owner. With `at`, every branch runs at owner
        `at`, where `leaf_reg` names every leaf's register (the block placement)."""
        reg: dict[int, int] = {}
        for node in nodes:
            r = leaf_reg(node)
            if r is not None:
                reg[id(node)] = r
                continue
            owner = node.owner if at is None else at
            pair = []
            moved = None  # the register of the last child moved to owner
            for child in (node.left, node.right):
                r = reg.pop(id(child))
                here = at is not None or child.owner == owner
                pair.append(r if here else self.move(child.owner, r, owner))
                moved = moved if here else pair[-1]
            a, b = pair
            words = self.words[owner][a] + (self.words[owner][b] if kind == "select" else 0)
            dst = self.reg(owner, words)
            recv = self.received(owner, moved) if kind == "combine" and moved is not None else None
            if recv is None:
                self.emit(owner, Op.of(kind, dst=dst, left=a, right=b))
            else:  # its sums are added as the moved child's words arrive
                side = "recv-add-left" if moved == a else "recv-add-right"
                self.emit(owner, Op.of(side, peer=recv.peer, dst=dst, left=a, right=b))
            reg[id(node)] = dst
        return reg[id(nodes[-1])]

    def exchange(self, moves: list[tuple[int, int, int]]) -> list[int]:
        """Move every (sender, register, receiver) at once: at each owner one `exchange` of
        its sends, then its receives (a step of the global schedule every owner enters
        together; no frame waits on another owner's turn); the new registers, in order."""
        sends: list[list[Op]] = [[] for _ in self.ops]
        recvs: list[list[Op]] = [[] for _ in self.ops]
        out = []
        for src, r, dst_owner in moves:
            out.append(self.reg(dst_owner, self.words[src][r]))
            sends[src].append(Op.of("send", peer=dst_owner, src=r))
            recvs[dst_owner].append(Op("recv", peer=src, dst=out[-1]))
        for o, group in enumerate(zip(sends, recvs)):
            frames = group[0] + group[1]
            if frames:
                self.emit(o, Op.of("exchange", count=len(frames)))
                self.ops[o].extend(frames)
        return out

    def spread(self, root_owner: int, r: int, edges: list[Transfer]) -> dict[int, int]:
        held = {root_owner: r}
        for t in edges:
            held[t.receiver] = self.move(t.sender, held[t.sender], t.receiver)
        return held

    def protocols(self, root: TreeNode, n: int, nodes: list[TreeNode]) -> tuple[OwnerProtocol, ...]:
        """Every owner's protocol: these update ops and register sizes, with the finish and
        checkpoint ops of the tree over owners `root`."""
        finish = _finish_ops(root, n, nodes)
        ckpt = _checkpoint_ops(root, n, nodes)
        return tuple(OwnerProtocol(o, tuple(self.ops[o]), finish[o], tuple(self.words[o]), ckpt[o])
                     for o in range(n))


def by_owner(values: dict[int, int]):
    """`_Schedule.reduce`'s leaf registers of a tree over owners: values[owner] at a leaf."""
    return lambda node: values[node.owner] if isinstance(node, TreeLeaf) else None


class _OwnerLeaves:
    """The contributions of a tree over owners: each leaf owner's `local` value in its
    register 0, combined along the tree (leaves keyed by owner)."""

    def __init__(self, root: TreeNode, nodes: list[TreeNode]) -> None:
        self.nodes = nodes
        self.owners = sorted(set(leaves(root, nodes)))

    def allocate(self, sch: _Schedule, k: int) -> None:
        for o in range(len(sch.ops)):
            sch.reg(o, k + 1)  # register 0: the local (sum, count)

    def local(self, sch: _Schedule, k: int) -> dict:
        for o in self.owners:
            sch.emit(o, Op("local", dst=0))
        return {o: 0 for o in self.owners}

    @staticmethod
    def owner_of(key: int) -> int:
        return key

    def reduce(self, sch: _Schedule, leaf: dict, kind: str, at: int | None = None) -> int:
        return sch.reduce(self.nodes, by_owner(leaf), kind, at)


class _SampleLeaves:
    """The contributions of the sample tree: each block's value (`sample-block`, on the
    binary-counter stack in register 0), combined along the placed tree (leaves keyed by
    block). Without samples, owner 0's `local` value (+0.0, 0) is the total, and the mean
    refuses as for any deployment without samples."""

    def __init__(self, tree: PlacedSampleTree) -> None:
        self.tree = tree

    def allocate(self, sch: _Schedule, k: int) -> None:
        depth = [0] * len(sch.ops)  # levels of each owner's largest block
        for b in self.tree.nodes:
            if b.is_block:
                depth[b.owner] = max(depth[b.owner], stack_depth(b.hi - b.lo))
        if self.tree.root is None:
            depth[0] = 1  # register 0 holds owner 0's empty total
        for o, d in enumerate(depth):
            sch.reg(o, (k + 1) * d)  # register 0: the stack

    def local(self, sch: _Schedule, k: int) -> dict:
        if self.tree.root is None:
            sch.emit(0, Op("local", dst=0))
            return {None: 0}
        leaf = {}
        for block in self.tree.nodes:
            if block.is_block:
                leaf[block] = sch.reg(block.owner, k + 1)
                sch.emit(block.owner, Op.of("sample-block", dst=leaf[block], first=self.tree.first(block),
                                            count=block.hi - block.lo))
        return leaf

    @staticmethod
    def owner_of(key) -> int:
        return 0 if key is None else key.owner

    def reduce(self, sch: _Schedule, leaf: dict, kind: str, at: int | None = None) -> int:
        if self.tree.root is None:
            return leaf[None]
        return sch.reduce(self.tree.nodes, lambda x: leaf[x] if x.is_block else None, kind, at)


def reduce_everywhere(sch: _Schedule, root: TreeNode, contributions, local: dict,
                      layout: OwnerLayout, k: int, placement: CombinePlacement) -> dict[int, int]:
    """The full reduction at every owner, by owner: along the tree, then replicated down it
    (the branch placement), or the block placement's reduce-scatter and gather."""
    if placement is CombinePlacement.BLOCK_OWNERS:
        return block_gather(sch, block_reduce(sch, contributions, local, layout), layout, k)
    total = contributions.reduce(sch, local, "combine")
    return sch.spread(root.owner, total, replicate_edges(root))


def project_replicated(root: TreeNode, n: int, k: int, nodes: list[TreeNode], layout: OwnerLayout | None,
                       contributions, placement: CombinePlacement) -> tuple[OwnerProtocol, ...]:
    """Each owner's protocol for a replicated learner, as a global schedule: the
    contributions, the full reduction at every owner (`reduce_everywhere`), the update."""
    layout = layout or OwnerLayout(k, 0, n)
    sch = _Schedule(n)
    contributions.allocate(sch, k)
    held = reduce_everywhere(sch, root, contributions, contributions.local(sch, k), layout, k, placement)
    for o in range(n):  # the mean of a value received last is taken as its words arrive
        recv = sch.received(o, held[o])
        sch.emit(o, Op.of("update", mean=held[o]) if recv is None else
                 Op.of("recv-update", peer=recv.peer, mean=held[o]))
    return sch.protocols(root, n, nodes)


def project_partitioned(root: TreeNode, n: int, part, k: int,
                        nodes: list[TreeNode] | None = None,
                        layout: OwnerLayout | None = None,
                        targets: tuple[int, ...] | None = None,
                        contributions=None,
                        placement: CombinePlacement = CombinePlacement.BRANCH_OWNERS,
                        ) -> tuple[OwnerProtocol, ...]:
    """Each owner's protocol when parameters, optimizer state or gradients are partitioned.

    One update, as a global schedule projected onto owners:
      1. parameters partitioned: every owner offers its parameters; a selection combine over
         the same tree gathers them, the result is replicated and installed as each owner's
         read replica of this version (`replica-install`);
      2. `local` (reading the replica), then `replica-release` when there is a replica;
      3. gradients partitioned: for each coordinate owner t in order, every owner slices its
         local value to t's coordinates, the same tree reduces the slices in the same order,
         and the result is delivered down the path to t alone (CombineDeliverTo t; with
         `targets`, to targets[t] instead); otherwise the full reduction is replicated to
         every owner (CombineReplicateAll);
      4. `update-owned` on the owner's coordinates and the shared words;
      5. each replicated region the update changed only in part (parameters unless
         partitioned; per-coordinate state unless partitioned) is offered, assembled by
         selection over the tree, replicated and installed.
    Replica comparison and publication (finish ops) are those of the replicated learner.
    Register sizes count the coordinates each owner holds under `layout` (the owner
    layout; without one, that of k coordinates over n owners under `part`).
    `contributions`: what steps 2 and 3 combine (default: each owner's `local` value along
    `root`; the sample tree's blocks along the placed sample tree, `project_sample_tree`).
    Under BLOCK_OWNERS, step 3 is the block placement's: `block_reduce`, each coordinate
    owner's reduction at that owner (moved on to targets[t] where that differs), then, for
    replicated gradients, `block_gather`; the assemblies of steps 1 and 5 run along the tree.
    """
    nodes = postorder(root) if nodes is None else nodes
    owners = sorted(set(leaves(root, nodes)))
    contributions = contributions or _OwnerLeaves(root, nodes)
    if layout is None:
        m = part.words_per_coordinate * k + len(set(part.shared_state))
        layout = OwnerLayout.build(k, m, n, part)
    assert (layout.k, layout.n) == (k, n), "the owner layout is not this learner's"
    w = layout.w
    sch = _Schedule(n)
    contributions.allocate(sch, k)
    all_edges = replicate_edges(root)
    parent = {e.receiver: e.sender for e in all_edges}

    def assemble(mask: int, words_per_coord: int) -> dict[int, int]:
        offered = {}
        for o in owners:
            offered[o] = sch.reg(o, words_per_coord * layout.owned_count(o))
            sch.emit(o, Op.of("offer", dst=offered[o], regions=mask))
        total = sch.reduce(nodes, by_owner(offered), "select")
        return sch.spread(root.owner, total, all_edges)

    if part.parameters.sharded:
        held = assemble(REGION_PARAMETERS, 1)
        for o in owners:
            sch.emit(o, Op.of("replica-install", src=held[o]))
    local = contributions.local(sch, k)
    if part.parameters.sharded:
        for o in owners:
            sch.emit(o, Op("replica-release"))
    mean: dict[int, int] = {}
    if part.gradients.sharded and placement is CombinePlacement.BLOCK_OWNERS:
        for t, r in block_reduce(sch, contributions, local, layout).items():
            to = t if targets is None else targets[t]
            mean[to] = r if to == t else sch.move(t, r, to)
    elif part.gradients.sharded:
        for t in range(n):
            sliced = {}
            for key, r in local.items():
                o = contributions.owner_of(key)
                sliced[key] = sch.reg(o, layout.owned_count(t) + 1)
                sch.emit(o, Op.of("slice", owner=t, dst=sliced[key], src=r))
            total = contributions.reduce(sch, sliced, "combine")
            to = t if targets is None else targets[t]
            mean[to] = sch.spread(root.owner, total, delivery_path(parent, to))[to]
    else:
        mean = reduce_everywhere(sch, root, contributions, local, layout, k, placement)
    for o in owners:
        sch.emit(o, Op.of("update-owned", mean=mean[o]))
    mask = (0 if part.parameters.sharded else REGION_PARAMETERS) | (
        0 if part.optimizer_state.sharded or w == 0 else REGION_STATE)
    if mask:
        per = (1 if mask & REGION_PARAMETERS else 0) + (w if mask & REGION_STATE else 0)
        held = assemble(mask, per)
        for o in owners:
            sch.emit(o, Op.of("install", src=held[o], regions=mask))
    return sch.protocols(root, n, nodes)


def project_sample_tree(root: TreeNode, n: int, tree: PlacedSampleTree, part, k: int,
                        nodes: list[TreeNode], layout: OwnerLayout | None,
                        placement: CombinePlacement = CombinePlacement.BRANCH_OWNERS,
                        ) -> tuple[OwnerProtocol, ...]:
    """Each owner's protocol under the sample tree; `root` is its owner tree
    (`tree.sample_owner_tree`). One update, as a global schedule projected onto owners: every
    owner evaluates its blocks (`sample-block`, in sample order); the branches above them
    run in post-order, a right child moving to its parent's owner when the two differ
    (send, then its receive); the root's owner spreads the total down the owner tree; every
    owner updates. With partitioning, `project_partitioned` over the same contributions
    (each gradient slice is reduced along the same sample tree). Under BLOCK_OWNERS, every
    block's value is sliced and the whole sample tree for coordinate block b runs at b's
    owner (`block_reduce`)."""
    contributions = _SampleLeaves(tree)
    if part is not None and part.any:
        return project_partitioned(root, n, part, k, nodes, layout, contributions=contributions,
                                   placement=placement)
    return project_replicated(root, n, k, nodes, layout, contributions, placement)


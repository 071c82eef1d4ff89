"""`plan(deployment)`: the data the oracle and the code generators interpret.

Checks the combine tree's coverage, the contract's profile and, under partitioning, the
update's separability and the state's shard maps (a sample tree is placed on the owners'
shares instead: it covers every sample by construction); then derives the phases, every owner's
protocol (from `protocol.project`, the single source of op lists), bytes per owner, the
numerical contract and the protocol identity. Who holds which coordinate and which words
is the owner layout (`layout.OwnerLayout`), built once; the shard maps, protocols and
bytes all read it. Every problem is collected before failing.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

from alphac.diagnostics import DiagnosticBag, Span
from alphac.ir import nodes as ir
from alphac.plan import protocol as proto
from alphac.plan import storage
from alphac.plan.contract import NumericalContract, check_profile, derive
from alphac.plan.delivery import check_deliveries
from alphac.plan.identity import protocol_identity
from alphac.plan.layout import OwnerLayout
from alphac.plan.memory import OwnerBytes, bytes_per_owner
from alphac.plan.mutants import Mutation, check_applies, mutant_deployment, mutant_tree, mutation
from alphac.plan.phases import (REPLICATE_ALL, Delivery, Transfer, reduce_phase, replicate_phase,
                                sample_reduce_phase)
from alphac.plan.registers import RegisterSlots, register_slots
from alphac.plan.sampletree import PlacedSampleTree, place
from alphac.plan.shards import ShardMap, learner_shard_maps, check_shard_map
from alphac.plan.separable import check_claim, check_dependence, check_unclaimed_writes
from alphac.plan.tree import TreeShape, check_topology, sample_owner_tree, shape_of


@dataclass(frozen=True)
class OwnerPlan:
    owner: int
    role: str
    target: str
    protocol: proto.OwnerProtocol
    bytes: OwnerBytes
    registers: RegisterSlots                 # where each register of the protocol lives

    @property
    def persistent_bytes(self) -> int:
        return self.bytes.persistent

    @property
    def peak_bytes(self) -> int:
        return self.bytes.peak


@dataclass(frozen=True, eq=False)
class Plan:
    """Plans compare by identity: field-wise equality would walk (and recurse down) the
    tree; two plans of the same protocol have the same `protocol_id`."""

    deployment: ir.Deployment
    tree: ir.TreeNode
    shape: TreeShape
    delivery: Delivery                       # of the full reduction (replicated gradients)
    deliveries: tuple[Delivery, ...]         # one per reduction, in the order they run
    reduce: tuple[Transfer, ...]
    replicate: tuple[Transfer, ...]
    owners: tuple[OwnerPlan, ...]
    contract: NumericalContract
    shard_maps: tuple[ShardMap, ...]
    protocol_id: int
    layout: OwnerLayout                      # who holds which coordinate and which words
    mutation: Mutation                       # the executed mutant built (name None: none)
    # under DataParallelSampleTree: the placed sample tree (the combine); `tree` is then
    # its owner tree (delivery of the total, publication and checkpoint reports)
    sample_tree: PlacedSampleTree | None = None

    @property
    def mutant(self) -> str | None:
        return self.mutation.name

    @property
    def protocol_hex(self) -> str:
        return f"{self.protocol_id:016x}"

    @property
    def n(self) -> int:
        return self.deployment.owners

    def owner(self, o: int) -> OwnerPlan:
        return self.owners[o]

    @property
    def roles(self) -> dict[str, tuple[OwnerPlan, ...]]:
        """Each role's owner plans, in owner order: what one role executable must carry."""
        out: dict[str, list[OwnerPlan]] = {}
        for o in self.owners:
            out.setdefault(o.role, []).append(o)
        return {name: tuple(plans) for name, plans in out.items()}


def _span(node, fallback: Span) -> Span:
    span = getattr(node, "span", None)
    return span if span is not None and span.line > 0 else fallback


def _resumed(resume: ir.Resume, fallback: Span, bag: DiagnosticBag) -> str | None:
    """The sha256 of the resumed checkpoint's manifest.txt (which the protocol identity
    covers), or None after reporting why it cannot be read: the manifest's own located
    diagnostic, or one at the resume declaration for a missing or partial checkpoint. How
    the checkpoint's learner and contract compare with the plan's is the driver's check
    (`alphac.image.resume`), once the plan is made."""
    from alphac.checkpoint import CheckpointError, read_manifest

    span = _span(resume, fallback)
    try:
        return read_manifest(resume.path).sha256
    except CheckpointError as err:
        note = (f"the deployment resumes from the checkpoint {resume.path}" if err.line == 0 else
                f"the resume declaration at {span} names this checkpoint")
        bag.add(err.diagnostic(span, (note,)))
        return None


def check_independent_partitioning(dep: ir.Deployment, bag: DiagnosticBag) -> None:
    """An independent-state learner's owners hold exactly their own regions: its parameters
    partitioned in blocks of r (block o, owner o's region, at owner o), nothing else. Its
    families fix this; IR built otherwise is refused."""
    L = dep.learner
    if not L.independent:
        return
    own = ir.Partitioning(parameters=ir.Shard(), block_words=L.region)
    if dep.partitioning != own:
        bag.error("independent-state-partitioning", f"an independent-state learner holds each "
                  f"owner's region as its own block of r = {L.region} parameters; this deployment "
                  f"declares {dep.partitioning}", _span(dep.partitioning, dep.span),
                  ["no owner may hold, or update, another owner's region"])


def plan(dep: ir.Deployment, mutant: str | None = None) -> Plan:
    """Plan one deployment; raises CompileError carrying every diagnostic. With `mutant`
    (one of alphac.ir.mutants.NAMES), the plan of that executed mutant instead of the
    declared program (alphac.plan.mutants; MutantError when it does not apply)."""
    # A 10,000-owner plan allocates a few hundred thousand small acyclic objects; the cycle
    # collector's repeated scans over them cost about a third of the time and free nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _plan(dep, mutant)
    finally:
        if enabled:
            gc.enable()


def check_consistency(dep: ir.Deployment, bag: DiagnosticBag) -> None:
    """The synchronous learner is built, fixed staleness for data-parallel learners on CPU
    targets, local steps for replicated learners on a star or a
    hierarchy, and bounded staleness for data-parallel learners on a star or a hierarchy of
    CPU owners; anything else is refused, located at the declaration,
    rather than run as another learner."""
    c = dep.consistency
    span = c.span if c.span.line > 0 else dep.span
    L = dep.learner

    def unless(declared: str, reasons, built: str, notes=()) -> None:
        why = [reason for reason, present in reasons if present]
        if why:
            bag.error("consistency-not-built", f"deployment {dep.name} declares {declared} with "
                      f"{' and '.join(why)}; {built}", span, list(notes))

    if c.kind is ir.ConsistencyKind.FIXED_STALENESS:
        unless(f"fixed staleness {c.value}", (
            ("an independent-state learner", L.independent),
            ("an SM86 owner", "sm86" in dep.placement)),
            "fixed staleness is built for data-parallel learners on CPU targets")
    elif c.kind is ir.ConsistencyKind.LOCAL_STEPS:
        unless(f"{c.value} local steps", (
            ("an independent-state learner", L.independent),
            ("partitioning", dep.partitioning.any),
            ("the sample tree", isinstance(dep.topology, ir.SampleTree)),
            ("an SM86 owner", "sm86" in dep.placement)),
            "local steps are built for replicated learners on a star or a hierarchy of CPU owners")
    elif c.kind is ir.ConsistencyKind.BOUNDED_STALENESS:
        unless(f"staleness bounded by {c.value}", (
            ("an independent-state learner", L.independent),
            ("the sample tree", isinstance(dep.topology, ir.SampleTree)),
            ("an SM86 owner", "sm86" in dep.placement)),
            "bounded staleness is built for data-parallel learners on a star or a hierarchy of CPU owners",
            ["each contribution reads the newest version its owner has, recorded; ConsistencyFixedStaleness "
             "{ staleness = S } reads version max(u - S, 0) whatever the timing"])


def _plan(dep: ir.Deployment, mutant: str | None) -> Plan:
    dep = mutant_deployment(dep, mutant)
    bag = DiagnosticBag()
    n = dep.owners
    dspan = dep.span
    shape = None
    placed = None
    if n >= 1 and isinstance(dep.topology, ir.SampleTree):
        shares = dep.learner.samples.shares
        placed = place(shares[o] if o < len(shares) else 0 for o in range(n))
        shape = shape_of(sample_owner_tree(placed))
    elif n >= 1:
        shape = check_topology(n, dep.topology, _span(dep.topology, dspan), bag)
    else:
        # the checker refuses such a spec; IR built by hand still gets a located refusal
        bag.error("combine-leaf-missing", "a deployment without owners has nothing to combine", dspan,
                  [f"owners: {n}"])
    check_profile(dep.contract, dspan, bag, dep.learner)
    storage.check(dep, dspan, bag)
    check_independent_partitioning(dep, bag)
    check_consistency(dep, bag)
    resumed = _resumed(dep.resume, dspan, bag) if dep.resume is not None else None
    # the single answer to who holds what; everything below reads it
    layout = OwnerLayout.of(dep)
    maps: tuple[ShardMap, ...] = ()
    part = dep.partitioning
    pspan = _span(part, dspan)
    # an overclaimed layout has no shard maps to speak of; every other problem is independent
    claimed = not part.any or check_claim(dep.learner, part, pspan, bag)
    # foreign-accumulator's update reads the next coordinate's accumulator by design
    if part.any and claimed and mutant != "foreign-accumulator":
        check_dependence(dep.learner, part, pspan, bag)
        if not part.optimizer_state.sharded:
            # a partitioned state refuses unclaimed words as missing shard coverage
            check_unclaimed_writes(dep.learner, part, pspan, bag)
    if claimed and n >= 1:
        maps = learner_shard_maps(dep, layout=layout)
        for shard_map in maps:
            bag.extend(check_shard_map(shard_map, pspan))
    bag.raise_if_any()
    assert shape is not None
    check_applies(dep, shape.root, mutant)
    mutated = mutation(dep, shape.leaf_order, layout, mutant)
    root = mutant_tree(shape.root, mutant)
    if root is not shape.root:  # swap-branch: the owners combine along another tree
        shape = shape_of(root)
    if dep.learner.independent:
        deliveries = ()  # nothing is combined, so nothing is delivered
    elif part.gradients.sharded:
        deliveries = tuple(Delivery(t) for t in mutated.targets)
    else:
        deliveries = (REPLICATE_ALL,)
    nodes = list(shape.nodes)
    check_deliveries(root, nodes, deliveries, dspan, bag)
    bag.raise_if_any()
    if dep.learner.independent:
        protocols = proto.project_independent(root, n, nodes)
    else:
        protocols = proto.project(root, n, part if part.any else None, layout.k, nodes,
                                  layout, mutated.targets, placed, dep.combine_placement)
    slots = [register_slots(p, layout.k) for p in protocols]
    sizes = bytes_per_owner(dep, layout, slots, proto.LEAF_TAG_WORDS if part.any else 0)
    role_of = {o: r.name for r in reversed(dep.roles) for o in r.owners}
    owners = []
    for o in range(n):
        target = dep.placement[o] if o < len(dep.placement) else ""
        owners.append(OwnerPlan(o, role_of.get(o, ""), target, protocols[o], sizes[o], slots[o]))
    return Plan(
        deployment=dep,
        tree=root,
        shape=shape,
        delivery=REPLICATE_ALL,
        deliveries=deliveries,
        reduce=() if dep.learner.independent else (
            reduce_phase(root, nodes) if placed is None else sample_reduce_phase(placed)),
        replicate=() if dep.learner.independent else replicate_phase(
            root, REPLICATE_ALL, nodes, None if placed is None else f"s[0,{placed.samples})"),
        owners=tuple(owners),
        contract=derive(dep, nodes),
        shard_maps=maps,
        protocol_id=protocol_identity(dep, nodes, resumed, mutant),
        layout=layout,
        mutation=mutated,
        sample_tree=placed,
    )


def plan_spec(path: str) -> Plan:
    """Load SPEC's deployment with the front end, then plan it."""
    from alphac.check import load_deployment

    return plan(load_deployment(path))

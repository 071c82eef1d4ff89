"""The named deployment families of the learner shapes (docs/learners.md), as deployments,
and the lowering of the independent-state learner.

A value of `Runtime.NativeDataParallelOwned.NativeDataParallelOwned` (a star) or
`Runtime.NativeDataParallelOwnedTree.NativeDataParallelOwnedTree` (a hierarchy) is the
Deployment of its learner with its topology and partitioning fixed by the family; so is a
value of `Runtime.NativeIndependentState.NativeIndependentState` (a star) or
`Runtime.NativeIndependentTree.NativeIndependentTree` (a hierarchy), whose learner is a
`LocalCorrelation.System.LocalCorrelationSystem` and whose partitioning gives owner o the
parameters [o*r, o*r + r): its region. A value of `PartitionedRegression.NativeHost.NativeHost`
or `PartitionedRegression.Build.NativeHost.BuildNativeHost` is the data-parallel learner
of one parameter (k = 1, samples (x, y)) on a star of a coordinator (owner 0) and a worker
(owner 1); one of `PartitionedRegression.CoordinateHost.CoordinateHost` or
`PartitionedRegression.Build.CoordinateDevice/CoordinateMemory` is the learner of
`PartitionedRegression.Coordinates` (k = 2 with one accumulator per coordinate) on the
same two owners, everything partitioned, so that owner i holds coordinate i. Each is placed
as written or, for the build families, on SM86. Each is rewritten field by
field into a `Learning.Deployment.Deployment` object, which the one deployment lowering
(`Lowering.deployment`) then checks and lowers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from alphac.check.programs import ProgramLowering
from alphac.check.slots import Layout, Region
from alphac.check.values import MAX_LEARNER_WORDS, VBool, VList, VNat, VObj, VProgram, VString, VWords, whole
from alphac.ir import nodes as ir

DEPLOYMENT = "Learning.Deployment.Deployment"
TOPOLOGY = "Runtime.NativeDataParallel.DataParallelTopology"
PARTITIONING = "Runtime.NativeDataParallel.DataParallelPartitioning"
LEARNER = "Learning.DataParallel.DataParallelSystem"
ROLE = "Learning.Deployment.DeploymentRole"
TARGET = "Learning.Deployment.DeploymentTarget"
COMBINE_PLACEMENT = "Learning.Deployment.CombinePlacement"
CONSISTENCY = "Learning.Deployment.Consistency"
# the Deployment fields every named family carries under its own prefix
COMMON = ("Learner", "Owners", "Roles", "Placement", "Updates", "Contract", "Checkpoint")


@dataclass(frozen=True)
class Named:
    """One named deployment family: its fields' prefix and the topology it runs on."""

    prefix: str
    topology: str  # a DataParallelTopology constructor
    independent: bool = False


OWNED = {
    "Runtime.NativeDataParallelOwned.NativeDataParallelOwned": Named("owned", "DataParallelStar"),
    "Runtime.NativeDataParallelOwnedTree.NativeDataParallelOwnedTree":
        Named("ownedTree", "DataParallelHierarchy"),
}
INDEPENDENT = {
    "Runtime.NativeIndependentState.NativeIndependentState":
        Named("independent", "DataParallelStar", True),
    "Runtime.NativeIndependentTree.NativeIndependentTree":
        Named("independentTree", "DataParallelHierarchy", True),
}
NAMED_FAMILIES = {**OWNED, **INDEPENDENT}
LOCAL_CORRELATION = "LocalCorrelation.System.LocalCorrelationSystem"
PAIR = 2  # an input pair's words
SMALL_WORDS = 4096  # initial words kept as a tuple, as lower._small keeps them


def as_deployment(obj: VObj) -> VObj:
    """The Deployment object a named family's value stands for (cached on the value)."""
    if "deployment" not in obj.cache:
        obj.cache["deployment"] = (_two_owners(obj, TWO_OWNERS[obj.key]) if obj.key in TWO_OWNERS
                                   else _named(obj, NAMED_FAMILIES[obj.key]))
    return obj.cache["deployment"]


def _field(obj: VObj, named: Named, name: str):
    return obj.fields.get(named.prefix + name)


def _region_words(learner) -> VNat | None:
    """An independent-state learner's r, as written in its rule, or None."""
    rule = learner.fields.get("localCorrelationRule") if isinstance(learner, VObj) else None
    words = rule.fields.get("scaledProductRegionWords") if isinstance(rule, VObj) else None
    return words if isinstance(words, VNat) else None


def _partitioning(obj: VObj, named: Named) -> dict:
    """The partitioning fields the family fixes: everything owned (the partitioned
    data-parallel learner), or each owner's region as its block of parameters."""
    span = obj.span
    if named.independent:
        off, on = VBool(False, span), VBool(True, span)
        r = _region_words(_field(obj, named, "Learner"))
        return {"partitionOptimizerState": off, "partitionParameters": on,
                "partitionGradients": off, "partitionWordsPerCoordinate": VNat(0, span),
                "partitionSharedState": VList((), span),
                # an r above the learner cap is refused once, at r, as learner-too-large
                "partitionBlockWords": r if r is None or r.n <= MAX_LEARNER_WORDS else None}
    return _all_owned(span, _field(obj, named, "WordsPerCoordinate"),
                      _field(obj, named, "SharedState"), _field(obj, named, "BlockWords"))


def _all_owned(span, words, shared, blocks) -> dict:
    """Optimizer state, parameters and gradients partitioned: w words per coordinate, the
    shared state offsets, blocks of B coordinates."""
    on = VBool(True, span)
    return {"partitionOptimizerState": on, "partitionParameters": on, "partitionGradients": on,
            "partitionWordsPerCoordinate": words, "partitionSharedState": shared,
            "partitionBlockWords": blocks}


def _deployment(obj: VObj, fields: dict, topology: VObj, partitioning: VObj) -> VObj:
    """The Deployment object of a named family's value: `fields` (learner, owners, roles,
    placement, updates, contract, checkpoint), the topology and partitioning it fixes, and
    each branch of the combine at the owner the tree names, every contribution reading the
    version it updates (synchronous)."""
    placement = VObj(COMBINE_PLACEMENT, "CombineAtBranchOwners", {}, obj.span)
    consistency = VObj(CONSISTENCY, "ConsistencySynchronous", {}, obj.span)
    return VObj(DEPLOYMENT, "DeploymentOf", {
        **fields, "deploymentTopology": topology, "deploymentPartitioning": partitioning,
        "deploymentCombinePlacement": placement, "deploymentConsistency": consistency},
        obj.span, name=obj.name, complete=obj.complete)


def _named(obj: VObj, named: Named) -> VObj:
    span = obj.span
    topology = {}
    if named.topology == "DataParallelHierarchy":
        topology = {"dataParallelFanout": _field(obj, named, "Fanout")}
    return _deployment(obj, {f"deployment{name}": _field(obj, named, name) for name in COMMON},
                       VObj(TOPOLOGY, named.topology, topology, span, complete=obj.complete),
                       VObj(PARTITIONING, "DataParallelPartitioned", _partitioning(obj, named),
                            span, complete=obj.complete))


# ----------------------------------------------------------------------------- two-owner learners

def _learner(obj: VObj, k: int, s: int, fields: dict, slots: tuple[int, int]) -> VObj:
    """A DataParallelSystem object of k parameters and samples of s words from `fields`
    (its Contribution, Update, Initial, InitialState, Rate and Samples)."""
    return VObj(LEARNER, "DataParallelSystemOf", {
        "dataParallelParameterCount": VNat(k, obj.span), "dataParallelSampleWidth": VNat(s, obj.span),
        **{f"dataParallel{name}": v for name, v in fields.items()},
    }, obj.span, args=slots, type_span=obj.span, name=obj.name, complete=obj.complete)


def _regression_learner(obj: VObj, f) -> VObj:
    """The scalar learner: w, samples (x, y), the coordinator's and then the worker's."""
    span = obj.span
    initial, samples = f("Initial"), [f("CoordinatorSamples"), f("WorkerSamples")]
    return _learner(obj, 1, PAIR, {
        "Contribution": f("Gradient"), "Update": f("Step"),
        "Initial": VWords(np.array([initial.w], dtype=np.uint64), initial.span) if initial else None,
        "InitialState": VWords(np.zeros(0, dtype=np.uint64), span), "Rate": f("Rate"),
        "Samples": VList(tuple(samples), span) if None not in samples else None,
    }, (4, 3))


def _coordinates_learner(obj: VObj, f) -> VObj | None:
    """The coordinate-owned learner: w0 w1, their accumulators, samples (x0, x1, y)."""
    c = f("Learner")
    if not isinstance(c, VObj):
        return None
    g = c.fields.get
    return _learner(c, 2, 3, {
        "Contribution": g("coordinatesGradient"), "Update": g("coordinatesUpdate"),
        "Initial": g("coordinatesInitial"), "InitialState": g("coordinatesAccumulators"),
        "Rate": g("coordinatesRate"), "Samples": g("coordinatesSamples"),
    }, (7, 7))


def _replicated(span) -> dict:
    return {"partitionBlockWords": VNat(1, span)}


def _coordinate_owned(span) -> dict:
    """Owner i holds coordinate i, its accumulator (one state word) and its gradient sum."""
    return _all_owned(span, VNat(1, span), VList((), span), VNat(1, span))


@dataclass(frozen=True)
class TwoOwners:
    """A learner of a coordinator (owner 0) and a worker (owner 1) on a star."""

    prefix: str
    learner: object        # (obj, field getter) -> the DataParallelSystem object
    partitioning: object   # span -> the DataParallelPartitioned / Replicated fields
    placement: str | None  # every owner's target, or None: the family's Placement field


TWO_OWNERS = {
    "PartitionedRegression.NativeHost.NativeHost":
        TwoOwners("nativeHost", _regression_learner, _replicated, None),
    "PartitionedRegression.Build.NativeHost.BuildNativeHost":
        TwoOwners("buildNativeHost", _regression_learner, _replicated, "TargetSM86"),
    "PartitionedRegression.CoordinateHost.CoordinateHost":
        TwoOwners("coordinateHost", _coordinates_learner, _coordinate_owned, None),
    "PartitionedRegression.Build.CoordinateDevice.CoordinateDevice":
        TwoOwners("coordinateDevice", _coordinates_learner, _coordinate_owned, "TargetSM86"),
    "PartitionedRegression.Build.CoordinateMemory.CoordinateMemory":
        TwoOwners("coordinateMemory", _coordinates_learner, _coordinate_owned, "TargetSM86"),
}


NAMED = frozenset(NAMED_FAMILIES) | frozenset(TWO_OWNERS)


def _two_owners(obj: VObj, shape: TwoOwners) -> VObj:
    """The Deployment of a two-owner family's learner on a star of its two owners."""
    span = obj.span
    f = (lambda name: obj.fields.get(shape.prefix + name))
    roles = VList(tuple(VObj(ROLE, "RoleOf", {"roleName": VString(name, span),
                                              "roleOwners": VList((VNat(o, span),), span)}, span)
                        for o, name in enumerate(("coordinator", "worker"))), span)
    where = f("Placement") if shape.placement is None else VList(
        (VObj(TARGET, shape.placement, {}, span),) * 2, span)
    partitioning = shape.partitioning(span)
    ctor = "DataParallelPartitioned" if len(partitioning) > 1 else "DataParallelReplicated"
    return _deployment(obj, {
        "deploymentLearner": shape.learner(obj, f), "deploymentOwners": VNat(2, span),
        "deploymentRoles": roles, "deploymentPlacement": where,
        "deploymentUpdates": f("Updates"), "deploymentContract": f("Contract"),
        "deploymentCheckpoint": f("Checkpoint"),
    }, VObj(TOPOLOGY, "DataParallelStar", {}, span), VObj(PARTITIONING, ctor, partitioning, span))


# ----------------------------------------------------------------------------- coordinate ownership

def lower_named(low, obj: VObj, source_file: str) -> ir.Deployment | None:
    """The IR of a named family's deployment, or None after reporting; a coordinate-owned
    learner's update must also keep every coordinate with its owner (`coordinate-not-held`)."""
    shape = TWO_OWNERS.get(obj.key)
    coordinates = shape is not None and shape.learner is _coordinates_learner
    if coordinates and not _two_coordinates(low, obj.fields.get(shape.prefix + "Learner")):
        return None
    dep = low.deployment(as_deployment(obj), source_file)
    if dep is None or not coordinates:
        return dep
    return dep if _coordinates_held(low, dep.learner.update, dep.learner.k) else None


def _two_coordinates(low, learner) -> bool:
    """A coordinate-owned learner has two coordinates and one accumulator for each."""
    ok = True
    for name in ("coordinatesInitial", "coordinatesAccumulators"):
        v = learner.fields.get(name) if isinstance(learner, VObj) else None
        if isinstance(v, VWords) and len(v.data) != 2:
            words = f"{len(v.data)} word{'' if len(v.data) == 1 else 's'}"
            low.bag.error("length-mismatch", f"{name} has {words}; the coordinate-owned "
                          "learner has two coordinates, each with its accumulator", v.span)
            ok = False
    return ok


class _ByCoordinate:
    """A read through a temporary, standing for the coordinate its `let` read."""

    def __init__(self, coordinate) -> None:
        self.coordinate = coordinate


def _coordinate(index, k: int):
    """Which coordinate an update slot (parameters, accumulators, means: k each) belongs
    to: a number, or (loop variable, offset); None for the rate, a word of no coordinate."""
    if isinstance(index, _ByCoordinate):
        return index.coordinate
    if index.terms:  # an element of a 2-D view: words of several coordinates
        return (str(index), "several")
    if index.base >= 3 * k:
        return None
    return index.base % k if index.var is None else (index.var, index.base % k)


def _coordinates_held(low, update: ir.Program, k: int) -> bool:
    """Every statement of a coordinate-owned update writes one coordinate's parameter or
    accumulator from that coordinate's words (and the rate) alone: the owner holding the
    words it reads is the owner of the coordinate it writes."""
    ok = True
    lets: dict[str, set] = {}
    for stmt in ir.statements(update.body):
        reads = {_coordinate(i, k) for i in _slot_reads(stmt.value, lets)} - {None}
        if isinstance(stmt, (ir.Let, ir.VectorLet)):
            lets[stmt.name] = reads
            continue
        target = _coordinate(stmt.target, k)
        foreign = sorted(map(str, reads - {target}))
        if foreign:
            low.bag.error("coordinate-not-held", f"`{stmt.label or stmt.target}` writes coordinate "
                          f"{_shown(target)} from the words of coordinate {foreign[0]}, which another "
                          "owner holds", stmt.span,
                          ["owner i holds coordinate i, its parameter, its accumulator and its mean; "
                           "a coordinate's update reads only its own words and the rate"])
            ok = False
    return ok


def _shown(coordinate) -> str:
    return str(coordinate) if not isinstance(coordinate, tuple) else f"{coordinate[0]} + {coordinate[1]}"


def _slot_reads(expr, lets: dict) -> list:
    """The slot indices an expression reads (through `let` temporaries too)."""
    out = []
    for e in ir.subexpressions(expr):
        if isinstance(e, ir.SlotRef):
            out.append(e.index)
        elif isinstance(e, (ir.Local, ir.VectorLocal)):
            out.extend(_ByCoordinate(c) for c in lets.get(e.name, ()))
    return out


# ----------------------------------------------------------------------------- independent state

def independent_learner(low, obj: VObj) -> ir.Learner | None:
    """The IR of a `LocalCorrelationSystem` (`low`: the Lowering, for its bag, samples and
    programs), or None after reporting; checks every well-formed part at once."""
    if "learner" in obj.cache:
        return obj.cache["learner"]
    obj.cache["learner"] = None
    state, rule = obj.fields.get("localCorrelationState"), obj.fields.get("localCorrelationRule")
    if not (isinstance(state, VObj) and isinstance(rule, VObj)):
        return None
    before = low.bag.count
    r = _region_words(obj)
    if r is not None and r.n < 1:
        low.bag.error("independent-state-region-length", "scaledProductRegionWords is 0; an "
                      "owner's region holds at least one word", r.span)
    initial = state.fields.get("independentStateInitial")
    if r is not None and _too_large(low, r, initial):
        return None
    r = r.n if r is not None and r.n >= 1 else None
    regions = _regions(low, initial, r)
    inputs = state.fields.get("independentStateInputs")
    samples = low._samples(inputs, PAIR) if inputs is not None else None
    if regions is not None and samples is not None and len(regions) != len(samples.shares):
        low.bag.error("independent-state-owners", f"the regions are listed for {len(regions)} "
                      f"owners and the inputs for {len(samples.shares)}", inputs.span,
                      ["every owner holds one region and its own inputs (possibly none)"])
    program = _rule(low, rule.fields.get("scaledProductRule"), r)
    scale = rule.fields.get("scaledProductScale")
    if (low.bag.count != before or not (obj.complete and state.complete and rule.complete)
            or None in (regions, samples, program, r)):
        return None
    words = np.concatenate(regions) if regions else np.zeros(0, dtype=np.uint64)
    learner = ir.Learner(obj.name or "learner", len(regions) * r, PAIR, 0, program, ir.Program(0, ()),
                         ir.Words(tuple(int(w) for w in words) if len(words) <= SMALL_WORDS else words), ir.Words(()),
                         scale.w, samples, obj.span, shape=ir.INDEPENDENT, region=r)
    obj.cache["learner"] = learner
    return learner


def _too_large(low, r: VNat, initial) -> bool:
    """Whether the regions' k = n r words (n: the regions listed, measured without looking at
    them) exceed the learner cap, as a data-parallel learner's k + m would; reported at r."""
    n = len(initial.items) if isinstance(initial, VList) else 1
    if n * r.n <= MAX_LEARNER_WORDS:
        return False
    shown = f"{n} regions of r = {r.n} words, k = {n * r.n}" if isinstance(initial, VList) else f"r = {r.n} words"
    low.bag.error("learner-too-large", f"{shown}; a learner holds at most {MAX_LEARNER_WORDS} (2**22) words, "
                  "so that the oracle evaluates it in about 1.6 GiB", r.span)
    return True


def _regions(low, v, r: int | None) -> list | None:
    """Every owner's initial region (r words each), or None after reporting."""
    if not (isinstance(v, VList) and whole(v)):
        return None
    out, ok = [], True
    for owner, region in enumerate(v.items):
        if r is not None and isinstance(region, VWords) and len(region.data) != r:
            low.bag.error("independent-state-region-length", f"owner {owner}'s region has "
                          f"{len(region.data)} initial words; the rule's region holds r = {r}",
                          region.span)
            ok = False
        out.append(region.data if isinstance(region, VWords) else None)
    return out if ok and all(region is not None for region in out) else None


def _rule(low, prog, r: int | None) -> ir.Program | None:
    """The rule over region [0, r), pair [r, r+2), scale at r+2; a rule typed for more slots
    reaches another owner's region there, and every access to it is refused."""
    if not isinstance(prog, VProgram) or r is None:
        return None
    slots = r + PAIR + 1
    declared = prog.slots if isinstance(prog.slots, int) else slots
    if declared < slots:
        low.bag.error("slot-count-mismatch", f"the rule is typed for {declared} slots; a rule over "
                      f"a region of r = {r} words has r + 3 = {slots} (region, pair, scale)",
                      prog.span)
        return None
    regions = (Region("region", 0, r), Region("pair", r, r + PAIR), Region("scale", r + PAIR, slots))
    if declared > slots:
        regions += (Region("another owner's region", slots, declared,
                           refused="independent-state-foreign-region"),)
    program = ProgramLowering(low.ev, prog, Layout("rule", declared, regions, 0, r)).lower()
    return None if program is None else replace(program, slots=slots)

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
(owner 1), placed as written or, for the build family, on SM86. Each is rewritten field by
field into a `Learning.Deployment.Deployment` object, which the one deployment lowering
(`Lowering.deployment`) then checks and lowers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from alphac.check.programs import Layout, ProgramLowering, Region
from alphac.check.values import VBool, VList, VNat, VObj, VProgram, VString, VWords, whole
from alphac.ir import nodes as ir

DEPLOYMENT = "Learning.Deployment.Deployment"
TOPOLOGY = "Runtime.NativeDataParallel.DataParallelTopology"
PARTITIONING = "Runtime.NativeDataParallel.DataParallelPartitioning"
LEARNER = "Learning.DataParallel.DataParallelSystem"
ROLE = "Learning.Deployment.DeploymentRole"
TARGET = "Learning.Deployment.DeploymentTarget"
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
# the samples-partitioned scalar learner: its fields' prefix and its placement (None: as written)
REGRESSION = {
    "PartitionedRegression.NativeHost.NativeHost": ("nativeHost", None),
    "PartitionedRegression.Build.NativeHost.BuildNativeHost": ("buildNativeHost", "TargetSM86"),
}
NAMED_FAMILIES = {**OWNED, **INDEPENDENT}
NAMED = frozenset(NAMED_FAMILIES) | frozenset(REGRESSION)
LOCAL_CORRELATION = "LocalCorrelation.System.LocalCorrelationSystem"
PAIR = 2  # an input pair's words


def as_deployment(obj: VObj) -> VObj:
    """The Deployment object a named family's value stands for (cached on the value)."""
    if "deployment" not in obj.cache:
        obj.cache["deployment"] = (_regression(obj, *REGRESSION[obj.key]) if obj.key in REGRESSION
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
        return {"partitionOptimizerState": off, "partitionParameters": on,
                "partitionGradients": off, "partitionWordsPerCoordinate": VNat(0, span),
                "partitionSharedState": VList((), span),
                "partitionBlockWords": _region_words(_field(obj, named, "Learner"))}
    flag = VBool(True, span)
    return {
        "partitionOptimizerState": flag, "partitionParameters": flag, "partitionGradients": flag,
        "partitionWordsPerCoordinate": _field(obj, named, "WordsPerCoordinate"),
        "partitionSharedState": _field(obj, named, "SharedState"),
        "partitionBlockWords": _field(obj, named, "BlockWords"),
    }


def _named(obj: VObj, named: Named) -> VObj:
    fields = {f"deployment{name}": _field(obj, named, name) for name in COMMON}
    span = obj.span
    topology = {}
    if named.topology == "DataParallelHierarchy":
        topology = {"dataParallelFanout": _field(obj, named, "Fanout")}
    fields["deploymentTopology"] = VObj(TOPOLOGY, named.topology, topology, span,
                                        complete=obj.complete)
    fields["deploymentPartitioning"] = VObj(PARTITIONING, "DataParallelPartitioned",
                                            _partitioning(obj, named), span, complete=obj.complete)
    fields["deploymentCombinePlacement"] = VObj(
        "Learning.Deployment.CombinePlacement", "CombineAtBranchOwners", {}, span)
    return VObj(DEPLOYMENT, "DeploymentOf", fields, span, name=obj.name, complete=obj.complete)



# ----------------------------------------------------------------------------- scalar regression

def _regression(obj: VObj, prefix: str, placement: str | None) -> VObj:
    """The Deployment of the samples-partitioned scalar learner: k = 1, s = 2, m = 0, the
    coordinator's samples then the worker's, replicated on a star of the two owners."""
    span, f = obj.span, (lambda name: obj.fields.get(prefix + name))
    ok = obj.complete

    def words(v) -> VWords | None:
        return VWords(np.array([v.w], dtype=np.uint64), v.span) if v is not None else None

    samples = [f("CoordinatorSamples"), f("WorkerSamples")]
    learner = VObj(LEARNER, "DataParallelSystemOf", {
        "dataParallelParameterCount": VNat(1, span), "dataParallelSampleWidth": VNat(PAIR, span),
        "dataParallelContribution": f("Gradient"), "dataParallelUpdate": f("Step"),
        "dataParallelInitial": words(f("Initial")),
        "dataParallelInitialState": VWords(np.zeros(0, dtype=np.uint64), span),
        "dataParallelRate": f("Rate"),
        "dataParallelSamples": VList(tuple(samples), span) if None not in samples else None,
    }, span, args=(4, 3), type_span=span, name=obj.name, complete=ok)
    roles = VList(tuple(VObj(ROLE, "RoleOf", {"roleName": VString(name, span),
                                              "roleOwners": VList((VNat(o, span),), span)}, span)
                        for o, name in enumerate(("coordinator", "worker"))), span)
    where = f("Placement") if placement is None else VList(
        (VObj(TARGET, placement, {}, span),) * 2, span)
    fields = {
        "deploymentLearner": learner, "deploymentOwners": VNat(2, span),
        "deploymentTopology": VObj(TOPOLOGY, "DataParallelStar", {}, span),
        "deploymentPartitioning": VObj(PARTITIONING, "DataParallelReplicated",
                                       {"partitionBlockWords": VNat(1, span)}, span),
        "deploymentRoles": roles, "deploymentPlacement": where,
        "deploymentUpdates": f("Updates"), "deploymentContract": f("Contract"),
        "deploymentCheckpoint": f("Checkpoint"),
        "deploymentCombinePlacement": VObj("Learning.Deployment.CombinePlacement",
                                           "CombineAtBranchOwners", {}, span),
    }
    return VObj(DEPLOYMENT, "DeploymentOf", fields, span, name=obj.name, complete=ok)


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
    r = r.n if r is not None and r.n >= 1 else None
    regions = _regions(low, state.fields.get("independentStateInitial"), r)
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
    learner = ir.Learner(obj.name or "learner", len(regions) * r, PAIR, 0, program,
                         ir.Program(0, ()), ir.Words(tuple(int(w) for w in words)), ir.Words(()),
                         scale.w, samples, obj.span, shape=ir.INDEPENDENT, region=r)
    obj.cache["learner"] = learner
    return learner


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

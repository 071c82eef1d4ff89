"""The named deployment families of the learner shapes (docs/learners.md), as deployments.

A value of `Runtime.NativeDataParallelOwned.NativeDataParallelOwned` (a star) or
`Runtime.NativeDataParallelOwnedTree.NativeDataParallelOwnedTree` (a hierarchy) is the
Deployment of its learner with its topology and partitioning fixed by the family: it is
rewritten field by field into a `Learning.Deployment.Deployment` object, which the one
deployment lowering (`Lowering.deployment`) then checks and lowers.
"""

from __future__ import annotations

from dataclasses import dataclass

from alphac.check.values import VBool, VObj

DEPLOYMENT = "Learning.Deployment.Deployment"
TOPOLOGY = "Runtime.NativeDataParallel.DataParallelTopology"
PARTITIONING = "Runtime.NativeDataParallel.DataParallelPartitioning"
# the Deployment fields every named family carries under its own prefix
COMMON = ("Learner", "Owners", "Roles", "Placement", "Updates", "Contract", "Checkpoint")


@dataclass(frozen=True)
class Named:
    """One named deployment family: its fields' prefix and the topology it runs on."""

    prefix: str
    topology: str  # a DataParallelTopology constructor


OWNED = {
    "Runtime.NativeDataParallelOwned.NativeDataParallelOwned": Named("owned", "DataParallelStar"),
    "Runtime.NativeDataParallelOwnedTree.NativeDataParallelOwnedTree":
        Named("ownedTree", "DataParallelHierarchy"),
}
NAMED = frozenset(OWNED)


def as_deployment(obj: VObj) -> VObj:
    """The Deployment object a named family's value stands for (cached on the value)."""
    if "deployment" not in obj.cache:
        obj.cache["deployment"] = _owned(obj, OWNED[obj.key])
    return obj.cache["deployment"]


def _field(obj: VObj, named: Named, name: str):
    return obj.fields.get(named.prefix + name)


def _owned(obj: VObj, named: Named) -> VObj:
    fields = {f"deployment{name}": _field(obj, named, name) for name in COMMON}
    span = obj.span
    topology = {}
    if named.topology == "DataParallelHierarchy":
        topology = {"dataParallelFanout": _field(obj, named, "Fanout")}
    fields["deploymentTopology"] = VObj(TOPOLOGY, named.topology, topology, span,
                                        complete=obj.complete)
    flag = VBool(True, span)
    fields["deploymentPartitioning"] = VObj(PARTITIONING, "DataParallelPartitioned", {
        "partitionOptimizerState": flag, "partitionParameters": flag, "partitionGradients": flag,
        "partitionWordsPerCoordinate": _field(obj, named, "WordsPerCoordinate"),
        "partitionSharedState": _field(obj, named, "SharedState"),
        "partitionBlockWords": _field(obj, named, "BlockWords"),
    }, span, complete=obj.complete)
    fields["deploymentCombinePlacement"] = VObj(
        "Learning.Deployment.CombinePlacement", "CombineAtBranchOwners", {}, span)
    return VObj(DEPLOYMENT, "DeploymentOf", fields, span, name=obj.name, complete=obj.complete)


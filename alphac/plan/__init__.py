"""The planner: combine trees, phases, delivery, per-owner protocols, shard maps, bytes,
numerical contracts and the protocol identity (`alphac plan`)."""

from alphac.plan.assembly import Offer, assemble, offers_of, owned_by
from alphac.plan.contract import NumericalContract, compatible
from alphac.plan.phases import REPLICATE_ALL, Delivery, Transfer, reduce_phase, replicate_phase
from alphac.plan.planner import OwnerPlan, Plan, plan, plan_spec
from alphac.plan.shards import Fragment, LogicalRegion, ShardMap, check_shard_map

__all__ = [
    "Delivery", "Fragment", "LogicalRegion", "NumericalContract", "Offer", "OwnerPlan", "Plan",
    "REPLICATE_ALL", "ShardMap", "Transfer", "assemble", "check_shard_map", "compatible",
    "offers_of", "owned_by", "plan", "plan_spec", "reduce_phase", "replicate_phase",
]

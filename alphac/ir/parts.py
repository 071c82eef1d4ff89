"""The parts of a deployment that hold no program: its combine topology (a star, a
hierarchy, an explicit tree or the sample tree), its partitioning (each region replicated or
sharded), where its combine runs, its roles, its numerical contract, its checkpoints and where
it resumes from.

They are IR nodes like those of nodes.py (frozen dataclasses holding tuples, spans never in
equality), which holds the Deployment that gathers them with its learner and names each of
them too, so `nodes.X` reaches every IR node. This module imports nothing of nodes.py: it
is the lower of the two, and `span_field` is theirs in common.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Union

from alphac.diagnostics import NO_SPAN, Span


def span_field() -> Span:
    """A node's source span: it never takes part in equality, hashing or repr."""
    return field(default=NO_SPAN, compare=False, hash=False, repr=False)


# ----------------------------------------------------------------------------- topology

@dataclass(frozen=True)
class Star:
    """Left-deep chain at the hub (owner 0): ((c0 + c1) + c2) + ..."""

    span: Span = span_field()


@dataclass(frozen=True)
class Hierarchy:
    """Owner i's children are f*i+1 .. f*i+f (those < n); each owner combines its own
    contribution, then each child's subtree in order, left-deep."""

    fanout: int
    span: Span = span_field()


@dataclass(frozen=True)
class TreeLeaf:
    """`Runtime.OrderedCombine.OrderedCombineLeaf`: one owner's (sum, mass) contribution."""

    owner: int
    span: Span = span_field()


@dataclass(frozen=True)
class TreeBranch:
    """`OrderedCombineBranch`: left subtree, then right subtree, combined at `owner`."""

    owner: int
    left: "TreeNode"
    right: "TreeNode"
    span: Span = span_field()


TreeNode = Union[TreeLeaf, TreeBranch]


@dataclass(frozen=True)
class ExplicitTree:
    """A declared combine tree. `coverage` is "members" (an ordered member list that also
    fixes the leaf order) or "group" (a participant group the tree covers exactly once).
    `delivery` is the declared `CombineDelivery`: None for CombineReplicateAll, or the
    target owner of CombineDeliverTo."""

    root: TreeNode
    coverage: str
    members: tuple[int, ...]
    span: Span = span_field()
    delivery: int | None = None


@dataclass(frozen=True)
class SampleTree:
    """`DataParallelSampleTree`: the combine fixed over the global sample sequence (owner
    0's samples, then owner 1's, ...) as a binary tree over sample indices (node (h, j)
    covers [j*2^h, (j+1)*2^h) cut at N), so that any owner count and any shares give the
    same bits (docs/plan.md, "The sample tree")."""

    span: Span = span_field()


Topology = Union[Star, Hierarchy, ExplicitTree, SampleTree]


# ----------------------------------------------------------------------------- declarations

class _Placement:
    """A region's placement. It is no truth value (a region placed either way is "some
    placement"): ask `.sharded`."""

    sharded: ClassVar[bool]

    def __bool__(self) -> bool:
        raise TypeError(f"{self!r} is no truth value; ask its .sharded")


@dataclass(frozen=True)
class Replicate(_Placement):
    """A region every owner holds whole."""

    sharded: ClassVar[bool] = False


@dataclass(frozen=True)
class Shard(_Placement):
    """A region held in coordinate blocks: block b (coordinates b*B .. b*B + B - 1) at
    owner b mod n alone, B being the partitioning's `block_words` (one block size serves
    every sharded region and the block combine placement)."""

    sharded: ClassVar[bool] = True


Placement = Union[Replicate, Shard]


def placed(sharded: bool) -> Placement:
    """`Shard()` if `sharded`, else `Replicate()` (a spec declares each region by a flag)."""
    return Shard() if sharded else Replicate()


@dataclass(frozen=True)
class Partitioning:
    """Where each region of the learner's words lives (`Replicate()` or `Shard()`): its
    parameters, its optimizer state and the gradients it combines. Coordinates come in
    blocks of `block_words` (B) consecutive coordinates, block b belonging to owner b mod n
    (B = 1: coordinate i -> owner i mod n); the blocks are the shards' and the block combine
    placement's, so B is declared even when every region is replicated.

    The state's shape, whatever its placement: `shared_state` lists state offsets (0-based
    within the m state words) declared shared (replicated), e.g. Adam's two bias-correction
    powers. The other state words are per coordinate: `words_per_coordinate` (w) blocks of
    k consecutive words, in offset order, so block b's word for coordinate i is the
    (b*k + i)-th non-shared state word. A claim is consistent only when
    w*k + len(shared_state) == m.
    """

    parameters: Placement = Replicate()
    optimizer_state: Placement = Replicate()
    gradients: Placement = Replicate()
    words_per_coordinate: int = 0
    shared_state: tuple[int, ...] = ()
    block_words: int = 1
    span: Span = span_field()

    def __post_init__(self) -> None:
        for region in (self.parameters, self.optimizer_state, self.gradients):
            if not isinstance(region, (Replicate, Shard)):
                raise TypeError(f"a region is placed Replicate() or Shard(), not {region!r}")
        if self.block_words < 1:
            raise ValueError(f"a coordinate block holds at least one coordinate, not {self.block_words}")

    @property
    def any(self) -> bool:
        """Whether some region is sharded."""
        return self.parameters.sharded or self.optimizer_state.sharded or self.gradients.sharded


class CombinePlacement(Enum):
    """`Learning.Deployment.CombinePlacement`: where the combine tree's branches run. The
    value is the placement's name in plans and the protocol identity."""

    BRANCH_OWNERS = "branch-owners"  # CombineAtBranchOwners: each branch at the owner the tree names
    BLOCK_OWNERS = "block-owners"    # CombineAtBlockOwners: the whole tree for block b at b's owner


class ConsistencyKind(Enum):
    """`Learning.Deployment.Consistency`'s constructors; the value is the kind's name in
    diagnostics and plans."""

    SYNCHRONOUS = "synchronous"              # the contribution to update u reads version u
    FIXED_STALENESS = "fixed-staleness"      # it reads version u - S
    LOCAL_STEPS = "local-steps"              # H local updates per owner between combines
    BOUNDED_STALENESS = "bounded-staleness"  # the newest version held, at most S behind, recorded


@dataclass(frozen=True)
class OuterMomentum:
    """Local steps' outer momentum (`Learning.Deployment.OuterMomentum`): b := momentum * b +
    mean, v := v + rate * b; `rate` and `momentum` as binary64 bits."""

    rate: int
    momentum: int


@dataclass(frozen=True)
class Consistency:
    """Which parameter version each contribution reads: `kind` and its one number, `value`
    (the staleness S, the local steps H or the bound S; 0 for the synchronous learner).
    Fixed staleness 0 and bound 0 are lowered as the synchronous learner: it is the same
    learner."""

    kind: ConsistencyKind = ConsistencyKind.SYNCHRONOUS
    value: int = 0
    span: Span = span_field()
    outer: OuterMomentum | None = None  # local steps' outer update: None averages

    @property
    def staleness(self) -> int:
        """S of a fixed staleness (update u's contributions read version max(u - S, 0)); 0
        for the synchronous learner."""
        return self.value if self.kind is ConsistencyKind.FIXED_STALENESS else 0

    @property
    def bound(self) -> int:
        """S of a bounded staleness (each contribution reads the newest version its owner
        has, at most S behind, and the version is recorded); 0 for every other kind."""
        return self.value if self.kind is ConsistencyKind.BOUNDED_STALENESS else 0

    @property
    def local_steps(self) -> int:
        """H of local steps (each owner applies H updates on its own samples between
        combines); 0 for every other kind."""
        return self.value if self.kind is ConsistencyKind.LOCAL_STEPS else 0


@dataclass(frozen=True)
class Role:
    name: str
    owners: tuple[int, ...]
    span: Span = span_field()


@dataclass(frozen=True)
class Profile:
    """`Std.Numeric.Profile`: formats, rounding, subnormals, exceptional values."""

    format: str = "binary64"
    rounding: str = "nearest-even"
    subnormals: str = "preserve"
    exceptional: str = "finite-or-refuse"
    span: Span = span_field()


@dataclass(frozen=True)
class Contract:
    """`Learning.Numerics.NumericalContract`: a profile and a relation (`exact`, or a bound).
    The ordered operation list is derived by the planner from the tree and the programs."""

    profile: Profile = Profile()
    relation: str = "exact"
    span: Span = span_field()


@dataclass(frozen=True)
class Checkpoint:
    """When to publish checkpoints: `every` updates (0 = never) under `directory`."""

    every: int = 0
    directory: str = ""
    span: Span = span_field()


@dataclass(frozen=True)
class Resume:
    """`Learning.Deployment.DeploymentResume`: the deployment starts from the published
    checkpoint directory `path` (resolved against the spec file's directory), continuing
    its contract (`mode` "same") or starting a new one on its state ("new")."""

    path: str
    mode: str = "same"  # "same" | "new"
    span: Span = span_field()


"""The typed IR every later stage reads: pointwise programs, learners, deployments.

All nodes are frozen dataclasses holding tuples; spans never take part in equality.
Words are binary64 bit patterns held as Python ints in [0, 2**64).

Program semantics (shared by the oracle and every code generator):
  * A program runs over a vector of `slots` binary64 words.
  * Statements run in order; an `Assign` writes its slot immediately, so later statements
    read the new value (typed assignment semantics).
  * `Loop(var, lo, hi, body)` runs iteration lo, lo+1, ..., hi-1, each running its whole
    body. The checker guarantees that a slot range written inside a loop is read inside it
    only at the very index it is written at, so statement-by-statement vectorisation over
    the loop variable gives the same words as the sequential order.
  * `Let` binds a binary64 temporary; inside a loop it is per iteration. `VectorLet`
    writes one element of a vector temporary (per-index scratch of the loop's range),
    read by `VectorLocal` after the loop, or inside it at the loop's own index.
  * An `Index` is affine in the loop and sum variables (a 2-D view's element is
    base + d*i + j). For every loop, the checker guarantees that a slot written inside it
    and read inside it is read only in the iteration that writes it (the slots of two
    iterations are disjoint), which is what statement-by-statement vectorisation over
    the loop variable needs; the vector engine and the chunked kernel loop also test
    what they vectorise themselves and otherwise run the loop in order.
  * Expressions are evaluated exactly as written: no reassociation, no fused multiply-add,
    `div` and `sqrt` correctly rounded.
  * `Sum(var, lo, hi, body)` is the ordered left fold
        (((body(lo) + body(lo+1)) + body(lo+2)) + ... ) ; an empty sum is +0.0.
  * Finite-or-refuse: every operand and result of every arithmetic operation must be
    finite, otherwise the whole update refuses, naming the assignment and coordinate.
  * `round32(x)` is the binary32 nearest x (ties to even), as the binary64 of that value
    (widening is exact): the explicit narrowing of a binary32 or mixed-precision learner.
  * `exp`, `log`, `log1p`, `expm1` are correctly rounded (the binary64 nearest the real
    value); `sigmoid` and `tanh` are the declared algorithms of docs/language.md
    "Elementary functions". Their operand must be finite (even where the function would
    absorb a non-finite one: exp(-inf) is 0), and so must their result.
  * Selection is exact (docs/language.md "Comparisons and selection"): `abs` clears the
    sign bit, `copysign(x, y)` is x's magnitude with y's sign, `min`/`max` are IEEE
    754-2019 minimum/maximum (of -0.0 and +0.0, min is -0.0 and max +0.0), a comparison
    is IEEE's (-0.0 == +0.0) and yields a Bool, and `select(c, x, y)` evaluates c, x and y
    (each operation finite-or-refuse, the one not taken too), then is x where c holds,
    else y.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from alphac.diagnostics import Span
# A deployment's program-free parts live in parts.py; named here too, so that every stage
# reads the whole IR as `nodes.X`.
from alphac.ir.parts import (Checkpoint, CombinePlacement, Consistency, ConsistencyKind, OuterMomentum,  # noqa: F401
                             Contract, ExplicitTree, Hierarchy,
                             Partitioning, Placement, Profile, Replicate, Resume, Role, SampleTree,
                             Shard, Star, Topology, TreeBranch, TreeLeaf, TreeNode, placed)
from alphac.ir.parts import span_field as _span


# ----------------------------------------------------------------------------- indices

# A field whose default the canonical encodings leave out (alphac/plan/canon.py `flat`), so
# that IR written without it keeps its identity.
OMIT_DEFAULT = {"canon": "omit-default"}


@dataclass(frozen=True)
class Index:
    """A slot index, affine in the enclosing loop and sum variables:
    base + sum(stride * var for (var, stride) in strides).

    `Index(base)` is a constant and `Index(base, var)` is `base + var`; any other form
    (several variables, or a stride other than 1: a 2-D view's `W[i, j]` is
    `base + d*i + j`) has `var` None and its `terms`, the (var, stride) pairs with nonzero
    strides, each variable once, sorted by name. `affine` builds the one normal form of
    each index, so equal indices compare equal."""

    base: int
    var: str | None = None
    terms: tuple[tuple[str, int], ...] = field(default=(), metadata=OMIT_DEFAULT)

    def __post_init__(self) -> None:
        if self.var is not None and self.terms:
            raise ValueError("an Index has either `var` or `terms`, not both")

    @property
    def strides(self) -> tuple[tuple[str, int], ...]:
        """The (var, stride) pairs of the index (empty for a constant)."""
        return ((self.var, 1),) if self.var is not None else self.terms

    @property
    def constant(self) -> bool:
        return self.var is None and not self.terms

    @property
    def simple(self) -> bool:
        """A constant or `base + var`: the forms of a 1-D index."""
        return not self.terms

    def stride(self, var: str) -> int:
        return dict(self.strides).get(var, 0)

    def variables(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.strides)

    def at(self, binds) -> int:
        """The slot when every variable of the index is bound to an int in `binds`."""
        return self.base + sum(s * binds[v] for v, s in self.strides)

    def bounds(self, ranges) -> tuple[int, int]:
        """[lo, hi) holding every slot of the index when each variable v ranges over
        `ranges[v]` = (lo, hi); (lo, lo) when some range is empty."""
        lo = hi = self.base
        for v, s in self.strides:
            a, b = ranges[v]
            if b <= a:
                return self.base, self.base
            lo += min(s * a, s * (b - 1))
            hi += max(s * a, s * (b - 1))
        return lo, hi + 1

    def __str__(self) -> str:
        if self.var is not None:
            return f"{self.base}+{self.var}"
        text = str(self.base)
        for v, s in self.terms:
            sign = "-" if s < 0 else "+"
            text += f"{sign}{v}" if abs(s) == 1 else f"{sign}{abs(s)}*{v}"
        return text


def affine(base: int, strides) -> Index:
    """The normal form of base + sum(stride * var) over `strides`, (var, stride) pairs (a
    variable may repeat: its strides add up)."""
    total: dict[str, int] = {}
    for v, s in strides:
        total[v] = total.get(v, 0) + s
    terms = tuple(sorted((v, s) for v, s in total.items() if s != 0))
    if not terms:
        return Index(base)
    if len(terms) == 1 and terms[0][1] == 1:
        return Index(base, terms[0][0])
    return Index(base, None, terms)


# ----------------------------------------------------------------------------- expressions

@dataclass(frozen=True)
class Const:
    """A binary64 constant, as its 64-bit pattern."""

    bits: int
    span: Span = _span()


@dataclass(frozen=True)
class SlotRef:
    index: Index
    span: Span = _span()


@dataclass(frozen=True)
class Local:
    """A `Let`-bound temporary."""

    name: str
    span: Span = _span()


UNARY_OPS = ("neg", "sqrt", "abs", "round32", "exp", "log", "log1p", "expm1", "sigmoid", "tanh")
# The elementary functions (alphac/codegen/elementary/, alphac/oracle/elementary.py): exp,
# log, log1p and expm1 correctly rounded, sigmoid and tanh a declared algorithm of them.
ELEMENTARY_OPS = ("exp", "log", "log1p", "expm1", "sigmoid", "tanh")
BINARY_OPS = ("add", "sub", "mul", "div", "min", "max", "copysign")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")


@dataclass(frozen=True)
class Unary:
    op: str  # one of UNARY_OPS
    arg: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Binary:
    op: str  # one of BINARY_OPS
    lhs: "Expr"
    rhs: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Compare:
    """`lhs OP rhs` for OP in COMPARE_OPS: a Bool, read only as a Select's condition."""

    op: str  # one of COMPARE_OPS
    lhs: "Expr"
    rhs: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Select:
    """`select(cond, then, other)`: `then` where `cond` holds, else `other`; all three are
    evaluated, in that order."""

    cond: Compare
    then: "Expr"
    other: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Sum:
    """Ordered left fold of `body` over var = lo .. hi-1 (see the module docstring)."""

    var: str
    lo: int
    hi: int
    body: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class VectorLocal:
    """Element `index` of the vector temporary `name` (a `VectorLet`): `index` counts in
    the writing loop's coordinates, so element `index - lo` of its storage."""

    name: str
    index: Index
    span: Span = _span()


Expr = Union[Const, SlotRef, Local, Unary, Binary, Compare, Select, Sum, VectorLocal]


def children(e: "Expr") -> tuple:
    """The operands of an expression node, in evaluation order (a Sum's body; none for a
    leaf)."""
    if isinstance(e, Unary):
        return (e.arg,)
    if isinstance(e, (Binary, Compare)):
        return (e.lhs, e.rhs)
    if isinstance(e, Select):
        return (e.cond, e.then, e.other)
    if isinstance(e, Sum):
        return (e.body,)
    return ()


def subexpressions(expr: "Expr"):
    """Every node of an expression, itself first, Sum bodies included (iteratively: trees
    may be deep)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(children(e))


# ----------------------------------------------------------------------------- statements

@dataclass(frozen=True)
class Assign:
    target: Index
    value: Expr
    span: Span = _span()
    label: str = field(default="", compare=False)  # source text of the target, for refusals


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class VectorLet:
    """`let name[var] = value` in the body of `Loop(var, lo, hi)`: element var - lo of the
    vector temporary `name`, real storage of hi - lo words that is neither parameter nor
    contribution. Read as `VectorLocal(name, index)`: inside the loop at its own index after
    this statement, after the loop at any index in [lo, hi). A program names each vector
    temporary once."""

    name: str
    var: str
    lo: int
    hi: int
    value: Expr
    span: Span = _span()

    @property
    def words(self) -> int:
        return max(0, self.hi - self.lo)


@dataclass(frozen=True)
class Loop:
    var: str
    lo: int
    hi: int
    body: tuple["Stmt", ...]
    span: Span = _span()


Stmt = Union[Assign, Let, VectorLet, Loop]


def vector_lets(body) -> list[VectorLet]:
    """Every VectorLet of a program body, in source order."""
    out: list[VectorLet] = []
    stack = list(reversed(body))
    while stack:
        st = stack.pop()
        if isinstance(st, Loop):
            stack.extend(reversed(st.body))
        elif isinstance(st, VectorLet):
            out.append(st)
    return out


def temporary_words(program: "Program") -> int:
    """The words of a program's vector temporaries: their storage, all live at once."""
    return sum(v.words for v in vector_lets(program.body))


@dataclass(frozen=True)
class Program:
    """A pointwise program over `slots` words (the family's erased slot count)."""

    slots: int
    body: tuple[Stmt, ...]
    span: Span = _span()


def statements(body):
    """The statements of a program body other than loops, in source order (a loop's body
    once, where it stands)."""
    for st in body:
        if isinstance(st, Loop):
            yield from statements(st.body)
        else:
            yield st


# ----------------------------------------------------------------------------- word vectors

@dataclass(frozen=True, eq=False)
class Words:
    """A vector of binary64 words. Small ones hold a tuple; large ones a numpy uint64 array.

    Equality is by value. `source` names the file the words came from, if any.
    """

    data: object  # tuple[int, ...] or numpy.ndarray(dtype=uint64, ndim=1)
    source: str = ""

    def __len__(self) -> int:
        return len(self.data)

    def as_array(self):
        import numpy as np

        return np.asarray(self.data, dtype=np.uint64)

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(int(w) for w in self.data)

    def __eq__(self, other) -> bool:
        return isinstance(other, Words) and len(self) == len(other) and bool(
            (self.as_array() == other.as_array()).all())

    def __hash__(self) -> int:
        return hash(_digest(self.as_array()))


@dataclass(frozen=True, eq=False)
class Samples:
    """Every owner's samples: `words` is an (N, s) uint64 matrix in owner-then-sample order,
    `shares[o]` how many rows owner o holds (shares may be 0)."""

    width: int
    shares: tuple[int, ...]
    words: object  # numpy.ndarray(dtype=uint64, shape=(sum(shares), width))
    source: str = ""

    def owner_rows(self, owner: int):
        start = sum(self.shares[:owner])
        return self.words[start:start + self.shares[owner]]

    def __eq__(self, other) -> bool:
        return (isinstance(other, Samples) and self.width == other.width
                and self.shares == other.shares
                and self.words.shape == other.words.shape
                and bool((self.words == other.words).all()))

    def __hash__(self) -> int:
        return hash((self.width, self.shares, _digest(self.words)))


def _digest(words) -> bytes:
    """A digest of a word array read in place (the words may be a file's mapping: no copy)."""
    import hashlib

    import numpy as np

    return hashlib.blake2b(memoryview(np.ascontiguousarray(words, dtype=np.uint64)).cast("B"),
                           digest_size=16).digest()


# ----------------------------------------------------------------------------- learner

@dataclass(frozen=True)
class Learner:
    """`Learning.DataParallel.DataParallelSystem`: k parameters, m state words, width s.

    Contribution slots (2k+s): params [0,k), sample [k,k+s), contribution [k+s,2k+s).
    Update slots (2k+m+1): params [0,k), state [k,k+m), mean [k+m,2k+m), rate at 2k+m.

    `shape` "independent-state" (`LocalCorrelation.System.LocalCorrelationSystem`,
    docs/learners.md): every owner o holds its own region of r = `region` words, the
    parameters [o*r, o*r + r) of k = n*r (the regions in owner order, m = 0), and its own
    input pairs as its samples (s = 2). `contribution` is the rule, over slots region
    [0, r), pair [r, r+2), scale at r+2 (the scale is `rate`), run once per input pair in
    pair order and writing the region; `update` is the empty program: nothing is combined
    and no mean is read.
    """

    name: str
    k: int
    s: int
    m: int
    contribution: Program
    update: Program
    initial: Words  # k words
    initial_state: Words  # m words
    rate: int  # a word
    samples: Samples
    span: Span = _span()
    shape: str = "data-parallel"  # or "independent-state"
    region: int = 0  # an independent-state learner's words per owner (r)

    @property
    def independent(self) -> bool:
        return self.shape == INDEPENDENT


INDEPENDENT = "independent-state"


# ----------------------------------------------------------------------------- deployment

@dataclass(frozen=True)
class Deployment:
    """`Learning.Deployment.Deployment`: one runnable distributed learner."""

    name: str
    learner: Learner
    owners: int
    topology: Topology
    partitioning: Partitioning
    roles: tuple[Role, ...]
    placement: tuple[str, ...]  # target name per owner ("x86_64", "aarch64", "sm86")
    updates: int
    contract: Contract
    checkpoint: Checkpoint
    source_file: str = field(default="", compare=False)
    span: Span = _span()
    resume: Resume | None = None  # declared by a DeploymentResume value of the same file
    # where the combine tree's branches run: at the owners the tree names, or the whole tree
    # for coordinate block b at block b's owner
    combine_placement: CombinePlacement = CombinePlacement.BRANCH_OWNERS
    combine_placement_span: Span = _span()  # where its value is written
    consistency: Consistency = Consistency()  # which parameter version each contribution reads

    def role_of(self, owner: int) -> Role:
        for role in self.roles:
            if owner in role.owners:
                return role
        raise KeyError(owner)


# ----------------------------------------------------------------------------- module

@dataclass(frozen=True)
class CheckedSpec:
    """What `alphac check` produces for one root file: its learners and deployments."""

    file: str
    module: str
    families: tuple[str, ...]
    learners: tuple[Learner, ...]
    deployments: tuple[Deployment, ...]

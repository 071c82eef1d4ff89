"""The op table: every kind of op an owner's protocol holds, once, with its named and typed
operands, what it reads and writes, how it renders and what its image word `expect` declares.
The planner, the register analysis, the renderer, the image and the C runtime's checker (its
operand table, generated into alphac_gen.h) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

# Operand types: what an operand word means, and how the runtime checks it before the op runs
# (alphac/runtime/ops.c `check_op`; each type's C name is OPND_<TYPE>).
NONE = "none"        # not an operand: the word is -1
READ = "read"        # a register the op reads (0 <= r < the owner's registers)
WRITE = "write"      # the register the op writes
PEER = "peer"        # the owner the op moves a frame to or from (an owner it is connected to)
OWNER = "owner"      # the owner whose coordinates the op selects (0 <= o < n; no frame)
MASK = "mask"        # a set of regions (REGION_*): not empty, no other bit
GROUP = "group"      # how many of the ops after this one run with it (1 <= b < the ops left)
FIRST = "first"      # the first of the owner's samples a block covers (checked with its count)
SAMPLES = "samples"  # how many samples the block covers, after FIRST: inside the owner's share,
                     # and its stack fits register 0
ARRIVE = "arrive"    # the register a received frame fills, which the op reads as its words
                     # arrive (written, then read, by the op)
OPERAND_TYPES = (NONE, READ, WRITE, PEER, OWNER, MASK, GROUP, FIRST, SAMPLES, ARRIVE)
REGISTERS = (READ, WRITE, ARRIVE)

# The operand words of an op, in the order they follow its kind code in the op's words.
WORDS = ("peer", "dst", "a", "b")
WORD_INDEX = {w: i + 1 for i, w in enumerate(WORDS)}  # a word's place in the op's words

# Region masks (MASK operands).
REGION_PARAMETERS = 1
REGION_STATE = 2  # the per-coordinate optimizer-state words (never the shared words)
REGION_HISTORY = 3  # fixed staleness: a checkpoint's S earlier parameter versions (never an op's operand)
REGION_OUTER = 4    # local steps: a checkpoint's outer momentum (never an op's operand)
REGION_STATES = 5   # local steps: a checkpoint's every owner's own optimizer state (never an op's operand)
REGIONS = ((REGION_PARAMETERS, "parameters"), (REGION_STATE, "state"))

# What the `expect` word the image encodes for an op declares (alphac/plan/steps.py), else NO_EXPECT.
EXPECT_SAMPLES = "samples"        # a received sum: the sample count beneath it
EXPECT_PREPARED = "prepared"      # "prepared": the owners whose output digests it carries
EXPECT_CHECKPOINT = "checkpoint"  # a checkpoint report: its payload's words

# The sample count a written register holds, as the planner's symbolic run derives it
# (plan/steps.py `expected_counts`).
# (The register a receive fills holds the count of its matching send's register.)
COUNT_SHARE = "share"      # the owner's leaf count (its share, or an executed mutant's)
COUNT_SAMPLES = "samples"  # the op's SAMPLES operand
COUNT_READS = "reads"      # the sum of the counts of the registers it reads
COUNT_NONE = "none"        # assembled words: no count


@dataclass(frozen=True)
class Operand:
    name: str  # how the op's text and docs name it
    type: str  # one of OPERAND_TYPES
    word: str  # which of WORDS carries it


@dataclass(frozen=True)
class OpKind:
    name: str
    code: int
    operands: tuple[Operand, ...]
    text: str             # str.format over the operands' rendered names (`render`)
    doc: str
    matches: str = ""     # a receive: the send kind it pairs with (the j-th of each match)
    expect: str = ""      # what its `expect` word declares (EXPECT_*), "" for none
    count: str = ""       # the sample count of the register it writes (COUNT_*)

    def word_types(self) -> tuple[str, ...]:
        """The type of each of WORDS (NONE for a word that is no operand)."""
        by_word = {o.word: o.type for o in self.operands}
        return tuple(by_word.get(w, NONE) for w in WORDS)

    def of_type(self, *types: str) -> tuple[Operand, ...]:
        return _of_type(self, types)

    @property
    def talks(self) -> bool:
        """Whether it moves a frame to or from its peer."""
        return bool(self.of_type(PEER))

    @property
    def moved(self) -> Operand | None:
        """The register a frame of it carries: a send's READ operand, a receive's ARRIVE (or
        else WRITE) operand; None for an op that moves no register."""
        if not self.talks:
            return None
        found = (self.of_type(ARRIVE) or self.of_type(WRITE)) if self.matches else self.of_type(READ)
        return found[0] if found else None


def _kind(name: str, text: str, doc: str, **words) -> dict:
    """One row: `words` maps each used word of WORDS to (operand name, type); the keys
    matches, expect and count pass through."""
    extra = {key: words.pop(key) for key in ("matches", "expect", "count") if key in words}
    assert set(words) <= set(WORDS), words
    operands = tuple(Operand(n, t, w) for w in WORDS if w in words for n, t in (words[w],))
    return dict(name=name, operands=operands, text=text, doc=doc, **extra)


# The op kinds, in the order of their codes in the executables' embedded tables.
_ROWS = (
    _kind("local", "local {dst}", "dst <- this owner's (sum of contributions in sample order, "
          "sample count)", dst=("dst", WRITE), count=COUNT_SHARE),
    _kind("send", "send {src} -> {peer}", "send register src to peer (frame kind: combine value)",
          peer=("peer", PEER), a=("src", READ)),
    _kind("recv", "recv {dst} <- {peer}", "dst <- a combine value from peer", peer=("peer", PEER),
          dst=("dst", WRITE), matches="send", expect=EXPECT_SAMPLES),
    _kind("combine", "combine {dst} = {left} + {right}", "dst <- left + right (element-wise, left "
          "then right; counts added)", dst=("dst", WRITE), a=("left", READ), b=("right", READ),
          count=COUNT_READS),
    _kind("update", "update {mean}", "apply the update program to the mean of register mean",
          a=("mean", READ)),
    _kind("digest-send", "digest-send -> {peer}", "send this owner's state digest and its "
          "subtree's output digests (\"prepared\") to peer", peer=("peer", PEER),
          expect=EXPECT_PREPARED),
    _kind("digest-recv", "digest-recv <- {peer}", "receive peer's \"prepared\"; refuse unless its "
          "digest is this owner's", peer=("peer", PEER), matches="digest-send",
          expect=EXPECT_PREPARED),
    _kind("publish-send", "publish-send -> {peer}", "tell peer that the run is committed",
          peer=("peer", PEER)),
    _kind("publish-recv", "publish-recv <- {peer}", "wait for the commit verdict from peer",
          peer=("peer", PEER), matches="publish-send"),
    # -- partitioned learners only (protocol.project_partitioned) --
    _kind("slice", "slice {dst} = {src} at owner {owner}'s coordinates", "dst <- the words of src "
          "at owner's coordinates, and src's count", peer=("owner", OWNER), dst=("dst", WRITE),
          a=("src", READ), count=COUNT_READS),
    _kind("offer", "offer {dst} = own {regions}", "dst <- this owner's own words of regions, by "
          "coordinate", dst=("dst", WRITE), a=("regions", MASK), count=COUNT_NONE),
    _kind("select", "select {dst} = {left} | {right}", "dst <- left and right assembled by "
          "selection (disjoint coordinates, no arithmetic)", dst=("dst", WRITE), a=("left", READ),
          b=("right", READ), count=COUNT_NONE),
    _kind("install", "install {src} into {regions}", "check src covers every coordinate; install "
          "it into regions", a=("src", READ), b=("regions", MASK)),
    _kind("replica-install", "replica-install {src}", "check src covers every parameter; hold it "
          "as the read replica of this update's version (the contribution reads only it)",
          a=("src", READ)),
    _kind("replica-release", "replica-release", "clear the read replica before the update (the "
          "version may then advance)"),
    _kind("update-owned", "update-owned {mean}", "apply the update to this owner's coordinates and "
          "the shared words, reading the mean of register mean (all coordinates, or this "
          "owner's slice)", a=("mean", READ)),
    # -- independent-state learners only (protocol.project_independent) --
    _kind("evolve", "evolve", "apply the rule to this owner's region once per input pair, in "
          "pair order"),
    # -- publication of a run (finish ops; docs/runtime.md "Publication") --
    _kind("stage", "stage", "write this owner's output to its staged file (created before the "
          "first update), fsync it, and keep its sha256 for \"prepared\""),
    _kind("commit", "commit", "the root alone: every owner prepared; make the run's commit "
          "record durable"),
    _kind("finalize", "finalize", "the run is committed: link the staged output to its final "
          "path"),
    # -- a checkpoint (checkpoint ops, after every I-th update; docs/checkpoints.md) --
    _kind("ckpt-stage", "ckpt-stage", "write and fsync this owner's shard in the checkpoint's "
          "partial directory"),
    _kind("ckpt-send", "ckpt-send -> {peer}", "send the replica digest and the shard and "
          "manifest digests of this subtree to peer", peer=("peer", PEER),
          expect=EXPECT_CHECKPOINT),
    _kind("ckpt-recv", "ckpt-recv <- {peer}", "receive a child's checkpoint report: digests "
          "compared, entries kept", peer=("peer", PEER), matches="ckpt-send",
          expect=EXPECT_CHECKPOINT),
    _kind("ckpt-manifest", "ckpt-manifest", "an owner with children: write and fsync the "
          "manifest of its subtree"),
    _kind("ckpt-publish", "ckpt-publish", "the root: fsync the directory, rename it to "
          "ckpt-<u>, fsync its parent"),
    # -- the sample tree (protocol.project_sample_tree) --
    _kind("sample-block", "sample-block {dst} = samples {first}..{last}", "dst <- the sample tree "
          "over this owner's samples first .. first+count-1 (an aligned block), evaluated on the "
          "binary-counter stack held in register 0", dst=("dst", WRITE), a=("first", FIRST),
          b=("count", SAMPLES), count=COUNT_SAMPLES),
    # -- the block placement (`deploymentCombinePlacement = CombineAtBlockOwners`) --
    _kind("exchange", "exchange: the next {count} at once", "the next count ops, sends and "
          "receives of sums, run at once (every frame in flight together, each peer's frames "
          "in op order); among them recv-adds and combines, each run once the ops before it "
          "that write its operands are done", b=("count", GROUP)),
    _kind("place", "place {dst} <- {src} at owner {owner}'s coordinates", "dst's words at "
          "owner's coordinates <- src's words (a slice), dst's count <- src's count: selection, "
          "the inverse of slice", peer=("owner", OWNER), dst=("dst", WRITE), a=("src", READ),
          count=COUNT_READS),
    # -- a receive and the op that reads it, as one (the sums or the mean taken as the words
    #    arrive, in the pass that checks the frame; `_Schedule.reduce`, `project_replicated`) --
    _kind("recv-add-left", "recv-add {dst} = {left} <- {peer} + {right}", "left <- a combine value "
          "from peer, and dst <- left + right (as combine) as its words arrive",
          peer=("peer", PEER), dst=("dst", WRITE), a=("left", ARRIVE), b=("right", READ),
          matches="send", expect=EXPECT_SAMPLES, count=COUNT_READS),
    _kind("recv-add-right", "recv-add {dst} = {left} + {right} <- {peer}", "right <- a combine value "
          "from peer, and dst <- left + right (as combine) as its words arrive",
          peer=("peer", PEER), dst=("dst", WRITE), a=("left", READ), b=("right", ARRIVE),
          matches="send", expect=EXPECT_SAMPLES, count=COUNT_READS),
    _kind("recv-update", "recv-update {mean} <- {peer}", "mean <- a combine value from peer, its "
          "mean taken as its words arrive; then update as `update mean`", peer=("peer", PEER),
          a=("mean", ARRIVE), matches="send", expect=EXPECT_SAMPLES),
)

@lru_cache(maxsize=None)
def _of_type(kind: OpKind, types: tuple[str, ...]) -> tuple[Operand, ...]:
    return tuple(o for o in kind.operands if o.type in types)


@lru_cache(maxsize=None)
def _words_of(kind: str, types: tuple[str, ...]) -> tuple[str, ...]:
    """The words of `kind`'s operands of `types` (planning runs this once per op)."""
    return tuple(o.word for o in KIND[kind].of_type(*types))


OP_TABLE = tuple(OpKind(code=i, **row) for i, row in enumerate(_ROWS))
KIND = {k.name: k for k in OP_TABLE}
OP_KINDS = tuple(KIND)
OP_CODE = {k.name: k.code for k in OP_TABLE}
TALKING = frozenset(k.name for k in OP_TABLE if k.talks)
_UNUSED = {k.name: tuple(w for w, t in zip(WORDS, k.word_types()) if t == NONE) for k in OP_TABLE}
# per kind, the words of the registers it reads and of those it writes (in writing order)
_READ_WORDS = {k.name: tuple(o.word for o in k.of_type(READ, ARRIVE)) for k in OP_TABLE}
_WRITE_WORDS = {k.name: tuple(o.word for o in k.of_type(ARRIVE) + k.of_type(WRITE)) for k in OP_TABLE}


@dataclass(frozen=True)
class Op:
    """One op: its kind and its four operand words (-1 where the kind has no operand)."""

    kind: str
    peer: int = -1
    dst: int = -1
    a: int = -1
    b: int = -1

    def __post_init__(self) -> None:
        unused = _UNUSED.get(self.kind)
        if unused is None:
            raise ValueError(f"op kind {self.kind!r} is not in the op table")
        for word in unused:
            if getattr(self, word) != -1:
                raise ValueError(f"op {self.kind} has no operand in word {word}")

    @classmethod
    def of(cls, kind: str, **operands: int) -> Op:
        """The op of `kind` with its operands by name (`Op.of("install", src=3, regions=1)`)."""
        spec = KIND[kind]
        words = {o.word: operands.pop(o.name) for o in spec.operands if o.name in operands}
        if operands:
            raise ValueError(f"op {kind} has no operand {', '.join(operands)}")
        return cls(kind, **words)

    @property
    def spec(self) -> OpKind:
        return KIND[self.kind]

    def operand(self, name: str) -> int:
        """An operand's word, by its name in the table."""
        return getattr(self, next(o.word for o in self.spec.operands if o.name == name))

    def registers(self, *types: str) -> tuple[int, ...]:
        """The registers it names of the given types (READ, WRITE; both by default)."""
        return tuple(getattr(self, w) for w in _words_of(self.kind, types or REGISTERS))

    def reads(self) -> tuple[int, ...]:
        return tuple(getattr(self, w) for w in _READ_WORDS[self.kind])

    def writes(self) -> tuple[int, ...]:
        """The registers it writes: the one a frame fills first, then its result."""
        return tuple(getattr(self, w) for w in _WRITE_WORDS[self.kind])

    def words(self) -> tuple[int, int, int, int, int]:
        """The op as five signed integers: kind code, then WORDS."""
        return (OP_CODE[self.kind], self.peer, self.dst, self.a, self.b)


def regions_text(mask: int) -> str:
    return "+".join(n for bit, n in REGIONS if mask & bit) or "none"


_RENDER = {READ: "r{}".format, WRITE: "r{}".format, ARRIVE: "r{}".format, PEER: str, OWNER: str, MASK: regions_text,
           GROUP: str, FIRST: str, SAMPLES: str}


def render(op: Op) -> str:
    """The op's text: the table's `text` over its operands rendered by type (a register as
    r<i>, a mask as region names); a sample range (FIRST, SAMPLES) also names its {last}."""
    spec = op.spec
    fields = {o.name: _RENDER[o.type](getattr(op, o.word)) for o in spec.operands}
    first, count = spec.of_type(FIRST), spec.of_type(SAMPLES)
    if first and count:
        fields["last"] = getattr(op, first[0].word) + getattr(op, count[0].word) - 1
    return spec.text.format(**fields)

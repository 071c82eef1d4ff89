"""Storage formats: the words a learner's values are held, sent and checkpointed as.

The contract's profile names the format (`stdNumericFormat`). Under `StdBinary64` a value is
one word. Under `StdBinary32` every value of the learner (parameters, state, samples,
contributions, the combine's sums and the mean, and the rate) is a binary32 number held in
four bytes: two to a word, value 2j in the low half of word j (so the words' little-endian
bytes are the values' float32 bytes in order), an odd count's last word padded with +0.0.
Registers, frames, outputs and checkpoint shards then carry half the words. The programs
still compute in binary64 on the widened values, and every store into a slot must be a
binary32 value already (`round32(e)`, a slot read, or an exact selection of such): a
narrowing is written where it happens, never inferred (`binary32-narrowing`). The combine
adds in binary32 (each sum rounded once to binary32) and the mean divides in binary32.

Partitioned, a word's two values must belong to one owner: blocks of an even number of
coordinates, and (partitioned state) an even k and shared state values in pairs; the
layout is then the declared one over words (`word_partitioning`).

`check` holds a deployment to those rules and refuses what binary32 storage does not build
yet (`binary32-unsupported`); `pack` turns binary64 words of binary32 values into packed
words (the oracle unpacks them on its own, alphac/oracle/words.py). Nothing here runs at binary64 precision on behalf of a kernel:
packing is a change of representation, exact by the checks.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from alphac.diagnostics import DiagnosticBag
from alphac.ir import nodes as ir

FORMATS = {"binary64": 1, "binary32": 2}  # values per word
# The largest sample count whose binary32 conversion is exact (the mean's divisor).
BINARY32_COUNT_MAX = 1 << 24


def format_of(dep: ir.Deployment) -> str:
    return dep.contract.profile.format


def words(count: int, fmt: str) -> int:
    """Words holding `count` values of format `fmt`."""
    per = FORMATS[fmt]
    return (int(count) + per - 1) // per


def binary32_exact(words) -> np.ndarray:
    """For each binary64 word, whether it is a binary32 value (widening that value gives it)."""
    a = np.asarray(words, dtype=np.uint64).reshape(-1)
    with np.errstate(all="ignore"):
        return a.view(np.float64).astype(np.float32).astype(np.float64).view(np.uint64) == a


def pack(values, fmt: str) -> np.ndarray:
    """The packed words (uint64) of `values`, binary64 words of values of format `fmt`."""
    return pack_rows(np.asarray(values, dtype=np.uint64).reshape(1, -1), fmt).reshape(-1)


def pack_word(bits: int, fmt: str) -> int:
    """The storage word of one binary64 value (`bits`) in format `fmt` (binary32: the value
    in the word's first half): a learner's rate, an outer update's coefficients."""
    return int(pack([bits & (2**64 - 1)], fmt)[0])


def pack_rows(rows, fmt: str) -> np.ndarray:
    """An (N, s) matrix of binary64 words packed row by row: (N, words(s)) words, a row of
    odd length padded with +0.0."""
    a = np.asarray(rows, dtype=np.uint64)
    if fmt == "binary64":
        return a
    narrow = a.view(np.float64).astype(np.float32)
    if narrow.shape[1] % 2:
        narrow = np.concatenate([narrow, np.zeros((narrow.shape[0], 1), dtype=np.float32)], axis=1)
    return np.ascontiguousarray(narrow).view("<u8").astype(np.uint64)


def word_counts(dep: ir.Deployment) -> tuple[int, int, int]:
    """(k, s, m) in words: what the learner's parameters, one sample and its state occupy."""
    L, fmt = dep.learner, format_of(dep)
    return words(L.k, fmt), words(L.s, fmt), words(L.m, fmt)


def word_partitioning(dep: ir.Deployment) -> ir.Partitioning:
    """The partitioning over words: a binary32 learner's blocks of B coordinates are blocks
    of B / 2 words, and its shared state values the words that hold them (`check` has made
    sure each word's two values are one owner's, and both shared or neither)."""
    part = dep.partitioning
    per = FORMATS[format_of(dep)]
    if per == 1 or not part.any:
        return part
    # (an odd B is refused by `check`; the layout of its plan, never built, rounds it up)
    return dataclasses.replace(part, block_words=max(1, part.block_words // per),
                               shared_state=tuple(sorted({s // per for s in part.shared_state})))


def _partition_problems(dep: ir.Deployment) -> list[str]:
    """Why a binary32 learner's partitioning would put two owners' values in one word."""
    part, L = dep.partitioning, dep.learner
    out = []
    if part.block_words % 2:
        out.append(f"partitionBlockWords = {part.block_words}: a binary32 word holds two "
                   "coordinates, so a block must hold an even number of them (declare "
                   f"partitionBlockWords = {2 * part.block_words})")
    if part.optimizer_state.sharded and L.m and L.k % 2:
        out.append(f"k = {L.k}: partitioned optimizer state packs each block of k state values "
                   "into words, which needs an even k")
    shared = set(part.shared_state)
    odd = sorted(s for s in shared if (s ^ 1) not in shared and (s ^ 1) < L.m)
    if part.optimizer_state.sharded and odd:
        out.append(f"shared state value {odd[0]} shares its word with value {odd[0] ^ 1}, which "
                   "is not shared: list shared values in pairs 2j, 2j + 1")
    return out


# ----------------------------------------------------------------------------- checks

def _narrowed(e, lets: dict[str, bool]) -> bool:
    """Whether every value `e` can take is a binary32 value: a round32, a slot (every slot
    of a binary32 learner holds one), a binary32 constant, or an exact selection, sign or
    magnitude of such values."""
    if isinstance(e, ir.Unary):
        if e.op == "round32":
            return True
        return e.op in ("neg", "abs") and _narrowed(e.arg, lets)
    if isinstance(e, ir.SlotRef):
        return True
    if isinstance(e, ir.Const):
        return bool(binary32_exact([int(e.bits) & (2**64 - 1)])[0])
    if isinstance(e, ir.Local):
        return lets.get(e.name, False)
    if isinstance(e, ir.VectorLocal):
        return lets.get(f"{e.name}[]", False)
    if isinstance(e, ir.Binary):
        if e.op in ("min", "max"):
            return _narrowed(e.lhs, lets) and _narrowed(e.rhs, lets)
        return e.op == "copysign" and _narrowed(e.lhs, lets)
    if isinstance(e, ir.Select):
        return _narrowed(e.then, lets) and _narrowed(e.other, lets)
    return False


def _check_program(program: ir.Program, what: str, bag: DiagnosticBag) -> None:
    lets: dict[str, bool] = {}

    def walk(body) -> None:
        for st in body:
            if isinstance(st, ir.Loop):
                walk(st.body)
            elif isinstance(st, ir.Let):
                lets[st.name] = _narrowed(st.value, lets)
            elif isinstance(st, ir.VectorLet):
                lets[f"{st.name}[]"] = _narrowed(st.value, lets)
            elif isinstance(st, ir.Assign) and not _narrowed(st.value, lets):
                bag.error("binary32-narrowing",
                          f"the {what} stores a binary64 value into a binary32 slot",
                          st.span if st.span.line > 0 else program.span,
                          [f"assignment {st.label or 'slot ' + str(st.target.base)}: write "
                           "round32(...) where the value is narrowed (a narrowing is never "
                           "inferred)"])
    walk(program.body)


def _check_words(name: str, data, span, bag: DiagnosticBag) -> None:
    a = np.asarray(data, dtype=np.uint64).reshape(-1)
    ok = binary32_exact(a)
    x = a.view(np.float64)
    if not ok.all():
        j = int(np.argmin(ok))
        near = float(np.float32(x[j]))
        bag.error("binary32-inexact", f"a value of the learner's {name} is no binary32 number",
                  span, [f"{name}: word {j} is {float(x[j])!r} ({float(x[j]).hex()}); the nearest "
                         f"binary32 is {near!r} ({near.hex()})",
                         "write that value, or keep the binary64 profile and narrow with round32"])


def check(dep: ir.Deployment, span, bag: DiagnosticBag) -> None:
    """A binary32 deployment's rules (the module docstring); nothing for binary64."""
    if format_of(dep) != "binary32":
        return
    L = dep.learner
    lspan = L.span if L.span.line > 0 else span
    unsupported = []
    if L.independent:
        unsupported.append("an independent-state learner (its regions are binary64 words)")
    if dep.partitioning.any:
        unsupported += _partition_problems(dep)
    if "sm86" in dep.placement:
        unsupported.append("an SM86 owner (the device kernels load binary64 words)")
    total = sum(L.samples.shares)
    if total > BINARY32_COUNT_MAX:
        unsupported.append(f"{total:,} samples: the mean's count must be exact in binary32 "
                           f"(at most 2^24 = {BINARY32_COUNT_MAX:,})")
    for why in unsupported:
        bag.error("binary32-unsupported", "binary32 storage is not built for this deployment",
                  span, [why, "the binary64 profile runs it, with round32 where values narrow"])
    if unsupported or L.independent:
        return
    _check_words("initial parameters", L.initial.as_array(), lspan, bag)
    _check_words("initial state", L.initial_state.as_array(), lspan, bag)
    _check_words("rate", [int(L.rate) & (2**64 - 1)], lspan, bag)
    _check_words("samples", L.samples.words, lspan, bag)
    _check_program(L.contribution, "contribution", bag)
    _check_program(L.update, "update", bag)

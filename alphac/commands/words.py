"""How commands show binary64 words: by default a summary (how many, the first few in
decimal with their hex; a binary32 learner's, the binary32 values its words pack), with
--full every word as 16 hex digits, four to a line."""

from __future__ import annotations

from alphac.ir.words import to_float

WORDS_PER_LINE = 4
SHOWN = 4  # words a summary shows of each region
DIGEST_DIGITS = 16  # a digest in a table: its first 16 hex digits (--json: all 64)


def hex_word(w: int) -> str:
    return f"{int(w):016x}"


def decimal(w: int) -> str:
    """The shortest decimal that reads back as the word's binary64 value."""
    return repr(to_float(int(w)))


def halves(w: int) -> tuple[int, int]:
    """A binary32 learner's word as its two binary32 values' bits, the low half first."""
    return int(w) & 0xFFFFFFFF, int(w) >> 32


def decimal32(bits: int) -> str:
    """The shortest decimal that reads back as a binary32 value's bits."""
    import numpy as np

    return str(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def summary(name: str, words, fmt: str = "binary64") -> str:
    """`  params 3 words: 0.25 (3fd0000000000000), ...`, the first SHOWN of them; a
    binary32 learner's words as the values they pack, `0.25 (3e800000)`."""
    if not len(words):
        return f"  {name:<6} (none)"
    count = f"{len(words)} word{'' if len(words) == 1 else 's'}"
    if fmt == "binary32":
        values = [h for w in words[:SHOWN] for h in halves(w)][:SHOWN]
        shown = ", ".join(f"{decimal32(v)} ({v:08x})" for v in values)
        more = 2 * len(words) - SHOWN
        tail = f", ... {more} more (--full shows every word)" if more > 0 else ""
        return f"  {name:<6} {count} of binary32 pairs: {shown}{tail}"
    shown = ", ".join(f"{decimal(w)} ({hex_word(w)})" for w in words[:SHOWN])
    more = len(words) - SHOWN
    tail = f", ... {more} more (--full shows every word)" if more > 0 else ""
    return f"  {name:<6} {count}: {shown}{tail}"


def full(name: str, words) -> list[str]:
    """Every word, WORDS_PER_LINE to a line, the region's name on the first."""
    if not len(words):
        return [f"  {name:<6} (none)"]
    out = []
    for i in range(0, len(words), WORDS_PER_LINE):
        head = name if i == 0 else ""
        out.append(f"  {head:<6} " + " ".join(hex_word(w) for w in words[i:i + WORDS_PER_LINE]))
    return out


def lines(name: str, words, every: bool, fmt: str = "binary64") -> list[str]:
    return full(name, words) if every else [summary(name, words, fmt)]

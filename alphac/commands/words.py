"""How commands show binary64 words: by default a summary (how many, the first few in
decimal with their hex), with --full every word as 16 hex digits, four to a line."""

from __future__ import annotations

import struct

WORDS_PER_LINE = 4
SHOWN = 4  # words a summary shows of each region
DIGEST_DIGITS = 16  # a digest in a table: its first 16 hex digits (--json: all 64)


def hex_word(w: int) -> str:
    return f"{int(w):016x}"


def decimal(w: int) -> str:
    """The shortest decimal that reads back as the word's binary64 value."""
    return repr(struct.unpack("<d", struct.pack("<Q", int(w)))[0])


def summary(name: str, words) -> str:
    """`  params 3 words: 0.25 (3fd0000000000000), ...`, the first SHOWN of them."""
    if not len(words):
        return f"  {name:<6} (none)"
    shown = ", ".join(f"{decimal(w)} ({hex_word(w)})" for w in words[:SHOWN])
    more = len(words) - SHOWN
    tail = f", ... {more} more (--full shows every word)" if more > 0 else ""
    return f"  {name:<6} {len(words)} word{'' if len(words) == 1 else 's'}: {shown}{tail}"


def full(name: str, words) -> list[str]:
    """Every word, WORDS_PER_LINE to a line, the region's name on the first."""
    if not len(words):
        return [f"  {name:<6} (none)"]
    out = []
    for i in range(0, len(words), WORDS_PER_LINE):
        head = name if i == 0 else ""
        out.append(f"  {head:<6} " + " ".join(hex_word(w) for w in words[i:i + WORDS_PER_LINE]))
    return out


def lines(name: str, words, every: bool) -> list[str]:
    return full(name, words) if every else [summary(name, words)]

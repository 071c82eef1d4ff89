"""Slurm's hostlist syntax, expanded: `node[1-3,7]`, `n[01-10]` (zero padding by the width
of the lower bound), `a[1-2],b3`, `rack[1-2]-node[1-2]` (groups outermost first). The same
parser as the executables' `alphac/runtime/hostlist.c`, message for message; both are held
to one table of cases (tests/hostlist_cases.py). Bad input raises HostlistError, one line.
"""

from __future__ import annotations

import re

from alphac.wire import MAX_HOSTS

HOST_NAME_MAX_LEN = 255
MAX_DIGITS = 18  # every number of a range fits in a u64
NAME_CHAR = re.compile(r"[A-Za-z0-9._-]")
RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


class HostlistError(ValueError):
    """A host list that does not follow the syntax; the message says where (1-based)."""


def _range(text: str, a: int, b: int) -> tuple[int, int, int]:
    """(lo, hi, width of lo) of the range text[a:b]: N or N-M, N <= M."""
    r = text[a:b]
    m = RANGE.fullmatch(r)
    if m is None:
        raise HostlistError(f"bad range '{r}' at character {a + 1}: expected N or N-M")
    lo, hi = m.group(1), m.group(2) or m.group(1)
    if len(lo) > MAX_DIGITS or len(hi) > MAX_DIGITS:
        raise HostlistError(f"number in range '{r}' at character {a + 1} has more than {MAX_DIGITS} digits")
    if int(lo) > int(hi):
        raise HostlistError(f"range '{r}' at character {a + 1} runs backwards")
    return int(lo), int(hi), len(lo)


def _ranges(text: str, a: int, b: int) -> list[tuple[int, int, int]]:
    """Every range of the group text[a:b] (inside its brackets)."""
    out, s = [], a
    while True:
        e = text.find(",", s, b)
        e = b if e < 0 else e
        out.append(_range(text, s, e))
        if e == b:
            return out
        s = e + 1


def _parts(text: str, a: int, b: int) -> list[str | list[tuple[int, int, int]]]:
    """One entry text[a:b]: literal runs and bracket groups, nothing after the last group."""
    if a == b:
        raise HostlistError(f"empty entry at character {a + 1}")
    parts: list = []
    i, last_close = a, None
    while i < b:
        c = text[i]
        if c == "]":
            raise HostlistError(f"unexpected ']' at character {i + 1}")
        if c != "[":
            if not NAME_CHAR.fullmatch(c):
                raise HostlistError(f"character '{c}' at character {i + 1} is not allowed in a host name")
            if parts and isinstance(parts[-1], str):
                parts[-1] += c
            else:
                parts.append(c)
            i += 1
            continue
        close = i + 1
        while close < b and text[close] not in "[]":
            close += 1
        if close < b and text[close] == "[":
            raise HostlistError(f"'[' inside brackets at character {close + 1}")
        if close == b:
            raise HostlistError(f"unclosed '[' at character {i + 1}")
        parts.append(_ranges(text, i + 1, close))
        last_close = i = close
        i += 1
    if last_close is not None and last_close + 1 < b:
        raise HostlistError(f"text after the last ']' at character {last_close + 2}")
    return parts


def _count(parts) -> int:
    """How many names the parts expand to, capped just above MAX_HOSTS."""
    n = 1
    for p in parts:
        if not isinstance(p, str):
            n = min(MAX_HOSTS + 1, n * min(MAX_HOSTS + 1, sum(hi - lo + 1 for lo, hi, _ in p)))
    return n


def _longest(parts) -> int:
    return sum(len(p) if isinstance(p, str) else max(max(w, len(str(hi))) for _, hi, w in p)
               for p in parts)


def _entry_end(text: str, a: int) -> int:
    """The next comma outside brackets after a, or the end."""
    depth = 0
    for i in range(a, len(text)):
        if text[i] == "[":
            depth = 1
        elif text[i] == "]":
            depth = 0
        elif text[i] == "," and not depth:
            return i
    return len(text)


def _expand(parts, prefix: str = "") -> list[str]:
    if not parts:
        return [prefix]
    head, rest = parts[0], parts[1:]
    if isinstance(head, str):
        return _expand(rest, prefix + head)
    return [name for lo, hi, width in head for v in range(lo, hi + 1)
            for name in _expand(rest, prefix + f"{v:0{width}d}")]


def expand(text: str) -> list[str]:
    """Every host name of the list, in order (duplicates kept); HostlistError if malformed
    or longer than MAX_HOSTS names."""
    if not text:
        raise HostlistError("empty host list")
    entries, total, a = [], 0, 0
    while True:  # every entry checked, and counted, before any is expanded
        b = _entry_end(text, a)
        parts = _parts(text, a, b)
        if _longest(parts) > HOST_NAME_MAX_LEN:
            raise HostlistError(f"entry at character {a + 1} expands to a host name longer than "
                                f"{HOST_NAME_MAX_LEN} characters")
        total += _count(parts)
        if total > MAX_HOSTS:
            raise HostlistError(f"expands to more than {MAX_HOSTS} hosts")
        entries.append(parts)
        if b == len(text):
            return [name for parts in entries for name in _expand(parts)]
        a = b + 1

"""Reading lists of plain numbers ahead of the parser: inline samples are most of a big spec.

A list such as `[1.5, -2, 0x1p-3]` in value position (after `=`, `,`, `[`, `(` or
`shares`) is replaced by one NUMBERS token of exactly the same extent (U+0001, the list's
newlines with spaces for everything else, U+0002), so every position stays where it was and
the token's offset names the list; the list is built here as the very AST the parser would
have built, spans included. A sample `[1, 2]` costs so about what its numbers do, not a
parse tree. Anything else, and
any list on a line with a string or a comment before it, is left to the parser.
"""

from __future__ import annotations

import bisect
import re

from alphac.diagnostics import Span
from alphac.syntax import ast

_NUM = (r"-?(?:0[xX][0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?[pP][+-]?[0-9]+"
        r"|[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|0[xX][0-9a-fA-F]+|[0-9]+)"
        r"(?![0-9A-Za-z_.'])")
# A list's opening bracket in value position; the list itself is then read item by item
# (_scan): one regular expression over a whole list kept a backtracking frame per item,
# about 500 bytes a number while it ran.
_OPEN = re.compile(r"(?:(?<=[=,\[(])|(?<=\bshares))[ \t\r\n]*(\[)")
_BLANKS = re.compile(r"[ \t\r\n]*")
_ITEM = re.compile(_NUM)
MARK, END = "\x01", "\x02"
_BLANK = re.compile(r"[^\n]")


def _is_float(body: str) -> bool:
    if body[:2] in ("0x", "0X"):
        return "p" in body or "P" in body
    return "." in body or "e" in body or "E" in body


def _scan(text: str, a: int, number, listed):
    """The number list whose `[` is at `a`, as (end, node): `[` ITEM (`,` ITEM)* `,`? `]` with
    blanks between, an ITEM a number (`number(start, end)` builds its node) or a nested
    number list (`listed(start, end, items)`); None where the text there is not one (no
    item, or anything else inside)."""
    items: list = []
    p = _BLANKS.match(text, a + 1).end()
    while True:
        m = _ITEM.match(text, p)
        if m is not None:
            items.append(number(p, m.end()))
            p = m.end()
        elif text.startswith("[", p):
            inner = _scan(text, p, number, listed)  # at most 64 deep (parse.check_nesting)
            if inner is None:
                return None
            p = inner[0]
            items.append(inner[1])
        elif items and text.startswith("]", p):  # after a trailing comma
            return p + 1, listed(a, p + 1, items)
        else:
            return None
        p = _BLANKS.match(text, p).end()
        if text.startswith("]", p):
            return p + 1, listed(a, p + 1, items)
        if not text.startswith(",", p):
            return None
        p = _BLANKS.match(text, p + 1).end()


def _lists(text: str, number, listed):
    """(start, end, node) of every number list in value position outside another one, in order."""
    pos = 0
    while True:
        m = _OPEN.search(text, pos)
        if m is None:
            return
        found = _scan(text, m.start(1), number, listed)
        if found is None:
            pos = m.start(1) + 1
            continue
        yield m.start(1), found[0], found[1]
        pos = found[0]


def read_ahead(path: str, text: str) -> tuple[str, dict[int, ast.ListLit]]:
    """(text with number lists replaced by NUMBERS tokens, the lists' ASTs by offset)."""
    if "[" not in text or MARK in text or END in text:
        return text, {}
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))

    def span(a: int, b: int) -> Span:
        line = bisect.bisect_right(starts, a)
        end_line = bisect.bisect_right(starts, b)
        return Span(path, line, a - starts[line - 1] + 1, end_line, b - starts[end_line - 1] + 1)

    def number(s: int, e: int):
        token = text[s:e]
        neg = token.startswith("-")
        digits = token[1:] if neg else token
        ds = s + 1 if neg else s
        if _is_float(digits):
            item = ast.FloatLit(digits, span(ds, e))
        else:
            value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
            item = ast.IntLit(digits, value, span(ds, e))
        return ast.Unary("neg", item, span(s, e)) if neg else item

    def listed(a: int, b: int, items: list) -> ast.ListLit:
        return ast.ListLit(tuple(items), span(a, b))

    lists: dict[int, ast.ListLit] = {}
    out: list[str] = []
    pos = 0
    seen_line, risky = -1, False  # the line last looked at; whether it has a string or comment
    for a, b, node in _lists(text, number, listed):
        line = bisect.bisect_right(starts, a) - 1
        if line != seen_line:
            end = starts[line + 1] if line + 1 < len(starts) else len(text)
            seen_line = line
            risky = text.find('"', starts[line], end) >= 0 or text.find("--", starts[line], end) >= 0
        if risky:
            prefix = text[starts[line]:a]
            if '"' in prefix or "--" in prefix:
                continue
        body = text[a:b]
        # The token keeps the list's newlines so that every later line number is unchanged.
        inner = _BLANK.sub(" ", body[1:-1])
        lists[a] = node
        out.append(text[pos:a])
        out.append(MARK + inner + END)
        pos = b
    out.append(text[pos:])
    return "".join(out), lists

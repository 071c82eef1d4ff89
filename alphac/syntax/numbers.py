"""Reading lists of plain numbers ahead of the parser: inline samples are most of a big spec.

A list such as `[1.5, -2, 0x1p-3]` in value position (after `=`, `,`, `[`, `(` or
`shares`) is replaced by one NUMBERS token of exactly the same extent (U+0001, its index,
the list's spaces and newlines, U+0002), so every position stays where it was; the list is
built here as the very AST the parser would have built, spans included. Anything else, and
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
_LIST = re.compile(r"(?:(?<=[=,\[(])|(?<=\bshares))([ \t\r\n]*)(\[[ \t\r\n]*" + _NUM
                   + r"(?:[ \t\r\n]*,[ \t\r\n]*" + _NUM + r")*[ \t\r\n]*,?[ \t\r\n]*\])")
_ITEM = re.compile(_NUM)
MARK, END = "\x01", "\x02"
_BLANK = re.compile(r"[^\n]")


def _is_float(body: str) -> bool:
    if body[:2] in ("0x", "0X"):
        return "p" in body or "P" in body
    return "." in body or "e" in body or "E" in body


def read_ahead(path: str, text: str) -> tuple[str, list[ast.ListLit]]:
    """(text with number lists replaced by NUMBERS tokens, the lists' ASTs by index)."""
    if "[" not in text or MARK in text or END in text:
        return text, []
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))

    def span(a: int, b: int) -> Span:
        line = bisect.bisect_right(starts, a)
        end_line = bisect.bisect_right(starts, b)
        return Span(path, line, a - starts[line - 1] + 1, end_line, b - starts[end_line - 1] + 1)

    lists: list[ast.ListLit] = []
    out: list[str] = []
    pos = 0
    seen_line, risky = -1, False  # the line last looked at; whether it has a string or comment
    for m in _LIST.finditer(text):
        a, b = m.span(2)
        line = bisect.bisect_right(starts, a) - 1
        if line != seen_line:
            end = starts[line + 1] if line + 1 < len(starts) else len(text)
            seen_line = line
            risky = text.find('"', starts[line], end) >= 0 or text.find("--", starts[line], end) >= 0
        if risky:
            prefix = text[starts[line]:a]
            if '"' in prefix or "--" in prefix:
                continue
        mark = f"{MARK}{len(lists)}"
        body = m.group(2)
        if len(body) < len(mark) + 1:
            continue  # too short to hold its mark: the parser reads it
        # The token keeps the list's newlines so that every later line number is unchanged.
        inner = _BLANK.sub(" ", body[len(mark):-1])
        items = []
        for n in _ITEM.finditer(body):
            s, e = a + n.start(), a + n.end()
            token = n.group()
            neg = token.startswith("-")
            digits = token[1:] if neg else token
            ds = s + 1 if neg else s
            if _is_float(digits):
                item = ast.FloatLit(digits, span(ds, e))
            else:
                value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
                item = ast.IntLit(digits, value, span(ds, e))
            items.append(ast.Unary("neg", item, span(s, e)) if neg else item)
        lists.append(ast.ListLit(tuple(items), span(a, b)))
        out.append(text[pos:a])
        out.append(mark + inner + END)
        pos = b
    out.append(text[pos:])
    return "".join(out), lists

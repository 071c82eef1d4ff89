"""Canonical, flat encodings of IR for identities and contracts, and infix text of programs.

Every walk is iterative and every encoding is a flat list of strings and ints, so neither a
10,000-branch chain nor a long expression reaches a recursion limit (in Python or in the
JSON encoder). Spans and labels never take part: they do not change what runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from alphac.ir import nodes as ir

_SKIP = {"span", "label"}


def _fields(obj) -> list:
    """The fields that take part: not spans or labels, nor a field marked `OMIT_DEFAULT`
    (ir/nodes.py) while it holds its default, so IR that predates it keeps its encoding."""
    return [getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in _SKIP
            and not (f.metadata.get("canon") == "omit-default" and getattr(obj, f.name) == f.default)]


def flat(obj) -> list:
    """Prefix tokens of an IR value: `(Name` fields `)`; tuples `[` items `]`."""
    out: list = []
    stack: list = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, _Token):
            out.append(item.text)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            out.append("(" + type(item).__name__)
            stack.append(_CLOSE)
            stack.extend(reversed(_fields(item)))
        elif isinstance(item, (tuple, list)):
            out.append("[")
            stack.append(_END)
            stack.extend(reversed(item))
        elif item is None or isinstance(item, (bool, int, str)):
            out.append(item)
        else:
            raise TypeError(f"no canonical form for {type(item).__name__}")
    return out


class _Token:
    def __init__(self, text: str) -> None:
        self.text = text


_CLOSE = _Token(")")
_END = _Token("]")


def tree_table(nodes) -> list[list[int]]:
    """A post-order node table: [owner] for a leaf, [owner, left, right] for a branch
    (children by table index)."""
    index: dict[int, int] = {}
    table: list[list[int]] = []
    for node in nodes:
        if isinstance(node, ir.TreeLeaf):
            table.append([node.owner])
        else:
            table.append([node.owner, index.pop(id(node.left)), index.pop(id(node.right))])
        index[id(node)] = len(table) - 1
    return table


def canonical_json(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# ----------------------------------------------------------------------------- program text

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


# An elementary function's text names its level (and a declared algorithm's edition), so
# the protocol identity changes with either (docs/language.md "Elementary functions").
_FUNCTION_TEXT = {"exp": "exp.correctly-rounded", "log": "log.correctly-rounded",
                  "log1p": "log1p.correctly-rounded", "expm1": "expm1.correctly-rounded",
                  "sigmoid": "sigmoid.declared-1", "tanh": "tanh.declared-1"}


def word_text(bits: int) -> str:
    return f"word(0x{bits:016X})"


def expr_text(expr) -> str:
    """Fully parenthesised infix text of an expression (every binary op in parentheses)."""
    out: list[str] = []
    stack: list = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, _Token):
            if item.text == "@bin":
                rhs, lhs = out.pop(), out.pop()
                op = stack.pop()
                out.append(f"({lhs} {_INFIX[op]} {rhs})" if op in _INFIX else f"{op}({lhs}, {rhs})")
            elif item.text == "@un":
                arg = out.pop()
                op = stack.pop()
                out.append(f"(-{arg})" if op == "neg" else f"{_FUNCTION_TEXT.get(op, op)}({arg})")
            elif item.text == "@select":
                other, then, cond = out.pop(), out.pop(), out.pop()
                out.append(f"select({cond}, {then}, {other})")
            elif item.text == "@sum":
                body = out.pop()
                var, lo, hi = stack.pop()
                out.append(f"(sum {var} in {lo} .. {hi} of {body})")
            continue
        if isinstance(item, ir.Const):
            out.append(word_text(item.bits))
        elif isinstance(item, ir.SlotRef):
            out.append(f"slot {item.index}")
        elif isinstance(item, ir.Local):
            out.append(item.name)
        elif isinstance(item, ir.VectorLocal):
            out.append(f"{item.name}[{item.index}]")
        elif isinstance(item, (ir.Binary, ir.Compare)):
            stack.extend([item.op, _Token("@bin"), item.rhs, item.lhs])
        elif isinstance(item, ir.Select):
            stack.extend([_Token("@select"), item.other, item.then, item.cond])
        elif isinstance(item, ir.Unary):
            stack.extend([item.op, _Token("@un"), item.arg])
        elif isinstance(item, ir.Sum):
            stack.extend([(item.var, item.lo, item.hi), _Token("@sum"), item.body])
        else:
            raise TypeError(f"not an expression: {type(item).__name__}")
    (text,) = out
    return text


def program_lines(program: ir.Program) -> list[str]:
    """One line per statement, loops flattened with their header: the program's op order."""
    lines: list[str] = []
    stack: list = [(s, "") for s in reversed(program.body)]
    while stack:
        stmt, indent = stack.pop()
        if isinstance(stmt, str):
            lines.append(stmt)
        elif isinstance(stmt, ir.Assign):
            lines.append(f"{indent}slot {stmt.target} := {expr_text(stmt.value)}")
        elif isinstance(stmt, ir.Let):
            lines.append(f"{indent}let {stmt.name} = {expr_text(stmt.value)}")
        elif isinstance(stmt, ir.VectorLet):
            lines.append(f"{indent}let {stmt.name}[{stmt.var}] = {expr_text(stmt.value)}")
        elif isinstance(stmt, ir.Loop):
            lines.append(f"{indent}for {stmt.var} in {stmt.lo} .. {stmt.hi} {{")
            stack.append((f"{indent}}}", ""))
            stack.extend((s, indent + "  ") for s in reversed(stmt.body))
        else:
            raise TypeError(f"not a statement: {type(stmt).__name__}")
    return lines

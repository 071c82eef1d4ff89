"""Reading and parsing one spec file: pre-checks, lark, and translation of lark's errors.

Before lark sees a byte: the path must be a readable file (`io-error`), no larger than
MAX_BYTES (`file-too-large`), UTF-8 (`invalid-encoding`), and brackets may nest at most
MAX_NESTING deep (`nesting-too-deep`); after parsing, the tree may be at most MAX_DEPTH
deep, so that no later recursive pass can exhaust the Python stack.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from functools import lru_cache
from importlib.resources import files

from alphac.diagnostics import CompileError, Diagnostic, Span
from alphac.syntax import ast

MAX_BYTES = 16 * 1024 * 1024
MAX_NESTING = 64
MAX_DEPTH = 400

# Shipped in the package beside this module; read with importlib.resources.
GRAMMAR = files("alphac.syntax") / "alpha.lark"

# Readable spellings of the grammar's terminals, for "expected ..." notes.
_TERMINAL_TEXT = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a decimal number",
    "HEXFLOAT": "a hex float", "STRING": "a string", "END_FAMILY": "'end-family'",
    "NUMBERS": "a list",
    "$END": "end of file",
}


# The parser's options; with the grammar and lark's version they name its cache file.
_OPTIONS = dict(parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False)


@lru_cache(maxsize=1)
def parser():
    """The LALR parser of the grammar. Its analysed tables are kept in the user's own cache
    directory (alphac.resources; never the shared temporary directory, where another user
    could plant one), in a file named by the sha256 of the grammar, the options and lark's
    version, written whole or not at all (a new name renamed over it), so a new process
    loads them instead of analysing the grammar again. A file that does not load is
    replaced."""
    import lark

    text = GRAMMAR.read_text(encoding="utf-8")
    key = hashlib.sha256(repr((text, sorted(_OPTIONS.items()), lark.__version__)).encode()).hexdigest()
    path = _cache_path(f"alpha-{key[:32]}.lark")
    if path is not None:
        try:
            with open(path, "rb") as fh:
                return lark.Lark.load(fh)
        except Exception:  # absent, unreadable or not lark's: analysed again below
            pass
    made = lark.Lark(text, **_OPTIONS)
    if path is not None:
        _save(made, path)
    return made


def _cache_path(name: str):
    from alphac.resources import cache_dir

    folder = cache_dir() / "grammar"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / name


def _save(made, path) -> None:
    """Write the parser's tables to `path` whole: into a private name, then renamed."""
    fresh = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(fresh, "wb") as fh:
            made.save(fh)
        os.replace(fresh, path)
    except OSError:
        pass
    finally:
        if fresh.exists():
            fresh.unlink()


def _error(code: str, message: str, span: Span, notes=()) -> CompileError:
    return CompileError(Diagnostic(code, message, span, tuple(notes)))


def max_bytes() -> int:
    """The size limit: MAX_BYTES, or `$ALPHAC_MAX_SPEC_BYTES` when set to a number."""
    try:
        return int(os.environ.get("ALPHAC_MAX_SPEC_BYTES", MAX_BYTES))
    except ValueError:
        return MAX_BYTES


# The name of a spec read from standard input (`alphac check -`); its imports resolve in the
# working directory.
STDIN = "<stdin>"


def read_source(path: str) -> str:
    """The text of `path` (STDIN: standard input, read to its end), or
    CompileError(io-error | file-too-large | invalid-encoding)."""
    where = Span(path, 1, 1)
    try:
        data = sys.stdin.buffer.read(max_bytes() + 1) if path == STDIN else _read_file(path, where)
    except FileNotFoundError:
        raise _error("io-error", "no such file", where) from None
    except OSError as exc:
        raise _error("io-error", f"cannot read: {exc.strerror or exc}", where) from None
    if len(data) > max_bytes():
        raise _error("file-too-large", f"a spec may have at most {max_bytes()} bytes", where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _error("invalid-encoding",
                     f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8 text",
                     Span(path, line, col)) from None


def _read_file(path: str, where: Span) -> bytes:
    if os.path.isdir(path):
        raise _error("io-error", "is a directory, not a spec file", where)
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        # a pipe or device could block or never end
        raise _error("io-error", "is not a regular file", where)
    limit = max_bytes()
    if info.st_size > limit:
        raise _error("file-too-large",
                     f"the file has {info.st_size} bytes; a spec may have at most {limit}", where)
    with open(path, "rb") as handle:
        return handle.read(limit + 1)


_BRACKETS = re.compile(r'--[^\n]*|"[^"\n]*"|[(\[{]|[)\]}]')


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def check_nesting(path: str, text: str) -> None:
    """Refuse brackets nested deeper than MAX_NESTING, before the parser builds anything."""
    if text.count("(") + text.count("[") + text.count("{") <= MAX_NESTING:
        return
    depth = 0
    for match in _BRACKETS.finditer(text):
        ch = match.group()[0]
        if ch in "([{":
            depth += 1
            if depth > MAX_NESTING:
                line, col = _position(text, match.start())
                raise _error("nesting-too-deep",
                             f"brackets nest more than {MAX_NESTING} deep",
                             Span(path, line, col, line, col + 1))
        elif ch in ")]}":
            depth = max(0, depth - 1)


def _tree_depth_check(path: str, tree) -> None:
    from lark import Tree

    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = node.meta
            span = Span(path, getattr(meta, "line", 1), getattr(meta, "column", 1))
            raise _error("nesting-too-deep",
                         f"the expression nests more than {MAX_DEPTH} levels deep", span,
                         ["split it with `let` temporaries or named values"])
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth + 1))


def _describe_expected(expected) -> str:
    p = parser()
    names = []
    for name in sorted(expected):
        if name in _TERMINAL_TEXT:
            names.append(_TERMINAL_TEXT[name])
            continue
        try:
            pattern = p.get_terminal(name).pattern
        except KeyError:
            names.append(name)
            continue
        names.append(f"'{pattern.value}'" if pattern.type == "str" else name)
    names = sorted(set(names))
    if len(names) > 10:
        names = names[:10] + ["..."]
    return ", ".join(names)


def _translate(path: str, exc, text: str) -> CompileError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    if isinstance(exc, UnexpectedCharacters):
        ch = exc.char
        shown = repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
        return _error("syntax-error", f"unexpected character {shown}",
                      Span(path, exc.line, exc.column, exc.line, exc.column + 1))
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        notes = []
        if exc.expected:
            notes.append(f"expected {_describe_expected(exc.expected)}")
        if token.type == "$END":
            line, col = _position(text, len(text))
            return _error("syntax-error", "unexpected end of file", Span(path, line, col), notes)
        shown = "[" if token.type == "NUMBERS" else str(token)  # a list read ahead
        width = max(1, len(shown))
        end_col = token.column + width if "\n" not in shown else token.column + 1
        return _error("syntax-error", f"unexpected {shown!r}",
                      Span(path, token.line, token.column, token.line, end_col), notes)
    if isinstance(exc, UnexpectedEOF):
        line, col = _position(text, len(text))
        return _error("syntax-error", "unexpected end of file", Span(path, line, col))
    return _error("syntax-error", str(exc).splitlines()[0], Span(path, 1, 1))


# Modules parsed in this process, by (path, text): the AST is immutable (frozen dataclasses
# of tuples), so the std modules every spec imports are parsed once. A text that does not
# parse is not kept (its error is raised afresh), nor one over PARSED_MAX_BYTES characters.
_PARSED: "dict[tuple[str, str], ast.Module]" = {}
PARSED_KEPT = 256
PARSED_MAX_BYTES = 256 * 1024


def parse_text(path: str, text: str) -> ast.Module:
    """Parse `text` (named `path` in diagnostics) into an AST, or raise CompileError; the
    same path and text give the same (kept) AST."""
    if len(text) > PARSED_MAX_BYTES:
        return _parse_text(path, text)
    key = (path, text)
    tree = _PARSED.pop(key, None)
    if tree is None:
        tree = _parse_text(path, text)
        if len(_PARSED) >= PARSED_KEPT:
            del _PARSED[next(iter(_PARSED))]  # the least recently used
    _PARSED[key] = tree
    return tree


def _parse_text(path: str, text: str) -> ast.Module:
    from lark.exceptions import LarkError

    from alphac.syntax.transform import ToAst

    from alphac.syntax.numbers import read_ahead

    check_nesting(path, text)
    marked, lists = read_ahead(path, text)
    try:
        tree = parser().parse(marked)
    except LarkError as exc:
        raise _translate(path, exc, text) from None
    _tree_depth_check(path, tree)
    return ToAst(path, text, lists).transform(tree)


def parse_file(path: str) -> tuple[ast.Module, str]:
    """Read and parse `path`: (AST, source text), or raise CompileError."""
    text = read_source(path)
    return parse_text(path, text), text

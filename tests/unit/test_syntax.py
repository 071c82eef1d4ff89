"""The grammar and the parser front: aliases vs transformer, spans, pre-checks, lark errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from alphac.diagnostics import CompileError
from alphac.syntax import ast, parse_file, parse_text
from alphac.syntax.parse import GRAMMAR, MAX_NESTING
from alphac.syntax.transform import ToAst

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT.parent / "shared" / "seeds" / "000_218c1b39c5051fea.txt"


def codes_of(text: str) -> list[str]:
    with pytest.raises(CompileError) as info:
        parse_text("t.alpha", text)
    return [d.code for d in info.value.diagnostics]


def test_every_alias_has_exactly_one_transformer_method():
    aliases = set(re.findall(r"->\s*([a-z_0-9]+)", GRAMMAR.read_text()))
    methods = {name for name in vars(ToAst) if not name.startswith("_")}
    assert aliases == methods


def test_the_transformer_refuses_an_unknown_rule():
    from lark import Tree

    with pytest.raises(NotImplementedError):
        ToAst("t", "").transform(Tree("no_such_rule", []))


def test_the_seed_declaration_parses_with_its_members_in_order():
    module, _ = parse_file(str(ROOT / "specs" / "seed_dataparallel.alpha"))
    (family,) = module.items
    assert family.name == "DataParallelSystem"
    assert family.kind == ast.TypeUniverse(0)
    kinds = [type(m).__name__ for m in family.members]
    assert kinds == ["ParameterDecl"] * 2 + ["ConstructorDecl"] + ["FieldDecl"] * 8
    field = family.members[5]
    assert field == ast.FieldDecl("dataParallelContribution", ast.TypeApply("StdList", (
        ast.TypeApply("PointwiseAssignment", (ast.TypeName("StdU64"),
                                              ast.TypeName("dataParallelContributionSlots"))),)))


@pytest.mark.skipif(not SEED.is_file(), reason="the seed documents are not beside the tree")
def test_std_data_parallel_holds_the_seed_text_verbatim():
    seed = SEED.read_text()
    block = seed[seed.index("-- Slots, by position"):seed.index("end-family") + len("end-family")]
    assert block in (ROOT / "alphac" / "std" / "Learning" / "DataParallel.alpha").read_text()
    assert block in (ROOT / "specs" / "seed_dataparallel.alpha").read_text()


def test_spans_are_located_and_never_compared():
    module = parse_text("f.alpha", "value x : StdU64 =\n  0x1.8p-3\n")
    value = module.items[0]
    assert (value.value.span.line, value.value.span.col) == (2, 3)
    assert value.value == ast.FloatLit("0x1.8p-3")
    assert parse_text("g.alpha", "value   x:StdU64=0x1.8p-3") .items == module.items


def test_literal_forms_and_precedence():
    e = parse_text("t", "value x : StdU64 = -1.5 + 2 * word(0x3FF0000000000000) / sqrt(f64(3))").items[0].value
    assert e == ast.Binary("add", ast.Unary("neg", ast.FloatLit("1.5")), ast.Binary(
        "div", ast.Binary("mul", ast.IntLit("2", 2), ast.WordLit(0x3FF0000000000000)),
        ast.Unary("sqrt", ast.Unary("f64", ast.IntLit("3", 3)))))


def test_for_bounds_never_read_a_constructor():
    body = parse_text("t", "value p : Nat = pointwise { for i in 0 .. k { g[i] := x[i] } }").items[0].value
    (loop,) = body.body
    assert loop == ast.For("i", ast.NatLit(0), ast.NatName("k"), (ast.Assign(
        ast.TargetIndex("g", ast.NatName("i")), ast.ViewRef("x", ast.NatName("i"))),))
    assert loop.body[0].text == "g[i]"


def test_per_slot_assignments_keep_their_label():
    items = parse_text("t", "value p : Nat = [slot 5 := slot 0 * slot 2,]").items[0].value.items
    assert items == (ast.SlotAssign(ast.NatLit(5), ast.Binary(
        "mul", ast.SlotRef(ast.NatLit(0)), ast.SlotRef(ast.NatLit(2)))),)
    assert items[0].text == "slot 5"


@pytest.mark.parametrize("text, where, message", [
    ("value k = 2", "t.alpha:1:9", "unexpected '='"),
    ("value k : Nat = ", "t.alpha:1:17", "unexpected end of file"),
    ("value k : Nat = 2 $", "t.alpha:1:19", "unexpected character '$'"),
    ("family F : Type 0\nconstructor C\n", "t.alpha:3:1", "unexpected end of file"),
])
def test_lark_errors_become_located_syntax_errors(text, where, message):
    with pytest.raises(CompileError) as info:
        parse_text("t.alpha", text)
    (d,) = info.value.diagnostics
    assert (d.code, str(d.span), d.message) == ("syntax-error", where, message)


def test_nesting_limit_is_exact():
    ok = "value x : StdU64 = " + "(" * MAX_NESTING + "1.0" + ")" * MAX_NESTING
    parse_text("t", ok)
    assert codes_of("value x : StdU64 = " + "(" * (MAX_NESTING + 1) + "1.0" + ")" * (MAX_NESTING + 1)) \
        == ["nesting-too-deep"]


def test_brackets_in_comments_and_strings_do_not_count():
    parse_text("t", "-- " + "(" * 500 + "\nvalue s : String = \"" + "[" * 500 + "\"\n")


@pytest.mark.parametrize("data, code", [
    (b"value s : String = \"\xff\"", "invalid-encoding"),
    (b"\x00\x01\x02", "syntax-error"),
])
def test_bytes_that_are_not_a_spec(tmp_path, data, code):
    path = tmp_path / "x.alpha"
    path.write_bytes(data)
    with pytest.raises(CompileError) as info:
        parse_file(str(path))
    assert [d.code for d in info.value.diagnostics] == [code]


def _spans(node, out):
    """Every span in an AST, in a fixed walk order."""
    import dataclasses

    if isinstance(node, tuple):
        for item in node:
            _spans(item, out)
    elif dataclasses.is_dataclass(node):
        out.append((type(node).__name__, getattr(node, "span", None)))
        for f in dataclasses.fields(node):
            if f.name != "span":
                _spans(getattr(node, f.name), out)
    return out


READ_AHEAD_CASES = [
    "value a : (family StdList StdU64) = [1.5, -2, 0x1.8p-3, 0x10,\n  7e-3 , ]\n",
    "value a : X = F { xs = [[1.0, 2.0],\n [3.0]], ys = load \"p\" shares [1, 0] }\n",
    "value p : X = pointwise { view x = slot 0 .. 2\n slot 3 := x[0] * x[1] }\n",
    "value a : X = [1.5] -- [2.5]\nvalue b : String = \"[1, 2]\"\nvalue c : X = [1..2]\n",
    "value a : X = [1.5e, 2]\n",
    "value a : X = [- 1.5, 2]\nvalue b : X = [1, 2] [3]\n",
    "value a : X = [[[1]], [2, [3,]],\n [-4e1 ,0x1p-2],]\nvalue b : X = [[1, 2], [], [3]]\n",
    "value a : X = [[1], [2] [3]]\nvalue b : X = F { xs = [[1, 2], [x]], ys = [[1],\n -- [2]\n [3]] }\n",
]


@pytest.mark.parametrize("text", READ_AHEAD_CASES + [
    p.read_text() for p in sorted((ROOT / "specs").rglob("*.alpha"))])
def test_number_lists_read_ahead_give_the_parsers_tree_and_spans(text, monkeypatch):
    def parse(read_ahead: bool):
        if not read_ahead:
            monkeypatch.setattr("alphac.syntax.numbers.read_ahead", lambda path, text: (text, []))
        try:
            module = parse_text("t.alpha", text)
        except CompileError as exc:
            return [(d.code, str(d.span), d.message) for d in exc.diagnostics]
        finally:
            monkeypatch.undo()
        return module, _spans(module, [])

    assert parse(True) == parse(False)


def test_a_list_of_number_lists_is_read_ahead_as_one_token():
    from alphac.syntax.numbers import read_ahead

    # inline samples: each was a list of its own for the parser (one `[1, 2]` past the 999th
    # was too short for its index and was parsed), their list a parse tree of 2**17 items
    text = "value a : X = [" + ", ".join(["[1, 2]"] * 2000) + "]\n"
    marked, lists = read_ahead("t.alpha", text)
    assert list(lists) == [len("value a : X = ")] and "[" not in marked
    assert len(marked) == len(text) and marked.count("\x01") == 1
    (outer,) = lists.values()
    assert len(outer.items) == 2000 and all(len(x.items) == 2 for x in outer.items)


def test_the_parser_s_tables_are_cached_whole_and_a_bad_cache_is_replaced(tmp_path, monkeypatch):
    from alphac.syntax import parse as P

    monkeypatch.setenv("ALPHAC_CACHE", str(tmp_path))
    P.parser.cache_clear()
    try:
        first = P.parser()
        [cached] = list((tmp_path / "grammar").iterdir())
        assert cached.name.startswith("alpha-") and cached.suffix == ".lark"
        text = (Path(__file__).resolve().parents[2] / "specs" / "demo.alpha").read_text()
        P.parser.cache_clear()
        assert P.parser().parse(text) == first.parse(text)  # loaded from the file
        cached.write_bytes(b"not lark's tables")
        P.parser.cache_clear()
        assert P.parser().parse(text) == first.parse(text)  # analysed again, file rewritten
        assert cached.read_bytes() != b"not lark's tables"
        assert sorted(p.name for p in (tmp_path / "grammar").iterdir()) == [cached.name]
    finally:
        P.parser.cache_clear()


def test_a_text_is_parsed_once_per_path_and_its_errors_every_time(monkeypatch):
    from alphac.syntax import parse as module

    calls = []
    real = module._parse_text
    monkeypatch.setattr(module, "_parse_text", lambda p, t: calls.append(p) or real(p, t))
    text = "module Once\nvalue k : Nat = 3\n"
    first = parse_text("once.alpha", text)
    assert parse_text("once.alpha", text) is first and calls == ["once.alpha"]
    other = parse_text("elsewhere.alpha", text)  # spans name the path: another AST
    assert other is not first and other.span.file == "elsewhere.alpha"
    assert parse_text("once.alpha", text + "\n") is not first and len(calls) == 3
    for _ in range(2):
        assert codes_of("module Broken\nvalue k : Nat =\n") == ["syntax-error"]
    assert calls.count("t.alpha") == 2

"""Defaulted fields (`field unrestricted NAME : TYPE = EXPR`): parsed, checked once where the
family is declared, given to every application that omits the field, and to a bare
constructor name whose fields all have defaults; the std's partitionBlockWords and
deploymentCombinePlacement lower to the IR."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from alphac.check import check_file, load_deployment
from alphac.check.evaluate import Evaluator
from alphac.check.modules import World
from alphac.check.values import VNat, VObj
from alphac.diagnostics import DiagnosticBag, SourceCache
from alphac.ir import nodes as ir
from alphac.syntax import ast
from alphac.syntax.parse import parse_text

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "tests" / "errors"

SHAPES = """module Shapes
value three : Nat = 3

family Corner : Type 0
constructor CornerOf
field unrestricted cornerX : Nat = three + 1
field unrestricted cornerY : Nat
constructor CornerOrigin
field unrestricted cornerTag : Nat = 7
field unrestricted cornerNext : Edge = EdgeNone
end-family

family Edge : Type 0
constructor EdgeNone
constructor EdgeOf
field unrestricted edgeLength : Nat = 2
end-family
"""


def write(tmp_path: Path, body: str, shapes: str = SHAPES) -> Path:
    (tmp_path / "Shapes.alpha").write_text(shapes)
    path = tmp_path / "t.alpha"
    path.write_text("import Shapes\n" + body)
    return path


def values(path: Path) -> tuple[dict, list]:
    """Every value of the root file, evaluated as `alphac check` does, and the diagnostics."""
    world = World(DiagnosticBag(), SourceCache())
    root = world.load_root(str(path))
    ev = Evaluator(world)
    ev.validate_families()
    out = {name: ev.value_of(root, name, decl.span) for name, decl in root.values.items()}
    return {k: v[0] for k, v in out.items() if v is not None}, world.bag.items


def nat_fields(v: VObj) -> dict:
    return {k: (x.n if isinstance(x, VNat) else x.ctor) for k, x in v.fields.items()}


def located(diagnostics) -> list[tuple[str, str, int, int]]:
    return [(d.code, Path(d.span.file).name, d.span.line, d.span.col) for d in diagnostics]


def test_a_default_parses_as_the_fields_expression():
    text = "family F : Type 0\nconstructor C\nfield unrestricted a : Nat = 1 + 2\n" \
           "field unrestricted b : Nat\nend-family\n"
    family = parse_text("f.alpha", text).items[0]
    assert family.members[1] == ast.FieldDecl("a", ast.TypeName("Nat"), default=ast.Binary(
        "add", ast.IntLit("1", 1), ast.IntLit("2", 2)))
    assert family.members[2] == ast.FieldDecl("b", ast.TypeName("Nat"))
    assert family.members[1].default.span.line == 3 and family.members[1].default.span.col == 30


def test_given_fields_win_and_omitted_ones_get_their_default(tmp_path):
    got, diagnostics = values(write(tmp_path, "value a : Corner = CornerOf { cornerY = 5 }\n"
                                              "value b : Corner = CornerOf { cornerY = 5, cornerX = 0 }\n"))
    assert diagnostics == []
    assert nat_fields(got["a"]) == {"cornerY": 5, "cornerX": 4}  # three + 1, in Shapes' scope
    assert nat_fields(got["b"]) == {"cornerY": 5, "cornerX": 0}
    assert got["a"].complete and got["b"].complete


def test_a_bare_constructor_takes_every_default(tmp_path):
    got, diagnostics = values(write(tmp_path, "value o : Corner = CornerOrigin\n"
                                              "value e : Edge = EdgeOf\n"
                                              "value n : Edge = EdgeNone\n"))
    assert diagnostics == []
    assert nat_fields(got["o"]) == {"cornerTag": 7, "cornerNext": "EdgeNone"}
    assert nat_fields(got["e"]) == {"edgeLength": 2} and got["n"].fields == {}


def test_a_bare_constructor_with_a_field_without_default_is_missing_it(tmp_path):
    path = write(tmp_path, "value a : Corner = CornerOf\n")
    _, diagnostics, _ = check_file(str(path))
    assert located(diagnostics) == [("missing-field", "t.alpha", 2, 20)]
    assert diagnostics[0].message == "CornerOf needs field cornerY"
    assert diagnostics[0].notes == ("a bare CornerOf gives only the fields that have defaults; "
                                    "write CornerOf { cornerY = ..., ... }",)


def test_a_defaulted_field_given_the_wrong_type_is_a_type_mismatch(tmp_path):
    path = write(tmp_path, 'value a : Corner = CornerOf { cornerY = 1, cornerX = "four" }\n'
                           "value b : Corner = CornerOrigin { cornerNext = CornerOrigin }\n")
    _, diagnostics, _ = check_file(str(path))
    assert located(diagnostics) == [("type-mismatch", "t.alpha", 2, 54),
                                    ("type-mismatch", "t.alpha", 3, 48)]
    assert diagnostics[0].message == "expected Nat, found a String"
    assert diagnostics[1].message == "CornerOrigin builds a Corner, expected Edge"


def test_a_defaulted_field_given_twice_is_still_a_duplicate(tmp_path):
    path = write(tmp_path, "value a : Edge = EdgeOf { edgeLength = 1, edgeLength = 2 }\n")
    _, diagnostics, _ = check_file(str(path))
    assert [d.code for d in diagnostics] == ["duplicate-field"]


@pytest.mark.parametrize("default, code, col, message", [
    ('"two"', "type-mismatch", 39, "expected Nat, found a String"),
    ("nowhere", "unknown-name", 39, "no value or constructor named nowhere is in scope"),
    ("EdgeOf", "type-mismatch", 39, "EdgeOf builds an Edge, expected Nat"),
    ("three - 4", "nat-range", 39, "-1 is below zero; a Nat is never negative"),
])
def test_a_bad_default_is_located_at_the_default_even_when_unused(tmp_path, default, code, col, message):
    shapes = SHAPES.replace("field unrestricted edgeLength : Nat = 2",
                            f"field unrestricted edgeLength : Nat = {default}")
    path = write(tmp_path, "value v : Nat = 1\n", shapes)
    _, diagnostics, _ = check_file(str(path))
    assert located(diagnostics) == [(code, "Shapes.alpha", 16, col)]
    assert diagnostics[0].message == message


def test_a_bad_default_is_reported_once_however_many_applications_omit_it(tmp_path):
    shapes = SHAPES.replace("= three + 1", '= "x"')
    path = write(tmp_path, "value a : Corner = CornerOf { cornerY = 1 }\n"
                           "value b : Corner = CornerOf { cornerY = 2 }\n", shapes)
    _, diagnostics, _ = check_file(str(path))
    assert located(diagnostics) == [("type-mismatch", "Shapes.alpha", 6, 36)]


def test_a_default_that_needs_itself_is_cyclic(tmp_path):
    shapes = SHAPES.replace("field unrestricted edgeLength : Nat = 2",
                            "field unrestricted edgeLength : Nat = 2\n"
                            "field unrestricted edgeBack : Edge = EdgeOf")
    _, diagnostics, _ = check_file(str(write(tmp_path, "value v : Nat = 1\n", shapes)))
    assert located(diagnostics) == [("cyclic-definition", "Shapes.alpha", 17, 38)]
    assert diagnostics[0].message == "the default of EdgeOf's field edgeBack is defined in terms of itself"


# ----------------------------------------------------------------------------- the std's defaults

def deployment_text(partitioning: str = "DataParallelReplicated", extra: str = "") -> str:
    text = (ERRORS / "partition-block-words.alpha").read_text()
    start = text.index("  deploymentPartitioning = ")
    end = text.index("  deploymentRoles")
    text = text[:start] + f"  deploymentPartitioning = {partitioning},\n" + text[end:]
    return text.replace("deploymentCheckpoint = CheckpointNever,",
                        "deploymentCheckpoint = CheckpointNever," + extra)


PARTITIONED = ("DataParallelPartitioned {{ partitionOptimizerState = false, partitionParameters = true, "
               "partitionGradients = true, partitionWordsPerCoordinate = 0, partitionSharedState = []{} }}")


def lowered(tmp_path: Path, text: str) -> ir.Deployment:
    path = tmp_path / "d.alpha"
    path.write_text(text)
    return load_deployment(str(path))


def test_specs_that_declare_neither_lower_to_the_defaults(tmp_path):
    dep = lowered(tmp_path, deployment_text())
    assert dep.partitioning == ir.Partitioning() and dep.partitioning.block_words == 1
    assert dep.combine_placement is ir.CombinePlacement.BRANCH_OWNERS
    part = lowered(tmp_path, deployment_text(PARTITIONED.format(""))).partitioning
    assert part == ir.Partitioning(ir.Shard(), ir.Replicate(), ir.Shard(), 0, (), block_words=1)


@pytest.mark.parametrize("blocks", [1, 2, 3, 1000])
def test_block_words_lower_on_both_partitionings(tmp_path, blocks):
    dep = lowered(tmp_path, deployment_text(PARTITIONED.format(f", partitionBlockWords = {blocks}")))
    assert dep.partitioning == ir.Partitioning(ir.Shard(), ir.Replicate(), ir.Shard(), 0, (), block_words=blocks)
    rep = lowered(tmp_path, deployment_text(f"DataParallelReplicated {{ partitionBlockWords = {blocks} }}"))
    assert rep.partitioning == ir.Partitioning(block_words=blocks) and not rep.partitioning.any


def test_zero_block_words_are_refused_on_either_partitioning(tmp_path):
    path = tmp_path / "d.alpha"
    path.write_text(deployment_text("DataParallelReplicated { partitionBlockWords = 0 }"))
    _, diagnostics, _ = check_file(str(path))
    assert located(diagnostics) == [("partition-block-words", "d.alpha", 20, 75)]
    assert diagnostics[0].message == ("partitionBlockWords is 0; a coordinate block holds at least "
                                      "one coordinate")


@pytest.mark.parametrize("placement, want", [("CombineAtBranchOwners", ir.CombinePlacement.BRANCH_OWNERS),
                                             ("CombineAtBlockOwners", ir.CombinePlacement.BLOCK_OWNERS)])
def test_the_combine_placement_lowers_with_where_it_is_written(tmp_path, placement, want):
    dep = lowered(tmp_path, deployment_text(extra=f"\n  deploymentCombinePlacement = {placement},"))
    assert dep.combine_placement is want
    span = dep.combine_placement_span
    assert (Path(span.file).name, span.line, span.col) == ("d.alpha", 26, 32)


def test_a_placement_of_another_family_is_a_type_mismatch(tmp_path):
    path = tmp_path / "d.alpha"
    path.write_text(deployment_text(extra="\n  deploymentCombinePlacement = CheckpointNever,"))
    _, diagnostics, _ = check_file(str(path))
    assert [(d.code, d.message) for d in diagnostics] == [
        ("type-mismatch", "CheckpointNever builds a CheckpointPolicy, expected CombinePlacement")]


# ----------------------------------------------------------------------------- consistency

@pytest.mark.parametrize("declared, want", [
    ("", ir.Consistency()),
    ("\n  deploymentConsistency = ConsistencySynchronous,", ir.Consistency()),
    # fixed staleness 0 is the synchronous learner itself
    ("\n  deploymentConsistency = ConsistencyFixedStaleness { staleness = 0 },", ir.Consistency()),
    ("\n  deploymentConsistency = ConsistencyFixedStaleness { staleness = 3 },",
     ir.Consistency(ir.ConsistencyKind.FIXED_STALENESS, 3)),
    ("\n  deploymentConsistency = ConsistencyLocalSteps { localSteps = 8 },",
     ir.Consistency(ir.ConsistencyKind.LOCAL_STEPS, 8)),
    ("\n  deploymentConsistency = ConsistencyBoundedStaleness { bound = 2 },",
     ir.Consistency(ir.ConsistencyKind.BOUNDED_STALENESS, 2)),
])
def test_the_consistency_lowers_to_its_kind_and_number(tmp_path, declared, want):
    dep = lowered(tmp_path, deployment_text(extra=declared))
    assert (dep.consistency.kind, dep.consistency.value) == (want.kind, want.value)


def test_a_synchronous_declaration_plans_to_the_same_identity_and_others_are_refused(tmp_path):
    from alphac.diagnostics import CompileError
    from alphac.plan import plan

    default = plan(lowered(tmp_path, deployment_text()))
    for same in ("ConsistencySynchronous", "ConsistencyFixedStaleness { staleness = 0 }",
                 "ConsistencyBoundedStaleness { bound = 0 }"):
        dep = lowered(tmp_path, deployment_text(extra=f"\n  deploymentConsistency = {same},"))
        assert plan(dep).protocol_hex == default.protocol_hex
    stale = lowered(tmp_path, deployment_text(
        extra="\n  deploymentConsistency = ConsistencyFixedStaleness { staleness = 1 },"))
    assert plan(stale).protocol_hex != default.protocol_hex  # another learner, built
    local = lowered(tmp_path, deployment_text(
        extra="\n  deploymentConsistency = ConsistencyLocalSteps { localSteps = 1 },"))
    assert plan(local).protocol_hex not in (default.protocol_hex, plan(stale).protocol_hex)
    bounded = lowered(tmp_path, deployment_text(
        extra="\n  deploymentConsistency = ConsistencyBoundedStaleness { bound = 1 },"))
    assert plan(bounded).protocol_hex not in (default.protocol_hex, plan(stale).protocol_hex,
                                              plan(local).protocol_hex)
    dep = dataclasses.replace(bounded, topology=ir.SampleTree())
    with pytest.raises(CompileError) as refused:
        plan(dep)
    assert [d.code for d in refused.value.diagnostics] == ["consistency-not-built"]


def test_the_oracle_replays_bounded_staleness_only_from_a_recorded_schedule(tmp_path):
    from alphac.oracle import Refusal, evaluate

    dep = lowered(tmp_path, deployment_text(
        extra="\n  deploymentConsistency = ConsistencyBoundedStaleness { bound = 2 },"))
    with pytest.raises(Refusal) as refused:
        evaluate(dep)
    assert refused.value.code == "oracle-schedule"
    independent = dataclasses.replace(dep, learner=dataclasses.replace(dep.learner, shape="independent-state"))
    with pytest.raises(Refusal) as refused:
        evaluate(independent)
    assert refused.value.code == "oracle-consistency"
    assert refused.value.detail == ("deployment run declares staleness bounded by 2; the oracle evaluates it "
                                    "for data-parallel learners on trees over owners")

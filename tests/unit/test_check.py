"""The checker: the gate specs lower to the exact IR, problems are all reported at once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from alphac.check import check_file, load_deployment, load_spec
from alphac.commands import main
from alphac.diagnostics import CompileError
from alphac.ir import nodes as ir
from alphac.ir.words import to_bits as bits

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"


def codes(path) -> list[str]:
    _, diagnostics, _ = check_file(str(path))
    return [d.code for d in diagnostics]


def write(tmp_path: Path, text: str, name: str = "t.alpha") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_seed_declaration_alone_checks_clean():
    spec = load_spec(str(SPECS / "seed_dataparallel.alpha"))
    assert "seed_dataparallel.DataParallelSystem" in spec.families
    assert spec.learners == () and spec.deployments == ()


@pytest.mark.parametrize("opt, m, slots", [("plain", 0, 5), ("momentum", 2, 7), ("adam", 6, 11)])
@pytest.mark.parametrize("topology", ["star", "hierarchy"])
def test_gate_learners_lower_exactly(opt, m, slots, topology):
    dep = load_deployment(str(SPECS / f"lsq_{opt}_{topology}.alpha"))
    lrn = dep.learner
    assert (lrn.k, lrn.s, lrn.m) == (2, 3, m)
    assert (lrn.contribution.slots, lrn.update.slots) == (7, slots)
    assert lrn.samples.shares == (1, 2, 3, 0)
    assert lrn.samples.words.shape == (6, 3) and lrn.samples.words.dtype == np.uint64
    assert int(lrn.samples.words[0, 2]) == bits(271.828)
    assert int(lrn.samples.words[5, 2]) == bits(-31.415926)
    assert lrn.initial.as_tuple() == (bits(0.0012), bits(-3.75))
    assert dep.topology == (ir.Star() if topology == "star" else ir.Hierarchy(2))
    assert dep.owners == 4 and dep.updates == 5
    assert dep.placement == ("x86_64", "aarch64", "x86_64", "aarch64")
    assert dep.roles == (ir.Role("coordinator", (0,)), ir.Role("worker", (1, 2, 3)))
    assert dep.contract == ir.Contract(ir.Profile(), "exact")
    assert dep.checkpoint == ir.Checkpoint(0, "")
    assert dep.partitioning == ir.Partitioning()


def test_adam_state_and_rate_words():
    lrn = load_deployment(str(SPECS / "lsq_adam_star.alpha")).learner
    assert lrn.initial_state.as_tuple() == (0, 0, 0, 0, bits(1.0), bits(1.0))
    assert lrn.rate == bits(0.001)
    first = lrn.update.body[0]
    assert first == ir.Assign(ir.Index(6), ir.Binary("mul", ir.SlotRef(ir.Index(6)),
                                                      ir.Const(bits(0.9))))
    assert first.label == "slot 6"


def test_per_slot_contribution_is_the_tree_as_written():
    lrn = load_deployment(str(SPECS / "lsq_plain_star.alpha")).learner
    s = lambda i: ir.SlotRef(ir.Index(i))  # noqa: E731
    residual = ir.Binary("sub", ir.Binary("add", ir.Binary("mul", s(0), s(2)),
                                          ir.Binary("mul", s(1), s(3))), s(4))
    assert lrn.contribution.body == (ir.Assign(ir.Index(5), ir.Binary("mul", residual, s(2))),
                                     ir.Assign(ir.Index(6), ir.Binary("mul", residual, s(3))))


def test_indexed_form_resolves_views_to_absolute_bases():
    lrn = load_deployment(str(SPECS / "indexed_lsq.alpha")).learner
    let, loop = lrn.contribution.body
    assert let == ir.Let("r", ir.Binary("sub", ir.Sum("j", 0, 2, ir.Binary(
        "mul", ir.SlotRef(ir.Index(0, "j")), ir.SlotRef(ir.Index(2, "j")))), ir.SlotRef(ir.Index(4))))
    assert loop == ir.Loop("i", 0, 2, (ir.Assign(ir.Index(5, "i"), ir.Binary(
        "mul", ir.Local("r"), ir.SlotRef(ir.Index(2, "i")))),))
    assert loop.body[0].label == "g[i]"
    plain = load_deployment(str(SPECS / "lsq_plain_star.alpha")).learner
    assert lrn.samples == plain.samples and lrn.initial == plain.initial


def test_demo_deployment():
    dep = load_deployment(str(SPECS / "demo.alpha"))
    assert dep.owners == 6 and dep.topology == ir.Hierarchy(2)
    assert dep.placement == ("x86_64", "aarch64") * 3
    assert dep.learner.samples.shares == (2, 0, 3, 1, 4, 2)
    assert (dep.learner.k, dep.learner.s, dep.learner.m) == (3, 4, 8)


def test_order10_specs_differ_only_in_topology():
    star = load_deployment(str(SPECS / "order10_star.alpha"))
    tree = load_deployment(str(SPECS / "order10_hierarchy.alpha"))
    assert star.learner == tree.learner and star.owners == tree.owners == 10
    assert (star.topology, tree.topology) == (ir.Star(), ir.Hierarchy(2))


def test_big_learner_needs_its_generated_data(tmp_path, monkeypatch):
    spec = SPECS / "bench" / "big_lsq.alpha"
    data = ROOT / "out" / "data" / "big_samples.npy"
    if data.exists():
        pytest.skip("the generated data is present")
    assert codes(spec) == ["sample-file"]


def test_samples_load_from_npy_and_raw_files(tmp_path):
    rows = np.array([[1.5, -2.25, 3.0], [1e-3, 1e3, 0.1], [7.0, 8.0, 9.0]])
    np.save(tmp_path / "s.npy", rows)
    rows.astype("<f8").tofile(tmp_path / "s.bin")
    text = (SPECS / "Gates" / "Lsq.alpha").read_text().replace("module Gates.Lsq", "module T")
    for name in ("s.npy", "s.bin"):
        spec = write(tmp_path, text.replace("dataParallelSamples = lsqSamples,",
                                            f'dataParallelSamples = load "{name}" shares [2, 0, 1, 0],'))
        learners = load_spec(str(spec)).learners
        assert len(learners) == 3
        assert learners[0].samples.shares == (2, 0, 1, 0)
        assert learners[0].samples.words.tolist() == rows.view("<u8").tolist()


def test_literals_are_exact(tmp_path):
    spec = write(tmp_path, "value a : StdU64 = 0x1.8p-3\nvalue b : StdU64 = word(0x0000000000000001)\n"
                           "value c : StdU64 = f64(9007199254740992)\nvalue d : StdU64 = 0.1 + 0.2\n"
                           "value e : StdU64 = -0.0\n")
    assert codes(spec) == []
    from alphac.check.modules import World
    from alphac.check.evaluate import Evaluator
    from alphac.diagnostics import DiagnosticBag, SourceCache
    world = World(DiagnosticBag(), SourceCache())
    root = world.load_root(str(spec))
    ev = Evaluator(world)
    got = {n: ev.value_of(root, n, root.values[n].span)[0].w for n in "abcde"}
    assert got == {"a": bits(0.1875), "b": 1, "c": bits(2.0 ** 53), "d": bits(0.1 + 0.2),
                   "e": bits(-0.0)}


def test_every_problem_is_reported_at_once(tmp_path):
    text = (ROOT / "tests" / "errors" / "length-mismatch.alpha").read_text()
    text = text.replace("dataParallelRate = 0.01", "dataParallelRate = 1e999")
    text = text.replace("[[[1.5, 2.5]], []]", "[[[1.5]], []]")
    text = text.replace("slot 0 := slot 0 - slot 2 * slot 1", "slot 2 := slot 0")
    assert sorted(codes(write(tmp_path, text))) == [
        "length-mismatch", "non-finite-literal", "sample-width", "slot-write-out-of-range"]


def test_a_broken_learner_still_gets_its_deployment_checked(tmp_path):
    text = (ROOT / "tests" / "errors" / "placement-length.alpha").read_text()
    text = text.replace("dataParallelRate = 0.01,", "dataParallelRate = true,")
    text = text.replace("deploymentUpdates = 5,", "")
    assert sorted(codes(write(tmp_path, text))) == ["missing-field", "placement-length",
                                                    "type-mismatch"]


def test_loop_may_read_what_it_writes_at_its_own_index(tmp_path):
    text = (ROOT / "tests" / "errors" / "loop-carried-dependence.alpha").read_text()
    ok = text.replace("v[i + 1] := v[i] * 0.5", "v[i] := v[i] * 0.5\n      v[i] := v[i] + slot 4")
    assert codes(write(tmp_path, ok)) == []
    in_sum = text.replace("v[i + 1] := v[i] * 0.5", "v[i] := (sum j in 0 .. 3 of v[j]) * 0.5")
    assert codes(write(tmp_path, in_sum)) == ["loop-carried-dependence"]


def test_std_library_can_be_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("ALPHAC_STD", str(tmp_path))
    found = codes(SPECS / "seed_dataparallel.alpha")
    assert found[0] == "unknown-module" and set(found) == {"unknown-module", "unknown-type"}


def test_load_deployment_needs_exactly_one(tmp_path):
    with pytest.raises(CompileError) as info:
        load_deployment(str(SPECS / "Gates" / "Lsq.alpha"))
    assert [d.code for d in info.value.diagnostics] == ["no-deployment"]


def test_cli_ok_line_json_and_help():
    runner = CliRunner()
    result = runner.invoke(main, ["check", str(SPECS / "demo.alpha")])
    assert result.exit_code == 0
    assert result.output == f"ok: {SPECS / 'demo.alpha'}: 30 families, 1 learner, 1 deployment\n"
    result = runner.invoke(main, ["check", "--json", str(ROOT / "tests" / "errors" / "nat-range.alpha")])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and [d["code"] for d in payload["diagnostics"]] == ["nat-range"]
    for command in ("check", "plan", "oracle", "build", "launch", "inspect"):
        assert runner.invoke(main, [command, "--help"]).exit_code == 0


def test_explicit_tree_partitioning_contract_and_checkpoint_lower(tmp_path):
    text = (ROOT / "tests" / "errors" / "placement-length.alpha").read_text()
    text = text.replace("deploymentPlacement = [TargetX86_64]",
                        "deploymentPlacement = [TargetSM86, TargetAArch64]")
    text = text.replace("deploymentTopology = DataParallelStar", """deploymentTopology = DataParallelExplicitTree {
    dataParallelCombine = OrderedCombineOf {
      orderedCombineTree = OrderedCombineBranch {
        orderedCombineOwner = 1,
        orderedCombineLeft = OrderedCombineLeaf { orderedCombineOwner = 1 },
        orderedCombineRight = OrderedCombineLeaf { orderedCombineOwner = 0 },
      },
      orderedCombineCoverage = OrderedCombineGroup { orderedCombineGroupMembers = [0 .. 2] },
      orderedCombineDelivery = CombineReplicateAll,
    },
  }""")
    text = text.replace("deploymentPartitioning = DataParallelReplicated", """deploymentPartitioning = DataParallelPartitioned {
    partitionOptimizerState = true, partitionParameters = false, partitionGradients = true,
    partitionWordsPerCoordinate = 1, partitionSharedState = [],
  }""")
    text = text.replace("deploymentContract = binary64Exact", """deploymentContract = NumericalContractOf {
    numericalProfile = StdNumericProfileOf {
      stdNumericFormat = StdBinary64, stdNumericRounding = StdRoundNearestEven,
      stdNumericSubnormals = StdSubnormalsFlushToZero,
      stdNumericExceptional = StdExceptionalFiniteOrRefuse,
    },
    numericalRelation = NumericalBoundedUlps { numericalBoundUlps = 4 },
  }""")
    text = text.replace("deploymentCheckpoint = CheckpointNever",
                        'deploymentCheckpoint = CheckpointEvery { checkpointInterval = 2, '
                        'checkpointDirectory = "ckpt" }')
    dep = load_deployment(str(write(tmp_path, text)))
    assert dep.topology == ir.ExplicitTree(
        ir.TreeBranch(1, ir.TreeLeaf(1), ir.TreeLeaf(0)), "group", (0, 1))
    assert dep.partitioning == ir.Partitioning(optimizer_state=ir.Shard(), gradients=ir.Shard(), words_per_coordinate=1)
    assert dep.contract == ir.Contract(ir.Profile(subnormals="flush-to-zero"), "ulps:4")
    assert dep.checkpoint == ir.Checkpoint(2, "ckpt")
    assert dep.placement == ("sm86", "aarch64")
    assert dep.name == "run" and dep.learner.name == "learner"


def test_imports_resolve_beside_the_importing_file_and_from_its_module_root(tmp_path):
    (tmp_path / "Pkg").mkdir()
    (tmp_path / "Pkg" / "A.alpha").write_text("module Pkg.A\nimport Pkg.B\nvalue a : Nat = b + 1\n")
    (tmp_path / "Pkg" / "B.alpha").write_text("module Pkg.B\nvalue b : Nat = 41\n")
    root = write(tmp_path, "import Pkg.A\nvalue c : Nat = Pkg.A.a\nvalue d : Nat = b\n")
    assert codes(root) == []


def test_a_program_typed_on_its_own_must_fit_the_learner(tmp_path):
    text = (ROOT / "tests" / "errors" / "length-mismatch.alpha").read_text()
    text = text.replace("value learner : (family DataParallelSystem 4 3)",
                        "value g : (family StdList (family PointwiseAssignment StdU64 9)) = "
                        "[slot 3 := slot 1]\nvalue learner : DataParallelSystem")
    text = text.replace("dataParallelInitial = [0.5, 0.25]", "dataParallelInitial = [0.5]")
    text = text.replace("dataParallelContribution = [slot 3 := (slot 0 * slot 1 - slot 2) * slot 1]",
                        "dataParallelContribution = g")
    _, diagnostics, _ = check_file(str(write(tmp_path, text)))
    assert [(d.code, d.span.line, d.message) for d in diagnostics] == [
        ("slot-count-mismatch", 4, "this contribution program is typed for 9 slots; the "
                                   "learner's contribution has 4")]


ROLES = ('RoleOf { roleName = "coordinator", roleOwners = [0] }, '
         'RoleOf { roleName = "worker", roleOwners = [0, 1] }')


def _with_roles(tmp_path: Path, roles: str) -> Path:
    text = (ROOT / "tests" / "errors" / "role-coverage.alpha").read_text()
    assert ROLES in text
    return write(tmp_path, text.replace(ROLES, roles))


def test_role_names_that_would_leave_the_output_directory_are_refused(tmp_path):
    for bad in ("x/../../escaped", "../worker", "Worker", "worker.1", "", "1worker", "a" * 65,
                "w\tx", "w x", "w\u00f6rker"):
        spec = _with_roles(tmp_path, f'RoleOf {{ roleName = "coordinator", roleOwners = [0] }}, '
                                     f'RoleOf {{ roleName = "{bad}", roleOwners = [1] }}')
        _, diagnostics, _ = check_file(str(spec))
        assert [d.code for d in diagnostics] == ["role-name-invalid"], bad
        assert diagnostics[0].span.line == 20
    ok = _with_roles(tmp_path, 'RoleOf { roleName = "hub", roleOwners = [0] }, '
                               f'RoleOf {{ roleName = "w0-edge_{"a" * 56}", roleOwners = [1] }}')
    assert codes(ok) == []


def test_duplicate_role_names_are_refused_at_check_time(tmp_path):
    spec = _with_roles(tmp_path, 'RoleOf { roleName = "worker", roleOwners = [0] }, '
                                 'RoleOf { roleName = "worker", roleOwners = [1] }')
    _, diagnostics, _ = check_file(str(spec))
    assert [d.code for d in diagnostics] == ["role-name-duplicate"]
    (d,) = diagnostics
    first = 'roleName = "worker"'
    line = spec.read_text().splitlines()[19]
    assert (d.span.line, d.span.col) == (20, line.rindex(first) + len("roleName = ") + 1)
    assert d.notes[0] == f"the first role named \"worker\" is at {spec}:20:{line.index(first) + 12}"
    with pytest.raises(CompileError) as info:
        load_deployment(str(spec))
    assert [x.code for x in info.value.diagnostics] == ["role-name-duplicate"]


def _lsq_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (SPECS / "Gates" / "Lsq.alpha").read_text().replace("module Gates.Lsq", "module T")
    assert old in text
    return write(tmp_path, text.replace(old, new))


def _sample_spec(tmp_path: Path, name: str) -> Path:
    return _lsq_with(tmp_path, "dataParallelSamples = lsqSamples,",
                     f'dataParallelSamples = load "{name}" shares [2, 0, 1, 0],')


def _diagnostics(path: Path):
    _, diagnostics, _ = check_file(str(path))
    return diagnostics


def test_a_2d_sample_array_of_another_width_is_refused_not_reread(tmp_path):
    # 3 x 2 holds 6 words: as a flat list these are two samples of s = 3, but they are not
    rows = np.array([[1.5, -2.25], [3.0, 1e-3], [1e3, 0.1]])
    np.save(tmp_path / "s.npy", rows)
    diagnostics = _diagnostics(_sample_spec(tmp_path, "s.npy"))
    # one refusal per learner of Gates.Lsq that reads the file
    assert {d.code for d in diagnostics} == {"sample-width"}
    assert "3 x 2 array: samples of 2 words, but the sample width s is 3" in diagnostics[0].message
    np.save(tmp_path / "s.npy", rows.reshape(1, 3, 2))
    diagnostics = _diagnostics(_sample_spec(tmp_path, "s.npy"))
    assert {d.code for d in diagnostics} == {"sample-width"}
    assert "1 x 3 x 2 array" in diagnostics[0].message


def test_a_flat_sample_array_is_still_cut_into_rows_of_s(tmp_path):
    rows = np.array([[1.5, -2.25, 3.0], [1e-3, 1e3, 0.1], [7.0, 8.0, 9.0]])
    np.save(tmp_path / "s.npy", rows.reshape(-1))
    learners = load_spec(str(_sample_spec(tmp_path, "s.npy"))).learners
    assert learners[0].samples.words.tolist() == rows.view("<u8").tolist()


def test_a_fortran_order_array_is_refused_not_transposed(tmp_path):
    # its words would have to be copied into row order; the file is mapped as it is
    rows = np.array([[1.5, -2.25, 3.0], [1e-3, 1e3, 0.1], [7.0, 8.0, 9.0]])
    np.save(tmp_path / "f.npy", np.asfortranarray(rows))
    diagnostics = _diagnostics(_sample_spec(tmp_path, "f.npy"))
    assert {d.code for d in diagnostics} == {"sample-file"}
    assert "column by column (Fortran order)" in diagnostics[0].message


def test_uint64_npy_files_are_refused(tmp_path):
    words = np.array([[bits(1.5), bits(2.0), bits(3.0)]] * 3, dtype=np.uint64)
    np.save(tmp_path / "s.npy", words)
    diagnostics = _diagnostics(_sample_spec(tmp_path, "s.npy"))
    assert {d.code for d in diagnostics} == {"sample-file"}
    assert "holds uint64; a .npy of words holds float64" in diagnostics[0].message
    np.save(tmp_path / "w.npy", words[0, :2])
    spec = _lsq_with(tmp_path, "dataParallelInitial = [0.0012, -3.75],",
                     'dataParallelInitial = load "w.npy",')
    assert {d.code for d in _diagnostics(spec)} == {"load-file"}
    # the same words as a raw little-endian file are raw words, loaded as they are
    words[0, :2].astype("<u8").tofile(tmp_path / "w.bin")
    spec = _lsq_with(tmp_path, "dataParallelInitial = [0.0012, -3.75],",
                     'dataParallelInitial = load "w.bin",')
    assert load_spec(str(spec)).learners[0].initial.as_tuple() == (bits(1.5), bits(2.0))


def test_initial_words_load_as_one_row_of_k(tmp_path):
    def initial(array) -> Path:
        np.save(tmp_path / "w.npy", np.asarray(array, dtype="<f8"))
        return _lsq_with(tmp_path, "dataParallelInitial = [0.0012, -3.75],",
                         'dataParallelInitial = load "w.npy",')

    for ok in ([0.5, -1.0], [[0.5, -1.0]]):
        assert load_spec(str(initial(ok))).learners[0].initial.as_tuple() == (bits(0.5), bits(-1.0))
    diagnostics = _diagnostics(initial([[0.5], [-1.0]]))
    assert {d.code for d in diagnostics} == {"length-mismatch"}
    assert "2 x 1 array (rows of 1 word); the initial parameters are one row of k = 2" \
        in diagnostics[0].message
    assert {d.code for d in _diagnostics(initial([[0.5, -1.0]] * 2))} == {"length-mismatch"}
    assert {d.code for d in _diagnostics(initial([[[0.5, -1.0]]]))} == {"load-file"}
    assert {d.code for d in _diagnostics(initial(0.5))} == {"load-file"}

"""Bounded work: specs that ask for huge fan-outs, owner counts, role ranges, diagnostics or
`.npy` headers are refused quickly and located, and loading a word file costs about its
size in memory."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.diagnostics import MAX_KEPT, MAX_PER_CODE, CompileError, DiagnosticBag, render_all
from alphac.ir import nodes as ir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import bench_load  # noqa: E402

LIMIT_S = 1.0  # CPU seconds of each refusal, in process (work, not scheduling: the machine is shared)

BASE = """import Learning.Deployment

value learner : (family DataParallelSystem 4 3) = DataParallelSystemOf {
  dataParallelParameterCount = 1,
  dataParallelSampleWidth = 2,
  dataParallelContribution = [slot 3 := (slot 0 * slot 1 - slot 2) * slot 1],
  dataParallelUpdate = [slot 0 := slot 0 - slot 2 * slot 1],
  dataParallelInitial = INITIAL,
  dataParallelInitialState = [],
  dataParallelRate = 0.01,
  dataParallelSamples = SAMPLES,
}

value run : Deployment = DeploymentOf {
  deploymentLearner = learner,
  deploymentOwners = OWNERS,
  deploymentTopology = TOPOLOGY,
  deploymentPartitioning = DataParallelReplicated,
  deploymentRoles = ROLES,
  deploymentPlacement = PLACEMENT,
  deploymentUpdates = 5,
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}
"""

DEFAULTS = {"ROLES": '[RoleOf { roleName = "coordinator", roleOwners = COORDINATOR },\n'
                     '                     RoleOf { roleName = "worker", roleOwners = WORKER }]',
            "INITIAL": "[0.5]", "SAMPLES": "[[[1.5, 2.5]], []]", "OWNERS": "2",
            "TOPOLOGY": "DataParallelStar", "COORDINATOR": "[0]", "WORKER": "[1]",
            "PLACEMENT": "[TargetX86_64, TargetAArch64]"}


def spec(tmp_path: Path, **changes: str) -> Path:
    text = BASE
    for key, value in {**DEFAULTS, **changes}.items():
        text = text.replace(key, value)
    path = tmp_path / "t.alpha"
    path.write_text(text)
    return path


def timed_check(path: Path) -> tuple[driver.CheckResult, float]:
    driver.check(str(ROOT / "tests" / "errors" / "owner-count.alpha"))  # imports, grammar
    start = time.process_time()
    result = driver.check(str(path))
    return result, time.process_time() - start


def located(result: driver.CheckResult, path: Path, text: str) -> tuple[int, int]:
    """The one diagnostic's line and column; they point at `text` in the spec."""
    (d,) = result.diagnostics
    assert d.span.file == str(path)
    line = path.read_text().splitlines()[d.span.line - 1]
    assert line[d.span.col - 1:].startswith(text), (line, d.span)
    return d.span.line, d.span.col


def test_the_base_spec_checks_clean(tmp_path):
    result, _ = timed_check(spec(tmp_path))
    assert result.ok, result.diagnostics


# ---------------------------------------------------------------- fan-out


def test_a_fanout_above_the_owner_count_is_refused_at_the_fanout(tmp_path):
    path = spec(tmp_path, TOPOLOGY="DataParallelHierarchy { dataParallelFanout = 4294967296 }")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["invalid-fanout"]
    located(result, path, "4294967296")
    assert "4294967296 is more than the deployment's 2 owners" in result.diagnostics[0].message


@pytest.mark.parametrize("fanout", [1, 2, 3])
def test_a_fanout_up_to_the_owner_count_still_plans(tmp_path, fanout):
    path = spec(tmp_path, OWNERS="3", SAMPLES="[[[1.5, 2.5]], [], [[0.5, 1.0]]]",
                WORKER="[1 .. 3]", PLACEMENT="[TargetX86_64, TargetAArch64, TargetX86_64]",
                TOPOLOGY=f"DataParallelHierarchy {{ dataParallelFanout = {fanout} }}")
    result, _ = timed_check(path)
    assert result.ok, result.diagnostics


def test_plan_and_oracle_of_a_huge_fanout_built_by_hand_do_not_spin():
    dep = driver.deployment(str(ROOT / "specs" / "lsq_plain_hierarchy.alpha"))
    wide = dataclasses.replace(dep, topology=ir.Hierarchy(1 << 32, dep.topology.span))
    start = time.process_time()
    plan = driver.plan(wide)
    driver.oracle(wide, 1)
    assert time.process_time() - start < LIMIT_S
    # every owner but 0 is a child of 0: the star's leaf order
    assert plan.shape.leaf_order == tuple(range(dep.owners))


# ---------------------------------------------------------------- owner counts


def test_a_million_owners_is_refused_at_the_owner_count(tmp_path):
    path = spec(tmp_path, OWNERS="1000000")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["owner-count"]
    located(result, path, "1000000")
    assert "1 to 65536 owners" in result.diagnostics[0].message


def test_a_role_range_of_a_billion_owners_is_refused_unexpanded(tmp_path):
    path = spec(tmp_path, WORKER="[1 .. 1000000000]")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["size-limit"]
    located(result, path, "[1 .. 1000000000]")


def test_a_role_range_beyond_the_owners_is_one_diagnostic(tmp_path):
    path = spec(tmp_path, WORKER="[1 .. 1048577]")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["role-owner-out-of-range"]
    located(result, path, "[1 .. 1048577]")
    assert result.diagnostics[0].message == \
        "role worker names owners 2 .. 1048576; owners are 0 .. 1"
    out = CliRunner().invoke(main, ["check", str(path)])
    assert out.exit_code == 1 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 3  # the diagnostic, its source line, its caret


def test_a_role_listing_more_owners_than_the_deployment_has_is_one_diagnostic(tmp_path):
    path = spec(tmp_path, WORKER="repeat 1000000 of 1")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["role-coverage"]
    located(result, path, "repeat 1000000 of 1")


def test_many_roles_or_many_names_over_all_roles_are_refused_in_bounded_work(tmp_path):
    n = 65536
    big = dict(OWNERS=str(n), SAMPLES=f"repeat {n} of [[1.5, 2.5]]",
               PLACEMENT=f"repeat {n} of TargetX86_64")
    path = spec(tmp_path, ROLES='repeat 1000000 of RoleOf { roleName = "w", roleOwners = [0] }')
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["role-coverage"]
    assert "lists 1000000 roles; at most 65536" in result.diagnostics[0].message
    # 65536 roles each naming every owner: 2**32 names, refused after 2 * 65536 of them
    path = spec(tmp_path, **big, ROLES=f'repeat {n} of RoleOf {{ roleName = "w", '
                f'roleOwners = [0 .. {n}] }}')
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    got = [d.code for d in result.diagnostics]
    assert set(got) == {"role-name-duplicate", "role-coverage"}
    assert result.suppressed and sum(result.suppressed.values()) + len(got) > n


def test_placements_and_samples_for_too_many_owners_are_refused_by_length(tmp_path):
    path = spec(tmp_path, PLACEMENT="repeat 1000000 of TargetX86_64")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["placement-length"]
    path = spec(tmp_path, OWNERS="1000000", PLACEMENT="repeat 1000000 of TargetX86_64")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["owner-count", "placement-length"]
    path = spec(tmp_path, SAMPLES="repeat 1000000 of [[1.5, 2.5]]")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["owner-count"]
    located(result, path, "repeat 1000000 of")


# ---------------------------------------------------------------- diagnostic caps


def many_duplicates(tmp_path: Path) -> Path:
    """65536 owners, each named by both roles: 65536 role-coverage diagnostics."""
    n = 65536
    return spec(tmp_path, OWNERS=str(n), SAMPLES=f"repeat {n} of [[1.5, 2.5]]",
                COORDINATOR=f"[0 .. {n}]", WORKER=f"[0 .. {n}]",
                PLACEMENT=f"repeat {n} of TargetX86_64")


def test_a_bag_keeps_at_most_20_of_a_code_and_200_in_all():
    bag = DiagnosticBag()
    codes = sorted(__import__("alphac.codes", fromlist=["CHECK"]).CHECK)[:15]
    for code in codes:
        for i in range(30):
            bag.error(code, f"problem {i}")
    assert len(bag.items) == MAX_KEPT == 200
    assert max(sum(d.code == c for d in bag.items) for c in codes) == MAX_PER_CODE == 20
    assert bag.count == 15 * 30 and sum(bag.suppressed.values()) == 15 * 30 - 200
    err = CompileError(bag.items)
    assert err.suppressed == bag.suppressed and len(err.diagnostics) == 200
    last = render_all(err.diagnostics).splitlines()[-1]
    assert last.startswith("note: 250 more diagnostics not shown (")
    assert last.endswith("; at most 20 of one code and 200 in all are listed")
    # an uncapped list handed to CompileError is capped the same way
    many = CompileError([d for d in bag.items for _ in range(5)])
    assert len(many.diagnostics) == 200 and sum(many.suppressed.values()) == 800


def test_a_spec_with_65536_faults_reports_20_and_counts_the_rest(tmp_path):
    path = many_duplicates(tmp_path)
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["role-coverage"] * 20
    assert result.suppressed == {"role-coverage": 65536 - 20}
    start = time.process_time()
    out = CliRunner().invoke(main, ["check", str(path)])
    assert time.process_time() - start < 2 * LIMIT_S
    assert out.exit_code == 1
    lines = out.stderr.splitlines()
    assert len(lines) == 20 * 3 + 1
    assert lines[-1] == ("note: 65516 more diagnostics not shown (role-coverage: 65516); "
                         "at most 20 of one code and 200 in all are listed")
    out = CliRunner().invoke(main, ["check", "--json", str(path)])
    payload = json.loads(out.stdout)
    assert out.exit_code == 1 and payload["ok"] is False
    assert len(payload["diagnostics"]) == 20
    assert payload["suppressed"] == 65516
    assert payload["suppressed_codes"] == {"role-coverage": 65516}


def test_an_uncapped_report_has_no_note_and_suppresses_nothing(tmp_path):
    path = spec(tmp_path, WORKER="[1, 2]")
    out = CliRunner().invoke(main, ["check", str(path)])
    assert out.exit_code == 1 and "more diagnostics" not in out.stderr
    payload = json.loads(CliRunner().invoke(main, ["check", "--json", str(path)]).stdout)
    assert payload["suppressed"] == 0 and payload["suppressed_codes"] == {}


# ---------------------------------------------------------------- .npy headers


def lying_npy(path: Path, shape=(1 << 40,), size: int = 176, **header) -> Path:
    """A .npy whose header claims `shape` float64 words, padded to `size` bytes."""
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<f8", "fortran_order": False, "shape": shape, **header})
        fh.write(b"\0" * (size - fh.tell()))
    assert path.stat().st_size == size
    return path


def test_a_header_claiming_2_40_words_is_refused_before_allocation(tmp_path):
    lying_npy(tmp_path / "w.npy")
    path = spec(tmp_path, INITIAL='load "w.npy"')
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["load-file"]
    located(result, path, 'load "w.npy"')
    message = result.diagnostics[0].message
    assert "has 176 bytes, but its header describes a 1099511627776 float64 array" in message
    # as samples, the learner's sample-file
    path = spec(tmp_path, SAMPLES='load "w.npy" shares [1, 0]')
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["sample-file"]
    located(result, path, 'load "w.npy"')


def test_a_truncated_or_padded_npy_is_refused(tmp_path):
    data = np.array([0.5, 1.5, 2.5])
    np.save(tmp_path / "w.npy", data)
    whole = (tmp_path / "w.npy").read_bytes()
    path = spec(tmp_path, INITIAL='load "w.npy"')
    for broken in (whole[:-8], whole + b"\0" * 8, whole[:20]):
        (tmp_path / "w.npy").write_bytes(broken)
        result, _ = timed_check(path)
        assert [d.code for d in result.diagnostics] == ["load-file"], broken


def test_object_and_fortran_order_arrays_are_refused_cleanly(tmp_path):
    np.save(tmp_path / "w.npy", np.array([0.5, None], dtype=object), allow_pickle=True)
    path = spec(tmp_path, INITIAL='load "w.npy"')
    result, _ = timed_check(path)
    assert [d.code for d in result.diagnostics] == ["load-file"]
    assert "holds Python objects" in result.diagnostics[0].message
    np.save(tmp_path / "s.npy", np.asfortranarray(np.array([[1.5, 2.5], [3.5, 4.5]])))
    path = spec(tmp_path, SAMPLES='load "s.npy" shares [2, 0]')
    result, _ = timed_check(path)
    assert [d.code for d in result.diagnostics] == ["sample-file"]
    assert "Fortran order" in result.diagnostics[0].message


def test_loaded_words_are_a_read_only_view_with_the_same_values(tmp_path):
    from alphac.check import words as W

    rows = np.array([[1.5, -2.25], [1e-3, 1e3], [7.0, -0.0]])
    np.save(tmp_path / "s.npy", rows)
    words = W.load_words(str(tmp_path / "s.npy"))
    assert words.dtype == np.uint64 and words.shape == (3, 2) and not words.flags.writeable
    assert words.tolist() == rows.view("<u8").tolist()
    np.save(tmp_path / "b.npy", rows.astype(">f8"))  # big-endian: the same words
    assert W.load_words(str(tmp_path / "b.npy")).tolist() == rows.view("<u8").tolist()
    rows.astype("<f8").tofile(tmp_path / "s.bin")
    assert W.load_words(str(tmp_path / "s.bin")).tolist() == rows.view("<u8").reshape(-1).tolist()
    np.save(tmp_path / "e.npy", np.zeros((0, 2)))
    assert W.load_words(str(tmp_path / "e.npy")).shape == (0, 2)
    (tmp_path / "e.bin").write_bytes(b"")
    assert W.load_words(str(tmp_path / "e.bin")).shape == (0,)


def test_first_non_finite_finds_the_first_across_chunks():
    from alphac.check import words as W

    words = np.zeros(3 * W.SCAN_WORDS + 5, dtype=np.uint64)
    assert W.first_non_finite(words) == -1
    words[2 * W.SCAN_WORDS + 3] = W.EXP_MASK
    words[-1] = W.EXP_MASK | 1
    assert W.first_non_finite(words) == 2 * W.SCAN_WORDS + 3
    assert W.first_non_finite(words.reshape(-1, 1)) == 2 * W.SCAN_WORDS + 3


# ---------------------------------------------------------------- memory


def test_checking_32_mib_of_samples_costs_about_the_file(tmp_path):
    # the bench (bench/bench_load.py) measures 64 MiB; the bound is the same
    got = bench_load.measure(tmp_path, 32)
    assert got["ratio"] < 1.3, got


def test_a_combine_tree_of_65536_foreign_leaves_is_refused_in_bounded_work():
    from alphac.diagnostics import Span
    from alphac.plan.tree import check_explicit

    n = 65536
    node: ir.TreeNode = ir.TreeLeaf(n)
    for o in range(n + 1, 2 * n):
        node = ir.TreeBranch(n, node, ir.TreeLeaf(o))
    tree = ir.ExplicitTree(node, "members", tuple(range(n)), Span("t.alpha", 1, 1))
    bag = DiagnosticBag()
    start = time.process_time()
    assert check_explicit(n, tree, Span("t.alpha", 1, 1), bag) is None
    assert time.process_time() - start < LIMIT_S
    assert len(bag.items) <= MAX_KEPT and bag.count == n + 1 + (n - 1)
    assert {d.code for d in bag.items} == {"combine-leaf-foreign", "combine-leaf-missing",
                                           "combine-branch-owner"}


# ---------------------------------------------------------------- update counts


def test_a_deployment_of_2_62_updates_is_refused_at_its_update_count(tmp_path):
    from alphac.check.values import MAX_UPDATES

    assert MAX_UPDATES == driver.MAX_ROUNDS == 10**7
    path = tmp_path / "t.alpha"
    path.write_text(spec(tmp_path).read_text().replace("deploymentUpdates = 5",
                                                       f"deploymentUpdates = {1 << 62}"))
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["updates-limit"]
    located(result, path, str(1 << 62))
    assert result.diagnostics[0].message == \
        f"{1 << 62} updates; a deployment makes at most 10000000"
    start = time.monotonic()
    out = CliRunner().invoke(main, ["oracle", str(path)])
    assert time.monotonic() - start < 30
    assert out.exit_code == 1 and out.stdout == ""
    assert "error[updates-limit]" in out.stderr


def test_a_deployment_of_exactly_the_most_updates_checks(tmp_path):
    path = tmp_path / "t.alpha"
    path.write_text(spec(tmp_path).read_text().replace("deploymentUpdates = 5",
                                                       "deploymentUpdates = 10000000"))
    result, _ = timed_check(path)
    assert result.ok, result.diagnostics


def test_a_memory_error_is_one_line_with_a_code_not_a_traceback(monkeypatch):
    def exhausted(*args, **kw):
        raise MemoryError()

    monkeypatch.setattr(driver, "oracle", exhausted)
    out = CliRunner().invoke(main, ["oracle", str(ROOT / "specs" / "lsq_plain_star.alpha")])
    assert (out.exit_code, out.stdout) == (1, "")
    assert out.stderr == "alphac: error[out-of-memory]: alphac oracle ran out of memory (MemoryError) and stopped\n"


# ---------------------------------------------------------------- learner size


def test_a_learner_above_2_22_words_is_refused_at_its_parameter_count(tmp_path):
    from alphac.check.values import MAX_LEARNER_WORDS

    assert MAX_LEARNER_WORDS == 1 << 22
    n = MAX_LEARNER_WORDS + 1
    path = tmp_path / "t.alpha"
    path.write_text(spec(tmp_path, INITIAL=f"repeat {n} of 0.5").read_text()
                    .replace("dataParallelParameterCount = 1", f"dataParallelParameterCount = {n}")
                    .replace("DataParallelSystem 4 3", f"DataParallelSystem {2 * n + 2} {2 * n + 1}"))
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["learner-too-large"]
    located(result, path, str(n))
    assert result.diagnostics[0].message == (
        f"k = {n} parameters; a learner holds at most 4194304 (2**22) words, so that the oracle "
        "evaluates it in about 1.6 GiB")
    out = CliRunner().invoke(main, ["oracle", str(path)])
    assert out.exit_code == 1 and "error[learner-too-large]" in out.stderr
    assert "Traceback" not in out.output

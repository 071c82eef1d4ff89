"""Bounded work: specs that ask for huge fan-outs, owner counts, role ranges, diagnostics or
`.npy` headers are refused quickly and located, and loading a word file costs about its
size in memory."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
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

ROOT = Path(__file__).resolve().parents[2]
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


# ---------------------------------------------------------------- sizes measured before they are built

# The peak is the process's own VmHWM: getrusage's ru_maxrss is kept across execve, so a
# process started from a large test run reports at least the size that run had then.
PEAK = """import json, sys
from alphac import driver
result = driver.check(sys.argv[1])
codes = [d.code for d in result.diagnostics]
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps([codes, result.diagnostics[0].message if codes else "", hwm // 1024]))
"""
PEAK_MIB = 160  # a process that imports alphac and checks a small spec peaks at about 45 MiB


def checked_in_a_process(path: Path) -> tuple[list[str], str, int]:
    """The codes and first message of `path`'s check, and the checking process's peak
    resident MiB (a process of its own, so that nothing else of the test run counts)."""
    done = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    codes, message, peak = json.loads(done.stdout)
    return codes, message, peak


def refused_lean(path: Path, code: str, message: str, where: str) -> None:
    """`path` checked in a process of its own, whose peak stays below PEAK_MIB, and here,
    within LIMIT_S: refused `code` alone, with `message`, located at the first `where`."""
    codes, got, peak = checked_in_a_process(path)
    assert codes == [code] and peak < PEAK_MIB, (codes, peak)
    assert got == message
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    located(result, path, where)


def test_a_repeat_of_2_26_initial_words_is_refused_without_building_them(tmp_path):
    # k = 2**26 as the initial words' repeat: the 512 MiB of words were built (565 MiB peak)
    # before the learner's parameter count was refused
    n = 1 << 26
    path = tmp_path / "t.alpha"
    path.write_text(spec(tmp_path, INITIAL=f"repeat {n} of 0.5").read_text()
                    .replace("dataParallelParameterCount = 1", f"dataParallelParameterCount = {n}")
                    .replace("DataParallelSystem 4 3", f"DataParallelSystem {2 * n + 2} {2 * n + 1}"))
    codes, message, peak = checked_in_a_process(path)
    assert codes == ["learner-too-large"] and message.startswith(f"k = {n} parameters;")
    assert peak < PEAK_MIB, peak
    # the same repeat for a learner of one parameter: one length-mismatch, nothing built
    codes, message, peak = checked_in_a_process(spec(tmp_path, INITIAL=f"repeat {n} of 0.5"))
    assert codes == ["length-mismatch"]
    assert message == f"dataParallelInitial has {n} words; the learner has k = 1 parameters"
    assert peak < PEAK_MIB, peak


def test_a_spec_of_a_million_written_numbers_is_checked_in_about_350_bytes_a_number(tmp_path):
    # 2**20 initial words written out (a 5 MiB spec): 1115 MiB at its peak, most of it the
    # regular expression that read the list and a 150-byte span object per number; now 387
    n = 1 << 20
    codes, message, peak = checked_in_a_process(spec(tmp_path, INITIAL="[" + ", ".join(["0.5"] * n) + "]"))
    assert codes == ["length-mismatch"]
    assert message == f"dataParallelInitial has {n} words; the learner has k = 1 parameters"
    assert peak < 45 + n * 400 // (1 << 20), peak


def test_samples_repeated_past_2_26_words_are_refused_samples_too_large(tmp_path):
    from alphac.check.values import MAX_SAMPLE_WORDS

    assert MAX_SAMPLE_WORDS == 1 << 26
    # 2**20 samples of 2**20 words: 8 TiB; the checker died of a MemoryError (an internal error)
    s = 1 << 20
    path = tmp_path / "t.alpha"
    path.write_text(spec(tmp_path, SAMPLES=f"[repeat 1048576 of repeat {s} of 1.5, []]").read_text()
                    .replace("dataParallelSampleWidth = 2", f"dataParallelSampleWidth = {s}")
                    .replace("DataParallelSystem 4 3", f"DataParallelSystem {s + 2} 3")
                    .replace("slot 3 :=", f"slot {s + 1} :="))
    refused_lean(path, "samples-too-large", "the learner's samples hold 1099511627776 words in 1048576 samples; "
                 "at most 67108864 (2**26) words and as many samples, as one word file loads",
                 "[repeat 1048576 of repeat")
    # 2**26 + 1 samples of two words over 65 owners, and 65536 owners of 2**20 samples each
    many = spec(tmp_path, OWNERS="65", SAMPLES="[" + ", ".join(["repeat 1048576 of [1.5, 2.5]"] * 64)
                + ", [[1.5, 2.5]]]", WORKER="[1 .. 65]", PLACEMENT="repeat 65 of TargetX86_64")
    result, seconds = timed_check(many)
    assert [d.code for d in result.diagnostics] == ["samples-too-large"] and seconds < LIMIT_S
    assert "hold 134217730 words in 67108865 samples" in result.diagnostics[0].message


def test_a_repeated_sample_of_the_wrong_width_is_one_diagnostic(tmp_path):
    # each of the 2**20 repeats of one sample was reported, 20 shown and 1048556 counted
    path = spec(tmp_path, SAMPLES="[repeat 1048576 of repeat 3 of 1.5, []]")
    result, seconds = timed_check(path)
    assert seconds < LIMIT_S
    assert [d.code for d in result.diagnostics] == ["sample-width"] and not result.suppressed
    assert result.diagnostics[0].message == "owner 0's sample 0 has 3 words; the sample width s is 2"
    located(result, path, "repeat 3 of 1.5")


def test_repeated_samples_and_words_are_the_words_written_out(tmp_path):
    written = driver.deployment(str(spec(tmp_path, SAMPLES="[[[1.5, 2.5], [1.5, 2.5], [1.5, 2.5]], "
                                         "[[0.5, 1.0], [0.5, 1.0]]]")))
    repeated = driver.deployment(str(spec(tmp_path, SAMPLES="[repeat 3 of [1.5, 2.5], "
                                          "repeat 2 of repeat 2 of 0.5]")))
    assert repeated.learner.samples.shares == written.learner.samples.shares == (3, 2)
    got = repeated.learner.samples.words
    assert got.dtype == np.uint64 and got.flags.c_contiguous and got.flags.owndata
    assert got.tolist() == np.array([[1.5, 2.5]] * 3 + [[0.5, 0.5]] * 2).view(np.uint64).tolist()
    assert driver.oracle(written).owners == driver.oracle(driver.deployment(str(spec(
        tmp_path, SAMPLES="[repeat 3 of [1.5, 2.5], repeat 2 of [0.5, 1.0]]")))).owners
    # no samples, whatever the width of the sample repeated no times
    none = driver.deployment(str(spec(tmp_path, SAMPLES="[[[1.5, 2.5]], repeat 0 of repeat 3 of 1.5]")))
    assert none.learner.samples.shares == (1, 0) and none.learner.samples.words.shape == (1, 2)
    m = 5000  # state words kept as an array: a copy of its own, not the repeat's view of one word
    path = tmp_path / "m.alpha"
    path.write_text(spec(tmp_path).read_text().replace("dataParallelInitialState = []",
                                                       f"dataParallelInitialState = repeat {m} of 0.5")
                    .replace("DataParallelSystem 4 3", f"DataParallelSystem 4 {m + 3}"))
    data = driver.deployment(str(path)).learner.initial_state.data
    assert data.flags.c_contiguous and data.flags.owndata and data.tolist() == [0x3FE0000000000000] * m


# ---------------------------------------------------------------- the independent-state learner

INDEPENDENT = """import LocalCorrelation.System
import Runtime.NativeIndependentState

value rule : (family ScaledProductUpdate @SLOTS@) = ScaledProductUpdateOf {
  scaledProductRegionWords = @R@,
  scaledProductRule = [slot 0 := slot 0 + slot @SCALE@ * (slot @X@ * slot @Y@ - slot 0)],
  scaledProductScale = 0.125,
}

value learner : (family LocalCorrelationSystem @SLOTS@) = LocalCorrelationSystemOf {
  localCorrelationState = IndependentStateOf {
    independentStateInitial = @INITIAL@,
    independentStateInputs = @INPUTS@,
  },
  localCorrelationRule = rule,
}

value run : NativeIndependentState = NativeIndependentStateOf {
  independentLearner = learner,
  independentOwners = 2,
  independentRoles = [RoleOf { roleName = "coordinator", roleOwners = [0] },
                      RoleOf { roleName = "worker", roleOwners = [1] }],
  independentPlacement = [TargetX86_64, TargetAArch64],
  independentUpdates = @UPDATES@,
}
"""


def independent(tmp_path: Path, r: int, initial: str, inputs: str = "[[[1.5, 2.5]], []]",
                updates: int = 3) -> Path:
    """Two owners of regions of r words (the rule moves word 0 of the region)."""
    text = INDEPENDENT
    for key, value in {"@SLOTS@": r + 3, "@SCALE@": r + 2, "@X@": r, "@Y@": r + 1, "@R@": r,
                       "@INITIAL@": initial, "@INPUTS@": inputs, "@UPDATES@": updates}.items():
        text = text.replace(key, str(value))
    path = tmp_path / "i.alpha"
    path.write_text(text)
    return path


def test_the_independent_base_spec_checks_and_evaluates(tmp_path):
    result, _ = timed_check(independent(tmp_path, 1, "[[0.5], [0.25]]"))
    assert result.ok, result.diagnostics


def test_independent_regions_of_more_than_2_22_words_are_refused_at_r(tmp_path):
    # two regions of 2**22 words checked clean as k = 2**23 (764 MiB to check, the oracle after)
    r = 1 << 22
    path = independent(tmp_path, r, f"[repeat {r} of 0.5, repeat {r} of 0.25]")
    refused_lean(path, "learner-too-large", "2 regions of r = 4194304 words, k = 8388608; a learner holds at "
                 "most 4194304 (2**22) words, so that the oracle evaluates it in about 1.6 GiB", str(r))
    out = CliRunner().invoke(main, ["oracle", str(path)])
    assert out.exit_code == 1 and "error[learner-too-large]" in out.stderr and "Traceback" not in out.output
    # an r of 2**40 is refused by r alone, not by each region's length
    result, _ = timed_check(independent(tmp_path, 1 << 40, "[[0.5], [0.25]]"))
    assert [d.code for d in result.diagnostics] == ["learner-too-large"]


def test_independent_regions_of_exactly_2_22_words_check(tmp_path):
    r = 1 << 21
    path = independent(tmp_path, r, f"[repeat {r} of 0.5, repeat {r} of 0.25]")
    dep = driver.deployment(str(path))
    assert dep.learner.k == 1 << 22 and isinstance(dep.learner.initial.data, np.ndarray)


def test_independent_inputs_and_updates_have_the_data_parallel_caps(tmp_path):
    path = independent(tmp_path, 1, "[[0.5], [0.25]]", "[repeat 1048576 of repeat 1048576 of 1.5, []]")
    result, seconds = timed_check(path)
    assert [d.code for d in result.diagnostics] == ["samples-too-large"] and seconds < LIMIT_S
    located(result, path, "[repeat 1048576 of")
    path = independent(tmp_path, 1, "[[0.5], [0.25]]", updates=1 << 62)
    result, seconds = timed_check(path)
    assert [d.code for d in result.diagnostics] == ["updates-limit"] and seconds < LIMIT_S
    located(result, path, str(1 << 62))


# ---------------------------------------------------------------- partition blocks


def blocks_of(tmp_path: Path, words: int) -> Path:
    """The partitioned Adam hierarchy (k = 2) in blocks of `words` coordinates."""
    text = (ROOT / "specs" / "lsq_adam_partitioned_hierarchy.alpha").read_text()
    shutil.copytree(ROOT / "specs" / "Gates", tmp_path / "Gates", dirs_exist_ok=True)
    path = tmp_path / "b.alpha"
    path.write_text(text.replace("partitionSharedState = [4, 5],",
                                 f"partitionSharedState = [4, 5], partitionBlockWords = {words},"))
    return path


def test_a_block_of_more_than_2_22_coordinates_is_refused_at_its_size(tmp_path):
    # 2**62 was an internal ValueError of the planner's layout (an array of 2**62 offsets);
    # 10**8 took 1.6 GB and 15 s to plan two coordinates
    for words in (1 << 62, 10**8, (1 << 22) + 1):
        path = blocks_of(tmp_path, words)
        result, seconds = timed_check(path)
        assert seconds < LIMIT_S
        assert [d.code for d in result.diagnostics] == ["partition-block-words"]
        located(result, path, str(words))
        assert result.diagnostics[0].message == (f"partitionBlockWords is {words}; a coordinate block "
                                                 "holds at most 4194304 (2**22), the most words a learner holds")
    result, _ = timed_check(blocks_of(tmp_path, 1 << 22))
    assert result.ok, result.diagnostics

"""Executed mutants: native owners (x86-64 and AArch64 under qemu) built as each mutant
run over TCP to the end and publish exactly the oracle's evaluation of that mutant, word
for word, while the comparison with the declared program reports every owner
`oracle-mismatch` (stale-replica: every owner refuses `data-parallel-replica-version`, as
the oracle does). On the ten-owner order gates and on a partitioned learner whose owners
all hold words the gradient moves, with slices of different sizes.

Each case is one `alphac launch SPEC --mutant NAME --json`, and every launch builds into one
directory: the mutants' executables (`-mutant-NAME`) and the normal ones live side by side
without replacing each other.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.ir.nodes import Replicate
from alphac.testing import session
from alphac.launch.launcher import launch
from alphac.oracle import MUTANTS, evaluate
from alphac.targets.elf import read_metadata

SPECS = Path(__file__).resolve().parents[2] / "specs"
ORDER = ("order10_star", "order10_hierarchy")
PARTITIONED = "lsq_momentum_partitioned_star5"

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")
pytestmark = needs_qemu

# foreign-inputs applies only to independent-state learners (tests/e2e/test_independent_gates.py),
# foreign-accumulator to coordinate-owned ones (tests/e2e/test_coordinate_gates.py), fresher-read
# to a fixed staleness (tests/e2e/test_fixed_staleness.py), fewer-local-steps to local steps
# (tests/e2e/test_local_steps.py)
COMBINE_MUTANTS = tuple(m for m in MUTANTS if m not in ("foreign-inputs", "foreign-accumulator", "fresher-read",
                                                               "fewer-local-steps", "looser-bound"))
CASES = [(spec, m) for spec in ORDER for m in COMBINE_MUTANTS if m != "stale-replica"] + \
        [(PARTITIONED, m) for m in COMBINE_MUTANTS]


def out_dir() -> Path:
    return session.root() / "mutant-gates"


def _launch(name: str, mutant: str | None):
    """`alphac launch SPEC [--mutant NAME] --json`: its exit status and report."""
    args = ["launch", f"{SPECS}/{name}.alpha", "-o", str(out_dir()), "--json"]
    result = CliRunner().invoke(main, args + (["--mutant", mutant] if mutant else []))
    assert result.stdout, result.stderr
    return session.deployment(f"{SPECS}/{name}.alpha"), result.exit_code, json.loads(result.stdout)


def _hex(words) -> list[str]:
    return [f"{int(w):016x}" for w in words]


# by default every mutant on the 10-leaf hierarchy and on the partitioned star; the 10-leaf
# star's are exhaustive
@pytest.mark.parametrize("name,mutant", [
    c if c[0] != "order10_star" else pytest.param(*c, marks=pytest.mark.exhaustive)
    for c in CASES if c[1] != "stale-replica"])
def test_a_mutant_publishes_its_oracle_words_and_every_owner_mismatches(name, mutant):
    dep, status, report = _launch(name, mutant)
    assert status == 1 and not report["match"]
    assert (report["mutant"], report["mutant_match"]) == (mutant, True)
    want = evaluate(dep, mutant=mutant)
    for row, w in zip(report["owners"], want.owners, strict=True):
        assert (row["version"], row["params"], row["state"]) == (5, _hex(w.params), _hex(w.state)), row
        assert row["error"].startswith(f"oracle-mismatch: owner {row['owner']} ({row['role']} on "
                                       f"{row['target']}): "), row["error"]
    assert report["protocol"] == driver.plan(dep, mutant).protocol_hex != driver.plan(dep).protocol_hex


def test_stale_replica_owners_refuse_the_replica_of_the_previous_version():
    dep, status, report = _launch(PARTITIONED, "stale-replica")
    assert status == 1 and not report["match"]
    assert report["mutant_match"]  # the oracle's evaluation of the mutant refuses alike
    assert len(report["owners"]) == 4
    for row in report["owners"]:
        assert row["params"] is None
        assert row["error"] == (f"owner-failed: owner {row['owner']} ({row['role']} on {row['target']}) "
                                f"exited 1: refused: data-parallel-replica-version: owner {row['owner']}: "
                                "the contribution of version 1 reads a replica of version 0, not 1"), row["error"]


def test_deliver_to_next_with_partitioned_parameters_and_replicated_gradients():
    """Every owner receives the whole total and reads its coordinates' sums through the map
    (the update of its own coordinates reads the full vector), as with a replicated learner."""
    base = session.deployment(f"{SPECS}/{PARTITIONED}.alpha")
    dep = dataclasses.replace(base, partitioning=dataclasses.replace(base.partitioning, gradients=Replicate()))
    report = launch(dep, out_dir=session.root() / "mutant-gates-grads-replicated",
                    mutant="deliver-to-next", deadline_s=120.0, timeout_ms=20000)
    assert report.mutant_match and not report.match
    want = evaluate(dep, mutant="deliver-to-next")
    assert [(r.params, r.state) for r in report.rows] == [(w.params, w.state) for w in want.owners]
    assert all(r.why.startswith("oracle-mismatch: ") for r in report.rows)


def test_the_partitioned_gate_itself_matches_and_its_mutants_build_beside_it():
    dep, status, report = _launch(PARTITIONED, None)
    assert status == 0 and report["match"] and "mutant" not in report
    from alphac.launch.cache import ensure_built
    ensure_built(driver.plan(dep, "deliver-to-next"), out_dir())  # (a no-op after its gate ran)
    assert [len(r["params"]) for r in report["owners"]] == [2, 1, 1, 1]  # k = 5 on four owners
    names = {p.name for p in out_dir().iterdir() if p.is_file()}
    assert f"{PARTITIONED}-worker-aarch64" in names
    assert f"{PARTITIONED}-worker-aarch64-mutant-deliver-to-next" in names
    assert read_metadata(out_dir() / f"{PARTITIONED}-worker-aarch64")["mutant"] is None
    meta = read_metadata(out_dir() / f"{PARTITIONED}-worker-aarch64-mutant-deliver-to-next")
    assert (meta["mutant"], meta["protocol"]) == ("deliver-to-next",
                                                  driver.plan(dep, "deliver-to-next").protocol_hex)


def test_the_mutants_the_runtime_computes_are_test_builds_and_no_product_executable_has_them(tmp_path):
    """unweighted-mean, deliver-to-next and stale-replica compute in the runtime: their
    executables are test builds (the fault-injection hooks' names are in them); every other
    mutant is plan data or a rewrite, built as a product executable, as the declared one is."""
    from alphac.executables import build

    dep = session.deployment(f"{SPECS}/{PARTITIONED}.alpha")
    for mutant in (None, "swap-branch", "duplicate-mass", "unweighted-mean", "deliver-to-next", "stale-replica"):
        plan = driver.plan(dep, mutant)
        exe = build(plan, "worker", "x86_64", tmp_path)
        test_build = b"ALPHAC_DELAY_AT" in exe.read_bytes()
        assert test_build == plan.mutation.test_build == (
            mutant in ("unweighted-mean", "deliver-to-next", "stale-replica")), mutant


def test_launch_command_reports_every_owner_of_a_mutant_and_exits_1():
    spec = str(SPECS / "order10_star.alpha")
    out = CliRunner().invoke(main, ["launch", spec, "-o", str(out_dir()), "--mutant", "swap-branch"])
    assert out.exit_code == 1, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("alphac: error[")]
    assert [line.split("]")[0] for line in errors] == ["alphac: error[oracle-mismatch"] * 10
    assert ("alphac: note: built as mutant swap-branch: the owners computed the oracle's "
            "evaluation of the mutant") in out.stderr.splitlines()
    assert [line.split()[-1] for line in out.stdout.splitlines()[1:11]] == ["MISMATCH"] * 10
    exe = out_dir() / "order10_star-worker-x86_64-host-mutant-swap-branch"  # launch: kernels for this CPU
    inspected = CliRunner().invoke(main, ["inspect", str(exe)])
    assert "mutant      swap-branch (a testing aid: not the declared program)" in inspected.stdout.splitlines()

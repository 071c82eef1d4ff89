"""Executed mutants of a partitioned learner: protocols that misuse the read replica or the
selection assembly are built into real executables, run over TCP, and refused by name at
run time; nothing is published. Also the output file's format 2."""

import dataclasses
import shutil
import struct
from pathlib import Path

import pytest

from alphac.driver import build as build_executable
from alphac.testing import session
from alphac.launch.plan_run import run_plan
from alphac.launch.runs import new_run_dir
from alphac.launch.results import OwnerResult, ResultError, parse_result
from alphac.testing.outputs import encode_result
from alphac.plan.protocol import Op

SPECS = Path(__file__).resolve().parents[2] / "specs"
NAME = "lsq_momentum_partitioned_star"

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")


def _mutant(plan, edit):
    """The plan with every owner's update ops rewritten by edit(owner, ops) (same identity)."""
    owners = tuple(dataclasses.replace(
        op, protocol=dataclasses.replace(op.protocol, update_ops=tuple(edit(op.owner, list(op.protocol.update_ops)))))
        for op in plan.owners)
    return dataclasses.replace(plan, owners=owners)


def _run_mutant(tmp_path, edit):
    dep = session.deployment(f"{SPECS}/{NAME}.alpha")
    plan = _mutant(session.plan(NAME, dep), edit)
    exes = {}
    for o in range(dep.owners):
        key = (dep.role_of(o).name, dep.placement[o])
        if key not in exes:
            exes[key] = build_executable(plan, key[0], key[1], tmp_path / "bin")
    run = run_plan(dep, exes, new_run_dir(tmp_path, NAME), timeout_ms=5000, deadline_s=60.0, root=plan.tree.owner)
    assert run.outputs == {}, "a refused protocol published"
    for oc in run.result.outcomes:
        assert oc.returncode == 1, (oc.owner, oc.returncode, oc.stderr)
        assert not oc.out.exists()
    return {oc.owner: oc.stderr.strip().splitlines()[-1] for oc in run.result.outcomes}


@needs_qemu
def test_replica_released_before_the_contribution_is_refused(tmp_path):
    def edit(owner, ops):
        ops.remove(Op("replica-release"))
        ops.insert(ops.index(Op("local", dst=0)), Op("replica-release"))
        return ops

    lines = _run_mutant(tmp_path, edit)
    for o, line in lines.items():
        assert line == (f"refused: data-parallel-replica-released: owner {o}: the contribution of "
                        "version 0 reads no held replica (released or never installed)")


@needs_qemu
def test_replica_never_released_is_refused_before_the_version_advances(tmp_path):
    lines = _run_mutant(tmp_path, lambda owner, ops: [op for op in ops if op.kind != "replica-release"])
    for o, line in lines.items():
        assert line == (f"refused: data-parallel-replica-retained: owner {o}: the read replica of "
                        "version 0 is still held at the update of version 0")


@needs_qemu
def test_selection_with_a_duplicated_operand_is_refused_as_overlap(tmp_path):
    """The hub assembles its own offer twice (left and right): same word count as the
    owners' parameters would give, but coordinates held twice."""
    def edit(owner, ops):
        if owner != 0:
            return ops
        i = next(j for j, op in enumerate(ops) if op.kind == "select")
        ops[i] = dataclasses.replace(ops[i], b=ops[i].a)
        return ops

    lines = _run_mutant(tmp_path, edit)
    assert lines[0] == ("refused: data-parallel-assembly-overlap: owner 0: a selection's right "
                        "operand at update 0 covers leaves 0..1, expected 1..1: a leaf's "
                        "coordinates would be assembled twice")


@needs_qemu
def test_replica_installed_from_a_partial_assembly_is_refused_as_coverage(tmp_path):
    """The hub installs the assembly of owners 0..2 as its replica: owner 3's leaf is missing
    (owner 3 owns no coordinate of k = 2, so the word count alone would not show it)."""
    def edit(owner, ops):
        if owner != 0:
            return ops
        selects = [op for op in ops if op.kind == "select"]
        assert len(selects) == 3  # the replica's assembly only: nothing else is replicated
        i = next(j for j, op in enumerate(ops) if op.kind == "replica-install")
        ops[i] = Op("replica-install", a=selects[1].dst)
        return ops

    lines = _run_mutant(tmp_path, edit)
    assert lines[0] == ("refused: data-parallel-assembly-coverage: owner 0: an assembled vector at "
                        "update 0 covers leaves 0..3, expected 0..4: a leaf's coordinates would be "
                        "missing")


# -- output format 2 ----------------------------------------------------------------------

def test_owned_output_round_trips_and_rejects_bad_positions():
    r = OwnerResult(1, 5, 0x1234, (0x3FF0000000000000,), (7, 9), (1,), (1, 4))
    data = encode_result(r, 2, 6)
    assert len(data) == 8 * (9 + 2 * 3)
    assert struct.unpack_from("<9Q", data) == (0x3154554F41484C41, 2, 1, 5, 0x1234, 2, 6, 1, 2)
    assert parse_result(data) == r
    bad = bytearray(data)
    struct.pack_into("<Q", bad, 8 * 10, 6)  # state offset 6 of m = 6
    with pytest.raises(ResultError, match="state offsets are not ascending below 6"):
        parse_result(bytes(bad))
    with pytest.raises(ResultError) as info:
        parse_result(data[:-8])
    assert str(info.value) == ("<bytes>: format 2: 5 words after the header, 2 * (kp + mp) = 6 "
                               "(kp = 1 of k = 2, mp = 2 of m = 6)")

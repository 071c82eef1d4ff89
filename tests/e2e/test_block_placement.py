"""The block placement of the declared combine tree (CombineAtBlockOwners): the whole tree
for coordinate block b runs at block b's owner (an ordered reduce-scatter, then the blocks
delivered to their owners or gathered to every owner). Every owner equals the oracle and,
but for the protocol identity, writes the bytes the branch placement writes; the two
placements have different identities and an owner of one refuses an owner of the other;
each owner sends 2(n-1)k/n sums per update; an op table whose exchange or place is corrupt
refuses by name."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest

from alphac.driver import build as build_executable
from alphac.launch.plan_run import run_plan
from alphac.launch.report import compare
from alphac.launch.runs import new_run_dir
from alphac.oracle import evaluate
from alphac.plan import plan
from alphac.plan.identity import identity_document
from alphac.plan.protocol import OP_CODE
from alphac.plan.render import op_text, plan_json
from alphac.ir import nodes as ir
from alphac.testing import session
from alphac.testing.outputs import refusal_code
from alphac.testing.session import owner_exes
from shape_gates import needs_qemu
from test_plan_support import deployment

SPECS = Path(__file__).resolve().parents[2] / "specs"
PROTOCOL_WORD = 4  # an output file's protocol identity (docs/runtime.md "Output file")
BLOCK_OWNERS, BRANCH_OWNERS = ir.CombinePlacement.BLOCK_OWNERS, ir.CombinePlacement.BRANCH_OWNERS


def _variant(spec: str, placement: ir.CombinePlacement, **part):
    dep = session.deployment(str(SPECS / f"{spec}.alpha"))
    if part:
        dep = dataclasses.replace(dep, partitioning=dataclasses.replace(dep.partitioning, **part))
    return dataclasses.replace(dep, combine_placement=placement)


def _key(spec: str, placement: ir.CombinePlacement, part: dict) -> str:
    return "-".join([f"block-{spec}", placement.value,
                     *(f"{k}{getattr(v, 'sharded', v):d}" for k, v in sorted(part.items()))])


def _launch(spec: str, placement: ir.CombinePlacement, part: dict):
    """Every owner's output file under `placement`, after checking each against the oracle
    and its measured peak bytes against the plan's."""
    dep, key = _variant(spec, placement, **part), _key(spec, placement, part)
    run = session.run(key, dep, timeout_ms=20000)
    p = session.plan(key, dep)
    report = compare(p, run, evaluate(dep), dep.updates)
    assert report.failures == (), "\n".join(report.failures) + "\n" + "\n".join(report.stderr.values())
    assert report.match
    assert [run.stats[o].peak for o in range(dep.owners)] == [o.peak_bytes for o in p.owners]
    files = [(run.run_dir / f"owner-{o}.out").read_bytes() for o in range(dep.owners)]
    for data in files:
        assert struct.unpack_from("<Q", data, 8 * PROTOCOL_WORD)[0] == p.protocol_id
    return files


def _unidentified(data: bytes) -> bytes:
    """An output file with its protocol identity word zeroed."""
    at = 8 * PROTOCOL_WORD
    return data[:at] + bytes(8) + data[at + 8:]


CASES = [
    pytest.param("lsq_adam_star", {}, id="replicated-star"),
    pytest.param("lsq_plain_hierarchy", {}, id="hierarchy", marks=needs_qemu),
    pytest.param("lsq_adam_partitioned_hierarchy7", {}, id="partitioned-all-B1", marks=needs_qemu),
    pytest.param("lsq_adam_partitioned_hierarchy7", {"block_words": 3}, id="partitioned-all-B3",
                 marks=needs_qemu),
    pytest.param("lsq_adam_partitioned_hierarchy7",
                 {"parameters": ir.Replicate(), "optimizer_state": ir.Replicate()},
                 id="partitioned-gradients-B1", marks=needs_qemu),
    pytest.param("lsq_adam_partitioned_hierarchy7",
                 {"parameters": ir.Replicate(), "optimizer_state": ir.Replicate(), "block_words": 3},
                 id="partitioned-gradients-B3", marks=needs_qemu),
    pytest.param("order10_hierarchy", {}, id="order10", marks=needs_qemu),
    pytest.param("lsq_adam_sampletree7", {}, id="sample-tree", marks=needs_qemu),
]


@pytest.mark.parametrize("spec, part", CASES)
def test_every_owner_equals_the_oracle_and_the_branch_placement_byte_for_byte(spec, part):
    block = _launch(spec, BLOCK_OWNERS, part)
    branch = _launch(spec, BRANCH_OWNERS, part)
    assert [_unidentified(d) for d in block] == [_unidentified(d) for d in branch]
    assert block != branch  # the identity word tells them apart


def test_the_placements_have_different_protocol_identities():
    ids = set()
    specs = ("lsq_adam_star", "lsq_plain_hierarchy", "order10_hierarchy", "lsq_adam_partitioned_hierarchy7")
    for spec in specs:
        block, branch = (plan(_variant(spec, p)) for p in (BLOCK_OWNERS, BRANCH_OWNERS))
        assert block.protocol_id != branch.protocol_id, spec
        document = identity_document(block.deployment, list(block.shape.nodes))
        assert document["combine_placement"] == BLOCK_OWNERS.value
        assert "combine_placement" not in identity_document(branch.deployment, list(branch.shape.nodes))
        ids |= {block.protocol_id, branch.protocol_id}
    assert len(ids) == 8


def test_an_owner_of_one_placement_refuses_the_owners_of_the_other():
    block, branch = _variant("lsq_adam_star", BLOCK_OWNERS), _variant("lsq_adam_star", BRANCH_OWNERS)
    exes = owner_exes(block, session.built(_key("lsq_adam_star", BLOCK_OWNERS, {}), block))
    exes[0] = owner_exes(branch, session.built(_key("lsq_adam_star", BRANCH_OWNERS, {}), branch))[0]
    run = session.run("block-mixed-placement", block, exes=exes, timeout_ms=1500, deadline_s=30)
    codes = [refusal_code(oc.stderr) for oc in run.result.outcomes]
    assert "frame-protocol" in codes, [oc.stderr for oc in run.result.outcomes]
    assert all(oc.returncode == 1 for oc in run.result.outcomes), codes
    assert not run.result.timed_out
    assert sorted(p.name for p in run.run_dir.glob("owner-*.out*")) == []


# ----------------------------------------------------------------------------- op lists

def test_the_star_of_four_reduces_each_block_at_its_owner_then_gathers():
    p = plan(_variant("lsq_adam_star", BLOCK_OWNERS))
    ops = [op_text(op) for op in p.owner(2).protocol.update_ops]
    assert ops == [
        "local r0",
        "slice r1 = r0 at owner 0's coordinates", "slice r2 = r0 at owner 1's coordinates",
        "slice r3 = r0 at owner 2's coordinates", "slice r4 = r0 at owner 3's coordinates",
        # the star's order, ((c0 + c1) + c2) + c3 with owner 2's own slice third, inside the
        # exchange: c1 and c3 added as their words arrive, each once its left operand is done
        "exchange: the next 7 at once", "send r1 -> 0", "send r2 -> 1", "send r4 -> 3",
        "recv r5 <- 0", "recv-add r8 = r5 + r6 <- 1", "combine r9 = r8 + r3", "recv-add r10 = r9 + r7 <- 3",
        "exchange: the next 6 at once", "send r10 -> 0", "send r10 -> 1", "send r10 -> 3",
        "recv r11 <- 0", "recv r12 <- 1", "recv r13 <- 3",
        "place r14 <- r11 at owner 0's coordinates", "place r14 <- r12 at owner 1's coordinates",
        "place r14 <- r10 at owner 2's coordinates", "place r14 <- r13 at owner 3's coordinates",
        "update r14"]


def test_partitioned_gradients_stay_at_their_owners():
    p = plan(_variant("lsq_adam_partitioned_hierarchy7", BLOCK_OWNERS))
    for o in p.owners:
        kinds = [op.kind for op in o.protocol.update_ops]
        assert kinds.count("exchange") == 1 and "place" not in kinds
        update = next(op for op in o.protocol.update_ops if op.kind == "update-owned")
        # the mean is the owner's own combined block: its coordinates and the count
        assert o.protocol.register_words[update.a] == p.layout.owned_count(o.owner) + 1


def test_no_register_of_an_exchange_shares_a_slot_with_another():
    for spec in ("lsq_adam_star", "order10_hierarchy", "lsq_adam_partitioned_hierarchy7"):
        for o in plan(_variant(spec, BLOCK_OWNERS)).owners:
            ops = o.protocol.update_ops
            for i, op in enumerate(ops):
                if op.kind == "exchange":
                    group = ops[i + 1:i + 1 + op.b]
                    regs = [r for x in group for r in x.registers()]
                    assert "send" in {x.kind for x in group}
                    assert {x.kind for x in group} <= {"send", "recv", "recv-add-left", "recv-add-right",
                                                       "combine"}
                    slots = {o.registers.slot[r] for r in set(regs)}
                    assert len(slots) == len(set(regs)), (spec, o.owner, i)


# ----------------------------------------------------------------------------- traffic

def _sent(p, o: int, exchanged_only: bool = False) -> tuple[int, int]:
    """(sums, frames) owner o sends per update (each frame's count apart), all of its sends
    or only those of its exchanges."""
    ops = p.owner(o).protocol.update_ops
    inside = set()
    for i, op in enumerate(ops):
        if op.kind == "exchange":
            inside |= set(range(i + 1, i + 1 + op.b))
    sends = [op for i, op in enumerate(ops) if op.kind == "send" and (i in inside or not exchanged_only)]
    return sum(p.owner(o).protocol.register_words[op.a] - 1 for op in sends), len(sends)


@pytest.mark.parametrize("n, k, topology", [(4, 8, ir.Star()), (4, 1000, ir.Hierarchy(2)),
                                            (8, 64, ir.Hierarchy(3)), (5, 10, ir.Star())])
def test_every_owner_sends_2_n_minus_1_k_over_n_sums_per_update(n, k, topology):
    dep = dataclasses.replace(deployment(n, topology, k=k, kind="adam"), combine_placement=BLOCK_OWNERS)
    p = plan(dep)
    # (n - 1) slices of k/n sums to their owners, then the owner's block to the n - 1
    # others; each of the 2(n - 1) frames carries the count besides
    assert [_sent(p, o) for o in range(n)] == [(2 * (n - 1) * k // n, 2 * (n - 1))] * n
    # what `alphac plan` states: the sums and the counts
    stated = [o["sent_words"] for o in plan_json(p)["per_owner"]]
    assert stated == [2 * (n - 1) * k // n + 2 * (n - 1)] * n


def test_the_star_hub_sends_n_minus_1_k_sums_under_the_branch_placement():
    n, k = 4, 8
    dep = deployment(n, ir.Star(), k=k, kind="adam")
    p = plan(dataclasses.replace(dep, combine_placement=BRANCH_OWNERS))
    sends = [sum(op.kind == "send" for op in o.protocol.update_ops) for o in p.owners]
    assert sends == [n - 1, 1, 1, 1]  # (n - 1) k sums from the hub, k from each leaf
    block = plan(dataclasses.replace(dep, combine_placement=BLOCK_OWNERS))
    assert max(_sent(block, o)[0] for o in range(n)) == 2 * (n - 1) * k // n == 12 < (n - 1) * k


def test_partitioned_gradients_exchange_n_minus_1_k_over_n_sums():
    n, k = 4, 8
    dep = dataclasses.replace(deployment(n, ir.Hierarchy(2), k=k, kind="plain"),
                              partitioning=ir.Partitioning(gradients=ir.Shard()), combine_placement=BLOCK_OWNERS)
    p = plan(dep)
    # the slices only: each owner keeps its own block (then assembles the parameters
    # along the tree, as the branch placement does)
    assert [_sent(p, o, exchanged_only=True) for o in range(n)] == [((n - 1) * k // n, n - 1)] * n


# ----------------------------------------------------------------------------- corrupt tables

def _refusals(tmp_path, edit) -> dict[int, str]:
    """The last stderr line of every owner of the x86-64 star under the block placement,
    its owner 0's update ops rewritten by edit(ops) (the same identity)."""
    dep = dataclasses.replace(_variant("lsq_adam_star", BLOCK_OWNERS), placement=("x86_64",) * 4)
    good = plan(dep)
    zero = good.owner(0)
    ops = tuple(edit(list(zero.protocol.update_ops)))
    bad = dataclasses.replace(good, owners=(dataclasses.replace(
        zero, protocol=dataclasses.replace(zero.protocol, update_ops=ops)),) + good.owners[1:])
    exes = {(r, "x86_64"): build_executable(bad, r, "x86_64", tmp_path / "bin")
            for r in ("coordinator", "worker")}
    run = run_plan(dep, exes, new_run_dir(tmp_path, "corrupt"), timeout_ms=3000, deadline_s=60.0,
                   root=good.tree.owner)
    assert run.outputs == {}, "a corrupt table published"
    return {oc.owner: oc.stderr.strip().splitlines()[-1] for oc in run.result.outcomes}


def test_an_exchange_over_another_op_is_a_corrupt_executable(tmp_path):
    def edit(ops):
        i = max(j for j, op in enumerate(ops) if op.kind == "exchange")
        ops[i] = dataclasses.replace(ops[i], b=ops[i].b + 1)  # the gather's, over the first place
        return ops

    lines = _refusals(tmp_path, edit)
    assert lines[0] == ("refused: corrupt-executable: owner 0: corrupt op table (exchanged kind "
                        f"{OP_CODE['place']})")


def test_an_exchange_past_the_table_is_a_corrupt_executable(tmp_path):
    past = []

    def edit(ops):
        i = max(j for j, op in enumerate(ops) if op.kind == "exchange")
        past.append(len(ops) - i)  # one op more than follow it
        ops[i] = dataclasses.replace(ops[i], b=past[0])
        return ops

    lines = _refusals(tmp_path, edit)
    assert past == [12]
    assert lines[0] == "refused: corrupt-executable: owner 0: corrupt op table (exchange of 12)"


def test_a_place_of_a_register_of_another_size_is_a_corrupt_executable(tmp_path):
    def edit(ops):
        i = next(j for j, op in enumerate(ops) if op.kind == "place")
        ops[i] = dataclasses.replace(ops[i], a=0)  # register 0: k sums and the count
        return ops

    lines = _refusals(tmp_path, edit)
    assert lines[0] == "refused: corrupt-executable: owner 0: corrupt op table (placed register 0)"


def test_alphac_plan_names_the_placement_and_each_owners_words(tmp_path):
    from click.testing import CliRunner

    from alphac.commands import main
    from test_plan_blocks import gate_spec

    spec = str(gate_spec(tmp_path, placement="\n  deploymentCombinePlacement = CombineAtBlockOwners,"))
    out = CliRunner().invoke(main, ["plan", spec])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[2] == ("combine placement: CombineAtBlockOwners, the whole tree for block b at block "
                        "b's owner (the phases below are the tree's; the owners' ops are the block "
                        "placement's)")
    # k = 2 on four owners, everything partitioned: owner 3 slices (1 sum, the count) to
    # owners 0 and 1 and the count alone to owner 2, then offers its 0 parameters up the tree
    owner3 = next(line for line in lines if line.startswith("  owner 3 "))
    assert owner3.endswith("; sends 5 words per update")
    out = CliRunner().invoke(main, ["plan", "--json", spec])
    assert [o["sent_words"] for o in json.loads(out.stdout)["per_owner"]][3] == 5


# ------------------------------------------------------------------------ pipelined adds

@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_adds_pipelined_behind_frames_of_many_pieces_equal_the_oracle(transport):
    """At 4 x 300,000 words each slice is 75,000 words, frames of several pieces: each
    recv-add and combine of the reduce-scatter runs a piece at a time as far as the frame or
    add it reads has written (rt_exchange), keyed over TCP (a MAC per piece) and over
    shared memory; every owner equals the oracle."""
    dep = dataclasses.replace(deployment(4, ir.Star(), k=300_000, kind="plain", form="loop",
                                         placement=("x86_64",) * 4, name="lsq_plain_pipelined"),
                              combine_placement=BLOCK_OWNERS, updates=2)
    run = session.run("pipelined-block", dep, transport=transport, timeout_ms=60000)
    report = compare(session.plan("pipelined-block", dep), run, evaluate(dep), dep.updates)
    assert report.failures == (), "\n".join(report.failures) + "\n" + "\n".join(report.stderr.values())
    assert report.match

"""Coordinate blocks (partitionBlockWords B) and the combine's placement through the planner
and everything that describes a plan: the owner layout's shard maps, register sizes and
bytes for B in {1, 2, 3, k, k + 5}, the protocol identity, `alphac plan` (text and JSON),
the identity of either combine placement, the build and launch of a spec declaring blocks, and
the oracle, whose words do not depend on B nor on the placement."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.ir import nodes as ir
from alphac.oracle import evaluate
from alphac.plan import plan
from alphac.plan.layout import OwnerLayout
from alphac.plan.protocol import REGION_PARAMETERS, REGION_STATE
from alphac.plan.shards import check_shard_map, fragment_contents
from test_plan_support import adam_partitioning, deployment

ROOT = Path(__file__).resolve().parents[2]
K = 11
BLOCKS = (1, 2, 3, K, K + 5)
FLAGS = [(True, True, True), (True, False, False), (False, True, False), (False, False, True),
         (False, True, True)]  # optimizer_state, parameters, gradients


def blocked(n: int, B: int, flags=(True, True, True), k: int = K, **kw) -> ir.Deployment:
    opt, par, grad = flags
    part = dataclasses.replace(adam_partitioning(k, optimizer_state=ir.placed(opt), parameters=ir.placed(par),
                                                 gradients=ir.placed(grad)), block_words=B)
    return deployment(n, ir.Hierarchy(2), k=k, kind="adam", partitioning=part, **kw)


def mine(k: int, n: int, B: int, o: int) -> list[int]:
    """Owner o's coordinates, by the definition: block i // B belongs to owner (i // B) mod n."""
    return [i for i in range(k) if (i // B) % n == o]


def held(shard_map, o: int) -> list[int]:
    return sorted(int(p) for f in shard_map.of(o) if f.lifetime == "persistent"
                  for p in f.positions())


# ----------------------------------------------------------------------------- the planner

@pytest.mark.parametrize("B", BLOCKS)
@pytest.mark.parametrize("n", [1, 3, 4, 7])
def test_shard_maps_registers_and_bytes_follow_the_blocks(B, n):
    k = K
    shared = [2 * k, 2 * k + 1]
    for flags in FLAGS:
        opt, par, grad = flags
        dep = blocked(n, B, flags)
        p = plan(dep)
        assert p.layout == OwnerLayout.of(dep) and p.layout.block_words == B
        params_map, state_map = p.shard_maps
        words = np.arange(1, 2 * k + 3, dtype=np.uint64)
        for shard_map, logical in ((params_map, words[:k]), (state_map, words)):
            assert check_shard_map(shard_map, logical=logical,
                                   contents=fragment_contents(shard_map, logical)) == []
        for o in range(n):
            coords = mine(k, n, B, o)
            assert p.layout.coordinates(o).tolist() == coords
            # replicated: every owner holds all k, the authority of its block, a mirror of the rest
            assert held(params_map, o) == (coords if par else list(range(k)))
            state = [b * k + i for b in range(2) for i in coords] + shared if opt else list(range(2 * k + 2))
            assert held(state_map, o) == sorted(state)
            sizes = p.owners[o].protocol.register_words
            for op in p.owners[o].protocol.update_ops:
                if op.kind == "offer":
                    per = (1 if op.a & REGION_PARAMETERS else 0) + (2 if op.a & REGION_STATE else 0)
                    assert sizes[op.dst] == per * len(coords), (flags, o, op)
                elif op.kind == "slice":
                    assert sizes[op.dst] == len(mine(k, n, B, op.peer)) + 1, (flags, o, op)
            b = p.owners[o].bytes
            assert b.parameters == 8 * (len(coords) if par else k)
            assert b.state == 8 * (len(coords) * 2 + 2 if opt else 2 * k + 2)
            assert b.replica == (8 * k if par else 0)
            # a pool of register slots, each a frame buffer of its largest register
            slots = p.owners[o].registers
            assert max(slots.slot_words) == max(sizes) and sum(slots.slot_words) <= sum(sizes)
            assert b.registers == 8 * slots.pool_words(2)
            assert p.owners[o].peak_bytes == b.parameters + b.state + b.replica + b.registers + b.scratch
        if grad:  # one reduction per coordinate owner, each the size of its coordinates
            assert [d.target for d in p.deliveries] == list(range(n))


@pytest.mark.parametrize("B", [K, K + 5, 10**6])
def test_a_block_as_large_as_the_learner_is_one_block_at_owner_0(B):
    p = plan(blocked(4, B))
    assert [p.layout.owned_count(o) for o in range(4)] == [K, 0, 0, 0]
    assert [o.bytes.parameters for o in p.owners] == [8 * K, 0, 0, 0]
    assert p.layout.coordinate_runs(0) == ((0, 1, K),)


def test_blocks_of_three_over_four_owners_by_hand():
    p = plan(blocked(4, 3))
    runs = {o: [f.layout for f in p.shard_maps[0].of(o) if f.lifetime == "persistent"] for o in range(4)}
    assert runs == {0: [((0, 1, 3),)], 1: [((3, 1, 3),)], 2: [((6, 1, 3),)], 3: [((9, 1, 2),)]}
    # a block cycles back to owner 0 after n blocks
    p = plan(blocked(2, 2))
    assert [f.layout for f in p.shard_maps[0].of(0) if f.lifetime == "persistent"] == [
        ((0, 1, 2), (4, 1, 2), (8, 1, 2))]


def test_the_identity_covers_the_block_size_only_where_not_the_default():
    one = plan(blocked(4, 1)).protocol_id
    assert plan(deployment(4, ir.Hierarchy(2), k=K, kind="adam",
                           partitioning=adam_partitioning(K))).protocol_id == one
    others = {plan(blocked(4, B)).protocol_id for B in (2, 3, K)}
    assert len(others) == 3 and one not in others


def test_the_planner_builds_the_block_placement_under_another_identity():
    dep = dataclasses.replace(blocked(4, 2), combine_placement=ir.CombinePlacement.BLOCK_OWNERS)
    assert plan(dep).protocol_id != plan(blocked(4, 2)).protocol_id
    assert plan(dataclasses.replace(dep, combine_placement=ir.CombinePlacement.BRANCH_OWNERS)).protocol_id == \
        plan(blocked(4, 2)).protocol_id


def test_a_placement_the_planner_does_not_build_cannot_be_written():
    with pytest.raises(ValueError):
        ir.CombinePlacement("ring")


# ----------------------------------------------------------------------------- `alphac plan`

def gate_spec(tmp_path: Path, blocks: str = "", placement: str = "") -> Path:
    """The partitioned Adam hierarchy gate (k = 2, four owners) with a block size and a
    combine placement declared."""
    (tmp_path / "Gates").mkdir(exist_ok=True)
    shutil.copy(ROOT / "specs" / "Gates" / "Lsq.alpha", tmp_path / "Gates" / "Lsq.alpha")
    text = (ROOT / "specs" / "lsq_adam_partitioned_hierarchy.alpha").read_text()
    text = text.replace("partitionSharedState = [4, 5],", f"partitionSharedState = [4, 5],{blocks}")
    text = text.replace("deploymentCheckpoint = CheckpointNever,", f"deploymentCheckpoint = CheckpointNever,{placement}")
    path = tmp_path / "gate.alpha"
    path.write_text(text)
    return path


def test_plan_json_reports_block_words(tmp_path):
    runner = CliRunner()
    base = json.loads(runner.invoke(main, ["plan", "--json", str(gate_spec(tmp_path))]).stdout)
    assert base["partitioning"]["block_words"] == 1
    out = runner.invoke(main, ["plan", "--json", str(gate_spec(tmp_path, " partitionBlockWords = 3,"))])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["partitioning"] == {"optimizer_state": True, "parameters": True, "gradients": True,
                                    "words_per_coordinate": 2, "shared_state": [4, 5], "block_words": 3}
    assert data["protocol"] != base["protocol"]
    params = data["shard_maps"][0]["fragments"]
    assert [(f["owner"], f["layout"]) for f in params if f["lifetime"] == "persistent"] == [
        (0, [[0, 1, 2]]), (1, []), (2, []), (3, [])]
    assert [o["bytes"]["parameters"] for o in data["per_owner"]] == [16, 0, 0, 0]
    assert [o["bytes"]["state"] for o in data["per_owner"]] == [48, 16, 16, 16]


def test_plan_text_names_the_partitioning_and_its_blocks(tmp_path):
    out = CliRunner().invoke(main, ["plan", str(gate_spec(tmp_path, " partitionBlockWords = 3,"))])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[1] == (
        "partitioning: partitioned parameters, optimizer state, gradients (2 state words per "
        "coordinate, shared 4,5); coordinate blocks of 3 words, block b at owner b mod n")
    assert "    owner 0 host owner: 0..1" in out.stdout.splitlines()
    out = CliRunner().invoke(main, ["plan", str(ROOT / "specs" / "lsq_adam_star.alpha")])
    assert out.stdout.splitlines()[1] == ("partitioning: replicated; coordinate blocks of 1 word, "
                                          "block b at owner b mod n")


def test_check_and_plan_accept_either_placement_with_other_protocols(tmp_path):
    protocols = set()
    for placement in ("CombineAtBlockOwners", "CombineAtBranchOwners"):
        spec = str(gate_spec(tmp_path, placement=f"\n  deploymentCombinePlacement = {placement},"))
        assert CliRunner().invoke(main, ["check", spec]).exit_code == 0
        out = CliRunner().invoke(main, ["plan", "--json", spec])
        assert out.exit_code == 0, out.output
        protocols.add(json.loads(out.stdout)["protocol"])
    assert len(protocols) == 2


# ----------------------------------------------------------------------------- build

def test_a_spec_of_partitioned_blocks_builds_and_every_owner_equals_the_oracle(tmp_path):
    from alphac.testing import session
    from alphac.launch.report import compare

    spec = gate_spec(tmp_path, " partitionBlockWords = 2,")
    out = CliRunner().invoke(main, ["build", str(spec), "--all", "-o", str(tmp_path / "out")])
    assert out.exit_code == 0, out.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix != ".deps") == [
        "gate-coordinator-x86_64", "gate-worker-aarch64", "gate-worker-x86_64"]
    dep = driver.deployment(str(spec))
    assert dep.partitioning.block_words == 2 and dep.partitioning.any
    run = session.run("blocks-gate-2", dep, timeout_ms=10000, deadline_s=60)
    report = compare(session.plan("blocks-gate-2", dep), run, evaluate(dep), dep.updates)
    assert report.match, report.failures
    assert [len(run.outputs[o].params) for o in range(4)] == [2, 0, 0, 0]  # one block of k = 2


def test_replicated_blocks_build_the_same_op_tables():
    one = deployment(4, ir.Hierarchy(2), k=K, kind="adam")
    three = dataclasses.replace(one, partitioning=ir.Partitioning(block_words=3))
    a, b = (driver.image(plan(d), "worker", "aarch64") for d in (one, three))
    assert [o.ops for o in a.owners] == [o.ops for o in b.owners]
    assert [o.reg_words for o in a.owners] == [o.reg_words for o in b.owners]
    assert a.protocol_id != b.protocol_id


def test_replicated_blocks_run_and_equal_the_oracle(tmp_path):
    from alphac.testing import session
    from alphac.launch.report import compare

    dep = dataclasses.replace(deployment(3, ir.Star(), k=5, kind="adam", placement=["x86_64"] * 3),
                              partitioning=ir.Partitioning(block_words=2))
    r = session.run("blocks-replicated-2", dep, timeout_ms=10000, deadline_s=60)
    report = compare(session.plan("blocks-replicated-2", dep), r, evaluate(dep), dep.updates)
    assert report.match, report.failures


# ----------------------------------------------------------------------------- the oracle

@pytest.mark.parametrize("flags", FLAGS)
def test_the_oracles_words_do_not_depend_on_blocks_or_placement(flags):
    n = 4
    base = evaluate(blocked(n, 1, flags))
    for B in BLOCKS:
        for placement in ir.CombinePlacement:
            dep = dataclasses.replace(blocked(n, B, flags), combine_placement=placement)
            got = evaluate(dep)
            assert (got.params, got.state) == (base.params, base.state), (B, placement)
            layout = OwnerLayout.of(dep)
            for o in got.owners:
                assert list(o.params) == [got.params[i] for i in layout.params_held(o.owner)]
                assert list(o.state) == [got.state[j] for j in layout.state_held(o.owner)]
    # the words are the replicated learner's, too
    rep = evaluate(deployment(n, ir.Hierarchy(2), k=K, kind="adam"))
    assert (rep.params, rep.state) == (base.params, base.state)
    # while another B moves words between owners
    if flags[1]:
        moved = evaluate(blocked(n, 2, flags))
        assert [len(o.params) for o in moved.owners] == [4, 3, 2, 2]
        assert [len(o.params) for o in base.owners] == [3, 3, 3, 2]

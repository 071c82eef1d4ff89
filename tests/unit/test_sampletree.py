"""The sample tree (docs/plan.md "The sample tree"): its placement on owners' shares, the
projected protocols (which compute the tree's very sum on any owner count and shares,
deadlock-free), the contract that depends on N alone, the memory law of the block stack,
the plan's renderings, and the oracle's own level-by-level evaluation held equal to the
planner's placement."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from alphac import driver
from alphac.image.image import NO_EXPECT, build_image
from alphac.image.metadata import metadata_for
from alphac.ir import nodes as n
from alphac.oracle import MUTANTS, Refusal, evaluate
from alphac.oracle import sampletree as oracle_tree
from alphac.plan import compatible, plan
from alphac.plan.mutants import MutantError
from alphac.plan.render import plan_dot, plan_json, plan_text
from alphac.plan.sampletree import height, place, stack_depth
from test_plan_sim import sample_tree_expr, simulate

SPECS = Path(__file__).resolve().parents[2] / "specs"
GATE4 = driver.deployment(str(SPECS / "lsq_adam_sampletree.alpha"))
GATE7 = driver.deployment(str(SPECS / "lsq_adam_sampletree7.alpha"))
ROWS = GATE4.learner.samples.words

# shares of the gate's 13 samples: 1..8 owners, zero shares, a star-like split (one owner
# holds nearly all), uneven ones
SHARES = [(13,), (0, 13), (12, 1), (1, 12), (4, 0, 9), (6, 1, 0, 6), (3, 3, 3, 4), (13, 0, 0, 0),
          (0, 3, 1, 4, 0, 0, 5), (1, 1, 1, 1, 1, 1, 7), (2, 2, 2, 2, 2, 2, 0, 1), (0, 0, 0, 0, 0, 0, 0, 13)]


def on(shares, topology=None, part=None, rows=ROWS, placement=None) -> n.Deployment:
    """The gate's learner with `rows` split by `shares` (as many owners), all on x86-64."""
    owners = len(shares)
    learner = dataclasses.replace(GATE4.learner, samples=n.Samples(3, tuple(shares), rows))
    roles = (n.Role("coordinator", (0,)),) + ((n.Role("worker", tuple(range(1, owners))),) if owners > 1 else ())
    return dataclasses.replace(GATE4, learner=learner, owners=owners, topology=topology or n.SampleTree(),
                               roles=roles, placement=tuple(placement or ("x86_64",) * owners),
                               partitioning=part or n.Partitioning(), checkpoint=n.Checkpoint())


PARTS = {"replicated": n.Partitioning(),
         "state": n.Partitioning(optimizer_state=n.Shard(), words_per_coordinate=2, shared_state=(4, 5)),
         "parameters": n.Partitioning(parameters=n.Shard(), words_per_coordinate=2, shared_state=(4, 5)),
         "gradients": n.Partitioning(gradients=n.Shard(), words_per_coordinate=2, shared_state=(4, 5)),
         "all": n.Partitioning(optimizer_state=n.Shard(), parameters=n.Shard(), gradients=n.Shard(),
                               words_per_coordinate=2, shared_state=(4, 5))}


# ----------------------------------------------------------------------------- placement

@pytest.mark.parametrize("shares", SHARES + [(5, 0, 27, 1, 31, 0, 64, 2)])
def test_blocks_cover_the_samples_in_order_each_inside_one_owner_and_aligned(shares):
    tree = place(shares)
    blocks = [x for x in tree.nodes if x.is_block]
    assert [(b.lo, b.hi) for b in blocks] == list(zip([b.lo for b in blocks], [b.lo for b in blocks[1:]]
                                                      + [sum(shares)]))
    assert blocks[0].lo == 0
    for b in blocks:
        assert tree.starts[b.owner] <= b.lo < b.hi <= tree.starts[b.owner] + shares[b.owner]
        size = 1 << height(b.hi - b.lo)
        assert b.lo % size == 0, "a block is an aligned subtree"
        assert b.hi - b.lo == size or b.hi == sum(shares), "only the last block is cut at N"
    for x in tree.nodes:
        if not x.is_block:
            assert x.owner == x.left.owner and (x.left.lo, x.right.hi) == (x.lo, x.hi)
            assert x.owner == max(o for o in range(len(shares)) if tree.starts[o] <= x.lo and shares[o])
    # only nodes straddling an owner boundary are split
    assert len(tree.nodes) <= 2 * sum(1 for s in shares if s) * (height(sum(shares)) + 1)
    assert tree.root_owner == next(o for o, s in enumerate(shares) if s)


def test_a_block_of_c_samples_needs_bit_length_c_stack_levels():
    for c in range(1, 300):
        depth = max(bin(i).count("1") for i in range(c)) + 1  # levels held once sample i is pushed
        assert stack_depth(c) == depth, c


def test_an_owner_with_a_range_far_from_alignment_gets_few_blocks():
    tree = place((3, 1 << 20, 5))
    assert [(b.lo, b.hi) for b in tree.blocks(1)][:3] == [(3, 4), (4, 8), (8, 16)]
    assert len(tree.blocks(1)) <= 2 * 21 and len(tree.nodes) < 200


# ----------------------------------------------------------------------------- protocols

@pytest.mark.parametrize("part", list(PARTS))
@pytest.mark.parametrize("shares", SHARES)
def test_every_owner_updates_with_the_sample_trees_sum_whatever_the_shares(shares, part):
    """The projected protocols run without a deadlock under rendezvous sends, and each
    owner's update reads exactly the sample tree over samples 0..N-1 (under gradient
    partitioning, its own coordinates' slice of every block, reduced in the same order)."""
    p = plan(on(shares, part=PARTS[part]))
    run = simulate(tuple(o.protocol for o in p.owners), starts=p.sample_tree.starts)
    want = sample_tree_expr(0, 13)
    for o in range(len(shares)):
        got = run[o]["update"]
        if PARTS[part].gradients.sharded:
            assert set(re.findall(r"@(\d+)", got)) == {str(o)}
            got = re.sub(r"@\d+", "", got)
        assert got == want, (shares, o)
    sends = [sum(1 for op in x.protocol.update_ops if op.kind == "send" and op.a == x.protocol.update_ops[-1].a)
             for x in p.owners] if part == "replicated" else []
    assert all(s <= 2 for s in sends), "the total fans out binarily"


def test_the_four_owner_gates_protocol():
    p = plan(GATE4)
    ops = [[(op.kind, op.peer, op.dst, op.a, op.b) for op in o.protocol.update_ops] for o in p.owners]
    # owner 0 holds samples 0..5: blocks [0,4) and [4,6); owner 1 sample 6, so s[6,8) runs
    # there; owner 3 holds 7..12: blocks [7,8) and [8,13)
    # (a receive whose value is combined or meaned next is one op with its reader)
    assert ops[0] == [("sample-block", -1, 1, 0, 4), ("sample-block", -1, 2, 4, 2),
                      ("recv-add-right", 1, 4, 2, 3), ("combine", -1, 5, 1, 4),
                      ("recv-add-right", 3, 7, 5, 6),
                      ("send", 2, -1, 7, -1), ("send", 1, -1, 7, -1), ("update", -1, -1, 7, -1)]
    assert ops[1] == [("sample-block", -1, 1, 0, 1), ("recv-add-right", 3, 3, 1, 2),
                      ("send", 0, -1, 3, -1), ("recv", 0, 4, -1, -1), ("send", 3, -1, 4, -1),
                      ("update", -1, -1, 4, -1)]
    assert ops[2] == [("recv-update", 0, -1, 1, -1)]  # no samples: it only receives
    assert ops[3] == [("sample-block", -1, 1, 0, 1), ("sample-block", -1, 2, 1, 5), ("send", 1, -1, 1, -1),
                      ("send", 0, -1, 2, -1), ("recv-update", 1, -1, 3, -1)]
    assert [(t.sender, t.receiver, t.value, t.branch) for t in p.reduce] == [
        (3, 1, "s[7,8)", 0), (1, 0, "s[6,8)", 1), (3, 0, "s[8,13)", 3)]
    assert [(t.sender, t.receiver, t.value) for t in p.replicate] == [
        (0, 2, "s[0,13)"), (0, 1, "s[0,13)"), (1, 3, "s[0,13)")]
    # the frames' expect words: the samples beneath each received value
    img = build_image(p, "coordinator", "x86_64")
    expect = [op[6] for op in img.owners[0].ops[:len(p.owners[0].protocol.update_ops)]]
    assert [e for e in expect if e != NO_EXPECT] == [2, 5]
    img = build_image(p, "worker", "x86_64")
    assert [op[6] for op in img.owners[0].ops[:7] if op[6] != NO_EXPECT] == [1, 13]


def test_the_memory_law_counts_the_block_stack():
    """Register 0 is the binary-counter stack: (k + 1) words per level, bit_length of the
    owner's largest block; every other register holds k + 1 words."""
    p = plan(GATE4)
    k = GATE4.learner.k
    for o in p.owners:
        words = o.protocol.register_words
        depth = max((stack_depth(b.hi - b.lo) for b in p.sample_tree.blocks(o.owner)), default=0)
        assert words[0] == (k + 1) * depth
        assert set(words[1:]) == {k + 1}
        # the stack keeps a slot of its own; the law counts every slot as a frame buffer
        assert sum(r == o.registers.slot[0] for r in o.registers.slot) == 1
        assert o.registers.slot_words[o.registers.slot[0]] == words[0]
        assert o.bytes.registers == 8 * o.registers.pool_words(0)
        assert o.peak_bytes == o.persistent_bytes + o.bytes.registers + o.bytes.scratch
    assert [o.protocol.register_words[0] for o in p.owners] == [9, 3, 0, 9]
    # a slot's frame: 8 header words + its words + a checksum + 4 tag words
    frame = 8 + 1 + 4
    assert [o.peak_bytes for o in p.owners] == [64 + 8 * (9 + 4 * 3 + 5 * frame) + 16,
                                                64 + 8 * (4 * 3 + 4 * frame),
                                                64 + 8 * (3 + 2 * frame),
                                                64 + 8 * (9 + 2 * 3 + 3 * frame) + 16]


# ----------------------------------------------------------------------------- contract

def test_the_contract_depends_on_the_number_of_samples_only():
    plans = [plan(on(s)) for s in SHARES]
    assert len({p.contract.order_digest for p in plans}) == 1
    assert all(compatible(plans[0], p) == [] for p in plans)
    assert len({p.protocol_id for p in plans}) == len(plans), "placements differ, and so do identities"
    assert plan(GATE7).contract.order_digest == plan(GATE4).contract.order_digest
    assert plan(GATE4).contract.topology == "sample-tree"
    fewer = plan(on((6, 1, 0, 5), rows=ROWS[:12]))
    assert [d.code for d in compatible(plans[0], fewer)] == ["numerical-order-mismatch"]
    star = plan(on((6, 1, 0, 6), n.Star()))
    diags = compatible(plans[0], star)
    assert [d.code for d in diags] == ["numerical-order-mismatch"]
    assert diags[0].notes[0] == "topology: sample-tree here, star there"


def test_the_contract_names_the_trees_rule_and_n():
    ops = plan(GATE4).contract.ops
    assert [op for op in ops if op.startswith(("combine:", "normalise:"))] == [
        "combine: sample tree over 13 samples, root height 4 covering [0, 13)",
        "combine: node (h, j) covers [j*2^h, (j+1)*2^h) cut at N; a leaf (h = 0) is one sample's "
        "contribution, count 1",
        "combine: a branch whose right half is non-empty := left + right, left first, counts added",
        "combine: a branch whose right half is empty := its left child",
        "normalise: mean := s[0,13).sum / s[0,13).mass"]


# ----------------------------------------------------------------------------- renderings

def test_plan_text_json_dot_and_the_executables_record_show_the_sample_tree():
    p = plan(GATE4)
    text = plan_text(p).splitlines()
    at = text.index("sample tree over 13 samples (root height 4; s[lo,hi) covers samples lo..hi-1, "
                    "b<j> the j-th branch):")
    assert text[at + 1:at + 13] == [
        "  s[0,4) at owner 0: block of its samples 0..3",
        "  s[4,6) at owner 0: block of its samples 4..5",
        "  s[6,7) at owner 1: block of its samples 0..0",
        "  s[7,8) at owner 3: block of its samples 0..0",
        "  b0 = s[6,8) at owner 1 = s[6,7) + s[7,8)",
        "  b1 = s[4,8) at owner 0 = s[4,6) + s[6,8)",
        "  b2 = s[0,8) at owner 0 = s[0,4) + s[4,8)",
        "  s[8,13) at owner 3: block of its samples 1..5",
        "  b3 = s[0,13) at owner 0 = s[0,8) + s[8,13)",
        "owner tree (delivers the total, carries publication and checkpoints), root 0:",
        "  0 -> 2, 1",
        "  1 -> 3"]
    assert "    per update: sample-block r1 = samples 0..3; sample-block r2 = samples 4..5; " \
           "recv-add r4 = r2 + r3 <- 1; combine r5 = r1 + r4" in plan_text(p)
    data = json.loads(json.dumps(plan_json(p)))
    assert data["topology"] == "sample-tree"
    assert (data["sample_tree"]["samples"], data["sample_tree"]["height"]) == (13, 4)
    assert data["sample_tree"]["nodes"][-1] == {"id": 8, "name": "s[0,13)", "kind": "branch", "owner": 0,
                                                "lo": 0, "hi": 13, "branch": "b3", "left": 6, "right": 7}
    assert data["sample_tree"]["nodes"][0] == {"id": 0, "name": "s[0,4)", "kind": "block", "owner": 0,
                                               "lo": 0, "hi": 4}
    assert data["tree"]["leaf_order"] == [0, 1, 3, 2]  # the owner tree
    assert metadata_for(p, "worker", "x86_64", "x86_64-unknown-linux-gnu", {})["topology"] == "sample-tree"
    dot = plan_dot(p)
    assert 'n7 [shape=box, label="s[8,13)\\nowner 3"];' in dot
    assert 'n7 -> n8 [label="R", style=bold];' in dot


# ----------------------------------------------------------------------------- the oracle

def _stack_block(values: np.ndarray) -> np.ndarray:
    """A block's sum as the executables' sample-block computes it: a binary-counter stack
    (levels merge while their counts are equal, then fold from the top)."""
    stack: list[tuple[np.ndarray, int]] = []
    for v in values:
        stack.append((v, 1))
        while len(stack) > 1 and stack[-1][1] == stack[-2][1]:
            (a, ca), (b, cb) = stack[-2], stack.pop()
            stack[-1] = (a + b, ca + cb)
    while len(stack) > 1:
        (a, ca), (b, cb) = stack[-2], stack.pop()
        stack[-1] = (a + b, ca + cb)
    return stack[0][0]


def _placed_sum(shares, contrib: np.ndarray) -> np.ndarray:
    """The planner's placed tree over given contributions: blocks by the stack, branches
    left + right."""
    tree = place(shares)
    val = {}
    for x in tree.nodes:
        val[id(x)] = _stack_block(contrib[x.lo:x.hi]) if x.is_block else val[id(x.left)] + val[id(x.right)]
    return val[id(tree.root)]


@pytest.mark.parametrize("samples", [1, 2, 3, 5, 8, 13, 31, 64, 100, 257])
def test_the_oracles_sample_tree_equals_the_planners_placement(samples):
    rng = np.random.default_rng(samples)
    contrib = rng.normal(size=(samples, 3)) * 10.0 ** rng.integers(-8, 9, size=(samples, 1))
    owner = np.zeros(samples, dtype=np.int64)
    for run in (1, 4, 16, 1 << 20):  # the oracle's runs of P samples change nothing
        got = oracle_tree.total(((r0, contrib[r0:r0 + run]) for r0 in range(0, samples, run)), 3, owner, 0)
        assert got.n == samples
        for shares in ((samples,), (samples // 3, 0, samples - samples // 3), (1,) * samples):
            assert got.g.tobytes() == _placed_sum(shares, contrib).tobytes(), (samples, run, shares)
    # and the data rounds: another order of the same adds gives other bits
    if samples >= 13:
        assert np.cumsum(contrib, axis=0)[-1].tobytes() != got.g.tobytes()


def test_the_oracle_gives_the_same_bits_for_any_shares_and_both_engines():
    words = {evaluate(on(s), engine=e).params + evaluate(on(s), engine=e).state
             for s in SHARES for e in ("scalar", "vector")}
    assert len(words) == 1
    assert evaluate(GATE7).params == evaluate(GATE4).params


def test_the_gate_data_rounds_differently_under_a_star_or_a_hierarchy():
    tree = evaluate(GATE4)
    for topology in (n.Star(), n.Hierarchy(2)):
        other = evaluate(on((6, 1, 0, 6), topology))
        assert other.params != tree.params and other.state != tree.state


def test_without_samples_the_mean_refuses_as_for_any_deployment():
    dep = on((0, 0, 0), rows=ROWS[:0])
    with pytest.raises(Refusal) as err:
        evaluate(dep)
    assert err.value.code == "non-finite" and err.value.program == "mean"
    p = plan(dep)  # owner 0 holds the empty total (+0.0, 0) and delivers it
    assert [op.kind for op in p.owners[0].protocol.update_ops] == ["local", "send", "send", "update"]


def test_a_non_finite_branch_names_its_samples_and_owner():
    rows = ROWS.copy()
    big = np.array([1e200, 0.0, -1e200]).view(np.uint64)
    rows[4] = big  # (w.x - y) x is about 1e397 for sample 4 at once: a contribution refusal
    with pytest.raises(Refusal) as err:
        evaluate(on((6, 1, 0, 6), rows=rows))
    assert err.value.program == "contribution" and (err.value.owner, err.value.site.sample) == (0, 4)
    huge = np.array([1e154, 0.0, -1e154]).view(np.uint64)  # each contribution finite, their sum not
    rows = ROWS.copy()
    rows[6], rows[7] = huge, huge
    with pytest.raises(Refusal) as err:
        evaluate(on((6, 1, 0, 6), rows=rows), engine="scalar")
    assert (err.value.program, err.value.owner, err.value.statement) == ("combine", 1, "branch s[6,8)")


@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutants_are_not_defined_on_the_sample_tree(mutant):
    dep = dataclasses.replace(GATE4, checkpoint=n.Checkpoint())
    with pytest.raises(Refusal) as err:
        evaluate(dep, mutant=mutant)
    assert (err.value.code, err.value.detail) == (
        "mutant-not-applicable", f"mutant {mutant} is defined on trees over owners, not on the sample tree")
    with pytest.raises(MutantError) as err:
        plan(dep, mutant)
    assert str(err.value) == (f"mutant-not-applicable: mutant {mutant}: the mutants are defined on trees "
                              "over owners, not on the sample tree")


# ----------------------------------------------------------------------------- check time

TWELVE = """value twelve : (family DataParallelSystem 7 11) = DataParallelSystemOf {
  dataParallelParameterCount = 2,
  dataParallelSampleWidth = 3,
  dataParallelContribution = lsqGradient,
  dataParallelUpdate = lsqAdamUpdate,
  dataParallelInitial = [0.0012, -3.75],
  dataParallelInitialState = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
  dataParallelRate = 0.001,
  dataParallelSamples = load "twelve.npy" shares [0, 3, 1, 3, 0, 0, 5],
}
"""


def _resume(tmp_path: Path, base: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(base + '\nvalue fromFour : DeploymentResume = ResumeOf {\n  resumeDeployment = run,\n'
                    '  resumeCheckpoint = "ck/ckpt-2",\n  resumeContract = ResumeSameContract,\n}\n')
    return str(path)


def test_a_declared_resume_across_owner_counts_checks_and_across_n_is_refused(tmp_path):
    """A checkpoint of the 4-owner gate (written by the Python writer, the oracle's words at
    version 2): the 7-owner gate resumes it under the same contract; the same learner over
    12 samples is refused numerical-order-mismatch at the resume value."""
    from alphac.image.ckpt import write_plan_checkpoint

    shutil.copytree(SPECS / "Gates", tmp_path / "Gates")
    words = evaluate(GATE4, 2)
    write_plan_checkpoint(plan(GATE4), tmp_path / "ck" / "ckpt-2", 2, np.array(words.params, dtype=np.uint64),
                          np.array(words.state, dtype=np.uint64))
    seven = (SPECS / "lsq_adam_sampletree7.alpha").read_text()
    assert driver.check(_resume(tmp_path, seven, "seven.alpha")).ok
    np.save(tmp_path / "twelve.npy", np.load(SPECS / "Gates" / "sampletree13.npy")[:12])
    twelve = seven.replace("import Learning.Deployment", "import Gates.Lsq\nimport Learning.Deployment").replace(
        "deploymentLearner = sampleTreeAdam7", "deploymentLearner = twelve").replace(
        "value run : Deployment", TWELVE + "\nvalue run : Deployment")
    path = _resume(tmp_path, twelve, "twelve.alpha")
    result = driver.check(path)
    assert [d.code for d in result.diagnostics] == ["numerical-order-mismatch"]
    d = result.diagnostics[0]
    assert d.span.file == path and d.span.line == twelve.count("\n") + 2

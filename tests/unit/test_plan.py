"""The planner on the seeds' shapes: combine trees, coverage refusals, reduce and replicate
phases, the delivery laws, projected protocols, numerical contracts and protocol identity."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from alphac.diagnostics import CompileError, Span
from alphac.ir.nodes import (Contract, ExplicitTree, Hierarchy, Profile, Shard, Star, TreeBranch, TreeLeaf,
                             Words, placed)
from alphac.plan import Delivery, compatible, plan, replicate_phase
from alphac.plan.protocol import Op
from test_plan_sim import simulate, tree_expr
from test_plan_support import deployment

F = "spec.alpha"


def codes(dep) -> list[str]:
    with pytest.raises(CompileError) as err:
        plan(dep)
    return [d.code for d in err.value.diagnostics]


def edges(phase) -> list[tuple[int, int]]:
    return [(t.sender, t.receiver) for t in phase]


def chain(owners, at=0):
    node = TreeLeaf(owners[0], Span(F, 10, 5))
    for i, o in enumerate(owners[1:]):
        node = TreeBranch(at, node, TreeLeaf(o, Span(F, 11 + i, 5)), Span(F, 11 + i, 3))
    return node


def explicit(root, members, coverage="members"):
    return ExplicitTree(root, coverage, tuple(members), Span(F, 9, 21))


# ----------------------------------------------------------------------------- trees

def test_star_of_four_is_a_left_deep_chain_at_the_hub():
    p = plan(deployment(4))
    assert tree_expr(p.tree) == "(((c0+c1)+c2)+c3)"
    assert [b.owner for b in p.shape.branches] == [0, 0, 0]
    assert p.shape.leaf_order == (0, 1, 2, 3) and p.shape.depth == 3
    assert [(t.step, t.sender, t.receiver, t.value, t.branch) for t in p.reduce] == [
        (0, 1, 0, "c1", 0), (1, 2, 0, "c2", 1), (2, 3, 0, "c3", 2)]
    assert edges(p.replicate) == [(0, 3), (0, 2), (0, 1)]
    assert {t.value for t in p.replicate} == {"b2"}


def test_hierarchy_of_seven_at_fan_out_two():
    p = plan(deployment(7, Hierarchy(2)))
    assert tree_expr(p.tree) == "((c0+((c1+c3)+c4))+((c2+c5)+c6))"
    assert edges(p.reduce) == [(3, 1), (4, 1), (1, 0), (5, 2), (6, 2), (2, 0)]
    assert sorted(edges(p.replicate)) == [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)]


def test_ten_owners_star_and_hierarchy_are_different_contracts():
    star = plan(deployment(10))
    tree = plan(deployment(10, Hierarchy(3)))
    assert tree_expr(star.tree) != tree_expr(tree.tree)
    assert star.protocol_id != tree.protocol_id
    diags = compatible(star.contract, tree.contract)
    assert [d.code for d in diags] == ["numerical-order-mismatch"]
    assert "topology: star here, hierarchy 3 there" in diags[0].notes
    assert compatible(star.contract, plan(deployment(10)).contract) == []


def test_a_hierarchy_whose_tree_equals_the_star_is_still_another_protocol():
    star, flat = plan(deployment(4)), plan(deployment(4, Hierarchy(3)))
    assert tree_expr(star.tree) == tree_expr(flat.tree)
    assert star.contract.ops == flat.contract.ops
    assert star.protocol_id != flat.protocol_id


def test_explicit_member_tree_equal_to_the_star_plans_the_same_schedule():
    p = plan(deployment(4, explicit(chain([0, 1, 2, 3]), [0, 1, 2, 3])))
    star = plan(deployment(4))
    assert [o.protocol for o in p.owners] == [o.protocol for o in star.owners]
    assert p.contract.ops == star.contract.ops
    assert p.protocol_id != star.protocol_id  # declared topology differs


def test_group_coverage_accepts_any_leaf_order():
    root = TreeBranch(2, TreeBranch(2, TreeLeaf(2), TreeLeaf(0)), TreeBranch(1, TreeLeaf(1), TreeLeaf(3)))
    p = plan(deployment(4, explicit(root, [0, 1, 2, 3], "group")))
    assert tree_expr(p.tree) == "((c2+c0)+(c1+c3))"
    assert edges(p.reduce) == [(0, 2), (3, 1), (1, 2)] and p.shape.leaf_order == (2, 0, 1, 3)
    assert simulate(tuple(o.protocol for o in p.owners))[3]["update"] == "((c2+c0)+(c1+c3))"


# ----------------------------------------------------------------------------- coverage refusals

def test_missing_leaf_refuses_naming_the_owner():
    with pytest.raises(CompileError) as err:
        plan(deployment(4, explicit(chain([0, 1, 3]), [0, 1, 2, 3], "group")))
    (d,) = err.value.diagnostics
    assert d.code == "combine-leaf-missing"
    assert str(d.span) == "spec.alpha:9:21"
    assert d.notes == ("members without a leaf: 2",)


def test_duplicated_leaf_refuses_even_when_the_leaf_count_matches():
    # four leaves for four owners: the count matches, but owner 1 is twice and owner 3 never
    dep = deployment(4, explicit(chain([0, 1, 2, 1]), [0, 1, 2, 3], "group"))
    with pytest.raises(CompileError) as err:
        plan(dep)
    got = {d.code: d for d in err.value.diagnostics}
    assert sorted(got) == ["combine-leaf-duplicated", "combine-leaf-missing"]
    dup = got["combine-leaf-duplicated"]
    assert str(dup.span) == "spec.alpha:13:5"
    assert "its first leaf is at spec.alpha:11:5" in dup.notes


def test_duplicated_leaf_alone():
    assert codes(deployment(3, explicit(chain([0, 1, 2, 2]), [0, 1, 2], "group"))) == [
        "combine-leaf-duplicated"]


def test_foreign_leaf_and_member():
    assert codes(deployment(3, explicit(chain([0, 1, 2, 5]), [0, 1, 2], "group"))) == ["combine-leaf-foreign"]
    assert codes(deployment(3, explicit(chain([0, 1, 2]), [0, 1, 2, 7]))) == ["combine-leaf-foreign"]


def test_members_must_cover_every_owner():
    assert codes(deployment(4, explicit(chain([0, 1, 2]), [0, 1, 2]))) == ["combine-leaf-missing"]


def test_ordered_members_fix_the_leaf_order():
    with pytest.raises(CompileError) as err:
        plan(deployment(3, explicit(chain([0, 2, 1]), [0, 1, 2])))
    (d,) = err.value.diagnostics
    assert d.code == "combine-leaf-order"
    assert d.notes == ("leaf 1 is owner 2, member 1 is owner 1",)


def test_branch_must_run_at_an_owner_beneath_it():
    root = TreeBranch(0, TreeLeaf(0), TreeBranch(0, TreeLeaf(1), TreeLeaf(2), Span(F, 4, 7)))
    with pytest.raises(CompileError) as err:
        plan(deployment(3, explicit(root, [0, 1, 2])))
    (d,) = err.value.diagnostics
    assert (d.code, str(d.span)) == ("combine-branch-owner", "spec.alpha:4:7")
    assert d.notes[0] == "leaves beneath: 1, 2"


def test_fan_out_zero_refuses():
    assert codes(deployment(3, Hierarchy(0))) == ["combine-leaf-missing"]


# ----------------------------------------------------------------------------- delivery laws

def test_star_delivery_hub_sends_one_result_instead_of_three():
    p = plan(deployment(4))
    everyone = replicate_phase(p.tree)
    one = replicate_phase(p.tree, Delivery(3))
    assert sum(t.sender == 0 for t in everyone) == 3
    assert edges(one) == [(0, 3)]
    assert replicate_phase(p.tree, Delivery(0)) == ()


def test_fan_out_two_of_seven_delivery_relays_and_spares_the_other_subtree():
    p = plan(deployment(7, Hierarchy(2)))
    path = replicate_phase(p.tree, Delivery(4))
    assert edges(path) == [(0, 1), (1, 4)]          # owner 1 forwards
    receivers = {t.receiver for t in path}
    assert receivers.isdisjoint({2, 5, 6})           # the other subtree receives nothing
    assert 3 not in receivers                         # nor does 4's sibling
    assert edges(replicate_phase(p.tree, Delivery(6))) == [(0, 2), (2, 6)]


def test_partitioned_gradients_deliver_each_sum_to_its_owner_alone():
    from test_plan_support import adam_partitioning

    p = plan(deployment(7, Hierarchy(2), kind="adam", partitioning=adam_partitioning(2)))
    assert [str(d) for d in p.deliveries] == [f"CombineDeliverTo {t}" for t in range(7)]
    run = simulate(tuple(o.protocol for o in p.owners))
    for t in range(7):
        assert run[t]["update"] == tree_expr(p.tree, f"@{t}")
    # a leaf owner receives the parameter replica and its own sum: nothing else
    assert [run[o]["received"] for o in (3, 4, 5, 6)] == [2 + 1, 2 + 1, 2 + 1, 2 + 1]
    # forwarder 1: from 3 and 4 in all 7 reductions, and its subtree's deliveries (1, 3, 4)
    # from 0; 3 frames in the replica gather; 2 digests from its children, 1 publish from 0
    assert run[1]["received"] == 7 * 2 + 3 + 3 + 2 + 1


# ----------------------------------------------------------------------------- protocols

def test_star_protocols_are_exact():
    p = plan(deployment(4))
    hub = p.owners[0].protocol
    assert hub.update_ops == (
        Op("local", dst=0), Op("recv-add-right", peer=1, dst=2, a=0, b=1),
        Op("recv-add-right", peer=2, dst=4, a=2, b=3), Op("recv-add-right", peer=3, dst=6, a=4, b=5),
        Op("send", peer=3, a=6), Op("send", peer=2, a=6), Op("send", peer=1, a=6), Op("update", a=6))
    assert p.owners[2].protocol.update_ops == (
        Op("local", dst=0), Op("send", peer=0, a=0), Op("recv-update", peer=0, a=1))
    assert p.owners[2].protocol.finish_ops == (Op("stage"), Op("digest-send", peer=0),
                                               Op("publish-recv", peer=0), Op("finalize"))
    assert [(o.role, o.target) for o in p.owners] == [
        ("coordinator", "x86_64"), ("worker", "aarch64"), ("worker", "x86_64"), ("worker", "aarch64")]


@pytest.mark.parametrize("n,topology", [(1, Star()), (4, Star()), (7, Hierarchy(2)), (10, Star()),
                                        (10, Hierarchy(3)), (13, Hierarchy(1))])
def test_every_owner_updates_with_the_tree_sum_and_nothing_deadlocks(n, topology):
    p = plan(deployment(n, topology))
    run = simulate(tuple(o.protocol for o in p.owners))
    want = tree_expr(p.tree)
    assert [run[o]["update"] for o in range(n)] == [want] * n
    assert sum(r["sent"] for r in run.values()) == 2 * 2 * (n - 1)   # value up and down, digest, verdict


@pytest.mark.parametrize("flags", [(True, False, False), (False, True, False), (False, False, True),
                                   (True, True, False), (True, False, True), (True, True, True)])
def test_partitioned_protocols_run_and_assemble_by_selection(flags):
    from test_plan_support import adam_partitioning

    state, params, grads = flags
    n, k = 4, 6
    part = adam_partitioning(k, optimizer_state=placed(state), parameters=placed(params),
                             gradients=placed(grads))
    p = plan(deployment(n, Hierarchy(2), k=k, kind="adam", partitioning=part))
    run = simulate(tuple(o.protocol for o in p.owners))
    for o in range(n):
        r = run[o]
        assert r["update"] == (tree_expr(p.tree, f"@{o}") if grads else tree_expr(p.tree))
        if params:
            assert r["replica"] == frozenset((x, 1) for x in range(n)) and r["released"]
        else:
            assert r["replica"] is None
        mask = (0 if params else 1) | (0 if state else 2)
        assert r["installed"] == ((frozenset((x, mask) for x in range(n)), mask) if mask else None)
    kinds = [op.kind for op in p.owners[1].protocol.update_ops]
    if params:
        assert kinds.index("replica-install") < kinds.index("local") < kinds.index("replica-release") \
            < kinds.index("update-owned")


def test_ten_thousand_owners_plan_without_recursion():
    for topology in (Star(), Hierarchy(4)):
        p = plan(deployment(10_000, topology))
        assert len(p.reduce) == 9_999 and len(p.replicate) == 9_999
        assert p.owners[9_999].protocol.update_ops[-1].kind == "recv-update"  # the mean as it arrives
    p = plan(deployment(10_000))
    assert p.shape.depth == 9_999
    deep = plan(deployment(10_000, explicit(chain(list(range(10_000))), list(range(10_000)))))
    assert deep.shape.depth == 9_999


def test_ten_thousand_owner_duplicate_names_the_offender():
    owners = list(range(10_000))
    owners[-1] = 17
    with pytest.raises(CompileError) as err:
        plan(deployment(10_000, explicit(chain(owners), range(10_000), "group")))
    got = {d.code: d for d in err.value.diagnostics}
    assert sorted(got) == ["combine-leaf-duplicated", "combine-leaf-missing"]
    assert got["combine-leaf-missing"].notes == ("members without a leaf: 9999",)


# ----------------------------------------------------------------------------- contracts and identity

def test_contract_lists_the_order_that_runs():
    p = plan(deployment(4))
    combine = [op for op in p.contract.ops if op.startswith("combine:")]
    assert combine == ["combine: b0 := c0 + c1 at 0", "combine: b1 := b0 + c2 at 0",
                       "combine: b2 := b1 + c3 at 0"]
    assert "normalise: mean := b2.sum / b2.mass" in p.contract.ops
    assert p.contract.ops[-2:] == (
        "update: slot 0 := (slot 0 - (slot 4 * slot 2))", "update: slot 1 := (slot 1 - (slot 4 * slot 3))")


def test_profile_mismatch_between_contracts():
    a = plan(deployment(4)).contract
    from dataclasses import replace

    b = replace(a, profile=Profile(subnormals="flush-to-zero"))
    (d,) = compatible(a, b)
    assert d.code == "numerical-profile-mismatch"
    assert d.notes == ("subnormals: 'preserve' here, 'flush-to-zero' there",)


def test_a_profile_the_targets_do_not_run_refuses():
    with pytest.raises(CompileError) as err:
        plan(deployment(4, contract=Contract(Profile(rounding="toward-zero", span=Span(F, 3, 9)))))
    (d,) = err.value.diagnostics
    assert (d.code, str(d.span)) == ("numerical-profile-mismatch", "spec.alpha:3:9")
    assert d.notes == ("rounding: declared 'toward-zero', executed 'nearest-even'",)
    assert codes(deployment(4, contract=Contract(relation="bound 1ulp"))) == ["numerical-relation-unverified"]


def test_protocol_identity_is_stable_and_covers_what_changes_the_messages():
    base = plan(deployment(4))
    assert base.protocol_hex == f"{base.protocol_id:016x}" and 0 <= base.protocol_id < 2 ** 64
    # independent of placement, roles and spans
    same = deployment(4, placement=("aarch64",) * 4)
    assert plan(same).protocol_id == base.protocol_id
    for other in (deployment(5), deployment(4, Hierarchy(2)), deployment(4, kind="momentum"),
                  deployment(4, k=3), deployment(4, form="loop")):
        assert plan(other).protocol_id != base.protocol_id


def test_protocol_identity_covers_the_data():
    """Samples, shares, initial words, rate and update count determine the words, so an
    executable built from other data has another identity (and refuses this one's hello)."""
    import dataclasses

    base = deployment(4)
    learner = base.learner
    rows = learner.samples.words.copy()
    rows[0, 0] ^= 1
    others = [
        dataclasses.replace(base, learner=dataclasses.replace(
            learner, samples=dataclasses.replace(learner.samples, words=rows))),
        deployment(4, shares=(4, 0, 1, 1)),
        dataclasses.replace(base, learner=dataclasses.replace(learner, rate=learner.rate ^ 1)),
        dataclasses.replace(base, learner=dataclasses.replace(
            learner, initial=Words(tuple(w ^ 1 for w in learner.initial.as_tuple())))),
        dataclasses.replace(base, updates=base.updates + 1),
    ]
    ids = {plan(d).protocol_id for d in others}
    assert len(ids) == len(others) and plan(base).protocol_id not in ids


def test_protocol_identity_covers_the_wire_format(monkeypatch):
    import alphac.plan.identity as identity

    base = plan(deployment(4)).protocol_id
    monkeypatch.setattr(identity, "WIRE_FORMAT", identity.WIRE_FORMAT + 1)
    assert plan(deployment(4)).protocol_id != base


def test_protocol_identity_is_the_same_in_another_process():
    code = ("import sys; sys.path.insert(0, 'tests/unit'); from test_plan_support import deployment; "
            "from alphac.plan import plan; from alphac.ir.nodes import Hierarchy; "
            "print(plan(deployment(7, Hierarchy(2), kind='adam')).protocol_hex)")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), check=True)
    assert out.stdout.strip() == plan(deployment(7, Hierarchy(2), kind="adam")).protocol_hex


def test_a_declared_deliver_to_refuses_for_the_deployments_combine():
    tree = ExplicitTree(chain([0, 1, 2, 3]), "members", (0, 1, 2, 3), Span(F, 9, 21), delivery=3)
    with pytest.raises(CompileError) as err:
        plan(deployment(4, tree))
    (d,) = err.value.diagnostics
    assert (d.code, str(d.span)) == ("combine-delivery-partial", "spec.alpha:9:21")
    assert d.notes[0] == "owners that would never receive the mean: 0, 1, 2"


def test_roles_group_owner_plans_and_plans_compare_by_contract():
    p = plan(deployment(4))
    assert {name: [o.owner for o in plans] for name, plans in p.roles.items()} == {
        "coordinator": [0], "worker": [1, 2, 3]}
    assert compatible(p, plan(deployment(4))) == []
    assert [d.code for d in compatible(p, plan(deployment(4, Hierarchy(2))))] == ["numerical-order-mismatch"]


def test_no_owners_is_a_located_refusal_not_a_crash():
    from dataclasses import replace

    dep = replace(deployment(1), owners=0)
    assert codes(dep) == ["combine-leaf-missing"]


def test_star_hub_sends_each_coordinate_owner_one_result_under_gradient_partitioning():
    from alphac.ir.nodes import Partitioning

    p = plan(deployment(4, partitioning=Partitioning(gradients=Shard())))
    hub = list(p.owners[0].protocol.update_ops)
    first = next(i for i, op in enumerate(hub) if op.kind == "slice")
    last = next(i for i, op in enumerate(hub) if op.kind == "update-owned")
    sends = [op.peer for op in hub[first:last] if op.kind == "send"]
    assert sends == [1, 2, 3]          # one result per reduction, to its owner alone
    replicated = plan(deployment(4)).owners[0].protocol.update_ops
    assert [op.peer for op in replicated if op.kind == "send"] == [3, 2, 1]   # three for one result
    worker = [op.kind for op in p.owners[2].protocol.update_ops]
    # owner 2 receives exactly its own sum during the reductions (and the assembly afterwards)
    assert worker[worker.index("slice"):worker.index("update-owned")].count("recv") == 1

"""The named families of what exists: Runtime.NativeDataParallelOwned (star) and
Runtime.NativeDataParallelOwnedTree (hierarchy) are the partitioned data-parallel
deployments they name, and Runtime.NativeCombine's delivery laws hold for every planned
delivery and refuse, as combine-delivery-law, transfers that break them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from alphac.check import load_deployment
from alphac.diagnostics import CompileError, DiagnosticBag, Span
from alphac.ir.nodes import Hierarchy, Shard, Star
from alphac.plan import plan
from alphac.plan.delivery import PathOwners, check_delivery
from alphac.plan.phases import REPLICATE_ALL, Delivery
from alphac.plan.tree import Transfer, build_tree, delivery_path, postorder, replicate_edges

ROOT = Path(__file__).resolve().parents[2]
SPAN = Span("spec.alpha", 3, 1)
SPECS = ROOT / "specs"


@pytest.mark.parametrize("named,explicit", [
    ("lsq_momentum_owned_star", "lsq_momentum_partitioned_star"),
    ("lsq_adam_owned_hierarchy", "lsq_adam_partitioned_hierarchy"),
])
def test_a_named_family_is_the_deployment_it_names(named, explicit):
    a = load_deployment(str(ROOT / "specs" / f"{named}.alpha"))
    b = load_deployment(str(ROOT / "specs" / f"{explicit}.alpha"))
    assert replace(a, name=b.name) == b
    assert plan(a).protocol_id == plan(b).protocol_id


def test_the_owned_families_fix_their_topology_and_partitioning():
    star = load_deployment(str(ROOT / "specs" / "lsq_momentum_owned_star.alpha"))
    tree = load_deployment(str(ROOT / "specs" / "lsq_adam_owned_hierarchy.alpha"))
    assert isinstance(star.topology, Star) and tree.topology == Hierarchy(2)
    for dep in (star, tree):
        p = dep.partitioning
        assert (p.optimizer_state, p.parameters, p.gradients, p.block_words) == (Shard(), Shard(), Shard(), 1)
    assert (tree.partitioning.words_per_coordinate, tree.partitioning.shared_state) == (2, (4, 5))


def _law(n: int, topology, delivery: Delivery, transfers) -> list[str]:
    root = build_tree(n, topology)
    nodes = postorder(root)
    paths = PathOwners(nodes)
    bag = DiagnosticBag()
    check_delivery(root, delivery, transfers, paths, set(paths.leaf), SPAN, bag)
    return [d.code for d in bag.items]


def _planned(n: int, topology, target: int) -> list[Transfer]:
    root = build_tree(n, topology)
    return delivery_path({e.receiver: e.sender for e in replicate_edges(root)}, target)


def test_on_a_star_the_hub_sends_one_result_instead_of_three():
    planned = _planned(4, Star(), 2)
    assert planned == [Transfer(0, 2)]
    assert _law(4, Star(), Delivery(2), planned) == []
    everyone = replicate_edges(build_tree(4, Star()))
    assert len(everyone) == 3
    assert _law(4, Star(), Delivery(2), everyone) == ["combine-delivery-law"]


def test_on_a_fanout_2_tree_of_seven_a_forwarder_relays_and_the_other_subtree_receives_nothing():
    planned = _planned(7, Hierarchy(2), 5)
    assert planned == [Transfer(0, 2), Transfer(2, 5)]
    assert _law(7, Hierarchy(2), Delivery(5), planned) == []
    # the other subtree (owners 1, 3, 4) receiving too breaks the law
    extra = planned + [Transfer(0, 1)]
    assert _law(7, Hierarchy(2), Delivery(5), extra) == ["combine-delivery-law"]
    # skipping the forwarder: owner 5 hears from owner 2 before 2 holds the result
    assert _law(7, Hierarchy(2), Delivery(5), [Transfer(2, 5)]) == ["combine-delivery-law"]
    # never reaching the target
    assert _law(7, Hierarchy(2), Delivery(5), [Transfer(0, 2)]) == ["combine-delivery-law"]


def test_replicate_all_reaches_every_owner_once():
    edges = replicate_edges(build_tree(7, Hierarchy(2)))
    assert _law(7, Hierarchy(2), REPLICATE_ALL, edges) == []
    assert _law(7, Hierarchy(2), REPLICATE_ALL, edges[:-1]) == ["combine-delivery-law"]
    assert _law(7, Hierarchy(2), REPLICATE_ALL, edges + [edges[0]]) == ["combine-delivery-law"]


def test_the_law_message_names_the_law_and_the_first_break():
    root = build_tree(4, Star())
    paths = PathOwners(postorder(root))
    bag = DiagnosticBag()
    check_delivery(root, Delivery(2), replicate_edges(root), paths, set(paths.leaf), SPAN, bag)
    (d,) = bag.items
    assert d.message == ("the planned CombineDeliverTo 2 breaks NativeCombineDeliverToLaw: owners "
                         "1, 3 receive it off the path to owner 2")
    assert tuple(d.notes) == ("3 transfers planned",)


def test_every_planned_delivery_of_the_gates_keeps_its_law():
    for spec in ("lsq_adam_partitioned_hierarchy7", "lsq_momentum_partitioned_star5",
                 "lsq_adam_hierarchy", "order10_star"):
        p = plan(load_deployment(str(ROOT / "specs" / f"{spec}.alpha")))
        assert p.deliveries  # planned, hence checked


def test_a_broken_delivery_refuses_the_plan(monkeypatch):
    from alphac.plan import delivery

    dep = load_deployment(str(ROOT / "specs" / "lsq_momentum_owned_star.alpha"))
    # a planner whose delivery path sends the result to every owner
    monkeypatch.setattr(delivery, "delivery_path", lambda parent, target: [
        Transfer(0, o) for o in range(1, 4)])
    with pytest.raises(CompileError) as err:
        plan(dep)
    assert [d.code for d in err.value.diagnostics] == ["combine-delivery-law"] * 4


# Every named deployment family of specs/, by the value that stands for its deployment.
NAMED_SPECS = [("partitioned_regression", "run"), ("partitioned_regression_sm86", "run"),
               ("coordinate_host", "run"), ("coordinate_device", "device"),
               ("coordinate_memory", "device"), ("local_correlation_star", "run"),
               ("local_correlation_hierarchy", "run"), ("lsq_momentum_owned_star", "run"),
               ("lsq_adam_owned_hierarchy", "run")]


@pytest.mark.parametrize("stem,value", NAMED_SPECS)
def test_a_resume_declaration_names_a_value_of_every_deployment_family(tmp_path, stem, value):
    import shutil

    shutil.copytree(SPECS / "Gates", tmp_path / "Gates")
    text = (SPECS / f"{stem}.alpha").read_text()
    text = text.replace("\nimport ", "\nimport Learning.Deployment\nimport ", 1) + f"""
value again : DeploymentResume = ResumeOf {{
  resumeDeployment = {value},
  resumeCheckpoint = "ck/ckpt-2",
  resumeContract = ResumeNewContract,
}}
"""
    path = tmp_path / f"{stem}.alpha"
    path.write_text(text)
    dep = load_deployment(str(path))  # no type-mismatch: the value stands for its deployment
    assert (dep.resume.path, dep.resume.mode) == (str(tmp_path / "ck" / "ckpt-2"), "new")

"""The planner on the real specs under specs/: the gates' star and hierarchy shapes, the
ten-owner order gate, and partitioning claims on the gates' real Adam and momentum updates."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from alphac.check import load_deployment
from alphac.diagnostics import CompileError
from alphac.ir.nodes import Hierarchy, Partitioning, Shard, Star
from alphac.plan import compatible, plan, plan_spec
from test_plan_sim import sample_tree_expr, simulate, tree_expr

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
GATES = sorted(p.name for p in SPECS.glob("lsq_*.alpha")) + ["order10_star.alpha", "order10_hierarchy.alpha"]


@pytest.fixture(scope="module")
def deps():
    return {name: load_deployment(str(SPECS / name)) for name in GATES if (SPECS / name).exists()}


def test_every_gate_plans_and_runs_its_declared_tree(deps):
    assert len(deps) >= 8
    for name, dep in deps.items():
        p = plan(dep)
        starts = p.sample_tree.starts if p.sample_tree is not None else None
        run = simulate(tuple(o.protocol for o in p.owners), starts=starts)
        if starts is not None:
            # the sample tree over the global sample sequence, whatever the shares
            assert {run[o]["update"] for o in range(dep.owners)} == {
                sample_tree_expr(0, sum(dep.learner.samples.shares))}, name
        elif dep.partitioning.gradients.sharded:
            # one reduction per coordinate owner over the same tree, delivered to it alone
            for o in range(dep.owners):
                assert run[o]["update"] == re.sub(r"c(\d+)", rf"c\g<1>@{o}", tree_expr(p.tree)), name
        else:
            assert {run[o]["update"] for o in range(dep.owners)} == {tree_expr(p.tree)}, name
        if name.endswith("_star.alpha"):
            assert isinstance(dep.topology, Star)
            assert tree_expr(p.tree) == "(" * (dep.owners - 1) + "c0" + "".join(
                f"+c{o})" for o in range(1, dep.owners))


def test_ten_owners_star_and_hierarchy_are_two_contracts(deps):
    star, tree = plan(deps["order10_star.alpha"]), plan(deps["order10_hierarchy.alpha"])
    assert star.deployment.owners == tree.deployment.owners == 10
    assert isinstance(tree.deployment.topology, Hierarchy)
    assert star.protocol_id != tree.protocol_id
    assert [d.code for d in compatible(star.contract, tree.contract)] == ["numerical-order-mismatch"]
    # the programs agree; only the combine differs
    strip = lambda ops: [op for op in ops if not op.startswith(("combine:", "normalise:"))]  # noqa: E731
    assert strip(star.contract.ops) == strip(tree.contract.ops)
    assert star.shape.depth == 9 and tree.shape.depth < 9


def test_plan_spec_equals_plan_of_the_loaded_deployment():
    path = str(SPECS / "lsq_adam_hierarchy.alpha")
    assert plan_spec(path).protocol_id == plan(load_deployment(path)).protocol_id


def _adam(shared, w, **flags) -> Partitioning:
    on = dict(optimizer_state=Shard(), parameters=Shard(), gradients=Shard())
    on.update(flags)
    return Partitioning(words_per_coordinate=w, shared_state=tuple(shared), **on)


def test_gate_adam_partitions_with_its_powers_shared(deps):
    dep = deps["lsq_adam_star.alpha"]
    assert (dep.learner.k, dep.learner.m) == (2, 6)
    p = plan(replace(dep, partitioning=_adam((4, 5), 2)))
    # owner o < 2 holds its parameter and two moments, every owner the two shared powers
    assert [o.persistent_bytes for o in p.owners] == [40, 40, 16, 16]
    assert [o.bytes.replica for o in p.owners] == [16] * 4
    run = simulate(tuple(o.protocol for o in p.owners))
    assert [run[o]["update"] for o in range(4)] == [tree_expr(p.tree, f"@{o}") for o in range(4)]


def test_gate_adam_with_its_second_moment_shared_is_refused(deps):
    dep = deps["lsq_adam_hierarchy.alpha"]
    with pytest.raises(CompileError) as err:
        plan(replace(dep, partitioning=_adam((2, 3, 4, 5), 1)))
    assert [d.code for d in err.value.diagnostics] == ["data-parallel-not-separable"]


def test_gate_momentum_partitions_and_refuses_an_overclaim(deps):
    dep = deps["lsq_momentum_hierarchy.alpha"]
    p = plan(replace(dep, partitioning=_adam((), 1)))
    assert [o.persistent_bytes for o in p.owners] == [16, 16, 0, 0]
    with pytest.raises(CompileError) as err:
        plan(replace(dep, partitioning=_adam((), 2)))
    assert [d.code for d in err.value.diagnostics] == ["data-parallel-words-overclaimed"]

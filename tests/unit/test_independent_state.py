"""The independent-state learner (LocalCorrelation.System on Runtime.NativeIndependentState
and NativeIndependentTree): what the checker lowers, what the oracle evaluates on its own,
and what the planner plans (no combine, no mean; publication and checkpoints as for every
learner)."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from alphac.check import load_deployment
from alphac.diagnostics import CompileError
from alphac.ir import nodes as ir
from alphac.ir.mutants import NAMES
from alphac.oracle import Refusal, evaluate
from alphac.plan import plan
from alphac.plan.mutants import MutantError
from alphac.ir.words import to_bits as b64, to_float as f64

ROOT = Path(__file__).resolve().parents[2]
STAR = str(ROOT / "specs" / "local_correlation_star.alpha")
TREE = str(ROOT / "specs" / "local_correlation_hierarchy.alpha")


def test_the_star_lowers_to_one_region_per_owner():
    dep = load_deployment(STAR)
    L = dep.learner
    assert (L.shape, L.region, L.k, L.s, L.m) == (ir.INDEPENDENT, 1, 4, 2, 0)
    assert L.samples.shares == (1, 2, 3, 0)
    assert dep.partitioning == ir.Partitioning(parameters=ir.Shard(), block_words=1)
    assert isinstance(dep.topology, ir.Star)
    assert L.update == ir.Program(0, ())  # no update: nothing is combined
    assert L.contribution.slots == 4      # the rule: region | pair | scale
    tree = load_deployment(TREE)
    assert (tree.learner.region, tree.learner.k, tree.partitioning.block_words) == (2, 10, 2)
    assert tree.topology == ir.Hierarchy(2) and tree.checkpoint.every == 2


def _by_hand(region: list[float], pairs, scale: float, updates: int, moments: bool) -> list[float]:
    """The rules of specs/Gates/Correlation.alpha, written out in Python floats."""
    for _ in range(updates):
        for x, y in pairs:
            region[0] = region[0] + scale * (x * y - region[0])
            if moments:
                region[1] = region[1] + scale * (x * x - region[1])
    return region


@pytest.mark.parametrize("spec,moments", [(STAR, False), (TREE, True)])
def test_every_owner_evolves_its_own_region_from_its_own_pairs(spec, moments):
    dep = load_deployment(spec)
    L = dep.learner
    r = L.region
    res = evaluate(dep)
    words = [f64(w) for w in L.initial.as_tuple()]
    for o in range(dep.owners):
        pairs = [(f64(int(a)), f64(int(b))) for a, b in L.samples.owner_rows(o)]
        want = _by_hand(words[o * r:(o + 1) * r], pairs, f64(L.rate), dep.updates, moments)
        assert res.owners[o].params == tuple(b64(x) for x in want)
        assert res.owners[o].state == ()
    # an owner without inputs keeps its region
    empty = L.samples.shares.index(0)
    assert res.owners[empty].params == L.initial.as_tuple()[empty * r:(empty + 1) * r]


def test_an_owner_s_words_depend_on_nothing_of_another_owner():
    dep = load_deployment(STAR)
    L = dep.learner
    words = np.array(L.samples.words, dtype=np.uint64)
    words[0, 0] = b64(-2.5)  # owner 0's only pair
    other = replace(dep, learner=replace(L, samples=ir.Samples(2, L.samples.shares, words)))
    a, b = evaluate(dep), evaluate(other)
    assert a.owners[0].params != b.owners[0].params
    assert [o.params for o in a.owners[1:]] == [o.params for o in b.owners[1:]]


def test_the_scalar_and_vector_engines_agree():
    dep = load_deployment(TREE)
    assert evaluate(dep, engine="scalar").params == evaluate(dep, engine="vector").params


def test_the_oracle_ticks_each_update_and_stops_when_a_tick_raises():
    # the independent-state path never called tick: a launch's --timeout or interrupt, which
    # end the oracle's thread through its tick, did not stop it
    dep = load_deployment(TREE)
    heard: list[int] = []
    evaluate(dep, tick=heard.append)
    assert heard == list(range(dep.updates))
    heard.clear()
    two = evaluate(dep, rounds=2)
    evaluate(dep, start=(two.params, (), 2), tick=heard.append)
    assert heard == list(range(2, dep.updates))

    class Stop(Exception):
        pass

    def stop(u: int) -> None:
        heard.append(u)
        raise Stop

    heard.clear()
    start = time.process_time()
    with pytest.raises(Stop):
        evaluate(dep, rounds=10**7, tick=stop)
    assert heard == [0] and time.process_time() - start < 1.0


def test_resuming_from_the_words_of_update_2_continues_the_run():
    dep = load_deployment(TREE)
    two = evaluate(dep, rounds=2)
    rest = evaluate(dep, start=(two.params, (), 2))
    assert rest.version == dep.updates and rest.params == evaluate(dep).params


def test_the_foreign_inputs_mutant_runs_each_rule_on_the_next_owner_s_pairs():
    dep = load_deployment(STAR)
    declared, mutant = evaluate(dep), evaluate(dep, mutant="foreign-inputs")
    assert all(a.params != b.params for a, b in zip(declared.owners, mutant.owners))
    moved = replace(dep, learner=replace(dep.learner, samples=ir.Samples(
        2, (2, 3, 0, 1), np.roll(np.asarray(dep.learner.samples.words), -1, axis=0))))
    assert evaluate(moved).params == mutant.params


@pytest.mark.parametrize("name", [n for n in NAMES if n != "foreign-inputs"])
def test_no_combine_mutant_applies_to_an_independent_state_learner(name):
    dep = load_deployment(STAR)
    with pytest.raises(Refusal) as err:
        evaluate(dep, mutant=name)
    assert err.value.code == "mutant-not-applicable"
    with pytest.raises(MutantError):
        plan(dep, mutant=name)


def test_foreign_inputs_needs_an_independent_state_learner():
    dep = load_deployment(str(ROOT / "specs" / "lsq_plain_star.alpha"))
    with pytest.raises(Refusal) as err:
        evaluate(dep, mutant="foreign-inputs")
    assert err.value.code == "mutant-not-applicable"
    with pytest.raises(MutantError):
        plan(dep, mutant="foreign-inputs")


def test_a_non_finite_rule_result_refuses_naming_the_owner_and_pair():
    dep = load_deployment(STAR)
    L = dep.learner
    words = np.array(L.samples.words, dtype=np.uint64)
    words[2, :] = [b64(1e300), b64(1e300)]  # owner 1's second pair: x y overflows
    bad = replace(dep, learner=replace(L, samples=ir.Samples(2, L.samples.shares, words)))
    with pytest.raises(Refusal) as err:
        evaluate(bad)
    assert err.value.code == "non-finite"
    assert err.value.detail.startswith("update 0: rule of owner 1 sample 1: `slot 0`")


def test_the_plan_runs_the_rule_alone_and_publishes_along_the_tree():
    p = plan(load_deployment(TREE))
    assert p.reduce == () and p.replicate == () and p.deliveries == ()
    for o in p.owners:
        assert [op.kind for op in o.protocol.update_ops] == ["evolve"]
        assert o.bytes.parameters == 16 and o.bytes.replica == 0 and o.bytes.registers == 0
    assert [op.kind for op in p.owners[1].protocol.finish_ops] == [
        "stage", "digest-recv", "digest-recv", "digest-send", "publish-recv", "publish-send",
        "publish-send", "finalize"]
    assert p.contract.ops[0].startswith("rule: per owner")
    assert not any(op.startswith(("combine", "normalise", "update")) for op in p.contract.ops)
    (regions,) = p.shard_maps
    assert [(f.owner, f.layout, f.mutable) for f in regions.fragments] == [
        (o, ((2 * o, 1, 2),), True) for o in range(5)]


def test_the_identity_tells_the_shapes_apart():
    a, b = plan(load_deployment(STAR)), plan(load_deployment(TREE))
    assert a.protocol_id != b.protocol_id
    assert plan(load_deployment(STAR), mutant="foreign-inputs").protocol_id != a.protocol_id


def test_a_deployment_for_another_owner_count_is_refused(tmp_path):
    text = Path(STAR).read_text().replace("independentOwners = 4", "independentOwners = 3")
    text = text.replace("[1 .. 4]", "[1 .. 3]").replace(
        "TargetX86_64, TargetAArch64, TargetX86_64, TargetAArch64", "TargetX86_64, TargetAArch64, TargetX86_64")
    shutil.copytree(ROOT / "specs" / "Gates", tmp_path / "Gates")
    path = tmp_path / "three.alpha"
    path.write_text(text)
    with pytest.raises(CompileError) as err:
        load_deployment(str(path))
    assert [d.code for d in err.value.diagnostics] == ["owner-count"]


@pytest.mark.parametrize("part", [ir.Partitioning(), ir.Partitioning(parameters=ir.Shard()),
                                  ir.Partitioning(parameters=ir.Shard(), gradients=ir.Shard(), block_words=2)])
def test_a_deployment_holding_other_words_than_the_regions_is_refused(part):
    dep = load_deployment(TREE)
    with pytest.raises(CompileError) as err:
        plan(replace(dep, partitioning=part))
    assert [d.code for d in err.value.diagnostics] == ["independent-state-partitioning"]


def test_the_pairs_run_in_their_declared_order():
    """Owner 2's three pairs in reverse order give other words: the rule is not symmetric
    in its inputs, so the order the oracle (and every owner) runs them in shows."""
    dep = load_deployment(STAR)
    L = dep.learner
    words = np.array(L.samples.words, dtype=np.uint64)
    words[3:6] = words[3:6][::-1]  # owner 2's rows
    reversed_ = replace(dep, learner=replace(L, samples=ir.Samples(2, L.samples.shares, words)))
    a, b = evaluate(dep), evaluate(reversed_)
    assert a.owners[2].params != b.owners[2].params
    assert [a.owners[o].params for o in (0, 1, 3)] == [b.owners[o].params for o in (0, 1, 3)]

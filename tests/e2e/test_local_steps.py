"""Local steps H (Learning.Deployment.ConsistencyLocalSteps): between combines each owner
applies H updates on its own samples alone, then the declared tree combines the owners'
parameter deltas weighted by their sample counts and every owner adds their mean to the
shared version. The gate specs (H = 2 on a star, H = 3 on a hierarchy, owners alternating
x86-64 and AArch64) match the oracle bit for bit; the oracle's rounds are the synchronous
oracle's single-owner updates combined by hand; H changes the words; an executed mutant
is refused; the combine runs once per H local updates; what is not built is refused by name."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

from alphac import driver
from alphac.ir import nodes as ir
from alphac.ir.words import to_float
from alphac.launch.launcher import launch
from alphac.oracle import evaluate
from alphac.plan.render import plan_json, plan_text
from alphac.testing import session

from shape_gates import (SWAP, assert_launch_matches_on_mixed_instruction_sets, checkpoint_launcher, consistent,
                         needs_qemu, planner_refusal)

SPECS = Path(__file__).resolve().parents[2] / "specs"
GATE = str(SPECS / "local_steps.alpha")
_dep = functools.partial(driver.deployment, GATE)  # a gate deployment by name


def _steps(dep: ir.Deployment, H: int) -> ir.Deployment:
    return consistent(dep, ir.ConsistencyKind.LOCAL_STEPS, H)


def _alone(dep: ir.Deployment, o: int) -> ir.Deployment:
    """Owner o alone with its samples: the synchronous learner of one owner."""
    s = dep.learner.samples
    rows = s.owner_rows(o)
    learner = dataclasses.replace(dep.learner, samples=ir.Samples(s.width, (s.shares[o],), rows))
    return dataclasses.replace(dep, learner=learner, owners=1, topology=ir.Star(), placement=("x86_64",),
                               roles=(ir.Role("solo", (0,)),), consistency=ir.Consistency())


def _by_hand(dep: ir.Deployment, rounds: int) -> tuple[list[int], list[tuple[int, ...]]]:
    """Local steps on the star from the synchronous oracle: each owner's H updates are the
    one-owner learner's H updates from the shared words and its own state; then the deltas
    (x_o - v) * n_o, added in the star's order, divided by the total count, added to v (with
    an outer momentum b: b = mu * b + mean, v + r * b), in Python floats. The parameters and
    each owner's state."""
    H, shares = dep.consistency.local_steps, dep.learner.samples.shares
    v = [to_float(int(w)) for w in dep.learner.initial.as_array()]
    states = [np.asarray(dep.learner.initial_state.as_array(), dtype=np.uint64)] * dep.owners
    outer, b = dep.consistency.outer, [0.0] * len(v)
    for _ in range(rounds):
        words = np.array(v, dtype=np.float64).view(np.uint64)
        total = None
        for o in range(dep.owners):  # the star: ((c0 + c1) + c2) + c3
            n = shares[o]
            if n:
                alone = evaluate(_alone(dep, o), rounds=H, start=(words, states[o], 0))
                x, states[o] = alone.params, np.asarray(alone.state, dtype=np.uint64)
            d = [(to_float(int(x[j])) - v[j]) * float(n) if n else 0.0 for j in range(len(v))]
            total = d if total is None else [a + b for a, b in zip(total, d)]
        mean = [total[j] / float(sum(shares)) for j in range(len(v))]
        if outer is None:
            v = [v[j] + mean[j] for j in range(len(v))]
        else:
            b = [to_float(outer.momentum) * b[j] + mean[j] for j in range(len(v))]
            v = [v[j] + to_float(outer.rate) * b[j] for j in range(len(v))]
    return [int(w) for w in np.array(v, dtype=np.float64).view(np.uint64)], [tuple(int(w) for w in s) for s in states]


@pytest.mark.parametrize("name", ["local2", "local2Momentum", "local2Outer"])
def test_the_oracle_is_the_single_owner_updates_combined_by_their_weighted_deltas(name):
    dep = _dep(name)
    assert sum(1 for n in dep.learner.samples.shares if n) == 3  # an owner without samples too
    for rounds in (1, 3):
        got = evaluate(dep, rounds=rounds)
        params, states = _by_hand(dep, rounds)
        assert [int(w) for w in got.params] == params
        assert [o.state for o in got.owners] == states


def test_the_local_steps_change_the_words():
    """H = 2 and 3 differ from each other and from the synchronous learner. (For plain
    steps, linear in the mean, H = 1 is the synchronous learner but for rounding: on this
    data the two round alike.)"""
    dep = _dep("local2")
    words = {H: tuple(evaluate(_steps(dep, H)).params) for H in (0, 1, 2, 3)}
    assert len({words[0], words[2], words[3]}) == 3 and words[1] != words[2]
    ids = {H: driver.plan(_steps(dep, H)).protocol_hex for H in (0, 1, 2, 3)}
    assert len(set(ids.values())) == 4


def test_the_plan_shows_one_combine_per_H_local_updates():
    plan = driver.plan(_dep("local3"))
    text = plan_text(plan).splitlines()
    assert any(line.startswith("consistency: local steps 3: between combines each owner applies 3 updates")
               for line in text)
    assert plan_json(plan)["consistency"] == {"kind": "local-steps", "value": 3, "overlap": False}
    sync = plan_text(driver.plan(_steps(_dep("local3"), 0)))
    assert "sends 3 words per update of 3 local updates (1 per local update)" in "\n".join(text)
    assert "sends 3 words per update\n" in sync + "\n"
    # the shared version is kept beside the parameters
    k_bytes = 8 * plan.deployment.learner.k
    synchronous = driver.plan(_steps(_dep("local3"), 0))
    assert [o.bytes.parameters for o in plan.owners] == [o.bytes.parameters + k_bytes for o in synchronous.owners]


@needs_qemu
@pytest.mark.parametrize("name", ["local2", "local3", "local2Momentum", "local2Outer"])
def test_every_owner_matches_the_oracle_on_mixed_instruction_sets(name):
    assert_launch_matches_on_mixed_instruction_sets(_dep(name), GATE, f"local-steps-{name}")


def test_the_outer_momentum_is_part_of_the_learner():
    """OuterMomentum { outerRate = 0.7, outerMomentum = 0.9 } gives other words than the
    average, its own protocol identity and ordered operation list, a plan line, k words of
    state per owner."""
    dep = _dep("local2Outer")
    averaged = _steps(dep, 2)
    assert dep.consistency.outer == ir.OuterMomentum(0x3FE6666666666666, 0x3FECCCCCCCCCCCCD)
    assert evaluate(dep).params != evaluate(averaged).params
    plan, plain = driver.plan(dep), driver.plan(averaged)
    assert plan.protocol_hex != plain.protocol_hex
    assert plan.contract.order_digest != plain.contract.order_digest
    assert ("outer update: momentum b := 0.9 * b + mean, v := v + 0.7 * b (b kept by every owner alike, "
            "from +0.0)") in plan_text(plan).splitlines()
    assert plan_json(plan)["consistency"]["outer"] == {"kind": "momentum", "rate": "3fe6666666666666",
                                                       "momentum": "3feccccccccccccd"}
    k_bytes = 8 * dep.learner.k
    assert [o.bytes.state for o in plan.owners] == [o.bytes.state + k_bytes for o in plain.owners]


@needs_qemu
def test_the_outer_momentum_is_checkpointed_and_resumed_on_the_other_instruction_set(tmp_path):
    """A checkpoint of local steps with an outer momentum holds b (its `outer` region, k
    words, every owner's alike); resumed with every owner on the other instruction set the
    run ends with the uninterrupted run's words, b continued; a new contract on the same
    checkpoint starts b at +0.0 again, and the oracle agrees with both."""
    from alphac.checkpoint import logical_words, read_manifest

    launched = checkpoint_launcher(tmp_path)

    dep = dataclasses.replace(_dep("local2Outer"), checkpoint=ir.Checkpoint(2, "ck"))
    _, report = launched("local2Outer-ck", dep, "ck")
    assert report.match, [r.why for r in report.rows]
    ckpt = tmp_path / "ck" / "ckpt-2"
    assert read_manifest(ckpt).regions == {"parameters": dep.learner.k, "state": 0, "outer": dep.learner.k}
    assert not (logical_words(ckpt)["outer"] == 0).all()
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    _, resumed = launched("local2Outer-ck-swapped", swapped, "ck2", ckpt)
    assert resumed.match, [r.why for r in resumed.rows]
    assert [r.params for r in resumed.rows] == [r.params for r in report.rows]
    _, fresh = launched("local2Outer-ck-new", dep, "ck3", ckpt, new_contract=True)
    assert fresh.match, [r.why for r in fresh.rows]
    assert [r.params for r in fresh.rows] != [r.params for r in report.rows]


def test_each_owner_keeps_its_own_optimizer_state():
    """Momentum under local steps: the owners' parameters agree, their momentum does not
    (an owner without samples keeps its initial state)."""
    dep = _dep("local2Momentum")
    owners = evaluate(dep).owners
    assert len({o.params for o in owners}) == 1 and len({o.state for o in owners}) == 4
    assert owners[3].state == tuple(int(w) for w in dep.learner.initial_state.as_array())


@needs_qemu
def test_every_owners_own_state_is_checkpointed_and_resumed_on_the_other_instruction_set(tmp_path):
    """A checkpoint of local steps with optimizer state holds every owner's own (its `states`
    region, owner o's m words at [o m, (o + 1) m), each written by its owner) and owner
    0's as its `state` region; resumed with every owner on the other instruction set each
    owner continues its own and the run ends with the uninterrupted run's words; a new
    contract gives every owner owner 0's, and the oracle agrees with both."""
    from alphac.checkpoint import logical_words, read_manifest

    launched = checkpoint_launcher(tmp_path)

    dep = dataclasses.replace(_dep("local2Momentum"), checkpoint=ir.Checkpoint(2, "ck"))
    m = dep.learner.m
    _, report = launched("local2Momentum-ck", dep, "ck")
    assert report.match, [r.why for r in report.rows]
    ckpt = tmp_path / "ck" / "ckpt-2"
    assert read_manifest(ckpt).regions == {"parameters": dep.learner.k, "state": m, "states": 4 * m}
    words = logical_words(ckpt)
    at2 = evaluate(dep, rounds=2).owners
    assert [tuple(int(w) for w in words["states"][o * m:(o + 1) * m]) for o in range(4)] == [o.state for o in at2]
    assert tuple(int(w) for w in words["state"]) == at2[0].state
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    _, resumed = launched("local2Momentum-ck-swapped", swapped, "ck2", ckpt)
    assert resumed.match, [r.why for r in resumed.rows]
    assert [(r.params, r.state) for r in resumed.rows] == [(r.params, r.state) for r in report.rows]
    _, fresh = launched("local2Momentum-ck-new", dep, "ck3", ckpt, new_contract=True)
    assert fresh.match, [r.why for r in fresh.rows]
    assert [r.state for r in fresh.rows] != [r.state for r in report.rows]


@needs_qemu
def test_the_block_placement_combines_the_deltas_to_the_same_words(tmp_path):
    """At the block owners (the ordered reduce-scatter of the deltas, then the gather) the
    tree's order per coordinate is the declared one: the oracle's words. (On x86-64 alone:
    the gates show the instruction sets agree.)"""
    for name in ("local2", "local3"):
        dep = dataclasses.replace(_dep(name), combine_placement=ir.CombinePlacement.BLOCK_OWNERS,
                                  placement=("x86_64",) * 4)
        report = launch(dep, out_dir=session.root() / f"local-steps-{name}-blocks", spec=GATE)
        assert report.match, report.failures
        assert [r.params for r in report.rows] == [w.params for w in evaluate(_dep(name)).owners]


@needs_qemu
def test_binary32_storage_rounds_every_step_to_binary32():
    """The logistic regression gate stored in binary32 (two values a word, the exp kernel)
    under 3 local steps: each delta, product, sum, quotient and outer add is binary32's own;
    the owners on both instruction sets match the oracle, and the words are not the
    synchronous learner's."""
    dep = _steps(driver.deployment(str(SPECS / "logistic_regression_storage32.alpha"), "run"), 3)
    assert dep.contract.profile.format == "binary32"
    report = launch(dep, out_dir=session.root() / "local-steps-binary32")
    assert report.match, report.failures
    assert {r.target for r in report.rows} == {"x86_64", "aarch64"}
    assert evaluate(dep).params != evaluate(_steps(dep, 0)).params


@needs_qemu
def test_checkpoints_resume_on_the_other_instruction_set_and_another_consistency_is_a_new_contract(tmp_path):
    """A checkpoint after every second round holds the shared version (the owners' words
    between rounds); resumed with every owner on the other instruction set the run ends
    with the uninterrupted run's words. The consistency is part of the ordered operation
    list: resumed as the synchronous learner, the same contract refuses, a new one goes on."""
    from alphac.oracle import start_of

    launched = checkpoint_launcher(tmp_path)
    dep = dataclasses.replace(_dep("local2"), checkpoint=ir.Checkpoint(2, "ck"))
    _, report = launched("local2-ck", dep, "ck")
    assert report.match, [r.why for r in report.rows]
    ckpt = tmp_path / "ck" / "ckpt-2"
    assert tuple(int(w) for w in start_of(ckpt, dep.learner).params) == evaluate(dep, rounds=2).params
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    _, resumed = launched("local2-ck-swapped", swapped, "ck2", ckpt)
    assert resumed.match, [r.why for r in resumed.rows]
    assert [r.params for r in resumed.rows] == [r.params for r in report.rows]
    synchronous = _steps(dep, 0)
    run, _ = launched("local2-ck-synchronous", synchronous, "ck3", ckpt)
    assert {oc.returncode for oc in run.result.outcomes} == {1}
    assert all("refused: numerical-order-mismatch: " in oc.stderr for oc in run.result.outcomes)
    _, fresh = launched("local2-ck-synchronous-new", synchronous, "ck4", ckpt, new_contract=True)
    assert fresh.match, [r.why for r in fresh.rows]


@needs_qemu
def test_an_executed_mutant_is_refused():
    """fewer-local-steps's executables apply H - 1 local updates: a rewrite of the
    deployment; the oracle counts its own way."""
    dep = _dep("local3")
    report = launch(dep, out_dir=session.root() / "local-steps-fewer", spec=GATE, mutant="fewer-local-steps")
    assert not report.match and report.mutant_match
    assert evaluate(dep, mutant="fewer-local-steps").params == evaluate(_steps(dep, 2)).params


def test_fewer_local_steps_needs_two_or_more():
    from alphac.oracle import Refusal
    from alphac.plan.mutants import MutantError

    one = _steps(_dep("local2"), 1)
    with pytest.raises(MutantError, match="fewer-local-steps: it needs local steps H >= 2"):
        driver.plan(one, "fewer-local-steps")
    with pytest.raises(Refusal, match="it needs local steps H >= 2"):
        evaluate(one, mutant="fewer-local-steps")


@pytest.mark.parametrize("change, why", [
    (lambda d: dataclasses.replace(d, partitioning=ir.Partitioning(parameters=ir.Shard())), "partitioning"),
    (lambda d: dataclasses.replace(d, topology=ir.SampleTree()), "the sample tree"),
    (lambda d: dataclasses.replace(d, placement=("x86_64", "sm86", "x86_64", "aarch64")), "an SM86 owner"),
])
def test_what_is_not_built_yet_is_refused_by_name(change, why):
    d = planner_refusal(change(_dep("local2")))
    assert d.code == "consistency-not-built"
    assert d.message == (f"deployment local2 declares 2 local steps with {why}; local steps are built for "
                         "replicated learners on a star or a hierarchy of CPU owners")


def test_the_oracle_starts_each_owners_own_state_from_a_checkpoint_or_the_start_state():
    """Local steps with optimizer state from a start: each owner from its own block of the
    checkpoint's states region when it holds one, else from the start's state."""
    from alphac.oracle.resume import Start

    dep = _dep("local2Momentum")
    got = evaluate(dep, rounds=2)
    params = np.asarray(got.params, dtype=np.uint64)
    states = np.concatenate([np.asarray(o.state, dtype=np.uint64) for o in got.owners])
    own = Start(params, np.asarray(got.state, dtype=np.uint64), 2, "ck", "", "", states=states)
    assert [o.state for o in evaluate(dep, start=own).owners] == [o.state for o in evaluate(dep).owners]
    plain = (params, np.asarray(got.state, dtype=np.uint64), 2)
    assert [o.state for o in evaluate(dep, start=plain).owners] != [o.state for o in evaluate(dep).owners]

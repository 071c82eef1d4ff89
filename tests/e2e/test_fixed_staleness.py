"""Fixed staleness S (Learning.Deployment.ConsistencyFixedStaleness): the contributions to
update u read parameter version max(u - S, 0). The gate specs (S = 1 on a star, S = 2 on a
hierarchy, S = 1 with every region partitioned, owners alternating x86-64 and AArch64)
match the oracle bit for bit, the partitioned one the replicated learner too; S changes
the words from the second update on; an executed mutant is refused; S = 0 is the
synchronous learner itself; what is not built yet is refused by name."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from alphac import driver
from alphac.ir import nodes as ir
from alphac.launch.launcher import launch
from alphac.oracle import evaluate
from alphac.plan.render import plan_json, plan_text
from alphac.testing import session

from shape_gates import assert_launch_matches_on_mixed_instruction_sets, consistent, needs_qemu, planner_refusal

SPECS = Path(__file__).resolve().parents[2] / "specs"
GATE = str(SPECS / "fixed_staleness.alpha")


_dep = functools.partial(driver.deployment, GATE)  # a gate deployment by name


def _stale(dep: ir.Deployment, S: int) -> ir.Deployment:
    return consistent(dep, ir.ConsistencyKind.FIXED_STALENESS, S)


def test_the_gates_declare_their_staleness_and_the_plan_shows_which_version_each_update_reads():
    assert [(_dep(n).consistency.kind, _dep(n).consistency.staleness) for n in ("stale1", "stale2")] == [
        (ir.ConsistencyKind.FIXED_STALENESS, 1), (ir.ConsistencyKind.FIXED_STALENESS, 2)]
    plan = driver.plan(_dep("stale2"))
    assert ("consistency: fixed staleness 2: the contributions to update u read parameter version "
            "max(u - 2, 0) (0 reads 0, 1 reads 0, 2 reads 0, 3 reads 1, ...)") in plan_text(plan).splitlines()
    assert plan_json(plan)["consistency"] == {"kind": "fixed-staleness", "value": 2, "overlap": True}
    assert ("overlap: each owner computes the contributions to update u + 1 while update u combines and "
            "updates") in plan_text(plan).splitlines()
    assert "consistency" not in plan_json(driver.plan(_stale(_dep("stale2"), 0)))
    # a partitioned read replica is gathered by the update's own ops: nothing computed ahead
    partitioned = driver.plan(_dep("stale1Partitioned"))
    assert plan_json(partitioned)["consistency"]["overlap"] is False
    assert any(line.startswith("overlap: none") for line in plan_text(partitioned).splitlines())


def test_the_staleness_is_part_of_the_protocol_identity_and_zero_is_the_synchronous_learner():
    dep = _dep("stale1")
    ids = {S: driver.plan(_stale(dep, S)).protocol_hex for S in (0, 1, 2)}
    assert len(set(ids.values())) == 3
    synchronous = dataclasses.replace(dep, consistency=ir.Consistency())
    assert driver.plan(synchronous).protocol_hex == ids[0]


def test_the_staleness_changes_the_words_from_the_second_update_on():
    dep = _dep("stale1")
    first = {S: evaluate(_stale(dep, S), rounds=1).params for S in (0, 1, 2)}
    assert first[0] == first[1] == first[2]  # update 0 reads version 0 whatever S
    after = {S: evaluate(_stale(dep, S)).params for S in (0, 1, 2)}
    assert after[0] != after[1] and after[1] != after[2] and after[0] != after[2]
    # S at least the update count: every update reads the initial words
    assert evaluate(_stale(dep, 6)).params == evaluate(_stale(dep, 60)).params


@needs_qemu
@pytest.mark.parametrize("name", ["stale1", "stale2", "stale1Partitioned"])
def test_every_owner_matches_the_oracle_on_mixed_instruction_sets(name):
    assert_launch_matches_on_mixed_instruction_sets(_dep(name), GATE, f"fixed-staleness-{name}")


@needs_qemu
@pytest.mark.parametrize("name, mutant", [("stale2", "fresher-read"), ("stale1Partitioned", "fresher-read")])
def test_an_executed_mutant_is_refused(name, mutant):
    """fresher-read's executables read one version newer than declared (staleness S - 1): a
    rewrite of the deployment, no branch of the runtime; the oracle reads its own way."""
    dep = _dep(name)
    report = launch(dep, out_dir=session.root() / f"fixed-staleness-{name}-{mutant}", spec=GATE, mutant=mutant)
    assert not report.match and report.mutant_match
    assert evaluate(dep, mutant=mutant).params != evaluate(dep).params


def test_fresher_read_applies_to_a_fixed_staleness_only():
    from alphac.oracle import Refusal
    from alphac.plan.mutants import MutantError

    synchronous = _stale(_dep("stale1"), 0)
    with pytest.raises(MutantError, match="fresher-read: it needs a fixed staleness S >= 1"):
        driver.plan(synchronous, "fresher-read")
    with pytest.raises(Refusal, match="it needs a fixed staleness S >= 1"):
        evaluate(synchronous, mutant="fresher-read")
    # S = 1 read one version newer is the synchronous learner's words (its protocol is the mutant's)
    assert evaluate(_dep("stale1"), mutant="fresher-read").params == evaluate(synchronous).params


def test_the_partitioned_learner_is_the_replicated_one_bit_for_bit():
    part = _dep("stale1Partitioned")
    replicated = dataclasses.replace(part, partitioning=ir.Partitioning())
    assert evaluate(part).params == evaluate(replicated).params
    assert evaluate(part).params != evaluate(_stale(part, 0)).params
    with pytest.raises(Exception, match="kept by version"):
        driver.plan(part, "stale-replica")


def test_what_is_not_built_yet_is_refused_by_name():
    d = planner_refusal(dataclasses.replace(_dep("stale1"), placement=("x86_64", "sm86", "x86_64", "aarch64")))
    assert d.code == "consistency-not-built"
    assert d.message == ("deployment stale1 declares fixed staleness 1 with an SM86 owner; fixed staleness is "
                         "built for data-parallel learners on CPU targets")


@needs_qemu
@pytest.mark.parametrize("name", ["stale1", "stale2", "stale1Partitioned"])
def test_checkpoints_hold_the_versions_still_read_and_resume_on_the_other_instruction_set(tmp_path, name):
    """A checkpoint at version v holds the words at v and, in its history region, versions
    max(v - S, 0) .. v - 1, which updates v .. v + S - 1 read (partitioned: from and into the
    read replicas each owner keeps of them); resumed with every owner on
    the other instruction set the run ends with the uninterrupted run's words. Resumed as
    the synchronous learner the same contract refuses; a new contract goes on, and a
    checkpoint of the synchronous learner resumed under staleness S (a new contract) reads
    the start's words for every version before it."""
    from alphac.checkpoint import logical_words, read_manifest
    from alphac.oracle import start_of

    from shape_gates import SWAP, checkpoint_launcher

    launched = checkpoint_launcher(tmp_path)

    dep = dataclasses.replace(_dep(name), checkpoint=ir.Checkpoint(2, "ck"))
    S = dep.consistency.staleness
    _, report = launched(f"{name}-ck", dep, "ck")
    assert report.match, [r.why for r in report.rows]
    ckpt = tmp_path / "ck" / "ckpt-4"
    assert read_manifest(ckpt).regions == {"parameters": 2, "state": dep.learner.m, "history": 2 * S}
    history = logical_words(ckpt)["history"].reshape(S, 2)
    for j in range(S):
        assert tuple(int(w) for w in history[j]) == evaluate(dep, rounds=4 - S + j).params
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    _, resumed = launched(f"{name}-ck-swapped", swapped, "ck2", ckpt)
    assert resumed.match, [r.why for r in resumed.rows]
    assert [r.params for r in resumed.rows] == [r.params for r in report.rows]
    synchronous = _stale(dep, 0)
    run, _ = launched(f"{name}-ck-synchronous", synchronous, "ck3", ckpt)
    assert {oc.returncode for oc in run.result.outcomes} == {1}
    assert all("refused: numerical-order-mismatch: " in oc.stderr for oc in run.result.outcomes)
    _, fresh = launched(f"{name}-ck-synchronous-new", synchronous, "ck4", ckpt, new_contract=True)
    assert fresh.match, [r.why for r in fresh.rows]
    _, plain = launched(f"{name}-synchronous-ck", synchronous, "ck5")
    assert plain.match, [r.why for r in plain.rows]
    _, on_synchronous = launched(f"{name}-ck-from-synchronous", dep, "ck6", tmp_path / "ck5" / "ckpt-2",
                                 new_contract=True)
    assert on_synchronous.match, [r.why for r in on_synchronous.rows]
    start = start_of(tmp_path / "ck5" / "ckpt-2", dep.learner)
    assert start.history is None  # so versions 0 and 1 read the start's words
    assert [r.params for r in on_synchronous.rows] != [r.params for r in report.rows]
    # another staleness is a new contract: it reads the start's words, not the history
    _, other = launched(f"{name}-ck-other-staleness", _stale(dep, S + 1), "ck7", ckpt, new_contract=True)
    assert other.match, [r.why for r in other.rows]

"""Bounded staleness S (Learning.Deployment.ConsistencyBoundedStaleness): each owner's
contributions to update u read the newest parameter version it has when it starts them,
one of max(u - S, 0) .. u; its output records which, and the oracle replays exactly that
schedule. The gate specs (S = 1 on a star, S = 2 with momentum on a hierarchy, S = 1 with
every region partitioned, owners alternating x86-64 and AArch64) match the oracle's replay
bit for bit; two schedules forced
by the test build's delays are both verified and give different words; a read more than S
behind refuses, and the executed mutant that makes one is refused; what is not built yet
is refused by name."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from unittest.mock import patch

import pytest

from alphac import driver
from alphac.ir import mutants
from alphac.ir import nodes as ir
from alphac.launch.launcher import launch
from alphac.launch.results import read_result, recorded_schedule
from alphac.launch.verify import verify
from alphac.oracle import Refusal, evaluate
from alphac.plan.ops import OP_CODE
from alphac.plan.render import plan_json, plan_text
from alphac.testing import session

from shape_gates import consistent, needs_qemu, planner_refusal

SPECS = Path(__file__).resolve().parents[2] / "specs"
GATE = str(SPECS / "bounded_staleness.alpha")

_dep = functools.partial(driver.deployment, GATE)  # a gate deployment by name


def _bound(dep: ir.Deployment, S: int) -> ir.Deployment:
    return consistent(dep, ir.ConsistencyKind.BOUNDED_STALENESS, S)


def _stalest(dep: ir.Deployment) -> tuple[tuple[int, ...], ...]:
    """The schedule of contributions always S behind (an owner without samples reads u)."""
    S, shares = dep.consistency.bound, dep.learner.samples.shares
    return tuple(tuple(max(u - S, 0) if shares[o] else u for u in range(dep.updates)) for o in range(dep.owners))


def _mostly(got, want) -> bool:
    """Each owner's reads are `want`'s at every update but one at most: a forced schedule,
    whose delays a thread starved for longer than they last (a loaded machine) may miss once."""
    return all(sum(a != b for a, b in zip(g, w)) <= 1 for g, w in zip(got, want))


def _freshest(dep: ir.Deployment) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(range(dep.updates)) for _ in range(dep.owners))


def test_the_plan_shows_the_bound_and_the_overlap_and_the_bound_is_in_the_identity():
    plan = driver.plan(_dep("bounded2"))
    lines = plan_text(plan).splitlines()
    assert ("consistency: bounded staleness 2: each owner's contributions to update u read the newest "
            "parameter version it has when it starts them, one of max(u - 2, 0) .. u; each owner's output "
            "records which, and the oracle replays that schedule") in lines
    assert ("overlap: each owner computes the contributions of up to 2 updates ahead on a thread while the "
            "combines and updates run; a contribution waits only for version u - 2") in lines
    assert plan_json(plan)["consistency"] == {"kind": "bounded-staleness", "value": 2, "overlap": True}
    dep = _dep("bounded1")
    ids = {driver.plan(_bound(dep, S)).protocol_hex for S in (1, 2)}
    ids |= {driver.plan(consistent(dep, ir.ConsistencyKind.FIXED_STALENESS, 1)).protocol_hex,
            driver.plan(dataclasses.replace(dep, consistency=ir.Consistency())).protocol_hex}
    assert len(ids) == 4


def test_the_replay_is_the_synchronous_and_the_fixed_staleness_learner_on_their_schedules():
    dep = _dep("bounded2")
    fresh = evaluate(dep, schedule=_freshest(dep))
    assert fresh.params == evaluate(dataclasses.replace(dep, consistency=ir.Consistency())).params
    stalest = evaluate(dep, schedule=_stalest(dep))
    assert stalest.params == evaluate(consistent(dep, ir.ConsistencyKind.FIXED_STALENESS, 2)).params
    assert fresh.params != stalest.params
    # one owner one version fresher at one update changes the words
    mixed = [list(r) for r in _stalest(dep)]
    mixed[1][3] += 1
    assert evaluate(dep, schedule=mixed).params not in (fresh.params, stalest.params)


def test_a_read_outside_the_bound_or_a_schedule_of_another_shape_refuses():
    dep = _dep("bounded1")
    late = [list(r) for r in _stalest(dep)]
    late[2][4] = 2  # update 4 reading version 2: two behind
    with pytest.raises(Refusal) as refused:
        evaluate(dep, schedule=late)
    assert (refused.value.code, refused.value.detail) == (
        "data-parallel-stale-read", "update 4: owner 2's contributions read version 2; bounded staleness 1 "
        "allows versions 3 to 4")
    early = [list(r) for r in _stalest(dep)]
    early[0][1] = 2  # a version after the update's
    with pytest.raises(Refusal, match="update 1: owner 0's contributions read version 2"):
        evaluate(dep, schedule=early)
    with pytest.raises(Refusal) as refused:
        evaluate(dep)
    assert refused.value.code == "oracle-schedule"
    with pytest.raises(Refusal, match=r"names \[6, 6, 6\] reads for 3 owners"):
        evaluate(dep, schedule=_stalest(dep)[:3])


def _recorded(run) -> tuple[tuple[int, ...], ...]:
    return recorded_schedule({o: read_result(p) for o, p in run.items()}, len(run))


@needs_qemu
@pytest.mark.parametrize("name", ["bounded1", "bounded2", "bounded1Partitioned"])
def test_every_owner_matches_the_replay_of_its_recorded_schedule_on_mixed_instruction_sets(name):
    dep = _dep(name)
    report = launch(dep, out_dir=session.root() / f"bounded-staleness-{name}", spec=GATE)
    assert report.match, report.failures
    assert {r.target for r in report.rows} == {"x86_64", "aarch64"}
    schedule = _recorded({o: report.run_dir / f"owner-{o}.out" for o in range(dep.owners)})
    S = dep.consistency.bound
    assert all(max(u - S, 0) <= r[u] <= u for r in schedule for u in range(dep.updates))
    assert schedule[3] == tuple(range(dep.updates))  # owner 3 holds no samples: it reads nothing
    assert [r.params for r in report.rows] == [w.params for w in evaluate(dep, schedule=schedule).owners]
    if dep.partitioning.any:  # the partitioned learner is the replicated one on the same schedule
        replicated = dataclasses.replace(dep, partitioning=ir.Partitioning())
        assert evaluate(dep, schedule=schedule).params == evaluate(replicated, schedule=schedule).params


def _forced_run(dep, key: str, env: dict):
    """Every owner of the test build of `dep`, its delay hook set by `env`; the run and its
    recorded schedule."""
    exes = session.built(key, dep, faults=True)
    with patch.dict(os.environ, env):
        run = session.run(key, dep, exes=exes, timeout_ms=20000)
    assert run.committed, "\n".join(oc.stderr for oc in run.result.outcomes)
    return run, recorded_schedule(run.outputs, dep.owners)


@needs_qemu
def test_two_forced_schedules_are_both_verified_and_give_different_words():
    """A slow root (100 ms before each of its sends) holds every update back, so each owner's
    thread runs S updates ahead and reads version u - S; a slow owner 1 (100 ms before each
    contribution) finds the update before it done, and reads version u (either may miss by one
    update on a loaded machine). Both runs verify, with different words."""
    dep = _dep("bounded2")
    root = driver.plan(dep).tree.owner
    slow_root = {"ALPHAC_DELAY_AT": str(OP_CODE["send"]), "ALPHAC_DELAY_MS": "100", "ALPHAC_DELAY_OWNER": str(root)}
    slow_owner = {"ALPHAC_DELAY_AT": str(OP_CODE["local"]), "ALPHAC_DELAY_MS": "100", "ALPHAC_DELAY_OWNER": "1"}
    behind, behind_reads = _forced_run(dep, "bounded-slow-root", slow_root)
    fresh, fresh_reads = _forced_run(dep, "bounded-slow-owner", slow_owner)
    assert _mostly(behind_reads, _stalest(dep))
    assert _mostly(fresh_reads[1:2], _freshest(dep)[1:2])
    assert behind_reads[1] != fresh_reads[1]
    for run in (behind, fresh):
        assert verify(dep, run.run_dir).report.match
    assert behind.outputs[0].params != fresh.outputs[0].params
    assert behind.outputs[0].params == tuple(evaluate(dep, schedule=behind_reads).owners[0].params)


@needs_qemu
def test_the_looser_bound_mutant_reads_further_behind_and_its_replay_refuses():
    """looser-bound's executables are those of bound S + 1 (a rewrite, no branch of the
    runtime): with the root held back their threads run S + 1 updates ahead, and the
    declared bound's replay refuses the read; the mutant's own replay matches the words."""
    dep = _dep("bounded1")
    loose = mutants.looser_bound(dep)
    assert loose.consistency.bound == 2
    assert driver.plan(dep, "looser-bound").deployment.consistency == loose.consistency
    root = driver.plan(dep).tree.owner
    env = {"ALPHAC_DELAY_AT": str(OP_CODE["send"]), "ALPHAC_DELAY_MS": "100", "ALPHAC_DELAY_OWNER": str(root)}
    run, reads = _forced_run(loose, "bounded-looser", env)
    assert _mostly(reads, _stalest(loose))
    with pytest.raises(Refusal) as refused:
        evaluate(dep, schedule=reads)
    assert refused.value.code == "data-parallel-stale-read"
    assert "'s contributions read version " in refused.value.detail and "bounded staleness 1 allows" in refused.value.detail
    assert run.outputs[0].params == tuple(evaluate(dep, mutant="looser-bound", schedule=reads).owners[0].params)
    with pytest.raises(Exception, match="looser-bound: it needs a bounded staleness"):
        driver.plan(dataclasses.replace(dep, consistency=ir.Consistency()), "looser-bound")


@needs_qemu
def test_checkpoints_hold_the_schedule_so_far_and_resume_on_the_other_instruction_set(tmp_path):
    """A checkpoint after every second update holds the words at its version and each
    owner's schedule file (its reads so far, hashed in the manifest); those words are the
    oracle's replay of that schedule. Resumed with every owner on the other instruction
    set, the run reads versions from the checkpoint's on and equals the replay of its own
    schedule from the checkpoint's words. Resumed as the synchronous learner the same
    contract refuses; a new contract goes on."""
    from alphac.checkpoint import read_manifest
    from alphac.checkpoint.directory import schedule
    from alphac.oracle import start_of

    from shape_gates import SWAP, checkpoint_launcher

    run_and_compare = checkpoint_launcher(tmp_path)

    def launched(key, d, directory, ckpt=None, new_contract=False):
        run, report = run_and_compare(key, d, directory, ckpt, new_contract)
        return run, recorded_schedule(run.outputs, d.owners), report

    dep = dataclasses.replace(_dep("bounded2"), checkpoint=ir.Checkpoint(2, "ck"))
    _, reads, report = launched("bounded2-ck", dep, "ck")
    assert report.match, [r.why for r in report.rows]
    ckpt = tmp_path / "ck" / "ckpt-4"
    kept = schedule(ckpt)
    assert kept == {o: (0, reads[o][:4]) for o in range(dep.owners)}
    assert [line.split()[:5] for line in read_manifest(ckpt).text.splitlines() if line.startswith("reads ")] == [
        ["reads", str(o), f"reads-{o}.bin", "0", "4"] for o in range(dep.owners)]
    replay = evaluate(dep, rounds=4, schedule=[r[:4] for r in reads])
    assert tuple(int(w) for w in start_of(ckpt, dep.learner).params) == replay.params
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    _, later, resumed = launched("bounded2-ck-swapped", swapped, "ck2", ckpt)
    assert resumed.match, [r.why for r in resumed.rows]
    assert all(len(r) == 2 and min(r) >= 4 for r in later)
    assert schedule(tmp_path / "ck2" / "ckpt-6") == {o: (4, later[o]) for o in range(dep.owners)}
    synchronous = dataclasses.replace(dep, consistency=ir.Consistency())
    run, _, _ = launched("bounded2-ck-synchronous", synchronous, "ck3", ckpt)
    assert {oc.returncode for oc in run.result.outcomes} == {1}
    assert all("refused: numerical-order-mismatch: " in oc.stderr for oc in run.result.outcomes)
    _, _, fresh = launched("bounded2-ck-synchronous-new", synchronous, "ck4", ckpt, new_contract=True)
    assert fresh.match, [r.why for r in fresh.rows]


def test_a_schedule_file_that_is_not_its_manifest_s_is_refused(tmp_path):
    """The schedule files are hashed like the shards: a changed byte refuses."""
    import shutil

    from alphac.checkpoint import CheckpointError, verify
    from alphac.launch.checkpoints import run_arguments

    dep = dataclasses.replace(_dep("bounded1"), placement=("x86_64",) * 4, checkpoint=ir.Checkpoint(3, "ck"))
    args = run_arguments(tmp_path / "ck", None, False)
    run = session.run("bounded1-ck", dep, timeout_ms=20000, extra_argv={o: args for o in range(dep.owners)})
    assert run.committed
    ckpt = tmp_path / "ck" / "ckpt-3"
    verify(ckpt)
    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    data = bytearray((bad / "reads-1.bin").read_bytes())
    data[-8] ^= 1
    (bad / "reads-1.bin").write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as refused:
        verify(bad)
    assert refused.value.code == "checkpoint-hash-mismatch"


@pytest.mark.parametrize("change, why", [
    (lambda d: dataclasses.replace(d, placement=("x86_64", "sm86", "x86_64", "aarch64")), "an SM86 owner"),
    (lambda d: dataclasses.replace(d, topology=ir.SampleTree()), "the sample tree"),
])
def test_what_is_not_built_yet_is_refused_by_name(change, why):
    d = planner_refusal(change(_dep("bounded1")))
    assert d.code == "consistency-not-built"
    assert d.message == (f"deployment bounded1 declares staleness bounded by 1 with {why}; bounded staleness "
                         "is built for data-parallel learners on a star or a hierarchy of CPU owners")


def test_bound_zero_is_the_synchronous_learner_itself(tmp_path):
    (tmp_path / "Gates").mkdir()
    (tmp_path / "Gates" / "Lsq.alpha").write_text((SPECS / "Gates" / "Lsq.alpha").read_text())
    spec = tmp_path / "bounded0.alpha"
    spec.write_text(Path(GATE).read_text().replace("bound = 1 }", "bound = 0 }"))
    zero = driver.deployment(str(spec), "bounded1")
    assert zero.consistency.kind is ir.ConsistencyKind.SYNCHRONOUS
    synchronous = dataclasses.replace(_dep("bounded1"), consistency=ir.Consistency())
    assert driver.plan(zero).protocol_hex == driver.plan(synchronous).protocol_hex


def test_the_oracle_command_replays_a_run_directory_of_this_deployment_only():
    """`alphac oracle SPEC --schedule RUN`: the replay of the run's reads, its words the
    owners'; a run of another plan, or a deployment that records no reads, is refused by
    name, never replayed as if it were this one's."""
    from click.testing import CliRunner

    from alphac.commands import main

    dep = dataclasses.replace(_dep("bounded1"), placement=("x86_64",) * 4)
    run = session.run("bounded1-x86", dep, timeout_ms=20000)
    assert run.committed
    spec = str(session.root() / "bounded1-x86.alpha")
    Path(spec).write_text(Path(GATE).read_text().replace(
        "deploymentPlacement = [TargetX86_64, TargetAArch64, TargetX86_64, TargetAArch64],\n  deploymentUpdates = 6,\n"
        "  deploymentContract = binary64Exact,\n  deploymentCheckpoint = CheckpointNever,\n"
        "  deploymentConsistency = ConsistencyBoundedStaleness { bound = 1 },",
        "deploymentPlacement = [TargetX86_64, TargetX86_64, TargetX86_64, TargetX86_64],\n  deploymentUpdates = 6,\n"
        "  deploymentContract = binary64Exact,\n  deploymentCheckpoint = CheckpointNever,\n"
        "  deploymentConsistency = ConsistencyBoundedStaleness { bound = 1 },", 1))
    (Path(spec).parent / "Gates").mkdir(exist_ok=True)
    (Path(spec).parent / "Gates" / "Lsq.alpha").write_text((SPECS / "Gates" / "Lsq.alpha").read_text())
    out = CliRunner().invoke(main, ["oracle", spec, "--deployment", "bounded1", "--schedule", str(run.run_dir),
                                    "--json"])
    assert out.exit_code == 0, out.output
    reads = recorded_schedule(run.outputs, dep.owners)
    assert out.stdout.count(f"{run.outputs[0].params[0]:016x}") == 4
    assert evaluate(dep, schedule=reads).params == run.outputs[0].params
    other = CliRunner().invoke(main, ["oracle", GATE, "--deployment", "bounded2", "--schedule", str(run.run_dir)])
    assert other.exit_code == 1 and "refused: oracle-schedule: " in other.stderr
    assert "holds a run of protocol" in other.stderr
    plain = CliRunner().invoke(main, ["oracle", str(SPECS / "lsq_plain_star.alpha"), "--schedule", str(run.run_dir)])
    assert plain.exit_code == 1 and "refused: usage: --schedule replays a bounded-staleness run" in plain.stderr

"""Measured bytes equal the plan's laws: every spec of specs/ (not specs/bench), replicated
and under each partitioning (optimizer state, parameters, gradients, all three), on a star
and on a hierarchy, run with `--stats`; every owner's counted bytes, category by category
(at their highest and at exit), are its `alphac plan` bytes. Also the stats file itself:
written on a refusal too, refused when it cannot be created."""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path

import pytest

from alphac.diagnostics import CompileError
from alphac.ir import nodes as n
from alphac.testing import session
from alphac.launch.stats import StatsError, parse_stats, read_stats
from alphac.plan.memory import CATEGORIES
from spec_sweep import every_deployment

SPECS = Path(__file__).resolve().parents[2] / "specs"

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")

PARTITIONINGS = {  # (optimizer state, parameters, gradients)
    "replicated": (False, False, False), "state": (True, False, False),
    "parameters": (False, True, False), "gradients": (False, False, True), "all": (True, True, True),
}
TOPOLOGIES = {"star": n.Star(), "hierarchy": n.Hierarchy(2)}


def spec_deployments() -> dict[str, n.Deployment]:
    """Every deployment of every spec (spec_sweep), but those placed on SM86, which these
    tests do not run; by name, `stem` or `stem:deployment`."""
    return {name: dep for name, dep in every_deployment() if "sm86" not in dep.placement}


def claim(dep: n.Deployment) -> n.Partitioning:
    """The spec's own claim, or the first that plans: w = m // k words per coordinate down to
    0, the rest of the state shared."""
    if dep.partitioning.any:
        return dep.partitioning
    k, m = dep.learner.k, dep.learner.m
    # a binary32 learner's blocks hold an even number of coordinates (a word's two values)
    block = 2 if dep.contract.profile.format == "binary32" else 1
    for w in range(m // k if k else 0, -1, -1):
        part = n.Partitioning(n.Shard(), n.Shard(), n.Shard(), w, tuple(range(w * k, m)), block_words=block)
        try:
            session.plan(f"claim-{dep.name}-{k}-{m}-{w}", dataclasses.replace(dep, partitioning=part))
            return part
        except CompileError:
            continue
    return n.Partitioning()


def variant(dep: n.Deployment, partitioning: str, topology: str) -> n.Deployment:
    state, params, grads = PARTITIONINGS[partitioning]
    part = dataclasses.replace(claim(dep), optimizer_state=n.placed(state), parameters=n.placed(params),
                               gradients=n.placed(grads))
    if dep.contract.profile.format == "binary32":  # a word's two values are one owner's
        part = dataclasses.replace(part, block_words=2 * -(-part.block_words // 2))
    return dataclasses.replace(dep, partitioning=part, topology=TOPOLOGIES[topology], updates=2,
                               checkpoint=n.Checkpoint())


def assert_measured_is_the_law(key: str, dep: n.Deployment) -> None:
    plan = session.plan(key, dep)
    run = session.run(key, dep, timeout_ms=20000)
    assert run.committed, "\n".join(oc.stderr for oc in run.result.outcomes)
    assert sorted(run.stats) == list(range(dep.owners))
    for o, law in enumerate(plan.owners):
        got = run.stats[o]
        want = {c: getattr(law.bytes, c) for c in CATEGORIES}
        assert (got.owner, got.status) == (o, "ok")
        assert got.high == want, (key, o)
        # the replica is freed at release; under a fixed or bounded staleness the S + 1 kept by version stay
        kept = want["replica"] if dep.consistency.staleness or dep.consistency.bound else 0
        assert got.current == {**want, "replica": kept}, (key, o)
        assert (got.persistent, got.peak) == (law.persistent_bytes, law.peak_bytes), (key, o)


def sweep(specs: dict[str, n.Deployment], combos=None) -> tuple[list, list]:
    """Each spec under each (partitioning, tree) of `combos` (default: all 5 x 2) runs and
    measures its laws, or is refused by the planner: (ran, unplanned with its code)."""
    ran, unplanned = [], []
    for name, dep in specs.items():
        for partitioning, topology in combos or [(p, t) for p in PARTITIONINGS for t in TOPOLOGIES]:
            key = f"mem-{name}-{partitioning}-{topology}"
            v = variant(dep, partitioning, topology)
            try:
                session.plan(key, v)
            except CompileError as err:  # not separable under this claim
                unplanned.append((key, err.diagnostics[0].code))
                continue
            assert_measured_is_the_law(key, v)
            ran.append(key)
    return ran, unplanned


# one of each shape, under the combinations that tell its laws apart: momentum on five owners
# (a star) and Adam on seven (fan-out 2) under each partitioning, the samples-partitioned
# scalar learner replicated and fully partitioned on both trees, an independent-state learner
# holding its regions on both trees and refusing another partitioning; every spec x 5 x 2 is the exhaustive sweep
# (make test-exhaustive)
EVERY = tuple(PARTITIONINGS)
REPRESENTATIVE = {
    "lsq_momentum_partitioned_star5": [(p, "star") for p in EVERY],
    "lsq_adam_partitioned_hierarchy7": [(p, "hierarchy") for p in EVERY],
    "partitioned_regression": [(p, t) for p in ("replicated", "all") for t in TOPOLOGIES],
    "local_correlation_star": [("parameters", t) for t in TOPOLOGIES] + [("state", "star")],
    # the consistencies' buffers: S = 1 computed ahead (no history), S = 2 (a history of three
    # versions and the thread's), local steps (the shared version; with each owner's own state
    # and an outer momentum in the exhaustive sweep)
    "fixed_staleness:stale1": [("replicated", "star")],
    "fixed_staleness:stale2": [("replicated", "hierarchy")],
    "local_steps:local2": [("replicated", "star")],
    # bounded staleness 2: two sums computed ahead and the schedule; S = 1 partitioned: the
    # read replicas of two versions
    "bounded_staleness:bounded2": [("replicated", "hierarchy")],
    "bounded_staleness:bounded1Partitioned": [("all", "star")],
}


@needs_qemu
def test_representative_specs_under_the_partitionings_and_trees_measure_their_laws():
    specs = spec_deployments()
    ran, unplanned = [], []
    for name, combos in REPRESENTATIVE.items():
        r, u = sweep({name: specs[name]}, combos)
        ran += r
        unplanned += u
    assert len(ran) == 5 + 5 + 4 + 2 + 3 + 1 + 1
    assert unplanned == [("mem-local_correlation_star-state-star", "independent-state-partitioning")]


@pytest.mark.exhaustive
@needs_qemu
def test_every_spec_under_every_partitioning_and_topology_measures_its_laws():
    # every spec with a deployment that builds (not the seed's declaration alone, not the
    # three placed on SM86); two of them are independent-state learners
    specs = spec_deployments()
    independent = sum(dep.learner.independent for dep in specs.values())
    sm86 = sum("sm86" in dep.placement for _, dep in every_deployment())
    assert (len(specs), independent, sm86) == (len(every_deployment()) - 3, 2, 3)
    ran, unplanned = sweep(specs)
    # the independent-state specs hold their regions only and refuse the other claims; the
    # Huber gate clips by the global norm, which reads every coordinate: not separable
    whole = sum(name.startswith("huber_clip") for name in specs)
    # local steps are built replicated only
    local = sum(dep.consistency.local_steps > 0 for dep in specs.values())
    assert len(ran) == (len(specs) - independent - whole - local) * 5 * 2 + (independent + whole + local) * 2
    assert Counter(code for _, code in unplanned) == {
        "independent-state-partitioning": independent * 4 * 2,
        "data-parallel-not-separable": whole * 4 * 2,
        "consistency-not-built": local * 4 * 2}


@needs_qemu
def test_the_read_replica_is_counted_at_its_peak_and_freed():
    """Under parameter partitioning the replica's k words are at their highest during an
    update and none remain at exit; without it, none are ever allocated."""
    dep = session.deployment(f"{SPECS}/lsq_adam_partitioned_hierarchy7.alpha")
    run = session.run("mem-adam7", dep, timeout_ms=20000)
    k = dep.learner.k
    for stats in run.stats.values():
        assert (stats.high["replica"], stats.current["replica"]) == (8 * k, 0)
    state_only = dataclasses.replace(dep, partitioning=dataclasses.replace(
        dep.partitioning, parameters=n.Replicate(), gradients=n.Replicate()))
    run = session.run("mem-adam7-state", state_only, timeout_ms=20000)
    assert all(s.high["replica"] == 0 for s in run.stats.values())


def test_the_stats_file_is_written_on_a_refusal_and_refused_when_it_cannot_be_made(tmp_path):
    from alphac import driver
    from alphac.launch.ports import free_ports
    from alphac.launch.runner import write_peers
    import subprocess

    dep = session.deployment(f"{SPECS}/lsq_plain_star.alpha")
    exe = session.built("mem-plain", dep)[("worker", "x86_64")]
    peers = write_peers(tmp_path / "peers", free_ports(4))
    (tmp_path / "taken").write_bytes(b"")
    done = subprocess.run([str(exe), "--owner", "1", "--peers", str(peers), "--out", str(tmp_path / "taken"),
                           "--insecure", "--stats", str(tmp_path / "s")], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and done.stderr.startswith("refused: output-exists: ")
    stats = read_stats(tmp_path / "s")
    assert (stats.owner, stats.status, stats.peak) == (1, "output-exists", 0)
    done = subprocess.run([str(exe), "--owner", "1", "--peers", str(peers), "--out", str(tmp_path / "o"), "--insecure",
                           "--stats", str(tmp_path / "no-such-dir" / "s")], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 1 and done.stderr.startswith("refused: io-error: cannot create ")
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.tmp").exists()
    assert driver.plan(dep).owners[1].peak_bytes > 0


def test_a_malformed_stats_file_is_refused_by_line():
    good = ("alphac-stats 1\nowner 2\nstatus ok\n"
            + "".join(f"bytes {c} 8 16\n" for c in CATEGORIES) + "persistent 32\npeak 80\nrss_kb 900 1000\n")
    s = parse_stats(good)
    assert (s.owner, s.status, s.persistent, s.peak, s.high["replica"], s.current["state"]) == (2, "ok", 32, 80, 16, 8)
    assert (s.rss_start_kb, s.rss_peak_kb) == (900, 1000)
    for bad, why in ((good.replace("alphac-stats 1", "alphac-stats 2"), "not an alphac stats file"),
                     (good.replace("bytes scratch 8 16\n", ""), "no scratch"),
                     (good.replace("peak 80", "peak -1"), "is not a byte count"),
                     (good.replace("rss_kb 900 1000", "rss_kb 900"), "unexpected line 'rss_kb 900'"),
                     (good + "\n", "unexpected line ''")):
        with pytest.raises(StatsError, match=why):
            parse_stats(bad, "f")

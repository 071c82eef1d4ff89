"""Gates of the independent-state learner (specs/local_correlation_*.alpha): native owners,
x86-64 and AArch64 under qemu, on a star and on a hierarchy, each bit-identical to the
oracle; checkpoints every two updates resumed on the other instruction set; another owner
count refused; and the executed mutant foreign-inputs (each owner's rule on the next
owner's pairs) completing its run and refused by the comparison with the oracle."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.checkpoint import logical_words
from alphac.commands import main
from alphac.testing import session
from alphac.launch.checkpoints import run_arguments
from alphac.launch.report import compare
from alphac.ir import nodes as ir
from alphac.oracle import Refusal, evaluate, start_of

from shape_gates import SWAP, needs_qemu

SPECS = Path(__file__).resolve().parents[2] / "specs"
STAR = f"{SPECS}/local_correlation_star.alpha"
TREE = f"{SPECS}/local_correlation_hierarchy.alpha"
pytestmark = needs_qemu


def _run(key: str, dep, ckpt_dir: Path | None = None, resume=None):
    extra = run_arguments(ckpt_dir, resume, False) if ckpt_dir is not None else []
    return session.run(key, dep, timeout_ms=20000, extra_argv={o: extra for o in range(dep.owners)})


def _report(key: str, dep, **kw):
    r = _run(key, dep, **kw)
    oracle = evaluate(dep, start=start_of(kw["resume"], dep.learner) if kw.get("resume") else None)
    return r, compare(session.plan(key, dep), r, oracle, dep.updates)


@pytest.mark.parametrize("spec", [STAR, TREE], ids=["star", "hierarchy"])
def test_every_owner_of_each_topology_matches_the_oracle(spec, tmp_path):
    dep = session.deployment(spec)
    assert set(dep.placement) == {"x86_64", "aarch64"}
    _, report = _report(Path(spec).stem, dep, ckpt_dir=tmp_path / "ck")
    assert report.match, [r.why for r in report.rows]
    want = evaluate(dep)
    assert [r.params for r in report.rows] == [o.params for o in want.owners]
    assert [len(r.params) for r in report.rows] == [dep.learner.region] * dep.owners


@pytest.fixture(scope="module")
def tree_checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("lc-ckpt")
    r, report = _report("local_correlation_hierarchy", session.deployment(TREE), ckpt_dir=d)
    assert report.match and r.committed
    return d


def test_each_checkpoint_holds_the_oracles_regions_at_its_version(tree_checkpoints):
    dep = session.deployment(TREE)
    for u in (2, 4, 6):
        words = logical_words(tree_checkpoints / f"ckpt-{u}")
        assert tuple(int(w) for w in words["parameters"]) == evaluate(dep, rounds=u).params
        assert len(words["state"]) == 0


def test_a_resume_on_the_other_instruction_set_equals_the_uninterrupted_run(tree_checkpoints, tmp_path):
    dep = session.deployment(TREE)
    swapped = dataclasses.replace(dep, placement=tuple(SWAP[t] for t in dep.placement))
    _, report = _report("local_correlation_hierarchy-swapped", swapped, ckpt_dir=tmp_path / "c",
                        resume=tree_checkpoints / "ckpt-2")
    assert report.match, [r.why for r in report.rows]
    assert [r.params for r in report.rows] == [o.params for o in evaluate(dep).owners]
    assert [r.target for r in report.rows] == list(swapped.placement)


def _fewer_owners(dep, n: int):
    """The same rule on the first n owners' regions and inputs."""
    L = dep.learner
    r, rows = L.region, sum(L.samples.shares[:n])
    samples = ir.Samples(2, L.samples.shares[:n], L.samples.words[:rows])
    learner = dataclasses.replace(L, k=n * r, samples=samples,
                                  initial=ir.Words(L.initial.as_tuple()[:n * r]))
    roles = tuple(dataclasses.replace(role, owners=tuple(o for o in role.owners if o < n))
                  for role in dep.roles)
    return dataclasses.replace(dep, learner=learner, owners=n, roles=roles,
                               placement=dep.placement[:n])


def test_a_resume_on_another_owner_count_is_refused(tree_checkpoints, tmp_path):
    """An owner's region is its own: on another owner count the learner (k = n r) is
    another, and the oracle and every owner refuse the checkpoint by name."""
    four = _fewer_owners(session.deployment(TREE), 4)
    ckpt = tree_checkpoints / "ckpt-2"
    with pytest.raises(Refusal) as err:
        evaluate(four, start=start_of(ckpt, four.learner))
    assert err.value.code == "checkpoint-learner-mismatch"
    extra = run_arguments(tmp_path / "c", ckpt, True)
    r = session.run("local_correlation_hierarchy-4", four, timeout_ms=20000,
                    extra_argv={o: extra for o in range(4)})
    assert not r.committed and not r.outputs
    assert [oc.refusal().split(":")[1].strip() for oc in r.result.outcomes] == [
        "checkpoint-learner-mismatch"] * 4


def test_the_foreign_inputs_mutant_runs_to_the_end_and_every_owner_mismatches():
    args = ["launch", STAR, "-o", str(session.root() / "lc-mutant"), "--json",
            "--mutant", "foreign-inputs"]
    result = CliRunner().invoke(main, args)
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and not report["match"]
    assert (report["mutant"], report["mutant_match"]) == ("foreign-inputs", True)
    dep = session.deployment(STAR)
    want = evaluate(dep, mutant="foreign-inputs")
    for row, w in zip(report["owners"], want.owners, strict=True):
        assert row["params"] == [f"{p:016x}" for p in w.params]
        assert row["error"].startswith(f"oracle-mismatch: owner {row['owner']} "), row["error"]
    assert report["protocol"] == driver.plan(dep, "foreign-inputs").protocol_hex

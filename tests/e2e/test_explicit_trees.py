"""Every explicit combine tree the tree laws admit over 3 and 4 owners (each branch at the
owner of any leaf beneath it) plans a report tree that is a tree, builds, launches equal to
the oracle, publishes all-or-nothing and checkpoints; under either combine placement and
with the replicated and the partitioned learner. `make test` runs every tree over 3 owners
and a sample over 4; `make test-exhaustive` all of them."""

from __future__ import annotations

import dataclasses

import pytest

from alphac.checkpoint import logical_words, read_key, verify
from alphac.diagnostics import DiagnosticBag, Span
from alphac.image.ckpt import write_plan_checkpoint
from alphac.ir import nodes as ir
from alphac.plan.publication import prepared_owners, subtrees
from alphac.testing import session
from alphac.launch.checkpoints import checkpoint_key_file, run_arguments
from alphac.launch.report import compare
from alphac.oracle import evaluate
from alphac.plan.tree import Transfer, check_report_tree, check_topology, report_edges

from explicit_trees import cases, on_owners, spelled, with_tree

REPLICATED = session.deployment("specs/lsq_momentum_star.alpha")
PARTITIONED = session.deployment("specs/lsq_momentum_partitioned_star.alpha")
THREE, FOUR = cases(3), cases(4)
# the tree of the report that found the hang: owner 0's value goes to owner 1 and back
BACK_AND_FORTH = "((c0 + c1)@1 + c2)@0"


def test_the_enumeration_holds_every_admitted_tree():
    # 3 leaves: 2 shapes; 4 leaves: 5 shapes; each branch at any of its leaves' owners
    assert (len(THREE), len(FOUR)) == (12, 112)
    assert len({name for name, _ in THREE + FOUR}) == 124
    assert BACK_AND_FORTH in dict(THREE)
    for n, group in ((3, THREE), (4, FOUR)):
        for name, root in group:
            dep = with_tree(on_owners(REPLICATED, n), root)
            bag = DiagnosticBag()
            assert check_topology(n, dep.topology, Span("t", 1, 1), bag) is not None, name
            assert bag.count == 0, name


@pytest.mark.parametrize("name,root", THREE + FOUR, ids=[name for name, _ in THREE + FOUR])
def test_the_report_tree_is_a_tree_that_hears_every_owner(name, root):
    n = 3 if (name, root) in THREE else 4
    up = report_edges(root)
    assert sorted(t.sender for t in up) == sorted(set(range(n)) - {root.owner}), name
    plan = session.plan(f"plan-{name}", with_tree(on_owners(REPLICATED, n), root))
    protocols = tuple(o.protocol for o in plan.owners)
    assert prepared_owners(protocols)[root.owner] == n
    assert subtrees(protocols)[root.owner] == tuple(range(n))


def test_the_back_and_forth_tree_reports_along_its_top_nodes():
    root = dict(THREE)[BACK_AND_FORTH]
    # reduce edges 0 -> 1, 1 -> 0, 2 -> 0; owner 0's first move is not its report
    assert report_edges(root) == [Transfer(1, 0), Transfer(2, 0)]


@pytest.mark.parametrize("up,why", [
    ([Transfer(0, 1), Transfer(1, 0)], "reports twice or is the root"),
    ([Transfer(1, 2), Transfer(2, 1)], "never does"),
    ([Transfer(2, 0), Transfer(1, 2)], "has reported up already"),
    ([Transfer(1, 0), Transfer(1, 0)], "reports twice"),
])
def test_a_report_list_that_is_not_a_tree_is_refused_where_it_is_built(up, why):
    with pytest.raises(ValueError, match=why):
        check_report_tree(0, up)


def test_a_cycle_in_the_finish_ops_is_refused_not_walked_forever():
    from alphac.plan.protocol import Op, OwnerProtocol

    ring = tuple(OwnerProtocol(o, (), (Op("digest-recv", peer=(o + 1) % 3),)) for o in range(3))
    with pytest.raises(ValueError, match="reached twice|one tree"):
        prepared_owners(ring)


LEARNERS = {"replicated": REPLICATED, "partitioned": PARTITIONED}
PLACEMENTS = tuple(ir.CombinePlacement)


def all_cases():
    out = []
    for n, group in ((3, THREE), (4, FOUR)):
        for i, (name, root) in enumerate(group):
            for learner in LEARNERS:
                for placement in PLACEMENTS:
                    # the default run: every tree over 3 owners on the replicated learner at
                    # the branch owners and the tree in every variant; over 4 owners,
                    # every 28th tree in turn with each variant
                    sample = ((n == 3 and learner == "replicated" and placement == PLACEMENTS[0])
                              or name == BACK_AND_FORTH
                              or (n == 4 and i % 28 == (2 * list(LEARNERS).index(learner)
                                                       + PLACEMENTS.index(placement))))
                    marks = () if sample else (pytest.mark.exhaustive,)
                    out.append(pytest.param(n, name, root, learner, placement, marks=marks,
                                            id=f"{n}-{name}-{learner}-{placement.value}"))
    return out


@pytest.mark.parametrize("n,name,root,learner,placement", all_cases())
def test_every_admitted_tree_launches_equal_to_the_oracle_and_checkpoints(
        tmp_path, n, name, root, learner, placement):
    dep = with_tree(on_owners(LEARNERS[learner], n), root, placement, every=2)
    key = f"tree-{n}-{name}-{learner}-{placement.value}"
    args = run_arguments(tmp_path)
    run = session.run(key, dep, timeout_ms=10000, deadline_s=60,
                      extra_argv={o: args for o in range(n)})
    report = compare(session.plan(key, dep), run, evaluate(dep), dep.updates)
    assert report.match, [r.why for r in report.rows]
    assert run.committed and sorted(run.outputs) == list(range(n))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ckpt")) == ["ckpt-2", "ckpt-4"]
    replicated = dataclasses.replace(dep, partitioning=type(dep.partitioning)())
    for version in (2, 4):
        manifest = verify(tmp_path / f"ckpt-{version}")
        assert (manifest.version, sorted(manifest.owners)) == (version, list(range(n)))
        want = evaluate(replicated, version).owners[0]
        words = logical_words(tmp_path / f"ckpt-{version}", manifest)
        assert [int(w) for w in words["parameters"]] == list(want.params)
        assert [int(w) for w in words["state"]] == list(want.state)
        # byte for byte the checkpoint the Python writer makes of the plan (manifest tree
        # flattened as docs/checkpoints.md says, however deep the report tree), tagged under
        # the launcher's checkpoint key as the owners tagged it
        planned = tmp_path / f"planned-{version}"
        write_plan_checkpoint(session.plan(key, dep), planned, version, words["parameters"], words["state"],
                              key=read_key(checkpoint_key_file()))
        assert files_of(tmp_path / f"ckpt-{version}") == files_of(planned)


def files_of(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("placement", ["CombineAtBranchOwners", "CombineAtBlockOwners"])
def test_the_back_and_forth_spec_builds_and_launches_from_the_command_line(tmp_path, placement):
    from click.testing import CliRunner

    from alphac.commands import main

    text = open("specs/explicit_back_and_forth.alpha", encoding="utf-8").read()
    text = text.replace("  deploymentUpdates = 5,", f"  deploymentCombinePlacement = {placement},\n"
                        "  deploymentUpdates = 5,")
    text = text.replace("deploymentCheckpoint = CheckpointNever", "deploymentCheckpoint = CheckpointEvery "
                        '{ checkpointInterval = 2, checkpointDirectory = "ck" }')
    spec = tmp_path / "explicit_back_and_forth.alpha"
    spec.write_text(text, encoding="utf-8")
    built = CliRunner().invoke(main, ["build", str(spec), "--all", "-o", str(tmp_path / "out")])
    assert built.exit_code == 0, built.output
    launched = CliRunner().invoke(main, ["launch", str(spec), "-o", str(tmp_path / "out"), "--quiet"])
    assert launched.exit_code == 0, launched.output
    latest = tmp_path / "out" / "ck" / "latest"  # -> runs/RUN/ck/ckpt-4
    assert latest.resolve().name == "ckpt-4"
    assert sorted(p.name for p in latest.resolve().parent.iterdir()) == ["ckpt-2", "ckpt-4"]
    assert verify(latest).owners == (0, 1, 2)

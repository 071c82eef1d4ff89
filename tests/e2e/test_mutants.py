"""Executed mutants as plan data: one list of names, what each planned mutant changes
(tree, deliveries, leaf counts, mean sources, replica), the identity and the executable
names that keep them apart from normal builds, the image fields the runtime reads, and the
command line's refusals. (The executables themselves: tests/e2e/test_mutant_gates.py.)"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.image import build_image
from alphac.image.image import MEAN_ZERO
from alphac.ir import mutants as names
from alphac.oracle import MUTANTS as ORACLE_MUTANTS, evaluate
from alphac.oracle.combine import swap_branch
from alphac.plan.identity import identity_document
from alphac.plan.mutants import ZERO, MutantError
from alphac.plan.ops import OP_CODE
from test_plan_sim import simulate, tree_expr

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
STAR, HIER, PART = "order10_star.alpha", "order10_hierarchy.alpha", "lsq_momentum_partitioned_star5.alpha"

# Identities of normal builds (as without mutants, at wire format 5): a mutant changes none.
NORMAL_IDENTITIES = {
    "lsq_adam_hierarchy.alpha": "9cf4a1bffc929380",
    "lsq_adam_partitioned_hierarchy.alpha": "3ef7304f05358f12",
    "lsq_adam_partitioned_hierarchy7.alpha": "43b925d1fa051f86",
    "lsq_adam_star.alpha": "7bd01dbee941b1aa",
    "lsq_momentum_partitioned_star.alpha": "9c5171976605c5de",
    "lsq_plain_star.alpha": "eb81d441e4012896",
    "demo.alpha": "ec671bcf36264857",
}


def dep(name: str):
    return driver.deployment(str(SPECS / name))


def test_one_list_one_spelling():
    assert names.NAMES == ("swap-branch", "duplicate-mass", "unweighted-mean", "deliver-to-next",
                           "stale-replica", "foreign-inputs", "foreign-accumulator", "fresher-read",
                           "fewer-local-steps", "looser-bound")
    assert ORACLE_MUTANTS == names.NAMES == tuple(driver.MUTANTS)
    # the oracle's former spellings are gone from the code and the docs
    old = re.compile(r"swapped-branch|duplicated-mass")
    files = list((ROOT / "alphac").rglob("*.py")) + list((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    assert [str(f) for f in files if old.search(f.read_text())] == []
    with pytest.raises(ValueError, match="mutant must be one of swap-branch, duplicate-mass"):
        driver.plan(dep(STAR), "swapped-branch")


def test_normal_identities_are_unchanged_and_every_mutant_has_its_own():
    for name, hexid in NORMAL_IDENTITIES.items():
        p = driver.plan(dep(name))
        assert (p.protocol_hex, p.mutant) == (hexid, None), name
        assert "mutant" not in identity_document(p.deployment, list(p.shape.nodes))
    for name in (STAR, PART):
        d = dep(name)
        ids = {driver.plan(d, m).protocol_id for m in names.NAMES
               if m not in ("foreign-inputs", "foreign-accumulator", "fresher-read", "fewer-local-steps", "looser-bound")
               and (m != "stale-replica" or name == PART)}
        ids.add(driver.plan(d).protocol_id)
        assert len(ids) == (6 if name == PART else 5)


def test_swap_branch_plans_the_oracles_swapped_tree():
    for name in (STAR, HIER, PART):
        d = dep(name)
        declared, mutant = driver.plan(d), driver.plan(d, "swap-branch")
        assert tree_expr(mutant.tree) == tree_expr(swap_branch(declared.tree)) != tree_expr(declared.tree)
        assert mutant.contract.order_digest != declared.contract.order_digest
        run = simulate(tuple(o.protocol for o in mutant.owners))
        if name != PART:
            assert {run[o]["update"] for o in range(d.owners)} == {tree_expr(mutant.tree)}
    assert tree_expr(driver.plan(dep(STAR), "swap-branch").tree) == \
        "(((((((((c0+c1)+c2)+c3)+c4)+c5)+c6)+c7)+c9)+c8)"


def test_weight_mutants_change_only_the_counts_the_leaves_report():
    d = dep(STAR)
    shares = d.learner.samples.shares
    assert driver.plan(d).mutation.leaf_counts == shares == (2, 1, 3, 1, 0, 2, 1, 1, 1, 1)
    dup = driver.plan(d, "duplicate-mass").mutation
    assert (dup.leaf_counts, dup.leaf_mean) == ((4, 1, 3, 1, 0, 2, 1, 1, 1, 1), False)
    flat = driver.plan(d, "unweighted-mean").mutation
    assert (flat.leaf_counts, flat.leaf_mean) == ((1, 1, 1, 1, 0, 1, 1, 1, 1, 1), True)
    # the first leaf with samples in leaf order: owner 1 when owner 0 holds none
    empty0 = dataclasses.replace(d, learner=dataclasses.replace(d.learner, samples=dataclasses.replace(
        d.learner.samples, shares=(0, 3, 3, 1, 0, 2, 1, 1, 1, 1))))
    assert driver.plan(empty0, "duplicate-mass").mutation.leaf_counts[:2] == (0, 6)


def test_deliver_to_next_on_a_replicated_total_maps_the_sums_of_the_previous_owner():
    p = driver.plan(dep(STAR), "deliver-to-next")
    # k = 2 on ten owners: coordinate 1 (owner 1's) reads coordinate 0's sum (owner 0's);
    # coordinate 0 (owner 0's) reads owner 9's, who holds none: +0.0
    assert p.mutation.mean_from == ((ZERO, 0),) * 10
    assert [d.kind for d in p.deliveries] == ["replicate-all"]
    assert [o.protocol for o in p.owners] == [o.protocol for o in driver.plan(dep(STAR)).owners]


def test_deliver_to_next_with_partitioned_gradients_delivers_each_slice_to_the_next_owner():
    d = dep(PART)
    p = driver.plan(d, "deliver-to-next")
    assert [x.target for x in p.deliveries] == [1, 2, 3, 0]
    # owner 0 holds coordinates 0 and 4 but receives owner 3's one-word slice: word 1 is +0.0;
    # owner 1 receives owner 0's two words and reads the first
    assert p.mutation.mean_from == ((0, ZERO), (0,), (0,), (0,))
    run = simulate(tuple(o.protocol for o in p.owners))
    for o in range(4):
        assert run[o]["update"] == re.sub(r"c(\d+)", rf"c\g<1>@{(o - 1) % 4}", tree_expr(p.tree)), o
    words = {o: p.owners[o].protocol.register_words for o in range(4)}
    mean = {o: next(op.a for op in p.owners[o].protocol.update_ops if op.kind == "update-owned")
            for o in range(4)}
    assert [words[o][mean[o]] for o in range(4)] == [2, 3, 2, 2]  # the sender's slice and its count


def test_the_image_carries_the_mutants_fields():
    d = dep(PART)
    image = build_image(driver.plan(d), "worker", "aarch64")
    assert [(o.leaf_count, o.mean_from) for o in image.owners] == [(0, ()), (1, ()), (3, ())]
    flat = build_image(driver.plan(d, "unweighted-mean"), "worker", "aarch64")
    assert [o.leaf_count for o in flat.owners] == [0, 1, 1] and flat.mutation.leaf_mean
    nxt = build_image(driver.plan(d, "deliver-to-next"), "coordinator", "x86_64")
    raw = nxt.encode()
    assert MEAN_ZERO.to_bytes(8, "little") in raw
    assert nxt.owners[0].mean_from == (0, ZERO)
    assert build_image(driver.plan(d, "stale-replica"), "worker", "x86_64").mutation.stale_replica
    # a frame's sample count is checked against the mutant's counts: the hub expects owner 3's 1
    dup = build_image(driver.plan(dep(STAR), "unweighted-mean"), "coordinator", "x86_64")
    receives = {OP_CODE[k] for k in ("recv", "recv-add-left", "recv-add-right", "recv-update")}
    expects = [op[6] for op in dup.owners[0].ops if op[0] in receives][:9]  # the hub's receives, in order
    assert expects == [1, 1, 1, 0, 1, 1, 1, 1, 1]


def test_mutants_that_do_not_apply_are_refused_with_one_code():
    cases = [
        (dep(STAR), "stale-replica", "the deployment's parameters are not partitioned"),
        (dep("lsq_adam_hierarchy_ckpt.alpha"), "swap-branch", "the deployment checkpoints or resumes"),
    ]
    one = dep("lsq_plain_star.alpha")
    two = dataclasses.replace(one, owners=2, placement=one.placement[:2], roles=(
        dataclasses.replace(one.roles[0], owners=(0,)), dataclasses.replace(one.roles[1], owners=(1,))),
        learner=dataclasses.replace(one.learner, samples=dataclasses.replace(
            one.learner.samples, shares=(1, 5))))
    cases.append((two, "swap-branch", "fewer than three leaves"))
    for d, mutant, why in cases:
        with pytest.raises(MutantError) as info:
            driver.plan(d, mutant)
        assert info.value.code == "mutant-not-applicable"
        assert why in info.value.message and info.value.message.startswith(f"mutant {mutant}: ")


def test_names_metadata_and_texts_say_mutant():
    d = dep(STAR)
    plan = driver.plan(d, "swap-branch")
    assert driver.executable_name(plan, "worker", "x86_64") == "order10_star-worker-x86_64-mutant-swap-branch"
    assert driver.executable_name(driver.plan(d), "worker", "x86_64") == "order10_star-worker-x86_64"
    image = build_image(plan, "worker", "x86_64")
    assert image.version.startswith("order10_star-worker-x86_64-mutant-swap-branch: deployment ")
    assert image.version.endswith("\nmutant swap-branch: a testing aid; it completes its communication "
                                  "but computes other words than the declared program\n")
    assert "  mutant swap-branch: a testing aid" in image.usage
    assert "mutant" not in build_image(driver.plan(d), "worker", "x86_64").usage
    from alphac.image.metadata import metadata_for

    assert metadata_for(plan, "worker", "x86_64", "t", {})["mutant"] == "swap-branch"
    assert metadata_for(driver.plan(d), "worker", "x86_64", "t", {})["mutant"] is None


# -- the command line --------------------------------------------------------------------

def test_build_refuses_an_unknown_mutant_as_a_usage_error(tmp_path):
    out = CliRunner().invoke(main, ["build", str(SPECS / STAR), "--all", "-o", str(tmp_path / "o"),
                                    "--mutant", "swapped-branch"])
    assert out.exit_code == 2
    assert "Invalid value for '--mutant': 'swapped-branch' is not one of" in out.stderr
    assert not (tmp_path / "o").exists()


def test_build_refuses_stale_replica_without_partitioned_parameters(tmp_path):
    out = CliRunner().invoke(main, ["build", str(SPECS / STAR), "--all", "-o", str(tmp_path / "o"),
                                    "--mutant", "stale-replica"])
    assert out.exit_code == 1
    assert out.stderr == ("alphac: error[mutant-not-applicable]: mutant stale-replica: the deployment's "
                          "parameters are not partitioned: there is no read replica to go stale\n")
    assert not (tmp_path / "o").exists()


def test_launch_refuses_a_mutant_with_checkpoints(tmp_path):
    out = CliRunner().invoke(main, ["launch", str(SPECS / STAR), "-o", str(tmp_path / "o"),
                                    "--mutant", "swap-branch", "--checkpoint-dir", str(tmp_path / "c")])
    assert out.exit_code == 1
    assert out.stderr.startswith("alphac: error[mutant-not-applicable]: mutant swap-branch: ")
    assert not (tmp_path / "o").exists()


def test_oracle_command_evaluates_a_mutant():
    d = dep(PART)
    out = CliRunner().invoke(main, ["oracle", str(SPECS / PART), "--mutant", "deliver-to-next", "--json"])
    assert out.exit_code == 0, out.stderr
    got = json.loads(out.stdout)
    want = evaluate(d, mutant="deliver-to-next")
    assert got["mutant"] == "deliver-to-next"
    assert got["protocol"] == driver.plan(d, "deliver-to-next").protocol_hex
    assert [o["digest"] for o in got["owners"]] == [o.digest for o in want.owners]
    assert "mutant" not in json.loads(CliRunner().invoke(main, ["oracle", str(SPECS / PART), "--json"]).stdout)
    stale = CliRunner().invoke(main, ["oracle", str(SPECS / PART), "--mutant", "stale-replica"])
    assert stale.exit_code == 1
    assert stale.stderr == ("refused: data-parallel-replica-version: update 1: the contribution of "
                            "version 1 reads the read replica of version 0, kept from the first update\n")
    table = CliRunner().invoke(main, ["oracle", str(SPECS / STAR), "--mutant", "swap-branch"])
    assert table.stdout.splitlines()[0].endswith("after 5 updates, evaluated as mutant swap-branch")

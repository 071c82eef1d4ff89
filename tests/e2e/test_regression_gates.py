"""The samples-partitioned scalar learner (PartitionedRegression.NativeHost): a coordinator
(x86-64) holding one sample and a worker (AArch64) holding two, combining (sum, samples) at
the coordinator and updating the shared parameter. Its lowering, the order and weighting
the oracle gives, the native owners bit-identical to the oracle, checkpoints resumed on the
other instruction set, the unweighted-mean mutant executed and refused, and the SM86
build family evaluated as the host realization and built."""

from __future__ import annotations

from pathlib import Path

from alphac import driver
from alphac.ir import nodes as ir
from alphac.testing import session
from alphac.oracle import evaluate

from shape_gates import (assert_launch_matches_and_mutant_refused, assert_sm86_family_builds, f64,
                         needs_qemu, resume_across_instruction_sets)

SPECS = Path(__file__).resolve().parents[2] / "specs"
GATE = f"{SPECS}/partitioned_regression.alpha"
CKPT = f"{SPECS}/partitioned_regression_ckpt.alpha"
SM86 = f"{SPECS}/partitioned_regression_sm86.alpha"


def test_the_family_is_the_data_parallel_learner_of_one_parameter_on_two_owners():
    dep = driver.deployment(GATE)
    L = dep.learner
    assert (L.k, L.s, L.m, L.shape, L.samples.shares) == (1, 2, 0, "data-parallel", (1, 2))
    assert isinstance(dep.topology, ir.Star) and not dep.partitioning.any
    assert [(r.name, r.owners) for r in dep.roles] == [("coordinator", (0,)), ("worker", (1,))]
    assert dep.placement == ("x86_64", "aarch64")


def _by_hand(dep, order: str) -> float:
    """Five updates in Python floats: the declared sample-weighted combine, c0 + (g1 + g2)
    over 3 samples; one left fold over all samples; or the two owners' unweighted mean."""
    L = dep.learner
    rows = [tuple(f64(int(w)) for w in row) for row in L.samples.words]
    w, rate = f64(L.initial.as_tuple()[0]), f64(L.rate)
    for _ in range(dep.updates):
        g = [(w * x - y) * x for x, y in rows]
        if order == "declared":
            mean = (g[0] + (g[1] + g[2])) / 3.0
        elif order == "left":
            mean = ((g[0] + g[1]) + g[2]) / 3.0
        else:
            mean = (g[0] / 1.0 + (g[1] + g[2]) / 2.0) / 2.0
        w = w - rate * mean
    return w


def test_the_oracle_weights_by_samples_in_the_declared_order():
    dep = driver.deployment(GATE)
    got = f64(evaluate(dep).params[0])
    assert got == _by_hand(dep, "declared")
    assert got != _by_hand(dep, "left")  # another order gives other bits on these samples
    assert f64(evaluate(dep, mutant="unweighted-mean").params[0]) == _by_hand(dep, "unweighted")
    assert _by_hand(dep, "unweighted") != got


@needs_qemu
def test_both_owners_match_the_oracle_and_the_unweighted_mean_mutant_is_refused():
    assert_launch_matches_and_mutant_refused(GATE, session.root() / "regression", "unweighted-mean")


@needs_qemu
def test_checkpoints_hold_w_and_resume_on_the_other_instruction_set(tmp_path):
    report, resumed = resume_across_instruction_sets(tmp_path, "regression-ckpt",
                                                     driver.deployment(CKPT), 4)
    assert [r.params for r in resumed.rows] == [r.params for r in report.rows]


def test_the_sm86_build_family_checks_plans_evaluates_and_builds(tmp_path):
    assert_sm86_family_builds(SM86, GATE, tmp_path)

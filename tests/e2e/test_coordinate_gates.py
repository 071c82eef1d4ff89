"""The coordinate-owned learner (PartitionedRegression.Coordinates on CoordinateHost): two
owners each holding one coordinate of a two-coordinate linear predictor and its
accumulator. Its lowering, the order the oracle gives, the native owners (x86-64 and
AArch64) bit-identical to the oracle with each holding exactly its own words, checkpoints
resumed on the other instruction set, the foreign-accumulator mutant executed and refused,
and the SM86 build families refused by `alphac build` until SM86 is built."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from alphac import driver
from alphac.ir import nodes as ir
from alphac.testing import session
from alphac.oracle import Refusal, evaluate
from alphac.plan.mutants import MutantError

from shape_gates import (assert_launch_matches_and_mutant_refused, assert_sm86_family_builds, f64,
                         needs_qemu, resume_across_instruction_sets)

SPECS = Path(__file__).resolve().parents[2] / "specs"
HOST = f"{SPECS}/coordinate_host.alpha"
BUILDS = [f"{SPECS}/coordinate_device.alpha", f"{SPECS}/coordinate_memory.alpha"]


def test_owner_i_holds_coordinate_i_and_its_accumulator():
    dep = driver.deployment(HOST)
    L, part = dep.learner, dep.partitioning
    assert (L.k, L.m, L.s, dep.owners, L.samples.shares) == (2, 2, 3, 2, (1, 2))
    assert (part.optimizer_state, part.parameters, part.gradients) == (ir.Shard(),) * 3
    assert (part.words_per_coordinate, part.shared_state, part.block_words) == (1, (), 1)
    layout = driver.plan(dep).layout
    assert [list(layout.coordinates(o)) for o in range(2)] == [[0], [1]]
    assert [list(layout.state_held(o)) for o in range(2)] == [[0], [1]]


def _by_hand(dep, order: str) -> list[float]:
    """Five updates in Python floats: prediction (w0 x0) + (w1 x1); the gradient sums in the
    declared order g0 + (g1 + g2), or one left fold ((g0 + g1) + g2)."""
    L = dep.learner
    rows = [tuple(f64(int(v)) for v in row) for row in L.samples.words]
    w = [f64(v) for v in L.initial.as_tuple()]
    a = [f64(v) for v in L.initial_state.as_tuple()]
    rate = f64(L.rate)
    for _ in range(dep.updates):
        g = [[((w[0] * x0) + (w[1] * x1) - y) * x for x in (x0, x1)] for x0, x1, y in rows]
        for i in range(2):
            total = g[0][i] + (g[1][i] + g[2][i]) if order == "declared" else (g[0][i] + g[1][i]) + g[2][i]
            mean = total / 3.0
            a[i] = a[i] + mean * mean
            w[i] = w[i] - rate * mean / math.sqrt(a[i])
    return w + a


def test_the_oracle_predicts_and_sums_in_the_declared_order():
    dep = driver.deployment(HOST)
    res = evaluate(dep)
    got = [f64(w) for w in res.params + res.state]
    assert got == _by_hand(dep, "declared")
    assert got != _by_hand(dep, "left")  # another order gives other bits
    assert [(o.params, o.state) for o in res.owners] == [
        ((res.params[i],), (res.state[i],)) for i in range(2)]


@needs_qemu
def test_both_owners_match_the_oracle_and_the_foreign_accumulator_mutant_is_refused():
    assert_launch_matches_and_mutant_refused(HOST, session.root() / "coordinates", "foreign-accumulator")


def test_the_foreign_accumulator_mutant_reads_the_next_coordinate_s_accumulator():
    dep = driver.deployment(HOST)
    L = dep.learner
    mutant = evaluate(dep, mutant="foreign-accumulator")
    rows = [tuple(f64(int(v)) for v in row) for row in L.samples.words]
    w = [f64(v) for v in L.initial.as_tuple()]
    a = [f64(v) for v in L.initial_state.as_tuple()]
    for _ in range(dep.updates):
        g = [[((w[0] * x0) + (w[1] * x1) - y) * x for x in (x0, x1)] for x0, x1, y in rows]
        mean = [(g[0][i] + (g[1][i] + g[2][i])) / 3.0 for i in range(2)]
        w = [w[i] - f64(L.rate) * mean[i] / math.sqrt(a[1 - i]) for i in range(2)]
        a = [a[i] + mean[i] * mean[i] for i in range(2)]
    assert [f64(v) for v in mutant.params + mutant.state] == w + a
    # each owner holds every accumulator to read it: they are replicated in the mutant
    assert [len(o.state) for o in mutant.owners] == [2, 2]


@pytest.mark.parametrize("spec", ["lsq_plain_star.alpha", "local_correlation_star.alpha",
                                  "lsq_adam_partitioned_hierarchy.alpha"])
def test_foreign_accumulator_needs_one_partitioned_accumulator_per_coordinate(spec):
    dep = driver.deployment(f"{SPECS}/{spec}")
    with pytest.raises(Refusal) as err:
        evaluate(dep, mutant="foreign-accumulator")
    assert err.value.code == "mutant-not-applicable"
    with pytest.raises(MutantError):
        driver.plan(dep, "foreign-accumulator")


@needs_qemu
def test_checkpoints_resume_on_the_other_instruction_set(tmp_path):
    dep = dataclasses.replace(driver.deployment(HOST), checkpoint=ir.Checkpoint(2, ""))
    report, resumed = resume_across_instruction_sets(tmp_path, "coordinates-ckpt", dep, 2)
    assert [(r.params, r.state) for r in resumed.rows] == [(r.params, r.state) for r in report.rows]


@pytest.mark.parametrize("spec", BUILDS, ids=["device", "memory"])
def test_the_sm86_build_families_evaluate_as_the_host_and_build(spec, tmp_path):
    assert_sm86_family_builds(spec, HOST, tmp_path)


def test_a_coordinate_owned_learner_has_two_coordinates_and_two_accumulators(tmp_path):
    spec = tmp_path / "three.alpha"
    spec.write_text(Path(HOST).read_text().replace("import Gates.Coordinates\n", "").replace(
        "coordinateHostLearner = coordinates", "coordinateHostLearner = CoordinatesOf {\n"
        "    coordinatesInitial = [1.0, 2.0, 3.0], coordinatesAccumulators = [1.0, 1.0],\n"
        "    coordinatesRate = 0.1, coordinatesSamples = [[[1.0, 2.0, 3.0]], []] }"))
    from alphac.check import check_file

    _, diagnostics, _ = check_file(str(spec))
    assert [(d.code, d.message) for d in diagnostics] == [(
        "length-mismatch", "coordinatesInitial has 3 words; the coordinate-owned learner has two "
        "coordinates, each with its accumulator")]

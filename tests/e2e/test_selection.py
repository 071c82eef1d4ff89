"""Comparisons and selection (`abs`, `copysign`, `min`, `max`, `a < b`, `select`): exact
words, signed zeros included, the same on the three oracle engines and the kernels; a
non-finite value a selection would hide still refuses (in the chunked loop too); the
checker's diagnostics; and no instruction of these operations is a call."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from alphac.codegen.program import emit_program, program_regions
from alphac.commands import main
from alphac.ir import nodes as n
from alphac.ir.builders import C, S, assign, cmp, copysign, fabs, fmax, fmin, select
from alphac.oracle.refusal import Site
from alphac.oracle.scalar import run_program
from alphac.oracle.vector import Flagged, SlotStore
from alphac.oracle.vector import run_program as run_vector
from alphac.ir.words import to_bits as word, to_float

from test_codegen_program import Kernel, bits

ROOT = Path(__file__).resolve().parents[2]
K = 5  # a loop over 5 coordinates: x at [0, 5), y at [5, 10), results at [10, 15)
X, Y, R = 0, K, 2 * K


# (expression over x[i], y[i]; the exact result words for the X, Y below)
XS = [-0.0, 0.0, 1.5, -2.0, 3.0]
YS = [0.0, -0.0, -1.5, -2.0, 2.0]
CASES = {
    "min": (fmin(S(X, "i"), S(Y, "i")), [-0.0, -0.0, -1.5, -2.0, 2.0]),
    "max": (fmax(S(X, "i"), S(Y, "i")), [0.0, 0.0, 1.5, -2.0, 3.0]),
    "abs": (fabs(S(X, "i")), [0.0, 0.0, 1.5, 2.0, 3.0]),
    "copysign": (copysign(S(X, "i"), S(Y, "i")), [0.0, -0.0, -1.5, -2.0, 3.0]),
    # -0.0 == +0.0 in IEEE comparison: the first two take the `then` branch
    "select-eq": (select(cmp("eq", S(X, "i"), S(Y, "i")), C(1.0), C(-1.0)), [1.0, 1.0, -1.0, 1.0, -1.0]),
    "select-lt": (select(cmp("lt", S(X, "i"), S(Y, "i")), S(X, "i"), S(Y, "i")), [0.0, -0.0, -1.5, -2.0, 2.0]),
    "select-ge": (select(cmp("ge", S(X, "i"), C(0.0)), C(7.0), C(8.0)), [7.0, 7.0, 7.0, 8.0, 7.0]),
    "select-ne": (select(cmp("ne", S(X, "i"), S(Y, "i")), C(1.0), C(0.0)), [0.0, 0.0, 1.0, 0.0, 1.0]),
}


def loop(expr) -> n.Program:
    return n.Program(3 * K, (n.Loop("i", 0, K, (assign(R, expr, "i", "r[i]"),)),))


def slots(xs=XS, ys=YS) -> np.ndarray:
    return np.array(list(xs) + list(ys) + [0.0] * K)


@pytest.mark.parametrize("name", list(CASES))
def test_the_oracle_engines_give_the_exact_words(name):
    expr, want = CASES[name]
    p = loop(expr)
    scalar = run_program(p, slots().tolist(), Site(0, "contribution"))[R:]
    store = SlotStore([(0, slots().reshape(-1, 1).copy())])
    vector = run_vector(p, store).rows(R, R + K)[:, 0]
    assert [word(v) for v in scalar] == [word(v) for v in want]
    assert bits(vector) == [word(v) for v in want]


@pytest.mark.parametrize("name", list(CASES))
def test_the_kernels_give_the_exact_words_in_either_loop(tmp_path, name):
    expr, want = CASES[name]
    for k, lowering in ((K, "chunked"), (K, "scalar")):
        p = loop(expr)
        if lowering == "scalar":  # a second statement reading another index: not chunked
            p = n.Program(3 * K + 1, (n.Loop("i", 0, K, (assign(R, expr, "i", "r[i]"),
                                                         assign(3 * K, S(R, "i"), None, "last"))),))
        regions = [(0, K), (K, K), (R, p.slots - R)]
        kern = Kernel(tmp_path, p, regions, f"{name.replace('-', '_')}_{lowering}")
        status, _, out = kern(np.concatenate([slots(), np.zeros(p.slots - 3 * K)]))
        assert status == 0
        assert bits(out[R:R + K]) == [word(v) for v in want], lowering


ABSORBING = {
    "max": fmax(S(X, "i"), C(0.0)),         # max(-inf, 0) is 0: the -inf must refuse
    "min": fmin(S(X, "i"), C(0.0)),         # min(+inf, 0) is 0
    "copysign": copysign(C(1.0), S(X, "i")),  # the sign of a NaN
    "compare": select(cmp("lt", S(X, "i"), C(0.0)), C(1.0), C(2.0)),
    "select": select(cmp("lt", S(Y, "i"), C(0.0)), C(1.0), S(X, "i")),  # the branch not taken
}


@pytest.mark.parametrize("name", list(ABSORBING))
@pytest.mark.parametrize("bad", [-math.inf, math.inf, math.nan])
def test_a_value_a_selection_would_hide_still_refuses(tmp_path, name, bad):
    xs = [1.0, 2.0, bad, 4.0, 5.0]
    ys = [-1.0] * K  # select takes `then`, never the bad x
    p = loop(ABSORBING[name])
    with pytest.raises(Exception) as scalar:
        run_program(p, slots(xs, ys).tolist(), Site(0, "contribution"))
    assert getattr(scalar.value, "code", None) == "non-finite"
    assert "i=2" in str(scalar.value.detail)
    with pytest.raises(Flagged):
        run_vector(p, SlotStore([(0, slots(xs, ys).reshape(-1, 1).copy())]))
    kern = Kernel(tmp_path, p, program_regions("contribution", K, K, 0), f"absorb_{name}")
    status, coord, _ = kern(slots(xs, ys))
    assert (status, coord) == (1, 2)  # the first statement, coordinate 2: the chunked flag saw it


def test_the_selections_are_integer_and_select_instructions_not_calls():
    import llvmlite.ir as lir

    module = lir.Module("sel")
    p = n.Program(3 * K, tuple(n.Loop("i", 0, K, (assign(R, e, "i", "r[i]"),)) for e, _ in CASES.values()))
    emit_program(module, p, "sel", [(0, K), (K, K), (R, K)])
    text = str(module)
    assert "call" not in text.replace("call double @llvm.sqrt", "")
    assert "fcmp" in text and "select" in text and "llvm.minnum" not in text


# ----------------------------------------------------------------------------- the checker

SPEC = """\
import Learning.DataParallel
import Learning.Deployment

value learner : (family DataParallelSystem 7 5) = DataParallelSystemOf {{
  dataParallelParameterCount = 2,
  dataParallelSampleWidth = 3,
  dataParallelContribution = pointwise {{
    view w = slot 0 .. 2
    view x = slot 2 .. 4
    view y = slot 4
    view g = slot 5 .. 7
    let r = w[0] * x[0] + w[1] * x[1] - y
    for i in 0 .. 2 {{
      g[i] := {contribution}
    }}
  }},
  dataParallelUpdate = pointwise {{
    view w = slot 0 .. 2
    view mean = slot 2 .. 4
    view rate = slot 4
    for i in 0 .. 2 {{
      w[i] := w[i] - rate * max(-0.5, min(mean[i], 0.5))
    }}
  }},
  dataParallelInitial = [0.5, -0.25],
  dataParallelInitialState = [],
  dataParallelRate = {rate},
  dataParallelSamples = [[[1.0, 2.0, 3.0]], [[2.0, -1.0, 0.5], [0.5, 0.5, -7.0]]],
}}
"""


def check(tmp_path, contribution: str, rate: str = "0.1"):
    path = tmp_path / "sel.alpha"
    path.write_text(SPEC.format(contribution=contribution, rate=rate))
    out = CliRunner().invoke(main, ["check", str(path)])
    return out.exit_code, out.stderr.splitlines()


def test_a_program_with_selections_checks(tmp_path):
    assert check(tmp_path, "select(abs(r) <= 1.0, r, copysign(1.0, r)) * x[i]")[0] == 0
    assert check(tmp_path, "select(r + 1.0 < 2.0 * r, r, 0.0) * x[i]")[0] == 0  # arithmetic binds tighter


@pytest.mark.parametrize("contribution,head", [
    ("mx(r, 0.0) * x[i]", "error[unknown-name]: no function named mx; did you mean max?"),
    ("max(r) * x[i]", "error[wrong-arity]: max takes 2 arguments, not 1"),
    ("select(r, 1.0, 2.0)", "error[type-mismatch]: select's condition is a comparison (a < b, a <= b, a == b, ...)"),
    ("(r < 0.0) * x[i]", "error[type-mismatch]: a comparison is a Bool, not a binary64 value: it is the "
                         "condition of select(c, x, y)"),
])
def test_misused_selections_are_located_diagnostics(tmp_path, contribution, head):
    rc, lines = check(tmp_path, contribution)
    assert rc == 1
    assert lines[0].startswith(f"{tmp_path / 'sel.alpha'}:14:") and lines[0].endswith(head), lines


def test_a_selection_outside_a_program_is_misplaced(tmp_path):
    rc, lines = check(tmp_path, "r * x[i]", rate="max(0.1, 0.2)")
    assert rc == 1
    assert lines[0].endswith("error[misplaced-program-expression]: max(...) is an operation of a program: "
                             "the kernels and the oracle evaluate it, inside a pointwise program"), lines


def test_the_huber_gate_launches_equal_to_the_oracle(tmp_path):
    spec = ROOT / "specs" / "huber_clip_hierarchy.alpha"
    out = CliRunner().invoke(main, ["launch", str(spec), "-o", str(tmp_path / "out"), "--quiet"])
    assert out.exit_code == 0, out.output
    assert [ln.split()[-1] for ln in out.stdout.splitlines()[1:5]] == ["match"] * 4


def test_the_huber_gate_follows_an_independent_numpy_learner():
    """A check of the semantics, not of the bits: the same model written in numpy (its own
    summation order), full batch, clipped by global norm: the mean Huber loss after every
    update agrees to 1e-12 relative. Its data reach both branches of the loss and the clip."""
    from alphac import driver
    from alphac.oracle import evaluate

    dep = driver.deployment(str(ROOT / "specs" / "huber_clip_hierarchy.alpha"))
    L = dep.learner
    data = np.asarray(L.samples.words, dtype=np.uint64).view(np.float64).reshape(-1, L.s)
    X, Y = data[:, :L.k], data[:, L.k]
    delta, clip, rate = 1.0, 0.5, to_float(L.rate)

    def loss(w):
        r = X @ w - Y
        return float(np.mean(np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))))

    w = np.asarray(L.initial.as_array(), dtype=np.uint64).view(np.float64).copy()
    clipped = []
    r0 = X @ w - Y
    assert (np.abs(r0) > delta).sum() >= 2 and (np.abs(r0) <= delta).sum() >= 2  # both branches
    for u in range(1, dep.updates + 1):
        r = X @ w - Y
        g = (np.where(np.abs(r) <= delta, r, np.copysign(delta, r))[:, None] * X).mean(axis=0)
        norm = float(np.sqrt(g @ g))
        clipped.append(norm > clip)
        w = w - rate * min(1.0, clip / max(norm, 1e-300)) * g
        ours = np.asarray(evaluate(dep, u).params, dtype=np.uint64).view(np.float64)
        assert abs(loss(ours) - loss(w)) <= 1e-12 * abs(loss(w)), u
    assert clipped[0] and not all(clipped), clipped  # the clip acts, then lets go


PARTITIONED = """
value run : Deployment = DeploymentOf {
  deploymentLearner = learner,
  deploymentOwners = 2,
  deploymentTopology = DataParallelStar,
  deploymentPartitioning = DataParallelPartitioned {
    partitionOptimizerState = true, partitionParameters = true, partitionGradients = true,
    partitionWordsPerCoordinate = 0, partitionSharedState = [],
  },
  deploymentRoles = [RoleOf { roleName = "coordinator", roleOwners = [0] },
                     RoleOf { roleName = "worker", roleOwners = [1] }],
  deploymentPlacement = [TargetX86_64, TargetAArch64],
  deploymentUpdates = 4,
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}
"""


def test_a_per_coordinate_clip_is_separable_and_runs_partitioned(tmp_path):
    path = tmp_path / "sel.alpha"
    path.write_text(SPEC.format(contribution="select(abs(r) <= 1.0, r, copysign(1.0, r)) * x[i]",
                                rate="0.1") + PARTITIONED)
    out = CliRunner().invoke(main, ["launch", str(path), "-o", str(tmp_path / "out"), "--quiet"])
    assert out.exit_code == 0, out.output
    assert [ln.split()[-1] for ln in out.stdout.splitlines()[1:3]] == ["match", "match"]


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-aarch64 not installed")
def test_the_huber_gate_resumes_on_the_other_instruction_set(tmp_path):
    """Checkpointed every 2 updates, the Huber gate's ckpt-4 resumes with every owner on the
    other instruction set and ends with the uninterrupted run's words. (Clipping by global
    norm reads every coordinate, so this learner is not separable and does not run
    partitioned; the per-coordinate clip above does.)"""
    import dataclasses

    from alphac import driver
    from alphac.ir import nodes as n
    from shape_gates import resume_across_instruction_sets

    dep = driver.deployment(str(ROOT / "specs" / "huber_clip_hierarchy.alpha"))
    dep = dataclasses.replace(dep, checkpoint=n.Checkpoint(2, "ckpt-huber"))
    resume_across_instruction_sets(tmp_path, "huber", dep, 4)

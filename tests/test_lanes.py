"""The contribution kernel over LANES samples at once (alphac_contribution_lanes) computes,
in every lane, the words the scalar kernel computes for that sample, bit for bit; where a
check fails in some lane it says so (1), and the runtime then runs those samples through
the scalar kernel, which names the statement. Called in-process on the shared-library
build of each learner, on its own samples and on samples made to stress it."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from alphac import driver
from alphac.check.api import load_spec
from alphac.codegen.program import LANES

SPECS = ["demo.alpha", "logistic_regression.alpha", "logistic_regression_binary32.alpha",
         "softmax_regression.alpha", "tanh_network_adam.alpha", "huber_clip_hierarchy.alpha",
         "indexed_lsq.alpha", "lsq_adam_partitioned_hierarchy7.alpha"]


def _kernels(tmp_path, spec: str):
    dep = load_spec(f"specs/{spec}").deployments[0]
    plan = driver.plan(dep)
    role = dep.roles[0].name
    lib = ctypes.CDLL(str(driver.build(plan, role, "x86_64", tmp_path, shared=True)))
    for name in ("alphac_contribution", "alphac_contribution_lanes"):
        getattr(lib, name).restype = ctypes.c_int64
        getattr(lib, name).argtypes = [ctypes.c_void_p] * 4
    lanes = ctypes.c_int64.in_dll(lib, "alphac_contribution_lanes_count").value
    return dep.learner, lib, lanes


def _samples(learner, rng) -> np.ndarray:
    """The learner's own samples, and as many again with every word scaled and signed at
    random (zeros kept), LANES at least."""
    own = np.asarray(learner.samples.words, dtype=np.uint64).view(np.float64)
    more = own * rng.choice([-2.0, -0.5, 0.5, 3.0], size=own.shape)
    rows = np.concatenate([own, more])
    while len(rows) < 3 * LANES:
        rows = np.concatenate([rows, rows * 1.25])
    return np.ascontiguousarray(rows[: (len(rows) // LANES) * LANES])


def _params(learner, rng) -> np.ndarray:
    w = np.asarray(learner.initial.as_array(), dtype=np.uint64).view(np.float64).copy()
    return w + rng.standard_normal(len(w)) * 0.1


def _scalar(lib, k, params, row):
    out, fail = np.zeros(k, dtype=np.float64), ctypes.c_int64(-1)
    status = lib.alphac_contribution(params.ctypes.data, row.ctypes.data, out.ctypes.data, ctypes.byref(fail))
    return status, out


@pytest.mark.parametrize("spec", SPECS)
def test_every_lane_computes_the_scalar_kernels_words(tmp_path, spec):
    learner, lib, lanes = _kernels(tmp_path, spec)
    assert lanes == LANES  # lowered over lanes
    rng = np.random.default_rng(len(spec))
    rows, params, k = _samples(learner, rng), _params(learner, rng), learner.k
    checked = 0
    for at in range(0, len(rows), LANES):
        block = np.ascontiguousarray(rows[at:at + LANES])
        out = np.full((LANES, k), np.nan)
        got = lib.alphac_contribution_lanes(params.ctypes.data, block.ctypes.data, out.ctypes.data, None)
        scalar = [_scalar(lib, k, params, block[lane]) for lane in range(LANES)]
        assert got == (0 if all(s == 0 for s, _ in scalar) else 1)
        if got == 0:
            want = np.stack([o for _, o in scalar])
            assert np.array_equal(out.view(np.uint64), want.view(np.uint64)), (spec, at)
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize("spec", ["demo.alpha", "logistic_regression.alpha", "huber_clip_hierarchy.alpha"])
@pytest.mark.parametrize("lane", [0, 5, LANES - 1])
def test_a_non_finite_word_in_one_lane_is_reported_for_the_block(tmp_path, spec, lane):
    learner, lib, _ = _kernels(tmp_path, spec)
    rng = np.random.default_rng(7)
    rows, params, k = _samples(learner, rng)[:LANES].copy(), _params(learner, rng), learner.k
    rows[lane, 0] = np.inf
    out = np.zeros((LANES, k))
    assert lib.alphac_contribution_lanes(params.ctypes.data, rows.ctypes.data, out.ctypes.data, None) == 1
    assert _scalar(lib, k, params, rows[lane])[0] > 0  # the scalar kernel names the statement
    others = [_scalar(lib, k, params, rows[j])[0] for j in range(LANES) if j != lane]
    assert others == [0] * (LANES - 1)


def test_an_independent_state_rule_has_no_lanes_kernel(tmp_path):
    _, lib, lanes = _kernels(tmp_path, "local_correlation_star.alpha")
    assert lanes == 0
    assert lib.alphac_contribution_lanes(None, None, None, None) == -1

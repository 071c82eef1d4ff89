"""The gate learners of the elementary functions: each spec launched on mixed x86-64 and
AArch64 owners, replicated and partitioned, equal to the oracle bit for bit, a checkpoint
resumed on the other instruction set; an independent numpy learner of the same model
follows its loss after every update to 1e-12 relative (a check of the semantics: numpy's
order differs); and its data are such that another summation order or another exp and
log1p (the platform's libm) give other bits."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from alphac.commands import main
from shape_gates import needs_qemu, one_owner, resume_across_instruction_sets

ROOT = Path(__file__).resolve().parents[2]
LOGISTIC = ROOT / "specs" / "logistic_regression.alpha"
LOGISTIC32 = ROOT / "specs" / "logistic_regression_binary32.alpha"
SOFTMAX = ROOT / "specs" / "softmax_regression.alpha"
GATES = {"logistic": LOGISTIC, "logistic32": LOGISTIC32, "softmax": SOFTMAX}


def floats(words) -> np.ndarray:
    return np.asarray(words, dtype=np.uint64).view(np.float64)


def launched(tmp_path, spec: Path, deployment: str) -> list[str]:
    out = CliRunner().invoke(main, ["launch", str(spec), "--deployment", deployment,
                                    "-o", str(tmp_path / "out"), "--quiet"])
    assert out.exit_code == 0, out.output
    return [ln.split()[-1] for ln in out.stdout.splitlines()[1:5]]


@needs_qemu
@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("deployment", ["run", "partitioned"])
def test_the_gates_launch_equal_to_the_oracle(tmp_path, gate, deployment):
    assert launched(tmp_path, GATES[gate], deployment) == ["match"] * 4


@needs_qemu
@pytest.mark.parametrize("gate", GATES)
def test_the_gates_resume_on_the_other_instruction_set(tmp_path, gate):
    from alphac import driver

    resume_across_instruction_sets(tmp_path, gate, driver.deployment(str(GATES[gate]), "run"), 4)


def _learner():
    from alphac import driver

    dep = driver.deployment(str(LOGISTIC), "run")
    L = dep.learner
    data = floats(L.samples.words).reshape(-1, L.s)
    return dep, L, data[:, :L.k - 1], data[:, L.k - 1]


def test_logistic_regression_follows_an_independent_numpy_learner():
    """numpy, full batch: p = 1 / (1 + e^-z), w -= rate * mean((p - y) x); the mean log loss
    logaddexp(0, z) - y z. The loss alphac computes in the run (the last parameter, at
    version u the loss of version u - 1's parameters) and the loss of alphac's parameters
    both agree with numpy's to 1e-12 relative, after every update."""
    from alphac.oracle import evaluate

    dep, L, X, Y = _learner()
    rate = float(floats([L.rate])[0])

    def loss(w):
        z = X @ w
        return float(np.mean(np.logaddexp(0.0, z) - Y * z))

    w = floats(L.initial.as_array())[:-1].copy()
    losses = []
    for u in range(1, dep.updates + 1):
        ours = floats(evaluate(dep, u).params)
        assert abs(ours[-1] - loss(w)) <= 1e-12 * loss(w), u  # the loss before this update
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - rate * ((p - Y)[:, None] * X).mean(axis=0)
        assert abs(loss(ours[:-1]) - loss(w)) <= 1e-12 * loss(w), u
        losses.append(loss(w))
    assert losses == sorted(losses, reverse=True)  # it learns


def test_another_order_or_a_libm_gives_other_bits(monkeypatch):
    """The gate can tell: the plain left-to-right sum of the 96 gradients differs from the
    declared combine in some word, and so does the oracle with the platform's exp and log1p
    (math.exp, math.log1p: not correctly rounded everywhere) in place of the real functions
    rounded once: sample 0's z is an argument glibc's exp rounds the other way."""
    import dataclasses

    from alphac.ir import nodes as n
    from alphac.oracle import elementary, evaluate

    dep, L, X, Y = _learner()
    want = evaluate(dep, dep.updates, engine="scalar").params
    alone = dataclasses.replace(one_owner(dep), topology=n.Star())
    assert evaluate(alone, dep.updates, engine="scalar").params != want

    probe = float.fromhex("-0x1.97338a05008ccp-2")  # scripts/make_gate_data.py LIBM_PROBE
    assert floats([dep.learner.initial.as_array()[0]])[0] == probe
    if math.exp(probe) == elementary.correctly_rounded("exp", probe):
        pytest.skip("this platform's exp rounds the probe correctly")
    libm = {"exp": math.exp, "log1p": math.log1p}
    real = elementary.correctly_rounded

    def platform(name, x):
        return libm[name](x) if name in libm else real(name, x)

    # sigmoid's exp and the loss's exp and log1p
    first = evaluate(dep, 1, engine="scalar").params
    monkeypatch.setattr(elementary, "correctly_rounded", platform)
    assert evaluate(dep, 1, engine="scalar").params != first  # w[1] at version 1


# ----------------------------------------------------------------------------- binary32



def test_mixed_precision_logistic_regression_follows_a_numpy_learner():
    """The samples are float32 (loaded and widened exactly); every parameter after every
    update is a binary32 value; numpy's learner with the same roundings (float32 gradient
    words, binary64 mean, float32 parameters) has the same mean log loss to 1e-12."""
    from alphac import driver
    from alphac.oracle import evaluate

    dep = driver.deployment(str(LOGISTIC32), "run")
    L = dep.learner
    data = floats(L.samples.words).reshape(-1, L.s)
    stored = np.load(ROOT / "specs" / "Gates" / "logistic32.npy")
    assert stored.dtype == np.float32 and np.array_equal(data, stored.astype(np.float64))
    X, Y = data[:, :L.k - 1], data[:, L.k - 1]
    rate = float(floats([L.rate])[0])

    def loss(w):
        z = X @ w
        return float(np.mean(np.logaddexp(0.0, z) - Y * z))

    w = floats(L.initial.as_array())[:-1].astype(np.float32).astype(np.float64)
    for u in range(1, dep.updates + 1):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        g = ((p - Y)[:, None] * X).astype(np.float32).astype(np.float64)
        w = (w - rate * g.mean(axis=0)).astype(np.float32).astype(np.float64)
        ours = floats(evaluate(dep, u).params)
        assert np.array_equal(ours, ours.astype(np.float32).astype(np.float64)), u  # binary32 values
        assert abs(loss(ours[:-1]) - loss(w)) <= 1e-12 * loss(w), u


# ----------------------------------------------------------------------------- softmax



def test_softmax_regression_follows_an_independent_numpy_learner():
    """numpy, full batch: P = softmax(X W^T) (scipy-free: max subtracted), W -= rate
    mean((P - Y)^T X); the mean loss logsumexp(z) - y . z. alphac's in-run loss and the
    loss of its parameters agree with numpy's to 1e-12 after every update, and it learns."""
    from alphac import driver
    from alphac.oracle import evaluate

    dep = driver.deployment(str(SOFTMAX), "run")
    L = dep.learner
    classes, d = 10, 6
    data = floats(L.samples.words).reshape(-1, L.s)
    X, Y = data[:, :d], data[:, d:]
    rate = float(floats([L.rate])[0])

    def loss(W):
        z = X @ W.T
        top = z.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
        return float(np.mean(lse - (Y * z).sum(axis=1)))

    W = np.zeros((classes, d))
    losses = []
    for u in range(1, dep.updates + 1):
        ours = floats(evaluate(dep, u).params)
        assert abs(ours[-1] - loss(W)) <= 1e-12 * loss(W), u
        z = X @ W.T
        e = np.exp(z - z.max(axis=1, keepdims=True))
        P = e / e.sum(axis=1, keepdims=True)
        W = W - rate * ((P - Y).T @ X) / len(X)
        assert abs(loss(ours[:-1].reshape(classes, d)) - loss(W)) <= 1e-12 * loss(W), u
        losses.append(loss(W))
    assert losses == sorted(losses, reverse=True)

"""Write the sample files of the elementary-function gates (deterministic: a fixed seed).

    python3 scripts/make_gate_data.py [DIR]     default specs/Gates

logistic.npy: 96 samples of binary logistic regression, 8 features and a 0/1 label. The
first feature is 1 (a bias); the others are scaled by powers of ten from 1e-2 to 1e2, so
that summing the 96 gradients in another order gives other bits, and the labels come from a
noisy linear model, so that the classes overlap and the loss stays away from 0. Sample 0
probes the exp: see LIBM_PROBE. logistic32.npy: the same samples in float32.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def logistic(n: int = 96, d: int = 8, seed: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = np.array([1.0] + [10.0 ** e for e in np.linspace(-2, 2, d - 1)])
    x = rng.standard_normal((n, d)) * scale
    x[:, 0] = 1.0
    truth = rng.standard_normal(d) / scale
    z = x @ truth + 0.8 * rng.standard_normal(n)
    y = (z > 0).astype(np.float64)
    # Sample 0 is (1, 1, 0, ..., 0) and feature 1 is 0 elsewhere: with the spec's initial
    # w[0] = LIBM_PROBE and w[1] = 0, its z is LIBM_PROBE exactly, and w[1]'s first update
    # is that one sample's gradient, carried to the last bit.
    x[0, :] = 0.0
    x[0, :2] = 1.0
    x[1:, 1] = 0.0
    y[0] = 0.0  # so that its gradient (p - y) x is p itself, every bit of it
    return np.concatenate([x, y[:, None]], axis=1)


# An argument whose exp glibc's libm (Debian 12, 13) does not round correctly:
# math.exp(LIBM_PROBE) != the binary64 nearest e^LIBM_PROBE.
LIBM_PROBE = float.fromhex("-0x1.97338a05008ccp-2")


def logistic32() -> np.ndarray:
    """logistic.npy's samples as binary32 (each the binary32 nearest), for the
    mixed-precision gate (specs/logistic_regression_binary32.alpha)."""
    return logistic().astype(np.float32)


def softmax(n: int = 80, d: int = 6, classes: int = 10, seed: int = 21) -> np.ndarray:
    """80 samples of softmax regression: d features (the first a bias of 1, the others
    scaled from 1e-1 to 1e1) and a one-hot label of `classes` words, the class the argmax
    of a noisy linear score."""
    rng = np.random.default_rng(seed)
    scale = np.array([1.0] + [10.0 ** e for e in np.linspace(-1, 1, d - 1)])
    x = rng.standard_normal((n, d)) * scale
    x[:, 0] = 1.0
    truth = rng.standard_normal((classes, d)) / scale
    label = np.argmax(x @ truth.T + 0.5 * rng.standard_normal((n, classes)), axis=1)
    return np.concatenate([x, np.eye(classes)[label]], axis=1)


FILES = {"logistic.npy": logistic, "logistic32.npy": logistic32, "softmax.npy": softmax}


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "specs" / "Gates"
    for name, make in FILES.items():
        np.save(out / name, make())
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

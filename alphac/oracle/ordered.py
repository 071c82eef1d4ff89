"""Ordered sums on numpy arrays: the left fold a[0] + a[1] + ... with every partial kept.

numpy's `add.accumulate` computes out[i] = out[i-1] + a[i] one element after another
(it must produce every partial, so it cannot use the pairwise scheme of `add.reduce`,
`numpy.sum` or BLAS). `fold_partials` still checks that on a probe once per process and
refuses to run on a numpy where it does not hold.
"""

from __future__ import annotations

import functools

import numpy as np


def _sequential(values: list[float]) -> list[float]:
    out, acc = [], None
    for v in values:
        acc = v if acc is None else acc + v
        out.append(acc)
    return out


@functools.cache
def accumulate_is_sequential() -> bool:
    """Probe: 2**53 followed by many ones and a -2**53 gives 0 + ... only sequentially
    (each 1.0 is absorbed); a pairwise or blocked sum keeps them. Checked along both axes
    of 2-D arrays and for 1-D."""
    n = 1000
    col = [2.0 ** 53] + [1.0] * (n - 2) + [-(2.0 ** 53)]
    col[1::7] = [3.0] * len(col[1::7])
    want = np.array(_sequential(col))
    a = np.array(col)
    if not np.array_equal(np.add.accumulate(a).view(np.uint64), want.view(np.uint64)):
        return False
    two = np.stack([a, -a, a * 0.5], axis=1)  # (n, 3): fold along axis 0
    got0 = np.add.accumulate(two, axis=0)
    got1 = np.add.accumulate(np.ascontiguousarray(two.T), axis=1)
    for j, scale in enumerate((1.0, -1.0, 0.5)):
        w = np.array(_sequential([v * scale for v in col])).view(np.uint64)
        if not (np.array_equal(got0[:, j].view(np.uint64), w)
                and np.array_equal(got1[j].view(np.uint64), w)):
            return False
    return True


def fold_partials(terms: np.ndarray, axis: int = 0) -> np.ndarray:
    """Every partial of the ordered left fold of `terms` along `axis` (first partial is
    terms[0] itself, as in the IR's `Sum`)."""
    if not accumulate_is_sequential():
        raise RuntimeError("numpy.add.accumulate is not a sequential fold on this numpy")
    return np.add.accumulate(terms, axis=axis)

"""Local steps H (docs/learners.md, "Consistency"): one round per version. From the shared
version v, each owner with samples applies H updates of the learner on its own samples
alone: its own ordered sum, its own mean (sum / its count), the update program on its own
copy. Its leaf value is its parameter delta weighted by its sample count, (x_o - v) * n_o,
one subtraction and one multiplication per coordinate, each rounded once; an owner without
samples contributes (+0.0, 0). The declared tree adds the leaves as it adds contributions,
the mean divides by the total count, and every owner sets v + mean. A learner's optimizer
state is each owner's own: its updates carry it from round to round, and nothing combines it.

The oracle's own arithmetic: numpy element-wise operations on float64 (each one IEEE
operation per element, no reduction), the combine and the mean of alphac.oracle.combine;
`narrow` (a binary32 learner's: `words.narrow32`) rounds each result to binary32, which is
binary32's own operation (binary64 has more than twice binary32's precision).
"""

from __future__ import annotations

import numpy as np

from alphac.oracle.combine import Mass, _first_bad, _same, combine, mean
from alphac.oracle.refusal import Site, non_finite


def _finite(values: np.ndarray, update: int, owner: int | None, what: str, statement: str) -> np.ndarray:
    if not np.isfinite(values).all():
        raise non_finite(Site(update, "local steps", owner=owner), what, statement=statement,
                         coordinate=f"coordinate {_first_bad(values)}")
    return values


def owner_sums(contributions, L, samples: np.ndarray, u: int, narrow=None):
    """`sums(params, o)`: owner o's ordered sum of its contributions at `params`, from one
    of the oracle's engines (`contributions(L, params, samples, u, narrow)`, every owner's)
    run on owner o's rows alone: the learner's view in which every other owner holds no
    sample, so the engine's refusals still name owner o and its sample."""
    from dataclasses import replace

    shares = L.samples.shares
    starts = np.concatenate([[0], np.cumsum(shares)]).astype(np.int64)

    def sums(params: np.ndarray, o: int) -> np.ndarray:
        alone = tuple(n if j == o else 0 for j, n in enumerate(shares))
        rows = samples[starts[o]:starts[o + 1]]
        view = replace(L, samples=replace(L.samples, shares=alone, words=L.samples.owner_rows(o)))
        return contributions(view, params, rows, u, narrow)[o]
    return sums


def round_of(L, v: np.ndarray, states: list, H: int, owners: int, shares, sums_of, update, root,
             u: int, rate: float, narrow=_same, mutate=None, select=None,
             outer=None) -> tuple[np.ndarray, list, np.ndarray | None]:
    """Version u + 1 from version v, and every owner's optimizer state after its own
    updates: `states[o]`, owner o's own (an owner without samples keeps its state).
    `sums_of(params, o)` gives owner o's ordered sum of its contributions at `params`
    (`owner_sums`), `update(L, params, state, mean, rate, u)` the update
    program; `mutate(leaves)` a mutant's leaf values, `select(mean)` the mean a mutant's
    owners read. `outer` = (rate, momentum, b): the outer momentum b, carried from round to
    round (returned: the next b), b := momentum * b + mean and v + rate * b; None: v + mean."""
    leaves, states = {}, list(states)
    for o in range(owners):
        n = int(shares[o])
        if n == 0:
            leaves[o] = Mass(np.zeros(v.size), 0)
            continue
        x = v.copy()
        for _ in range(H):
            own = mean(Mass(sums_of(x, o), n), u, narrow)
            x, states[o] = update(L, x, states[o], own, rate, u)
        with np.errstate(all="ignore"):
            delta = _finite(narrow(x - v), u, o, "result of sub", "delta")
            leaves[o] = Mass(_finite(narrow(delta * np.float64(n)), u, o, "result of mul", "delta"), n)
    if mutate is not None:
        leaves = mutate(leaves)
    m_ = mean(combine(root, leaves, u, narrow), u, narrow)
    if select is not None:
        m_ = select(m_)
    with np.errstate(all="ignore"):
        if outer is None:
            return _finite(narrow(v + m_), u, None, "result of add", "outer"), states, None
        r, mu, b = outer
        b = _finite(narrow(narrow(np.float64(mu) * b) + m_), u, None, "result of add", "outer momentum")
        return _finite(narrow(v + narrow(np.float64(r) * b)), u, None, "result of add", "outer"), states, b

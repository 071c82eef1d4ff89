"""The engines agree word for word: Python floats one slot at a time, numpy over loop
ranges and sample batches, and the programs compiled by numba; ordered sums stay
sequential; loops that cannot be vectorised run in order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from alphac.ir.nodes import Assign, Hierarchy, Index, Let, Local, Loop, Program, Star, Sum
from alphac.oracle import evaluate
from alphac.oracle.ordered import accumulate_is_sequential, fold_partials
from alphac.oracle.vector import vectorisable

from test_oracle_learners import C, S, add, deployment, lsq_learner, mul, sub


def test_numpy_accumulate_is_a_sequential_fold():
    assert accumulate_is_sequential()
    # 2**53, then ones, then -2**53: sequentially every 1.0 is absorbed
    x = np.array([2.0 ** 53] + [1.0] * 4096 + [-(2.0 ** 53)])
    assert fold_partials(x)[-1] == 0.0
    assert np.sum(x) != 0.0  # the pairwise sum keeps the ones: it is another order
    y = np.stack([x, 2 * x])
    assert np.array_equal(fold_partials(y, axis=1)[:, -1], [0.0, 0.0])


def _random_learner(kind, form, k, shares, seed):
    rng = np.random.default_rng(seed)
    n = sum(shares)
    rows = rng.standard_normal((n, k + 1)) * 10.0 ** rng.uniform(-3, 3, (n, k + 1))
    w0 = tuple(float(v) for v in rng.standard_normal(k))
    return lsq_learner(kind, form, rows, shares, w0, 1e-3)


@pytest.mark.parametrize("kind", ["plain", "momentum", "adam"])
def test_engines_agree_on_a_wider_learner(kind):
    shares = (3, 0, 5, 1, 2, 4, 0)
    L = _random_learner(kind, "indexed", 40, shares, seed=3)
    for topology in (Star(), Hierarchy(2)):
        dep = deployment(L, len(shares), topology, updates=3)
        a, b, c = (evaluate(dep, engine=e) for e in ("scalar", "vector", "numba"))
        assert (a.params, a.state) == (b.params, b.state) == (c.params, c.state)
        assert [o.digest for o in a.owners] == [o.digest for o in b.owners] == [o.digest for o in c.owners]


@pytest.mark.parametrize("kind", ["plain", "momentum", "adam"])
def test_per_slot_and_indexed_forms_give_the_same_words(kind):
    shares = (2, 1, 0, 3)
    words = set()
    for form in ("slot", "indexed"):
        dep = deployment(_random_learner(kind, form, 5, shares, seed=11), 4, Hierarchy(2), 2)
        for engine in ("scalar", "vector", "numba"):
            r = evaluate(dep, engine=engine)
            words.add((r.params, r.state))
    assert len(words) == 1


def test_vector_batches_split_owners_across_chunks(monkeypatch):
    import alphac.oracle.driver as ev
    L = _random_learner("momentum", "indexed", 8, (5, 0, 7, 2), seed=5)
    dep = deployment(L, 4, Star(), 2)
    whole = evaluate(dep, engine="vector")
    monkeypatch.setattr(ev, "CHUNK_WORDS", 3 * (2 * 8 + 9))  # three samples per batch
    assert evaluate(dep, engine="vector").params == whole.params
    assert evaluate(dep, engine="scalar").params == whole.params


def _prefix_contribution(k: int) -> Program:
    """c[0] := x[0]*w[0]; c[i] := c[i-1] + x[i]*w[i] for i >= 1 (reads the previous
    iteration's write, so it must run in order), then c[i] := c[i] * y."""
    s = k + 1
    c = 2 * k + 1
    return Program(2 * k + s, (
        Assign(Index(c), mul(S(k), S(0)), label="c[0]"),
        Loop("i", 1, k, (Assign(Index(c, "i"), add(S(c - 1, "i"), mul(S(k, "i"), S(0, "i"))),
                                label="c[i]"),)),
        Loop("i", 0, k, (Let("t", mul(S(c, "i"), S(2 * k))),
                         Assign(Index(c, "i"), Local("t"), label="c[i]"))),
        Loop("a", 0, 2, (Loop("b", 0, k, (
            Assign(Index(c, "b"), add(S(c, "b"), Sum("j", 0, k, mul(S(k, "j"), C(0.5)))),
                   label="c[b]"),)),)),
    ))


def test_a_loop_reading_its_own_earlier_iterations_runs_in_order():
    k = 6
    prog = _prefix_contribution(k)
    assert not vectorisable(prog.body[1], {})
    assert vectorisable(prog.body[2], {})
    assert not vectorisable(prog.body[3], {})  # nested loop: outer runs in order
    L = replace(_random_learner("plain", "indexed", k, (2, 3), seed=9), contribution=prog)
    dep = deployment(L, 2, Star(), 2)
    a, b, c = (evaluate(dep, engine=e) for e in ("scalar", "vector", "numba"))
    assert a.params == b.params == c.params


def test_vectorisable_rejects_reads_of_written_slots_at_other_indices():
    k = 4
    shifted = Loop("i", 0, k, (Assign(Index(0, "i"), S(1, "i"), label="w[i]"),))
    assert not vectorisable(shifted, {})
    fixed = Loop("i", 0, k, (Assign(Index(0, "i"), S(2), label="w[i]"),))
    assert not vectorisable(fixed, {})  # slot 2 is written at i = 2
    other = Loop("i", 0, k, (Assign(Index(0, "i"), S(k, "i"), label="w[i]"),))
    assert vectorisable(other, {})
    assert sub(C(1.0), C(2.0)).op == "sub"

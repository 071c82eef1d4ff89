"""The numba engine: its own lowering of the IR programs, compiled without fast-math, gives
the scalar engine's words on every spec, and its refusals name the same code, update,
program, owner, sample, statement and coordinate; `auto` chooses it for large runs."""

from __future__ import annotations

import glob
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from alphac import driver
from alphac.diagnostics import Span
from alphac.ir.nodes import Assign, Index, Let, Local, Loop, Program, Star, Sum, Words
from alphac.oracle import Refusal, evaluate
from alphac.oracle import compiled
from alphac.oracle.driver import NUMBA_LIMIT, SCALAR_LIMIT, _choose

from spec_sweep import every_deployment
from test_oracle_learners import C, S, add, deployment, lsq_learner, mul

SPECS = Path(__file__).resolve().parents[2] / "specs"
INF, NAN, HUGE = 0x7FF0000000000000, 0x7FF8000000000000, 0x7FE0000000000000  # HUGE: 2**1023


SPEC_DEPS = every_deployment()


def _schedule(dep):
    """Bounded staleness: a schedule to replay, each owner S behind but an odd owner at odd
    updates one version fresher; None for every other consistency."""
    S = dep.consistency.bound
    return [[max(u - S + (o % 2) * (u % 2), 0) for u in range(dep.updates)] for o in range(dep.owners)] if S else None


def _outcome(dep, engine: str):
    """The words and every owner's view, or the refusal's full identity."""
    try:
        r = evaluate(dep, engine=engine, schedule=_schedule(dep))
    except Refusal as exc:
        return ("refused", exc.code, exc.detail, exc.site, exc.statement, exc.span, exc.coordinate)
    return ("words", r.params, r.state, r.version, r.owners)


def test_the_specs_are_every_deployment_of_specs():
    # every spec file but the one that declares no deployment, the elementary-function
    # gates with their two deployments each
    files = {s.split(":")[0] for s, _ in SPEC_DEPS}
    assert len(files) == len(glob.glob(str(SPECS / "*.alpha"))) - 1
    assert len(SPEC_DEPS) >= len(files) + 3


def _other(dep) -> tuple[str, str | None]:
    """The engine compared with the scalar one: numba, or the vector engine where numba
    refuses (and how it says so): a program calling an elementary function (numba's libm
    would compute it otherwise) or binary32 storage (numba sums in binary64)."""
    from alphac.oracle.driver import uses_elementary

    if dep.contract.profile.format != "binary64":
        return "vector", "binary32"
    if uses_elementary(dep.learner):
        return "vector", "no elementary functions"
    return "numba", None


@pytest.mark.parametrize("stem,dep", SPEC_DEPS, ids=[s for s, _ in SPEC_DEPS])
def test_every_spec_equals_the_scalar_engine_bit_for_bit(stem, dep):
    """numba, or where numba refuses the learner, the vector engine (`_other`)."""
    other, why = _other(dep)
    if why is not None:
        with pytest.raises(ValueError, match=why):
            evaluate(dep, engine="numba")
    a, b = _outcome(dep, "scalar"), _outcome(dep, other)
    assert a[0] == "words" and a == b
    more = replace(dep, updates=dep.updates + 3)  # a few updates further, as a launch --rounds
    assert _outcome(more, "scalar") == _outcome(more, other)


def _corrupt(dep, where: str, word: int):
    """`dep` with one input word replaced: a sample's, an initial parameter's, the rate."""
    L = dep.learner
    if where == "rate":
        return replace(dep, learner=replace(L, rate=word))
    if where == "param":
        init = list(L.initial.as_tuple())
        init[-1] = word
        return replace(dep, learner=replace(L, initial=Words(tuple(init))))
    rows = np.array(L.samples.words, dtype=np.uint64).copy()
    rows[(-1 if where == "last sample" else 0), (0 if where == "first sample" else -1)] = word
    return replace(dep, learner=replace(L, samples=replace(L.samples, words=rows)))


@pytest.mark.parametrize("stem,dep", SPEC_DEPS, ids=[s for s, _ in SPEC_DEPS])
def test_every_spec_refuses_as_the_scalar_engine_does(stem, dep):
    from alphac.oracle.driver import uses_elementary

    other, _ = _other(dep)
    refused = 0
    for where in ("first sample", "last sample", "param", "rate"):
        for word in (INF, NAN, HUGE):
            bad = _corrupt(dep, where, word)
            a, b = _outcome(bad, "scalar"), _outcome(bad, other)
            assert a == b, (where, hex(word))
            refused += a[0] == "refused"
    # most corruptions are refused; each names the same failure. An independent-state
    # owner without inputs never runs its rule: a corrupt word of its region is never read
    L = dep.learner
    unread = 3 if L.independent and L.samples.shares[-1] == 0 else 0
    # a huge (finite) weight saturates a sigmoid instead of overflowing a square
    saturated = 1 if uses_elementary(L) else 0
    assert refused >= 9 - unread - saturated


# ----------------------------------------------------------------------------- lowering

def _learner_with(contribution=None, update=None, k=3, shares=(2, 0, 3)):
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((sum(shares), k + 1))
    L = lsq_learner("plain", "indexed", rows, shares, tuple(rng.standard_normal(k)), 0.125)
    L = replace(L, contribution=contribution or L.contribution, update=update or L.update)
    return deployment(L, len(shares), Star(), updates=2)


def test_a_view_spanning_regions_a_written_input_and_shadowed_names():
    k, s = 3, 4
    c = k + s  # the contribution's first slot
    contribution = Program(2 * k + s, (
        # the sum's view spans parameters and sample (chosen at run time), and the
        # contribution writes a parameter slot: every sample must see the initial one
        Assign(Index(0), mul(S(0), C(2.0)), label="w[0]"),
        Let("t", Sum("j", 0, k + s, mul(S(0, "j"), C(0.5)))),
        Loop("i", 0, k, (
            Let("t", add(Local("t"), S(0, "i"))),  # shadows the outer t, per iteration
            Assign(Index(c, "i"), add(Local("t"), Sum("i", 0, 2, S(k, "i"))), label="c[i]"),
        )),
        Loop("i", 0, 0, (Assign(Index(c, "i"), S(k, "i"), label="never"),)),  # an empty range
    ))
    dep = _learner_with(contribution=contribution, k=k)
    assert compiled._writes(contribution, 0, k) and not compiled._writes(contribution, k, k + s)
    a, b = _outcome(dep, "scalar"), _outcome(dep, "numba")
    assert a[0] == "words" and a == b


def test_the_lowering_checks_as_the_scalar_engine_does():
    k = 2
    span = Span("t.alpha", 3, 4)
    # a sum whose 2nd term overflows: `term` and `partial` name the sum's variable beside the loop's
    update = Program(2 * k + 1, (
        Loop("i", 0, k, (Assign(Index(0, "i"), add(S(0, "i"), Sum("j", 0, 2, mul(S(k, "j"), C(1e308)))),
                                span, "w[i]"),)),
    ))
    dep = _learner_with(update=update, k=k)
    r = _outcome(dep, "numba")
    assert r == _outcome(dep, "scalar")
    assert r[0] == "refused" and r[6].startswith("i=0, j=")
    assert r[2].startswith("update ") and ": update: `w[i]` (t.alpha:3:4) at i=0, j=" in r[2]


def test_the_generated_module_holds_the_lowered_programs_only():
    L = _learner_with().learner
    text, csites, usites = compiled.module_text(L.k, L.s, L.m, L.contribution, L.update)
    assert text.count("@njit(fastmath=False, error_model=\"numpy\", nogil=True, cache=True)") == 3
    assert "fastmath=True" not in text and "parallel" not in text
    assert "import alphac" not in text  # nothing of the compiler: numpy, math, numba only
    # one `return SITE` per check, and `return 0`
    assert len(csites) == text[text.index("def contribution("):text.index("def update")].count("return ") - 1
    assert {s.what for s in usites} >= {"operand of mul", "result of mul", "result of sub"}


def test_the_probe_passes_here():
    compiled._probe()  # a fused multiply-add or a reassociated sum would raise


def test_auto_picks_scalar_vector_then_numba_by_work():
    def learner(k):
        return lsq_learner("plain", "indexed", np.ones((3, k + 1)), (1, 1, 1), (0.0,) * k, 0.5)

    small, mid = learner(2), learner(20_000)
    work = 4 * (2 * 20_000 + 20_001 + 0 + 1)  # (samples + 1) * slot words of one update
    assert work > SCALAR_LIMIT
    assert _choose("auto", small, 10 ** 6) == "scalar"
    assert _choose("auto", mid, NUMBA_LIMIT // work) == "vector"
    assert _choose("auto", mid, NUMBA_LIMIT // work + 1) == "numba"
    with pytest.raises(ValueError):
        _choose("fast", small, 1)


@pytest.mark.parametrize("bad_rows", [(0, 4), (4, 0), (3, 4), (2, 4)])
def test_owners_summed_in_threads_refuse_as_the_serial_order_does(bad_rows):
    """The numba engine sums each owner's samples in a thread of its own; where several
    owners' samples fail, the refusal is the serial order's first: the lowest owner's."""
    dep = _learner_with(shares=(2, 0, 3))  # rows 0-1 owner 0, rows 2-4 owner 2
    rows = np.array(dep.learner.samples.words, dtype=np.uint64).copy()
    for r in bad_rows:
        rows[r, 0] = INF
    bad = replace(dep, learner=replace(dep.learner, samples=replace(dep.learner.samples, words=rows)))
    a, b = _outcome(bad, "scalar"), _outcome(bad, "numba")
    assert a[0] == "refused" and a == b

"""Partitioning laws: separability by data dependence, shard maps (coverage, disjointness,
decode(assemble) = state even when byte totals match), replicas, selection assembly and the
persistent and peak bytes per owner."""

from __future__ import annotations

import numpy as np
import pytest

from alphac.diagnostics import CompileError, Span
from alphac.ir.nodes import Hierarchy, Loop, Partitioning, Program, Replicate, Shard, Sum, placed
from alphac.plan import (Fragment, LogicalRegion, ShardMap, assemble, check_shard_map, offers_of,
                         plan)
from alphac.plan.assembly import Offer
from alphac.plan.shards import fragment_contents, learner_shard_maps
from test_plan_support import (S, adam_partitioning, assign, bits, deployment, div, learner, mul, sub)

PSPAN = Span("spec.alpha", 30, 28)


def codes(dep) -> list[str]:
    with pytest.raises(CompileError) as err:
        plan(dep)
    return [d.code for d in err.value.diagnostics]


def part(**kw) -> Partitioning:
    return Partitioning(span=PSPAN, **kw)


# ----------------------------------------------------------------------------- separability

@pytest.mark.parametrize("form", ["slots", "loop"])
@pytest.mark.parametrize("kind,w,shared", [("plain", 0, ()), ("momentum", 1, ()), ("adam", 2, (6, 7))])
def test_admitted_updates(form, kind, w, shared):
    p = plan(deployment(4, k=3, kind=kind, form=form,
                        partitioning=part(optimizer_state=Shard(), parameters=Shard(), gradients=Shard(),
                                          words_per_coordinate=w, shared_state=shared)))
    assert p.deployment.partitioning.any


@pytest.mark.parametrize("form", ["slots", "loop"])
def test_adam_second_moment_declared_shared_refuses(form):
    k = 3
    with pytest.raises(CompileError) as err:
        plan(deployment(4, k=k, kind="adam", form=form,
                        partitioning=part(optimizer_state=Shard(), words_per_coordinate=1,
                                          shared_state=(3, 4, 5, 6, 7))))
    (d,) = err.value.diagnostics
    assert (d.code, str(d.span)) == ("data-parallel-not-separable", "spec.alpha:30:28")
    # the second moment's words read the mean of their coordinate
    assert d.notes[0].startswith("slot 6 (state word 3, declared shared) reads slot 11 (mean of coordinate 0)")
    if form == "loop":
        assert d.notes[0].endswith("(and 2 more words)")


def test_overclaimed_words_per_coordinate_refuse():
    assert codes(deployment(4, kind="momentum", partitioning=part(optimizer_state=Shard(),
                                                                   words_per_coordinate=2))) == [
        "data-parallel-words-overclaimed"]
    # Adam: three words per coordinate plus two powers is 8 > 6
    assert codes(deployment(4, kind="adam", partitioning=part(optimizer_state=Shard(), words_per_coordinate=3,
                                                               shared_state=(4, 5)))) == [
        "data-parallel-words-overclaimed"]
    # a shared offset the state does not have
    assert codes(deployment(4, kind="momentum", partitioning=part(optimizer_state=Shard(),
                                                                   words_per_coordinate=0,
                                                                   shared_state=(9,)))) == [
        "data-parallel-words-overclaimed"]


def test_cross_coordinate_update_refuses_in_both_forms():
    k = 2
    lr = learner(k, "plain")
    mean, rate = k, 2 * k
    # parameter 0 reads the mean of coordinate 1
    per_slot = Program(lr.update.slots, (assign(0, sub(S(0), mul(S(rate), S(mean + 1)))),
                                         assign(1, sub(S(1), mul(S(rate), S(mean + 1))))))
    # every parameter divided by the (ordered) sum of every mean
    loop = Program(lr.update.slots, (Loop("i", 0, k, (
        assign(0, sub(S(0, "i"), mul(S(rate), div(S(mean, "i"), Sum("j", 0, k, S(mean, "j"))))), "i"),)),))
    for update in (per_slot, loop):
        dep = deployment(4, partitioning=part(gradients=Shard()))
        from dataclasses import replace

        dep = replace(dep, learner=replace(dep.learner, update=update))
        with pytest.raises(CompileError) as err:
            plan(dep)
        (d,) = err.value.diagnostics
        assert d.code == "data-parallel-not-separable"
        assert "parameter 0" in d.notes[0] and "coordinate" in d.notes[0]
        # the same update is fine when nothing is partitioned
        plan(replace(dep, partitioning=Partitioning()))


@pytest.mark.parametrize("form", ["slots", "loop"])
@pytest.mark.parametrize("which", [dict(gradients=Shard()), dict(parameters=Shard()),
                                   dict(parameters=Shard(), gradients=Shard())])
def test_replicated_state_words_the_claim_leaves_unclaimed_refuse(form, which):
    # momentum with no word per coordinate: every owner updates only its coordinates, so
    # no owner would ever update the velocity the update writes
    k = 3
    with pytest.raises(CompileError) as err:
        plan(deployment(4, k=k, kind="momentum", form=form,
                        partitioning=part(words_per_coordinate=0, **which)))
    (d,) = err.value.diagnostics
    assert (d.code, str(d.span)) == ("data-parallel-words-unclaimed", "spec.alpha:30:28")
    first = "slot 3 (state word 0, unclaimed)"
    assert d.notes[0].startswith(first + (" is written" if form == "slots" else " (and 2 more words) is written"))
    assert len(d.notes) == (k if form == "slots" else 1) + 2
    # one word per coordinate claims the velocity: then the plan is the executables' one
    p = plan(deployment(4, k=k, kind="momentum", form=form,
                        partitioning=part(words_per_coordinate=1, **which)))
    assert all(check_shard_map(m) == [] for m in p.shard_maps)


def test_unclaimed_state_words_only_read_are_replicated_constants():
    # Adam with its powers unclaimed and never written: each owner reads its replica of them
    k = 2
    dep = deployment(4, k=k, kind="adam", partitioning=part(gradients=Shard(), words_per_coordinate=2))
    from dataclasses import replace

    upd = dep.learner.update
    dep = replace(dep, learner=replace(dep.learner, update=replace(upd, body=upd.body[2:])))
    assert plan(dep).deployment.partitioning.gradients.sharded
    # Adam's second moment left unclaimed (one word per coordinate, the powers shared)
    assert codes(deployment(4, k=k, kind="adam", partitioning=part(
        gradients=Shard(), words_per_coordinate=1, shared_state=(2 * k, 2 * k + 1)))) == [
        "data-parallel-words-unclaimed"]


def test_a_partitioned_state_reports_unclaimed_words_once_as_missing_coverage():
    assert codes(deployment(4, kind="momentum", partitioning=part(
        optimizer_state=Shard(), gradients=Shard(), words_per_coordinate=0))) == ["shard-coverage-missing"]


def test_a_million_coordinate_indexed_update_is_checked_without_unrolling():
    import time

    k = 1_000_000
    dep = deployment(4, k=4, kind="adam", form="loop", partitioning=adam_partitioning(4))
    from dataclasses import replace
    from test_plan_support import update

    upd, m = update(k, "adam", "loop")
    big = replace(dep.learner, k=k, m=m, update=upd)
    from alphac.diagnostics import DiagnosticBag
    from alphac.plan.separable import check_separable

    bag = DiagnosticBag()
    start = time.perf_counter()
    assert check_separable(big, adam_partitioning(k), 4, PSPAN, bag) and not bag
    assert time.perf_counter() - start < 5.0


# ----------------------------------------------------------------------------- shard maps

def test_coordinate_i_belongs_to_owner_i_mod_n():
    p = plan(deployment(4, k=6, kind="adam", partitioning=adam_partitioning(6)))
    params, state = p.shard_maps
    owned = {f.owner: f.positions().tolist() for f in params.fragments if f.mutable}
    assert owned == {0: [0, 4], 1: [1, 5], 2: [2], 3: [3]}
    state_owned = {f.owner: f.positions().tolist() for f in state.fragments if f.mutable and f.owner}
    # block 0 (first moment) then block 1 (second moment), coordinate i -> owner i mod 4
    assert state_owned == {1: [1, 5, 7, 11], 2: [2, 8], 3: [3, 9]}
    owner0 = sorted(x for f in state.fragments if f.mutable and f.owner == 0 for x in f.positions().tolist())
    assert owner0 == [0, 4, 6, 10, 12, 13]   # its coordinates' words and the two shared powers
    assert all(check_shard_map(m) == [] for m in p.shard_maps)


def test_empty_shards_are_legal():
    p = plan(deployment(7, Hierarchy(2), k=2, kind="adam", partitioning=adam_partitioning(2)))
    params = p.shard_maps[0]
    assert [f.words for f in params.fragments if f.mutable] == [1, 1, 0, 0, 0, 0, 0]
    assert [o.bytes.parameters for o in p.owners] == [8, 8, 0, 0, 0, 0, 0]


def region(domain=4):
    return LogicalRegion("lsq", "parameters", domain)


def test_duplicated_and_missing_coverage_refuse_even_when_byte_totals_match():
    # 2 + 2 words for a 4-word region: the totals match, yet word 1 is held twice, word 3 never
    m = ShardMap(region(), (Fragment(0, "host", ((0, 1, 2),)), Fragment(1, "host", ((1, 1, 2),))))
    assert sum(f.words for f in m.fragments) == m.region.domain
    diags = check_shard_map(m, PSPAN)
    assert [d.code for d in diags] == ["shard-coverage-missing", "shard-coverage-duplicated"]
    assert diags[0].notes == ("words without an owner: 3",)
    assert diags[1].notes == ("words held twice: 1", "owners: 0, 1")


def test_decode_of_assemble_must_be_the_state_even_when_coverage_and_bytes_match():
    m = ShardMap(region(), (Fragment(0, "host", ((0, 2, 2),)), Fragment(1, "host", ((1, 2, 2),))))
    logical = np.array([bits(x) for x in (1.0, 2.0, 3.0, 4.0)], dtype=np.uint64)
    good = fragment_contents(m, logical)
    assert [w.tolist() for w in good] == [[bits(1.0), bits(3.0)], [bits(2.0), bits(4.0)]]
    assert check_shard_map(m, PSPAN, logical, good) == []
    swapped = [good[0][::-1], good[1]]      # same words, same bytes, wrong places
    (d,) = check_shard_map(m, PSPAN, logical, swapped)
    assert d.code == "shard-decode-mismatch"
    assert d.notes == ("words that differ: 0, 2",
                       "first: word 0 is 0x4008000000000000, the state holds 0x3FF0000000000000")


def test_replicas_are_read_only_versioned_and_never_a_second_owner():
    whole = ((0, 1, 4),)
    mirrors = ShardMap(region(), (Fragment(0, "host", whole), Fragment(1, "host", whole, "persistent", False, 3)))
    assert check_shard_map(mirrors) == []
    writable = ShardMap(region(), (Fragment(0, "host", whole), Fragment(1, "host", whole, "persistent", True, 3)))
    assert [d.code for d in check_shard_map(writable)] == ["shard-replica-not-read-only"]
    unversioned = ShardMap(region(), (Fragment(0, "host", whole), Fragment(1, "host", whole, "update", False)))
    assert [d.code for d in check_shard_map(unversioned)] == ["shard-replica-unversioned"]
    outside = ShardMap(region(), (Fragment(0, "host", ((0, 1, 5),)),))
    assert [d.code for d in check_shard_map(outside)] == ["shard-coverage-outside"]


def test_shared_word_listed_twice_is_duplicated_coverage():
    with pytest.raises(CompileError) as err:
        plan(deployment(4, kind="adam", partitioning=part(optimizer_state=Shard(), words_per_coordinate=2,
                                                          shared_state=(4, 5, 5))))
    (d,) = err.value.diagnostics
    assert (d.code, str(d.span)) == ("shard-coverage-duplicated", "spec.alpha:30:28")
    assert d.notes[0] == "words held twice: 5"


def test_underclaimed_state_is_missing_coverage():
    with pytest.raises(CompileError) as err:
        plan(deployment(4, kind="adam", partitioning=part(optimizer_state=Shard(), words_per_coordinate=1,
                                                          shared_state=(4, 5))))
    (d,) = err.value.diagnostics
    assert d.code == "shard-coverage-missing" and d.notes == ("words without an owner: 2, 3",)


def test_planned_maps_decode_to_the_initial_state():
    for flags in ((True, True, True), (True, False, False), (False, True, False)):
        dep = deployment(5, k=7, kind="adam", form="loop",
                         partitioning=adam_partitioning(7, *map(placed, flags)))
        for m in learner_shard_maps(dep):
            logical = (dep.learner.initial if m.region.field == "parameters" else dep.learner.initial_state).as_array()
            assert check_shard_map(m, PSPAN, logical, fragment_contents(m, logical)) == []


@pytest.mark.parametrize("n", [1, 3, 4, 7])
def test_every_owner_writes_a_contiguous_block_of_a_replicated_region(n):
    """A replicated region is held whole by every owner; owner o is the authority of the
    words [o c, (o + 1) c), c = ceil(W / n), the words its checkpoint shard holds, and mirrors
    the rest. The shared words of a partitioned state keep one authority, owner 0."""
    k = 7
    for opt in (False, True):  # everything replicated; the state partitioned, the parameters not
        p = plan(deployment(n, k=k, kind="adam", form="loop",
                            partitioning=adam_partitioning(k, optimizer_state=Shard(), parameters=Replicate(),
                                                           gradients=Replicate()) if opt else None))
        maps = {m.region.field: m for m in p.shard_maps}
        for field in ("parameters",) if opt else ("parameters", "state"):
            m = maps[field]
            words, c = m.region.domain, -(-m.region.domain // n)
            for o in range(n):
                block = list(range(min(o * c, words), min((o + 1) * c, words)))
                assert [x for f in m.of(o) if f.mutable for x in f.positions().tolist()] == block
                mirrored = [x for f in m.of(o) if not f.mutable for x in f.positions().tolist()]
                assert sorted(block + mirrored) == list(range(words)), (field, o)
                assert all(f.mirrors == m.region.version and f.lifetime == "persistent"
                           for f in m.of(o) if not f.mutable)
            assert check_shard_map(m) == []
        if opt:
            shared = [f for f in maps["state"].fragments if f.mutable and 2 * k in f.positions()]
            assert [f.owner for f in shared] == [0]


# ----------------------------------------------------------------------------- selection assembly

def test_selection_assembly_is_exact_and_refuses_overlap_and_gaps():
    vec = np.array([bits(x) for x in (0.1, -2.5, 3e-310, 7.0, -0.0)], dtype=np.uint64)
    offers = offers_of(vec, 3)
    out, diags = assemble(5, offers)
    assert diags == [] and out.tolist() == vec.tolist()
    # order of offers does not matter: selection has no arithmetic
    out2, _ = assemble(5, list(reversed(offers)))
    assert out2.tolist() == vec.tolist()
    overlap = offers + [Offer(2, np.array([3]), vec[3:4])]
    out, diags = assemble(5, overlap, PSPAN)
    assert out is None and [d.code for d in diags] == ["data-parallel-assembly-overlap"]
    assert diags[0].notes == ("coordinate 3 offered by owners 0, 2",)
    out, diags = assemble(5, offers[:2], PSPAN)
    assert out is None and [d.code for d in diags] == ["data-parallel-assembly-coverage"]
    assert diags[0].notes == ("coordinates: 2",)


# ----------------------------------------------------------------------------- memory laws

def test_persistent_bytes_per_owner_for_four_owners():
    k = 6
    everything = plan(deployment(4, k=k, kind="adam", partitioning=adam_partitioning(k)))
    # owner o holds its coordinates' parameter, two moments each, and the two shared powers
    assert [o.persistent_bytes for o in everything.owners] == [8 * (2 + 4 + 2), 8 * (2 + 4 + 2),
                                                               8 * (1 + 2 + 2), 8 * (1 + 2 + 2)]
    replicated = plan(deployment(4, k=k, kind="adam"))
    assert [o.persistent_bytes for o in replicated.owners] == [8 * (6 + 14)] * 4
    state_only = plan(deployment(4, k=k, kind="adam",
                                 partitioning=adam_partitioning(k, parameters=Replicate(), gradients=Replicate())))
    assert [o.persistent_bytes for o in state_only.owners] == [8 * (6 + 6), 8 * (6 + 6), 8 * (6 + 4), 8 * (6 + 4)]
    grads_only = plan(deployment(4, k=k, kind="adam",
                                 partitioning=adam_partitioning(k, optimizer_state=Replicate(),
                                                                parameters=Replicate())))
    assert [o.persistent_bytes for o in grads_only.owners] == [8 * 20] * 4   # gradients hold no state
    momentum = plan(deployment(4, k=k, kind="momentum",
                               partitioning=part(optimizer_state=Shard(), parameters=Shard(), words_per_coordinate=1)))
    assert [o.persistent_bytes for o in momentum.owners] == [32, 32, 16, 16]


def test_the_read_replica_counts_toward_peak_never_toward_persistent_state():
    k = 6
    with_replica = plan(deployment(4, k=k, kind="adam", partitioning=adam_partitioning(k)))
    without = plan(deployment(4, k=k, kind="adam", partitioning=adam_partitioning(k, parameters=Replicate())))
    for o in range(4):
        a, b = with_replica.owners[o].bytes, without.owners[o].bytes
        assert a.replica == 8 * k and b.replica == 0
        assert a.persistent == b.persistent - 8 * (k - (2 if o < 2 else 1))
        assert a.peak == a.persistent + a.replica + a.registers + a.scratch
    # registers: the hub of a 4-owner star has 7 registers of k + 1 words, in 3 slots (its
    # own sum, the one received and their combination; each slot a frame buffer of 8 header
    # words, k + 1 words, a checksum and a 4-word tag); a worker's two share one slot (its
    # sum is sent before the total arrives)
    star = plan(deployment(4, k=k, kind="adam"))
    assert [len(p.slot) for p in (star.owners[0].registers, star.owners[3].registers)] == [7, 2]
    assert star.owners[0].bytes.registers == 3 * 8 * (8 + k + 1 + 1 + 4)
    assert star.owners[3].bytes.registers == 8 * (8 + k + 1 + 1 + 4)
    # the contribution buffer: k words at an owner of two or more samples
    shares = star.deployment.learner.samples.shares
    assert [o.bytes.scratch for o in star.owners] == [8 * k if s >= 2 else 0 for s in shares]


@pytest.mark.parametrize("n,k", [(4, 6), (7, 2), (3, 10)])
def test_shard_maps_hold_the_words_the_oracle_selects(n, k):
    from alphac.oracle.layout import param_coordinates, state_offsets

    for flags in ((True, True, True), (True, False, False), (False, True, True)):
        dep = deployment(n, k=k, kind="adam",
                         partitioning=adam_partitioning(k, *map(placed, flags)))
        p = plan(dep)
        params, state = p.shard_maps
        for o in range(n):
            held = lambda m: sorted(x for f in m.fragments if f.owner == o and f.lifetime == "persistent"  # noqa: E731
                                    for x in f.positions().tolist())
            assert held(params) == param_coordinates(dep, o).tolist()
            assert held(state) == state_offsets(dep, o).tolist()
            assert p.owners[o].persistent_bytes == 8 * (len(param_coordinates(dep, o)) + len(state_offsets(dep, o)))

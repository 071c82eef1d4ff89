"""Each owner reports the words it holds: all of them when replicated, its coordinates'
(i mod n) under partitioning; the logical state is the same for every layout."""

from __future__ import annotations

import hashlib
import struct

import pytest

from alphac.ir.nodes import Hierarchy, Partitioning, Shard
from alphac.oracle import Refusal, evaluate

from test_oracle_learners import gate


def sha(params, state) -> str:
    words = list(params) + list(state)
    return hashlib.sha256(struct.pack(f"<{len(words)}Q", *words)).hexdigest()


ADAM_STATE = Partitioning(optimizer_state=Shard(), words_per_coordinate=2, shared_state=(4, 5))


def test_replicated_owners_hold_every_word_and_the_same_digest():
    r = evaluate(gate("adam", updates=2))
    assert len(r.params) == 2 and len(r.state) == 6
    for o in r.owners:
        assert (o.params, o.state) == (r.params, r.state)
        assert o.digest == sha(r.params, r.state)
    assert [(o.owner, o.role, o.target) for o in r.owners] == [
        (0, "coordinator", "x86_64"), (1, "worker", "aarch64"),
        (2, "worker", "x86_64"), (3, "worker", "aarch64")]


def test_partitioned_optimizer_state_selects_each_owners_coordinates():
    full = evaluate(gate("adam", updates=2))
    part = evaluate(gate("adam", updates=2, partitioning=ADAM_STATE))
    assert (part.params, part.state) == (full.params, full.state)
    m = full.state  # m1[0], m1[1], m2[0], m2[1], p1, p2
    want = {0: (m[0], m[2], m[4], m[5]), 1: (m[1], m[3], m[4], m[5]),
            2: (m[4], m[5]), 3: (m[4], m[5])}
    for o in part.owners:
        assert o.params == full.params
        assert o.state == want[o.owner]
        assert o.digest == sha(full.params, want[o.owner])
    assert len({o.digest for o in part.owners}) == 3


def test_partitioned_parameters_select_coordinates_too():
    p = Partitioning(optimizer_state=Shard(), parameters=Shard(), words_per_coordinate=1)
    full = evaluate(gate("momentum", topology=Hierarchy(2), updates=3))
    part = evaluate(gate("momentum", topology=Hierarchy(2), updates=3, partitioning=p))
    assert (part.params, part.state) == (full.params, full.state)
    held = [(o.params, o.state) for o in part.owners]
    assert held == [((full.params[0],), (full.state[0],)), ((full.params[1],), (full.state[1],)),
                    ((), ()), ((), ())]
    assert part.owners[3].digest == hashlib.sha256(b"").hexdigest()


def test_an_overclaimed_partitioning_is_refused():
    bad = Partitioning(optimizer_state=Shard(), words_per_coordinate=3, shared_state=(4, 5))
    with pytest.raises(Refusal) as info:
        evaluate(gate("adam", partitioning=bad))
    assert info.value.code == "oracle-inconsistent"
    assert "claims 3 words per coordinate" in info.value.detail

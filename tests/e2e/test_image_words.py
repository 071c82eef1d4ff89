"""An executable embeds only the words its role's owners hold: each owner's initial
parameter and state words (the words every owner holds alike once, and each owner's own)
and its own sample rows, never another role's. Read from the executable's bytes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from alphac import driver
from alphac.ir import nodes as n
from alphac.testing import session

SPECS = Path(__file__).resolve().parents[2] / "specs"
# distinctive words: no code or other data of an executable holds these bit patterns
PARAM, STATE, SAMPLE = 0x4011223344556600, 0x4022334455667700, 0x4033445566778800


def marked(dep: n.Deployment, **flags) -> n.Deployment:
    """`dep` with every initial word and sample word replaced by a distinctive one."""
    L = dep.learner
    rows = L.samples.words
    samples = dataclasses.replace(L.samples, words=(SAMPLE + np.arange(rows.size, dtype=np.uint64)).reshape(rows.shape))
    learner = dataclasses.replace(L, initial=n.Words(tuple(PARAM + i for i in range(L.k))),
                                  initial_state=n.Words(tuple(STATE + j for j in range(L.m))), samples=samples)
    part = dataclasses.replace(dep.partitioning, **flags)
    return dataclasses.replace(dep, learner=learner, partitioning=part, placement=("x86_64",) * dep.owners)


def occurrences(data: bytes, word: int) -> int:
    return data.count(int(word).to_bytes(8, "little"))


def executable(key: str, dep, role: str) -> bytes:
    return session.built(key, dep)[(role, "x86_64")].read_bytes()


@pytest.mark.parametrize("flags", [{}, {"block_words": 2}])
def test_a_role_embeds_its_owners_words_once_and_no_other_roles(flags):
    dep = marked(session.deployment(f"{SPECS}/lsq_adam_partitioned_hierarchy7.alpha"), **flags)
    key = f"image-words-{flags.get('block_words', 1)}"
    layout = driver.plan(dep).layout
    k, m = dep.learner.k, dep.learner.m
    rows = dep.learner.samples
    for role in dep.roles:
        data = executable(key, dep, role.name)
        mine = set(role.owners)
        for i in range(k):  # a parameter: in the role that holds it, once
            assert occurrences(data, PARAM + i) == (layout.owner_of(i) in mine), (role.name, i)
        for j in range(m):  # a state word: shared ones in every role, others where held
            held = any(j in layout.state_held(o) for o in mine)
            assert occurrences(data, STATE + j) == held, (role.name, j)
        for o in range(dep.owners):  # a sample row: only in its owner's role
            for word in rows.owner_rows(o).ravel():
                assert occurrences(data, word) == (o in mine), (role.name, o)
    # the coordinator (owner 0) holds coordinate 0 (or, in blocks of 2, 0 and 1) of k = 5
    coordinator = executable(key, dep, "coordinator")
    assert [occurrences(coordinator, PARAM + i) for i in range(k)] == \
        ([1, 0, 0, 0, 0] if not flags else [1, 1, 0, 0, 0])


def test_a_replicated_role_embeds_every_initial_word_once():
    dep = marked(session.deployment(f"{SPECS}/lsq_adam_hierarchy.alpha"))
    data = executable("image-words-replicated", dep, "worker")  # owners 1, 2, 3
    assert [occurrences(data, PARAM + i) for i in range(dep.learner.k)] == [1] * dep.learner.k
    assert [occurrences(data, STATE + j) for j in range(dep.learner.m)] == [1] * dep.learner.m
    assert occurrences(data, dep.learner.samples.owner_rows(0).ravel()[0]) == 0  # the coordinator's

"""Coordinate blocks (`Partitioning.block_words` = B: block b of B coordinates belongs to
owner b mod n) end to end: for B = 1, 2, 3, 7, k and k + 5 and every partitioning, each
owner (x86-64 and AArch64 under qemu) holds exactly the oracle's words for its blocks, and
the words every owner holds, assembled, are the replicated learner's bit for bit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from alphac.ir.nodes import Replicate, Shard
from alphac.testing import session
from test_partitioned import _assemble, _launch, _replicated, _replicated_words, needs_qemu

SPECS = Path(__file__).resolve().parents[2] / "specs"
pytestmark = needs_qemu

FLAGS = {"state": dict(optimizer_state=Shard(), parameters=Replicate(), gradients=Replicate()),
         "parameters": dict(optimizer_state=Replicate(), parameters=Shard(), gradients=Replicate()),
         "gradients": dict(optimizer_state=Replicate(), parameters=Replicate(), gradients=Shard()),
         "all": dict(optimizer_state=Shard(), parameters=Shard(), gradients=Shard())}


SPEC_NAMES = ("lsq_adam_partitioned_hierarchy7", "lsq_momentum_partitioned_star")
BLOCKS = ("1", "2", "3", "7", "k", "k+5")


def _blocked_runs(spec: str, flags: str, blocks: tuple[str, ...]) -> None:
    dep = session.deployment(f"{SPECS}/{spec}.alpha")
    k, nn = dep.learner.k, dep.owners
    want = _replicated_words(f"{spec}-replicated", _replicated(dep))
    for block in (k + int(b[2:] or 0) if b.startswith("k") else int(b) for b in blocks):
        blocked = dataclasses.replace(dep, partitioning=dataclasses.replace(
            dep.partitioning, block_words=block, **FLAGS[flags]))
        run = _launch(f"{spec}-{flags}-b{block}", blocked)  # every owner matches the oracle
        for o in range(nn):
            out = run.outputs[o]
            coords = tuple(i for i in range(k) if (i // block) % nn == o)
            assert out.param_coords == (coords if blocked.partitioning.parameters.sharded else tuple(range(k)))
        assert _assemble(blocked, run) == want, (flags, block)


# by default: every block size fully partitioned, and B = 3 (uneven blocks) under each single
# partitioning; every block size under every partitioning is exhaustive
@pytest.mark.parametrize("spec", SPEC_NAMES)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_blocked_owners_equal_the_oracle_and_the_replicated_learner(spec, flags):
    _blocked_runs(spec, flags, BLOCKS if flags == "all" else ("3",))


@pytest.mark.exhaustive
@pytest.mark.parametrize("spec", SPEC_NAMES)
@pytest.mark.parametrize("flags", [f for f in FLAGS if f != "all"])
def test_every_block_size_under_every_partitioning(spec, flags):
    _blocked_runs(spec, flags, tuple(b for b in BLOCKS if b != "3"))

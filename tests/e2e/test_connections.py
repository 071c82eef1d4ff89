"""Connections only to protocol peers: every owner connects to and accepts from exactly the
owners its update, finish and checkpoint ops exchange frames with (a partitioned owner's
`slice` for owner t names t without talking to it), counted from the owners' connections
reports against the plan, on a star, a hierarchy and partitioned learners."""

from __future__ import annotations

from pathlib import Path

import pytest

from alphac.testing import session
from alphac.plan.protocol import Op, OwnerProtocol, peers
from alphac.plan.tree import hierarchy_children

SPECS = Path(__file__).resolve().parents[2] / "specs"


def _talks_to(proto: OwnerProtocol) -> set[int]:
    """The owners a protocol sends frames to or receives them from (read off the op kinds
    here, not through protocol.peers)."""
    moving = ("send", "recv", "recv-add-left", "recv-add-right", "recv-update", "digest-send",
              "digest-recv", "publish-send", "publish-recv", "ckpt-send", "ckpt-recv")
    return {op.peer for op in proto.update_ops + proto.finish_ops + proto.checkpoint_ops
            if op.kind in moving}


def test_a_slice_names_an_owner_it_does_not_talk_to():
    proto = OwnerProtocol(3, (Op("local", dst=0), Op("slice", peer=1, dst=1, a=0),
                              Op("slice", peer=2, dst=2, a=0), Op("send", peer=0, a=1)),
                          (Op("digest-send", peer=0),), (), (Op("ckpt-send", peer=4),))
    assert peers(proto) == (0, 4)


def _expected(spec: str, owner: int, n: int) -> set[int]:
    """Who owner talks to in each of these deployments, from its topology alone."""
    if "star" in spec:
        return set(range(1, n)) if owner == 0 else {0}
    parent = {c: o for o in range(n) for c in hierarchy_children(o, n, 2)}
    return set(hierarchy_children(owner, n, 2)) | ({parent[owner]} if owner in parent else set())


@pytest.mark.parametrize("spec", ["lsq_plain_star", "lsq_adam_hierarchy", "lsq_momentum_partitioned_star",
                                  "lsq_adam_partitioned_hierarchy7"])
def test_each_owner_connects_to_its_protocol_peers_only(spec):
    dep = session.deployment(str(SPECS / f"{spec}.alpha"))
    key = f"connections_{spec}"
    plan = session.plan(key, dep)
    run = session.run(key, dep, updates=1, transport="tcp")
    assert run.result.ok, [oc.stderr for oc in run.result.outcomes]
    for owner in range(dep.owners):
        got = [c.peer for c in run.connections[owner]]
        want = _talks_to(plan.owners[owner].protocol)
        assert want == _expected(spec, owner, dep.owners), owner
        assert got == sorted(want), (owner, got)
    counts = [len(run.connections[o]) for o in range(dep.owners)]
    assert sum(counts) == 2 * (dep.owners - 1)  # a tree: one connection per edge, seen from both ends


# -- what the peers file allows, pair by pair ---------------------------------------------------

STAR = str(SPECS / "lsq_plain_star.alpha")


def _star_run(transports):
    dep = session.deployment(STAR)
    return session.run("connections_star", dep, updates=1, transport=transports, timeout_ms=3000,
                       deadline_s=30)


def test_each_pair_uses_shared_memory_only_where_both_lines_allow_it():
    run = _star_run(["shm", "tcp", "shm-only", "shm"])
    assert run.result.ok, [oc.stderr for oc in run.result.outcomes]
    got = {o: [(c.peer, c.transport, c.why) for c in run.connections[o]] for o in range(4)}
    assert got == {
        0: [(1, "tcp", "the peers file says tcp for owner 1"), (2, "shm", ""), (3, "shm", "")],
        1: [(0, "tcp", "the peers file says tcp for owner 1")],
        2: [(0, "shm", "")],
        3: [(0, "shm", "")],
    }


def test_shm_only_with_a_pair_that_cannot_refuses_by_name():
    run = _star_run(["shm-only", "tcp", "shm", "shm"])
    refusals = {oc.owner: oc.refusal() for oc in run.result.outcomes}
    why = "the peers file says tcp for owner 1), and the peers file says shm-only for owner 0"
    assert refusals[1] == f"refused: transport-unavailable: owner 1: no shared memory with owner 0 ({why}"
    assert refusals[0] == f"refused: transport-unavailable: owner 0: no shared memory with owner 1 ({why}"
    assert not run.committed and all(not oc.ok for oc in run.result.outcomes)

"""A symbolic interpreter of projected protocols, for the planner's tests: every owner runs
its op list with rendezvous sends (a send completes only when the peer is at the matching
receive), registers hold symbolic values, and the run must finish without a deadlock."""

from __future__ import annotations

from alphac.plan.ops import KIND
from alphac.plan.protocol import OwnerProtocol


class Deadlock(AssertionError):
    pass


def simulate(protocols: tuple[OwnerProtocol, ...], words: dict | None = None, starts=None) -> dict:
    """Run every owner's update ops, then its finish ops. Returns, per owner, the value its
    update read (`update`/`update-owned`), its read replica, what it installed, and the
    number of frames it sent and received. `starts[o]`: the global index of owner o's first
    sample, which a `sample-block` needs to name its samples x<i>."""
    n = len(protocols)
    progs = [list(p.update_ops) + list(p.finish_ops) for p in protocols]
    pc = [0] * n
    regs: list[dict[int, object]] = [dict() for _ in range(n)]
    out = {o: {"update": None, "replica": None, "installed": None, "sent": 0, "received": 0,
               "released": False} for o in range(n)}

    def step_local(o: int, op) -> None:
        r = regs[o]
        if op.kind == "local":
            r[op.dst] = f"c{o}"
        elif op.kind == "sample-block":
            r[op.dst] = sample_tree_expr(starts[o] + op.a, starts[o] + op.a + op.b)
        elif op.kind in ("combine", "recv-add-left", "recv-add-right"):  # (after the receive)
            r[op.dst] = f"({r[op.a]}+{r[op.b]})"
        elif op.kind == "slice":
            r[op.dst] = f"{r[op.a]}@{op.peer}"
        elif op.kind == "offer":
            r[op.dst] = frozenset({(o, op.a)})
        elif op.kind == "select":
            a, b = r[op.a], r[op.b]
            assert not (a & b), f"owner {o}: selection of overlapping offers"
            r[op.dst] = a | b
        elif op.kind in ("update", "update-owned", "recv-update"):
            out[o]["update"] = r[op.a]
        elif op.kind == "replica-install":
            out[o]["replica"] = r[op.a]
        elif op.kind == "replica-release":
            out[o]["released"] = True
        elif op.kind == "install":
            out[o]["installed"] = (r[op.a], op.b)
        elif op.kind in ("stage", "commit", "finalize"):
            out[o].setdefault("publication", []).append(op.kind)
        else:
            raise AssertionError(f"unknown local op {op.kind}")

    pairs = {"send", "digest-send", "publish-send"}
    receives = {k.name for k in KIND.values() if k.matches in pairs}
    done = 0
    while True:
        progressed = False
        for o in range(n):
            while pc[o] < len(progs[o]):
                op = progs[o][pc[o]]
                if op.kind in pairs:
                    p = op.peer
                    if pc[p] >= len(progs[p]):
                        break
                    peer_op = progs[p][pc[p]]
                    if KIND[peer_op.kind].matches != op.kind or peer_op.peer != o:
                        break
                    if op.kind == "send":  # into the register the receive fills
                        regs[p][getattr(peer_op, peer_op.spec.moved.word)] = regs[o][op.a]
                    out[o]["sent"] += 1
                    out[p]["received"] += 1
                    if peer_op.kind in ("recv-add-left", "recv-add-right", "recv-update"):
                        step_local(p, peer_op)  # what a receive with its reader does then
                    pc[o] += 1
                    pc[p] += 1
                    progressed = True
                    continue
                if op.kind in receives:
                    break  # waits for the sender's turn
                step_local(o, op)
                pc[o] += 1
                progressed = True
        if all(pc[o] == len(progs[o]) for o in range(n)):
            return out
        if not progressed:
            stuck = {o: progs[o][pc[o]] for o in range(n) if pc[o] < len(progs[o])}
            raise Deadlock(f"deadlock: {stuck}")


def tree_expr(node, suffix: str = "") -> str:
    """The tree's sum as the interpreter spells it (iteratively: trees may be deep)."""
    from alphac.plan.tree import postorder
    from alphac.ir.nodes import TreeLeaf

    val: dict[int, str] = {}
    for x in postorder(node):
        if isinstance(x, TreeLeaf):
            val[id(x)] = f"c{x.owner}{suffix}"
        else:
            val[id(x)] = f"({val.pop(id(x.left))}+{val.pop(id(x.right))})"
    return val[id(node)]


def sample_tree_expr(lo: int, hi: int) -> str:
    """The sample tree's sum over samples lo .. hi-1 (lo aligned to the block's height, or
    hi = N), from its definition: level by level, nodes 2j and 2j+1 added, a last odd node
    moving up unchanged."""
    level = [f"x{i}" for i in range(lo, hi)]
    while len(level) > 1:
        level = [f"({level[i]}+{level[i + 1]})" if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


def test_simulator_detects_a_deadlock():
    from alphac.plan.protocol import Op

    a = OwnerProtocol(0, (Op("recv", peer=1, dst=1), Op("send", peer=1, a=0)), ())
    b = OwnerProtocol(1, (Op("recv", peer=0, dst=1), Op("send", peer=0, a=0)), ())
    try:
        simulate((a, b))
    except Deadlock:
        return
    raise AssertionError("a receive-receive cycle must deadlock")

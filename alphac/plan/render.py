"""A plan as text, as JSON data (stable keys, see docs/plan.md) and as Graphviz dot."""

from __future__ import annotations

from alphac.ir import nodes as ir
from alphac.ir.words import to_float
from alphac.plan.contract import topology_name
from alphac.plan.memory import computes_ahead
from alphac.plan.phases import branch_numbers, value_name
from alphac.plan.ops import Op, render
from alphac.plan.registers import sent_words
from alphac.plan.storage import word_counts

JSON_FORMAT = "alphac-plan-2"  # the envelope of `alphac plan --json` (commands/report.py)


def op_text(op: Op) -> str:
    """An op as its text in the op table (`alphac.plan.ops.render`)."""
    return render(op)


def op_data(op: Op) -> dict:
    return {"kind": op.kind, "peer": op.peer, "dst": op.dst, "a": op.a, "b": op.b}


def tree_data(nodes) -> list[dict]:
    numbers = branch_numbers(nodes)
    index: dict[int, int] = {}
    out = []
    for node in nodes:
        if isinstance(node, ir.TreeLeaf):
            out.append({"id": len(out), "name": f"c{node.owner}", "kind": "leaf", "owner": node.owner})
        else:
            out.append({"id": len(out), "name": value_name(node, numbers), "kind": "branch",
                        "owner": node.owner, "left": index.pop(id(node.left)),
                        "right": index.pop(id(node.right))})
        index[id(node)] = len(out) - 1
    return out


def sample_tree_data(tree) -> list[dict]:
    """The placed sample tree's nodes in post-order (blocks and the branches above them),
    children by id; a branch is also named b<j>, its number among the branches."""
    index: dict[int, int] = {}
    out = []
    branches = 0
    for node in tree.nodes:
        item = {"id": len(out), "name": node.name, "kind": "block" if node.is_block else "branch",
                "owner": node.owner, "lo": node.lo, "hi": node.hi}
        if not node.is_block:
            item.update(branch=f"b{branches}", left=index.pop(id(node.left)), right=index.pop(id(node.right)))
            branches += 1
        out.append(item)
        index[id(node)] = item["id"]
    return out


def sample_tree_json(plan) -> dict | None:
    tree = plan.sample_tree
    if tree is None:
        return None
    return {"samples": tree.samples, "height": tree.height, "nodes": sample_tree_data(tree)}


def transfer_data(t) -> dict:
    return {"step": t.step, "sender": t.sender, "receiver": t.receiver, "value": t.value, "branch": t.branch}


def plan_json(plan) -> dict:
    dep = plan.deployment
    part = dep.partitioning
    return {
        "format": JSON_FORMAT,
        "deployment": dep.name,
        "learner": {"name": dep.learner.name, "k": dep.learner.k, "s": dep.learner.s, "m": dep.learner.m,
                    "shape": dep.learner.shape, "region": dep.learner.region},
        "owners": dep.owners,
        "topology": topology_name(dep.topology),
        "protocol": plan.protocol_hex,
        "combine_placement": dep.combine_placement.value,
        **({"consistency": {"kind": dep.consistency.kind.value, "value": dep.consistency.value,
                            "overlap": computes_ahead(dep, plan.layout) > 0,
                            **({"outer": {"kind": "momentum", "rate": f"{dep.consistency.outer.rate:016x}",
                                          "momentum": f"{dep.consistency.outer.momentum:016x}"}}
                               if dep.consistency.outer is not None else {})}}
           if dep.consistency.kind is not ir.ConsistencyKind.SYNCHRONOUS else {}),
        "partitioning": {"optimizer_state": part.optimizer_state.sharded, "parameters": part.parameters.sharded,
                         "gradients": part.gradients.sharded, "words_per_coordinate": part.words_per_coordinate,
                         "shared_state": list(part.shared_state), "block_words": part.block_words},
        "tree": {"depth": plan.shape.depth, "leaf_order": list(plan.shape.leaf_order),
                 "nodes": tree_data(plan.shape.nodes)},
        "sample_tree": sample_tree_json(plan),
        "reduce": [transfer_data(t) for t in plan.reduce],
        "replicate": [transfer_data(t) for t in plan.replicate],
        "deliveries": [{"kind": d.kind, "target": d.target} for d in plan.deliveries],
        "contract": plan.contract.as_json(),
        "shard_maps": [{
            "schema": m.region.schema, "field": m.region.field, "domain": m.region.domain,
            "representation": m.region.representation, "version": m.region.version,
            "fragments": [{"owner": f.owner, "address_space": f.address_space,
                           "layout": [list(r) for r in f.layout], "lifetime": f.lifetime,
                           "mutable": f.mutable, "mirrors": f.mirrors} for f in m.fragments],
        } for m in plan.shard_maps],
        "per_owner": [{
            "owner": o.owner, "role": o.role, "target": o.target,
            "persistent_bytes": o.persistent_bytes, "peak_bytes": o.peak_bytes,
            "bytes": {"parameters": o.bytes.parameters, "state": o.bytes.state,
                      "replica": o.bytes.replica, "registers": o.bytes.registers,
                      "scratch": o.bytes.scratch, "samples": o.bytes.samples},
            "sent_words": sent_words(o.protocol, word_counts(dep)[0]),
            "update_ops": [op_data(op) for op in o.protocol.update_ops],
            "finish_ops": [op_data(op) for op in o.protocol.finish_ops],
        } for o in plan.owners],
    }


def _layout_text(f) -> str:
    if not f.layout:
        return "(empty)"
    return " ".join(f"{s}" if c == 1 else (f"{s}..{s + c - 1}" if st == 1 else f"{s}+{st}*[0,{c})")
                    for s, st, c in f.layout)


def partitioning_text(part: ir.Partitioning) -> str:
    """What is partitioned, and the coordinate blocks that say who holds what."""
    parts = [name for name, region in (("parameters", part.parameters),
                                       ("optimizer state", part.optimizer_state),
                                       ("gradients", part.gradients)) if region.sharded]
    what = "partitioned " + ", ".join(parts) if parts else "replicated"
    if part.optimizer_state.sharded or part.words_per_coordinate:
        shared = ",".join(str(j) for j in part.shared_state) or "none"
        what += f" ({part.words_per_coordinate} state words per coordinate, shared {shared})"
    B = part.block_words
    return (f"partitioning: {what}; coordinate blocks of {B} word{'s' if B != 1 else ''}, "
            "block b at owner b mod n")


def placement_text(placement: ir.CombinePlacement) -> str:
    """Where the combine tree's branches run."""
    if placement is ir.CombinePlacement.BLOCK_OWNERS:
        return ("combine placement: CombineAtBlockOwners, the whole tree for block b at block b's "
                "owner (the phases below are the tree's; the owners' ops are the block placement's)")
    return "combine placement: CombineAtBranchOwners, each branch at the owner the tree names"


def _traffic(words: int, H: int) -> str:
    """An owner's words sent per update; under local steps H, also per local update."""
    if not H:
        return f"{words} words per update"
    return f"{words} words per update of {H} local updates ({words / H:g} per local update)"


def plan_text(plan) -> str:
    dep = plan.deployment
    lines = [f"plan {dep.name}: {dep.owners} owners, {topology_name(dep.topology)}, "
             f"protocol {plan.protocol_hex}", partitioning_text(dep.partitioning),
             placement_text(dep.combine_placement)]
    if dep.consistency.staleness:
        S = dep.consistency.staleness
        reads = ", ".join(f"{u} reads {max(u - S, 0)}" for u in range(min(dep.updates, S + 2)))
        lines.append(f"consistency: fixed staleness {S}: the contributions to update u read parameter "
                     f"version max(u - {S}, 0) ({reads}{', ...' if dep.updates > S + 2 else ''})")
        lines.append("overlap: " + ("each owner computes the contributions to update u + 1 while update u "
                                    "combines and updates" if computes_ahead(dep, plan.layout) else
                                    "none (built for replicated parameters and one local sum per update): "
                                    "each update's contributions are computed as it starts"))
    if dep.consistency.bound:
        S = dep.consistency.bound
        lines.append(f"consistency: bounded staleness {S}: each owner's contributions to update u read the "
                     f"newest parameter version it has when it starts them, one of max(u - {S}, 0) .. u; "
                     "each owner's output records which, and the oracle replays that schedule")
        lines.append(f"overlap: each owner computes the contributions of up to {S} updates ahead on a thread "
                     "while the combines and updates run; a contribution waits only for version u - "
                     f"{S}" if computes_ahead(dep, plan.layout) else
                     "overlap: none (built for replicated parameters and one local sum per update)")
    H = dep.consistency.local_steps
    if H:
        lines.append(f"consistency: local steps {H}: between combines each owner applies {H} updates on its "
                     "own samples alone; the tree combines the deltas (x_o - v) * n_o of its parameters x_o "
                     "from the shared version v, weighted by its sample count n_o, and every owner sets "
                     f"v + sum / count: one combine per {H} local updates")
        if dep.consistency.outer is not None:
            o = dep.consistency.outer
            lines.append(f"outer update: momentum b := {to_float(o.momentum)!r} * b + mean, v := v + "
                         f"{to_float(o.rate)!r} * b (b kept by every owner alike, from +0.0)")
    if dep.learner.independent:
        lines.append(f"independent state: each owner applies its rule to its own region of "
                     f"{dep.learner.region} words from its own inputs; nothing is combined, and the "
                     "tree carries only publication and checkpoints")
    lines += _sample_tree_text(plan) if plan.sample_tree is not None else _tree_text(plan)
    lines.append(f"reduce phase ({len(plan.reduce)} transfers):")
    for t in plan.reduce:
        lines.append(f"  {t.step}: {t.sender} -> {t.receiver}  {t.value} into b{t.branch}")
    lines.append(f"replicate phase, CombineReplicateAll ({len(plan.replicate)} transfers):")
    for t in plan.replicate:
        lines.append(f"  {t.step}: {t.sender} -> {t.receiver}  {t.value}")
    if plan.deliveries not in ((plan.delivery,), ()):
        lines.append("reductions: " + ", ".join(str(d) for d in plan.deliveries))
    c = plan.contract
    lines.append(f"contract: {c.profile.format}, {c.profile.rounding}, subnormals {c.profile.subnormals}, "
                 f"{c.profile.exceptional}; relation {c.relation}; {len(c.ops)} ordered operations, "
                 f"order {c.order_digest[:16]}")
    lines.append("shard maps:")
    for m in plan.shard_maps:
        lines.append(f"  {m.region.schema}.{m.region.field}: {m.region.domain} words, "
                     f"{m.region.representation}, version {m.region.version}")
        for f in m.fragments:
            kind = "owner" if f.mutable else ("read replica" if f.lifetime == "update" else "mirror")
            ver = f" of version {f.mirrors}" if f.mirrors is not None else ""
            lines.append(f"    owner {f.owner} {f.address_space} {kind}{ver}: {_layout_text(f)}")
    lines.append("owners:")
    for o in plan.owners:
        b = o.bytes
        lines.append(f"  owner {o.owner} ({o.role or '-'}, {o.target or '-'}): persistent {o.persistent_bytes} B "
                     f"(parameters {b.parameters}, state {b.state}), peak {o.peak_bytes} B "
                     f"(replica {b.replica}, registers {b.registers}, scratch {b.scratch}); sends "
                     f"{_traffic(sent_words(o.protocol, word_counts(dep)[0]), H)}")
        lines.append("    per update: " + "; ".join(op_text(op) for op in o.protocol.update_ops))
        if o.protocol.finish_ops:
            lines.append("    before publishing: " + "; ".join(op_text(op) for op in o.protocol.finish_ops))
    return "\n".join(lines)


def _tree_text(plan) -> list[str]:
    numbers = branch_numbers(plan.shape.nodes)
    lines = [f"tree (depth {plan.shape.depth}; c<o> is owner o's contribution, b<j> the j-th branch):"]
    for node in plan.shape.nodes:
        if isinstance(node, ir.TreeBranch):
            lines.append(f"  {value_name(node, numbers)} at owner {node.owner} = "
                         f"{value_name(node.left, numbers)} + {value_name(node.right, numbers)}")
    if len(plan.shape.nodes) == 1:
        lines.append(f"  c{plan.tree.owner} (a single leaf)")
    return lines


def _sample_tree_text(plan) -> list[str]:
    tree = plan.sample_tree
    nodes = sample_tree_data(tree)
    lines = [f"sample tree over {tree.samples} samples (root height {tree.height}; s[lo,hi) covers "
             f"samples lo..hi-1, b<j> the j-th branch):"]
    for node in nodes:
        if node["kind"] == "block":
            first = node["lo"] - tree.starts[node["owner"]]
            lines.append(f"  {node['name']} at owner {node['owner']}: block of its samples "
                         f"{first}..{first + node['hi'] - node['lo'] - 1}")
        else:
            lines.append(f"  {node['branch']} = {node['name']} at owner {node['owner']} = "
                         f"{nodes[node['left']]['name']} + {nodes[node['right']]['name']}")
    children = {}
    for t in plan.replicate:
        children.setdefault(t.sender, []).append(t.receiver)
    lines.append(f"owner tree (delivers the total, carries publication and checkpoints), root "
                 f"{plan.tree.owner}:")
    lines += [f"  {o} -> {', '.join(map(str, cs))}" for o, cs in children.items()]
    return lines


def plan_dot(plan) -> str:
    """The combine tree: leaves as boxes, branches as ellipses labelled with their owner;
    an edge runs from each operand to the branch combining it (L, R)."""
    nodes = tree_data(plan.shape.nodes) if plan.sample_tree is None else sample_tree_data(plan.sample_tree)
    out = [f'digraph "{plan.deployment.name}" {{', "  rankdir=BT;",
           f'  label="{plan.deployment.name}: {topology_name(plan.deployment.topology)}, '
           f'protocol {plan.protocol_hex}";']
    for node in nodes:
        if node["kind"] != "branch":
            out.append(f'  n{node["id"]} [shape=box, label="{node["name"]}\\nowner {node["owner"]}"];')
        else:
            out.append(f'  n{node["id"]} [shape=ellipse, label="{node["name"]}\\nat {node["owner"]}"];')
    for node in nodes:
        if node["kind"] == "branch":
            for side in ("left", "right"):
                child = nodes[node[side]]
                style = "" if child["owner"] == node["owner"] else ", style=bold"
                out.append(f'  n{child["id"]} -> n{node["id"]} [label="{side[0].upper()}"{style}];')
    out.append("}")
    return "\n".join(out)

"""The planner's owner layout against the oracle's own derivation of who holds which words,
and the oracle's own combine tree against the planner's; the oracle imports nothing of the
planner."""

from __future__ import annotations

import ast
import itertools
import random
from pathlib import Path

import numpy as np
import pytest

from alphac.ir.nodes import (Checkpoint, Contract, Deployment, ExplicitTree, Hierarchy, Learner,
                             Partitioning, Program, Role, Samples, Shard, Star, TreeBranch, TreeLeaf, Words,
                             placed)
from alphac.oracle import layout as oracle_layout
from alphac.oracle import tree as oracle_tree
from alphac.plan import plan
from alphac.plan import protocol as plan_protocol
from alphac.plan import tree as plan_tree
from alphac.plan.layout import OwnerLayout, layout_of_deployment
from spec_sweep import every_deployment
from test_plan_support import adam_partitioning, deployment

ROOT = Path(__file__).resolve().parents[2]
FLAGS = list(itertools.product((False, True), repeat=3))  # optimizer_state, parameters, gradients


# ----------------------------------------------------------------------------- helpers

def bare(n: int, k: int, m: int, part: Partitioning) -> Deployment:
    """A deployment of a learner with k parameters and m state words: all the layout reads."""
    learner = Learner("bare", k, 1, m, Program(2 * k + 1, ()), Program(2 * k + m + 1, ()),
                      Words((0,) * k), Words((0,) * m), 0,
                      Samples(1, (0,) * n, np.zeros((0, 1), dtype=np.uint64)))
    return Deployment("bare", learner, n, Star(), part, (Role("all", tuple(range(n))),),
                      ("x86_64",) * n, 1, Contract(), Checkpoint())


def shared_choices(w: int, k: int) -> list[tuple[int, ...]]:
    """Shared offsets for a state of w*k per-coordinate words: none, at the end, at the
    start, interleaved, and one listed twice."""
    c = w * k
    out = [(), (c, c + 1), (0,), (c + 1, 0)]
    if c >= 2:
        out.append((1, c + 1, 3))  # with c + 3 words: offsets 1 and 3 sit among the blocks
    out.append((c, c))
    return out


def m_of(w: int, k: int, shared) -> int:
    return w * k + len(set(shared))


def assert_agrees(layout: OwnerLayout, dep: Deployment, owners=None) -> None:
    """The layout and the oracle's derivation give every owner the same words."""
    n = dep.owners
    owners = range(n) if owners is None else owners
    for o in owners:
        want_p = oracle_layout.param_coordinates(dep, o)
        want_s = oracle_layout.state_offsets(dep, o)
        assert layout.params_held(o).tolist() == want_p.tolist(), (dep.partitioning, o)
        assert layout.state_held(o).tolist() == want_s.tolist(), (dep.partitioning, o)
        assert layout.params_count(o) == len(want_p) and layout.state_count(o) == len(want_s)
        # coordinates are the held parameters once parameters are partitioned
        coords = oracle_layout.param_coordinates(
            bare(n, dep.learner.k, dep.learner.m,
                 Partitioning(parameters=Shard(), block_words=dep.partitioning.block_words)), o)
        assert layout.coordinates(o).tolist() == coords.tolist()
        assert layout.owned_count(o) == len(coords)
        assert all(layout.owner_of(int(i)) == o for i in coords[:64])
        if dep.partitioning.optimizer_state.sharded:
            # the per-coordinate words are block b's word for each coordinate, by rank
            per = layout.coordinate_state_offsets()
            k, w = layout.k, layout.w
            ranks = [b * k + int(i) for b in range(w) for i in coords]
            mine = sorted(set(want_s.tolist()) - set(dep.partitioning.shared_state))
            assert sorted(int(per[r]) for r in ranks) == mine
    if n >= 2 and owners == range(n):
        # what every owner holds alike
        alike = set(oracle_layout.state_offsets(dep, 0).tolist())
        for o in range(1, n):
            alike &= set(oracle_layout.state_offsets(dep, o).tolist())
        assert layout.replicated_state().tolist() == sorted(alike)


# ----------------------------------------------------------------------------- (a) layouts

def test_every_spec_plans_the_oracles_layout():
    deps = every_deployment()
    assert len(deps) >= 10
    partitioned = 0
    for name, dep in deps:
        p = plan(dep)
        assert p.layout == OwnerLayout.of(dep) == layout_of_deployment(dep), name
        partitioned += dep.partitioning.optimizer_state.sharded or dep.partitioning.parameters.sharded
        if dep.contract.profile.format == "binary32":
            # the layout is over words of two values, each the words of the oracle's values
            for o in range(dep.owners):
                assert p.layout.params_held(o).tolist() == np.unique(
                    oracle_layout.param_coordinates(dep, o) // 2).tolist(), (name, o)
                assert p.layout.state_held(o).tolist() == np.unique(
                    oracle_layout.state_offsets(dep, o) // 2).tolist(), (name, o)
            continue
        # an independent-state learner's block is its region
        assert p.layout.block_words == (dep.learner.region if dep.learner.independent
                                        else dep.partitioning.block_words), name
        assert_agrees(p.layout, dep)
    assert partitioned >= 2


# owner counts 5, 6, 8 and 9 are the exhaustive sweep's
@pytest.mark.parametrize("n", [n if n in (1, 2, 3, 4, 7) else pytest.param(n, marks=pytest.mark.exhaustive)
                               for n in range(1, 10)])
def test_constructed_layouts_agree_with_the_oracle(n):
    for k in list(range(8)) + [13, 29]:
        for w in range(4):
            for shared in shared_choices(w, k):
                m = m_of(w, k, shared)
                for opt, par, grad in FLAGS:
                    for block in (1, 2, 3, k + 5):
                        part = Partitioning(placed(par), placed(opt), placed(grad),
                                            words_per_coordinate=w, shared_state=shared,
                                            block_words=block)
                        dep = bare(n, k, m, part)
                        layout = OwnerLayout.of(dep)
                        assert (layout.k, layout.m, layout.n, layout.w) == (k, m, n, w)
                        assert layout.block_words == block
                        assert_agrees(layout, dep)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_layouts_of_coordinate_blocks_agree_with_the_oracle(n):
    for k in (0, 1, 5, 13):
        for block in (2, 3, k + 1, k + 5):
            for w in range(3):
                for shared in shared_choices(w, k):
                    for opt, par, grad in FLAGS:
                        part = Partitioning(placed(par), placed(opt), placed(grad),
                                            words_per_coordinate=w, shared_state=shared,
                                            block_words=block)
                        dep = bare(n, k, m_of(w, k, shared), part)
                        layout = OwnerLayout.of(dep)
                        assert layout.block_words == block
                        assert_agrees(layout, dep)


def test_ten_thousand_owners_agree_with_the_oracle_where_sampled():
    n, k, w = 10_000, 25_003, 2
    shared = (w * k, w * k + 1)
    part = Partitioning(optimizer_state=Shard(), parameters=Shard(), words_per_coordinate=w, shared_state=shared)
    dep = bare(n, k, m_of(w, k, shared), part)
    layout = OwnerLayout.of(dep)
    assert_agrees(layout, dep, owners=[0, 1, 5_002, 5_003, 9_998, 9_999])
    assert sum(layout.owned_count(o) for o in range(n)) == k
    assert [layout.owned_count(o) for o in (0, 5_002, 5_003, 9_999)] == [3, 3, 2, 2]
    assert layout.replicated_state().tolist() == list(shared)


def test_planned_layouts_are_the_deployments():
    for n in (1, 3, 4, 7):
        for opt, par, grad in FLAGS:
            k = 5
            part = adam_partitioning(k, optimizer_state=placed(opt), parameters=placed(par),
                                     gradients=placed(grad))
            dep = deployment(n, Hierarchy(2), k=k, kind="adam", partitioning=part)
            p = plan(dep)
            assert p.layout == OwnerLayout.of(dep)
            assert_agrees(p.layout, dep)
            for o in p.owners:  # bytes are the layout's words
                assert o.bytes.parameters == 8 * p.layout.params_count(o.owner)
                assert o.bytes.state == 8 * p.layout.state_count(o.owner)
            # the persistent fragments hold exactly the layout's words
            for shard_map in p.shard_maps:
                params = shard_map.region.field == "parameters"
                for o in range(n):
                    pos = np.concatenate([f.positions() for f in shard_map.of(o)
                                          if f.lifetime == "persistent"])
                    held = p.layout.params_held(o) if params else p.layout.state_held(o)
                    assert sorted(pos.tolist()) == held.tolist()


@pytest.mark.parametrize("block", [1, 2, 3, 5])
def test_coordinate_blocks_belong_to_owner_b_mod_n(block):
    for n in range(1, 6):
        for k in range(0, 23):
            w = 2
            shared = (w * k,)
            L = OwnerLayout(k, w * k + 1, n, parameters=Shard(), optimizer_state=Shard(),
                            words_per_coordinate=w, shared_state=shared, block_words=block)
            per = L.coordinate_state_offsets().tolist()
            assert per == list(range(w * k))
            seen = []
            for o in range(n):
                want = [i for i in range(k) if (i // block) % n == o]
                assert L.coordinates(o).tolist() == want == L.params_held(o).tolist()
                assert L.owned_count(o) == len(want)
                assert [s + st * j for s, st, c in L.coordinate_runs(o) for j in range(c)] == want
                assert all(L.owner_of(i) == o for i in want)
                words = [b * k + i for b in range(w) for i in want]
                assert L.state_held(o).tolist() == sorted(words + [w * k])
                seen += want
            assert sorted(seen) == list(range(k))


def test_replicated_layouts_hold_everything():
    L = OwnerLayout(10**6, 3 * 10**6, 10_000)
    assert L.params_held(9_999).shape == (10**6,) and L.state_count(17) == 3 * 10**6
    assert L.replicated_state().shape == (3 * 10**6,)
    assert L.owned_count(9_999) == 100 and L.coordinate_runs(5) == ((5, 10_000, 100),)
    assert plan_protocol.owned_count(10**6, 10_000, 5) == 100
    with pytest.raises(ValueError):
        L.coordinates(0)[0] = 1  # the arrays handed out are read-only


# ----------------------------------------------------------------------------- (b) trees

def shape(nodes) -> list[tuple]:
    """A post-order node list as (kind, owner, left index, right index)."""
    index: dict[int, int] = {}
    out = []
    for node in nodes:
        if isinstance(node, TreeLeaf):
            out.append(("leaf", node.owner, -1, -1))
        else:
            out.append(("branch", node.owner, index.pop(id(node.left)), index.pop(id(node.right))))
        index[id(node)] = len(out) - 1
    return out


def random_tree(n: int, rng: random.Random):
    """An explicit tree over a shuffled owner list; each branch at one of its leaves' owners."""
    parts = [(TreeLeaf(o), [o]) for o in rng.sample(range(n), n)]
    while len(parts) > 1:
        i = rng.randrange(len(parts) - 1)
        (a, la), (b, lb) = parts[i], parts[i + 1]
        parts[i:i + 2] = [(TreeBranch(rng.choice(la + lb), a, b), la + lb)]
    root, members = parts[0]
    return ExplicitTree(root, "members", tuple(members))


def topologies(n: int, rng: random.Random):
    yield Star()
    for f in range(1, 5):
        yield Hierarchy(f)
    yield random_tree(n, rng)


@pytest.mark.parametrize("n", list(range(1, 41)) + [5_000])
def test_the_oracles_tree_is_the_planners(n):
    rng = random.Random(n)
    for topology in topologies(n, rng):
        mine = oracle_tree.combine_tree(n, topology)
        theirs = plan_tree.build_tree(n, topology)
        ours = oracle_tree.postorder(mine)
        assert shape(ours) == shape(plan_tree.postorder(theirs)), (n, topology)
        assert oracle_tree.leaves(mine) == plan_tree.leaves(theirs)
        assert sorted(oracle_tree.leaves(mine)) == list(range(n))
        assert len(ours) == 2 * n - 1 and ours[-1] is mine


def test_the_oracles_star_and_hierarchy_by_hand():
    def expr(node):
        if isinstance(node, TreeLeaf):
            return f"c{node.owner}"
        return f"({expr(node.left)}+{expr(node.right)})@{node.owner}"

    assert expr(oracle_tree.combine_tree(3, Star())) == "((c0+c1)@0+c2)@0"
    # fan-out 2 over 5: 0 has children 1, 2; 1 has 3, 4
    assert expr(oracle_tree.combine_tree(5, Hierarchy(2))) == "((c0+((c1+c3)@1+c4)@1)@0+c2)@0"
    assert expr(oracle_tree.combine_tree(1, Hierarchy(3))) == "c0"


# ----------------------------------------------------------------------------- (c) independence

def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = "alphac.oracle"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append(module)
            out.extend(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__"):
            out.extend(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return out


def test_the_oracle_imports_nothing_of_the_planner():
    files = sorted((ROOT / "alphac" / "oracle").rglob("*.py"))
    assert len(files) >= 8
    offenders = {}
    for path in files:
        if path.name == "command.py":
            continue  # the command line asks the planner for the protocol identity
        bad = [m for m in _imports(path) if m == "alphac.plan" or m.startswith("alphac.plan.")]
        if bad:
            offenders[path.name] = bad
    assert offenders == {}


def test_the_import_scan_sees_every_form(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("import alphac.plan.protocol\nfrom ..plan import tree\nfrom alphac import plan\n"
                 "importlib.import_module('alphac.plan.layout')\n")
    found = _imports(p)
    for name in ("alphac.plan.protocol", "alphac.plan", "alphac.plan.tree", "alphac.plan.layout"):
        assert name in found

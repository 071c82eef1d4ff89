"""The declared order shows in the bits: at ten owners the star and the hierarchy differ
on data with a wide dynamic range, the oracle reproduces each order as written directly
in Python floats, and each mutant gives other bits than the declared program."""

from __future__ import annotations

import pytest

from alphac.ir.nodes import ExplicitTree, Hierarchy, Partitioning, Shard, Star, TreeBranch, TreeLeaf
from alphac.oracle import MUTANTS, Refusal, evaluate

from test_oracle_learners import bits, deployment, lsq_learner

SHARES10 = (1, 2, 3, 0, 2, 1, 4, 0, 3, 2)
W0 = (0.375, -1.5)


# Each sample is x = (1, 0.5), so its residual r = (w0 + w1) - y is set by y; the residuals
# span 1e-3 .. 3e16 with cancelling signs, so every grouping of the sums loses other bits.
RESIDUALS = (
    (3.1771432948826892e+16,),
    (-0.043099932022058064, -186.1330279851551),
    (-2726555945518.554, -65310578086021.445, -2.8905097494719844e+16),
    (),
    (12917410.955178037, -1926362372.0101743),
    (725820448.0073341,),
    (73438720142.94707, -314556932778494.8, -779966.2948845667, -0.0034363489824253673),
    (),
    (0.039634406322789556, -19149608.401855916, -26569236.604767274),
    (1.7095586767222188, 3607322898223120.0),
)


def wide_rows() -> list[tuple[float, float, float]]:
    base = W0[0] * 1.0 + W0[1] * 0.5
    return [(1.0, 0.5, base - r) for owner in RESIDUALS for r in owner]


ROWS = wide_rows()


def order10(kind: str, topology, updates: int = 1):
    L = lsq_learner(kind, "indexed", ROWS, SHARES10, W0, 1.0)
    return deployment(L, 10, topology, updates)


def owner_sums(w):
    """(Σ contribution, n) per owner, straight from the learner's formulas in floats."""
    out, row = [], 0
    for share in SHARES10:
        acc = [0.0, 0.0]
        for _ in range(share):
            x0, x1, y = ROWS[row]
            row += 1
            r = (w[0] * x0 + w[1] * x1) - y
            acc = [acc[0] + r * x0, acc[1] + r * x1]
        out.append((acc, share))
    return out


def plus(a, b):
    return ([a[0][0] + b[0][0], a[0][1] + b[0][1]], a[1] + b[1])


def star(leaves):
    t = leaves[0]
    for leaf in leaves[1:]:
        t = plus(t, leaf)
    return t


def hierarchy(leaves, fanout=2, o=0):
    t = leaves[o]
    for c in range(fanout * o + 1, fanout * o + fanout + 1):
        if c < len(leaves):
            t = plus(t, hierarchy(leaves, fanout, c))
    return t


def plain_step(total, w, rate=1.0):
    g, n = total
    return [bits(w[i] - rate * (g[i] / n)) for i in range(2)]


def test_star_and_hierarchy_give_different_bits_and_each_is_reproduced():
    leaves = owner_sums(W0)
    want_star = plain_step(star(leaves), W0)
    want_tree = plain_step(hierarchy(leaves), W0)
    got_star = evaluate(order10("plain", Star()))
    got_tree = evaluate(order10("plain", Hierarchy(2)))
    assert list(got_star.params) == want_star
    assert list(got_tree.params) == want_tree
    assert got_star.params != got_tree.params
    assert got_star.owners[9].digest != got_tree.owners[9].digest


@pytest.mark.parametrize("kind", ["plain", "momentum", "adam"])
def test_orders_differ_for_every_update_rule(kind):
    a = evaluate(order10(kind, Star(), updates=2))
    b = evaluate(order10(kind, Hierarchy(2), updates=2))
    c = evaluate(order10(kind, Hierarchy(3), updates=2))
    assert len({(r.params, r.state) for r in (a, b, c)}) == 3


def _swapped(root):
    left = root.left
    return TreeBranch(root.owner, TreeBranch(left.owner, left.left, root.right), left.right)


# the mutants that apply to a replicated synchronous learner (stale-replica needs a read
# replica, fresher-read a fixed staleness)
REPLICATED_MUTANTS = tuple(m for m in MUTANTS
                           if m not in ("stale-replica", "foreign-inputs", "foreign-accumulator", "fresher-read",
                                     "fewer-local-steps", "looser-bound"))


@pytest.mark.parametrize("topology", [Star(), Hierarchy(2)], ids=["star", "hierarchy"])
def test_every_mutant_gives_other_bits(topology):
    dep = order10("plain", topology)
    declared = evaluate(dep)
    seen = {declared.params}
    for mutant in REPLICATED_MUTANTS:
        got = evaluate(dep, mutant=mutant)
        assert got.params not in seen, mutant
        seen.add(got.params)
    assert len(seen) == 1 + len(REPLICATED_MUTANTS) == 5


def test_mutants_compute_what_they_claim():
    leaves = owner_sums(W0)
    dep = order10("plain", Star())
    # unweighted: each owner's own mean, all weighing one, added in the star's order
    means = [([g[0] / n, g[1] / n], 1) if n else ([0.0, 0.0], 0) for g, n in leaves]
    assert list(evaluate(dep, mutant="unweighted-mean").params) == plain_step(star(means), W0)
    # duplicate mass: owner 0 (the first leaf with samples) counts its sample twice
    g, n = star(leaves)
    assert list(evaluate(dep, mutant="duplicate-mass").params) == plain_step((g, n + 1), W0)
    # deliver to the next owner: coordinate 1 (owner 1's) is updated from coordinate 0's sum
    # (owner 0's), coordinate 0 (owner 0's) from owner 9's, who holds no coordinate: +0.0
    assert list(evaluate(dep, mutant="deliver-to-next").params) == plain_step(([0.0, g[0]], n), W0)
    # swap branch: the same as declaring the swapped tree explicitly
    t = Hierarchy(2)
    from alphac.plan.tree import build_tree
    explicit = ExplicitTree(_swapped(build_tree(10, t)), "group", tuple(range(10)))
    assert (evaluate(order10("plain", t), mutant="swap-branch").params
            == evaluate(order10("plain", explicit)).params)


def test_mutants_that_do_not_apply_refuse_and_unknown_names_are_errors():
    L = lsq_learner("plain", "indexed", ROWS[:3], (1, 2), W0, 1.0)
    with pytest.raises(Refusal, match="swap-branch") as info:
        evaluate(deployment(L, 2), mutant="swap-branch")
    assert info.value.code == "mutant-not-applicable"
    with pytest.raises(Refusal, match="stale-replica") as info:
        evaluate(deployment(L, 2), mutant="stale-replica")
    assert info.value.code == "mutant-not-applicable"
    one = lsq_learner("plain", "indexed", ROWS[:3], (3,), W0, 1.0)
    with pytest.raises(Refusal, match="deliver-to-next"):
        evaluate(deployment(one, 1), mutant="deliver-to-next")
    with pytest.raises(ValueError, match="mutant must be one of"):
        evaluate(deployment(L, 2), mutant="reversed")
    with pytest.raises(ValueError, match="mutant must be one of"):  # the old spelling is gone
        evaluate(deployment(L, 2), mutant="swapped-branch")
    assert isinstance(TreeLeaf(0), TreeLeaf)


def test_stale_replica_refuses_at_the_second_update_by_the_runtimes_code():
    part = Partitioning(parameters=Shard(), gradients=Shard())
    dep = deployment(lsq_learner("plain", "indexed", ROWS, SHARES10, W0, 1.0), 10, Star(), 3, part)
    assert evaluate(dep, 1, mutant="stale-replica").params == evaluate(dep, 1).params
    with pytest.raises(Refusal) as info:
        evaluate(dep, mutant="stale-replica")
    assert info.value.code == "data-parallel-replica-version"
    assert info.value.update == 1
    assert info.value.line() == ("refused: data-parallel-replica-version: update 1: the contribution "
                                 "of version 1 reads the read replica of version 0, kept from the "
                                 "first update")

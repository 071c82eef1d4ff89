"""The order gate's data (specs/Gates/Order10.alpha): on the ten owners of
specs/order10_star.alpha and specs/order10_hierarchy.alpha, every other tree shape over the
ten leaves that the test enumerates, and every mutant, gives other words than the declared
program, evaluated by the oracle for the deployment's five updates.

Two trees compute the same sums, whatever the data, when they differ only by the order of
the two operands of an add (binary64 addition is commutative) or by where the leaf of owner
4 (which holds no samples: its value is (+0.0, 0), and x + 0.0 is x) is added. Shapes are
compared modulo those two (`canonical`); the first test shows both equivalences hold."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from alphac.check import load_deployment
from alphac.ir.nodes import ExplicitTree, TreeBranch, TreeLeaf
from alphac.oracle import MUTANTS, evaluate
from alphac.oracle.tree import combine_tree, hierarchy

SPECS = Path(__file__).resolve().parents[2] / "specs"
N = 10
EMPTY = 4  # the owner without samples


def deployment(name: str):
    return load_deployment(str(SPECS / name))


def left_deep(order) -> TreeBranch:
    node = TreeLeaf(order[0])
    for o in order[1:]:
        node = TreeBranch(order[0], node, TreeLeaf(o))
    return node


def right_deep(order) -> TreeBranch:
    node = TreeLeaf(order[-1])
    for o in reversed(order[:-1]):
        node = TreeBranch(o, TreeLeaf(o), node)
    return node


def balanced(order):
    if len(order) == 1:
        return TreeLeaf(order[0])
    half = len(order) // 2
    return TreeBranch(order[0], balanced(order[:half]), balanced(order[half:]))


def split_at_random(order, rng: random.Random):
    if len(order) == 1:
        return TreeLeaf(order[0])
    cut = rng.randint(1, len(order) - 1)
    return TreeBranch(order[0], split_at_random(order[:cut], rng), split_at_random(order[cut:], rng))


def canonical(node) -> str:
    """The sum a tree computes, up to commuting an add's operands and the empty leaf."""
    if isinstance(node, TreeLeaf):
        return "" if node.owner == EMPTY else f"c{node.owner}"
    a, b = canonical(node.left), canonical(node.right)
    if not a or not b:
        return a or b
    return "(" + "+".join(sorted((a, b))) + ")"


def shapes() -> list:
    """Left-deep, right-deep and balanced trees and the hierarchies of fan-out 2 to 4 over
    the leaves in owner order, 16 random binary trees over them, and the left-deep and
    balanced trees of 8 random permutations of the leaves: distinct up to `canonical`."""
    rng = random.Random(10)
    order = list(range(N))
    found = [left_deep(order), right_deep(order), balanced(order)]
    found += [hierarchy(N, f) for f in (2, 3, 4)]
    found += [split_at_random(order, rng) for _ in range(16)]
    for _ in range(8):
        perm = order[:]
        rng.shuffle(perm)
        found += [left_deep(perm), balanced(perm)]
    distinct: dict[str, object] = {}
    for tree in found:
        distinct.setdefault(canonical(tree), tree)
    return list(distinct.values())


def words(dep, root=None, mutant=None):
    if root is not None:
        dep = dataclasses.replace(dep, topology=ExplicitTree(root, "group", tuple(range(N))))
    r = evaluate(dep, mutant=mutant)
    return r.params, r.state


def test_commuted_operands_and_a_moved_empty_leaf_give_the_same_words():
    star = deployment("order10_star.alpha")
    declared = words(star)
    swapped_first = [1, 0] + list(range(2, N))
    empty_last = [o for o in range(N) if o != EMPTY] + [EMPTY]
    for order in (swapped_first, empty_last):
        tree = left_deep(order)
        assert canonical(tree) == canonical(combine_tree(N, star.topology))
        assert words(star, tree) == declared
    # the equivalence is exactly those two: moving owner 3's leaf (it holds a sample) changes them
    assert words(star, left_deep([o for o in range(N) if o != 3] + [3])) != declared


@pytest.mark.parametrize("name", ["order10_star.alpha", "order10_hierarchy.alpha"])
def test_every_other_tree_shape_gives_other_words(name):
    dep = deployment(name)
    assert dep.owners == N and dep.updates == 5 and dep.learner.samples.shares[EMPTY] == 0
    declared = words(dep)
    mine = canonical(combine_tree(N, dep.topology))
    others = [t for t in shapes() if canonical(t) != mine]
    assert len(others) >= 20
    same = [canonical(t) for t in others if words(dep, t) == declared]
    assert same == [], f"{len(same)} of {len(others)} shapes give the declared words: {same}"


@pytest.mark.parametrize("name", ["order10_star.alpha", "order10_hierarchy.alpha"])
def test_every_mutant_gives_other_words_and_no_two_agree(name):
    dep = deployment(name)
    seen = {words(dep)}
    # stale-replica needs partitioned parameters (these are replicated), foreign-inputs an
    # independent-state learner, foreign-accumulator one accumulator per coordinate,
    # fresher-read a fixed staleness (tests/e2e/test_fixed_staleness.py)
    applicable = [m for m in MUTANTS if m not in ("stale-replica", "foreign-inputs",
                                                  "foreign-accumulator", "fresher-read",
                                                  "fewer-local-steps", "looser-bound")]
    for mutant in applicable:
        got = words(dep, mutant=mutant)
        assert got not in seen, mutant
        seen.add(got)
    assert len(seen) == len(applicable) + 1


def test_the_star_and_the_hierarchy_differ_at_every_update():
    star, tree = deployment("order10_star.alpha"), deployment("order10_hierarchy.alpha")
    assert star.learner == tree.learner
    for rounds in range(1, 6):
        assert evaluate(star, rounds).params != evaluate(tree, rounds).params

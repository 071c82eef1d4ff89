"""Partitioned learners end to end: native owners (x86-64 and AArch64 under qemu, alternating)
hold only their own words, and the words they hold, assembled, are the replicated learner's
logical state bit for bit; each owner's output holds exactly the oracle's words for its
layout.

Each (deployment variant, role, target) is built once per session (alphac.testing.session).
"""

import dataclasses
import shutil
from pathlib import Path

import pytest

from alphac.ir import nodes as n
from alphac.testing import session
from alphac.launch.report import compare

SPECS = Path(__file__).resolve().parents[2] / "specs"
X86, ARM = "x86_64", "aarch64"

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")
pytestmark = needs_qemu


def _oracle(dep):
    from alphac.oracle import evaluate

    return evaluate(dep, dep.updates)


def _launch(key, dep):
    run = session.run(key, dep, timeout_ms=20000)
    report = compare(session.plan(key, dep), run, _oracle(dep), dep.updates)
    assert report.failures == (), "\n".join(report.failures) + "\n" + "\n".join(report.stderr.values())
    assert report.match
    return run


def _assemble(dep, run):
    """The logical (params, state) from the owners' own words: every per-coordinate word
    exactly once, every shared word held alike by every owner."""
    k, m, nn = dep.learner.k, dep.learner.m, dep.owners
    params: list = [None] * k
    state: list = [None] * m
    shared = set(dep.partitioning.shared_state) if dep.partitioning.optimizer_state.sharded else set(range(m))
    for o in range(nn):
        out = run.outputs[o]
        assert out.version == dep.updates
        coords = out.param_coords if out.param_coords is not None else tuple(range(k))
        offs = out.state_offsets if out.state_offsets is not None else tuple(range(m))
        for i, word in zip(coords, out.params):
            if dep.partitioning.parameters.sharded:
                assert params[i] is None, f"parameter {i} held twice"
            elif params[i] is not None:
                assert params[i] == word
            params[i] = word
        for j, word in zip(offs, out.state):
            if j in shared:
                assert state[j] in (None, word), f"shared state word {j} differs at owner {o}"
            else:
                assert state[j] is None, f"state word {j} held twice"
            state[j] = word
    assert None not in params and None not in state
    return tuple(params), tuple(state)


def _replicated(dep):
    return dataclasses.replace(dep, partitioning=n.Partitioning())


def _replicated_words(key, dep):
    run = _launch(key, dep)
    first = run.outputs[0]
    assert all((run.outputs[o].params, run.outputs[o].state) == (first.params, first.state)
               for o in range(dep.owners))
    return first.params, first.state


# four owners, alternating x86-64 and AArch64, five updates ----------------------------------

GATES = [
    # partitioned spec, replicated spec, words per owner: (params held, state words held)
    ("lsq_momentum_partitioned_star", "lsq_momentum_star", [(1, 1), (1, 1), (0, 0), (0, 0)]),
    ("lsq_adam_partitioned_hierarchy", "lsq_adam_hierarchy", [(1, 4), (1, 4), (0, 2), (0, 2)]),
]


@pytest.mark.parametrize("name,replicated,held", GATES)
def test_four_owners_partitioned_equal_replicated_and_oracle(name, replicated, held):
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    assert dep.owners == 4 and dep.updates == 5
    assert dep.placement == (X86, ARM, X86, ARM)
    part = dep.partitioning
    assert (part.optimizer_state, part.parameters, part.gradients) == (n.Shard(),) * 3
    run = _launch(name, dep)
    oracle = _oracle(dep)
    for o in range(4):
        out = run.outputs[o]
        assert (len(out.params), len(out.state)) == held[o]
        assert out.param_coords == tuple(range(o, 2, 4))
        want = oracle.owners[o]
        assert out.params == tuple(int(w) for w in want.params)
        assert out.state == tuple(int(w) for w in want.state)
    rep = session.deployment(f"{SPECS}/{replicated}.alpha")
    assert _assemble(dep, run) == _replicated_words(replicated, rep)


def test_adam_shared_powers_held_by_every_owner():
    """Owners 2 and 3 own no coordinate of k = 2 but hold the two shared powers."""
    name = "lsq_adam_partitioned_hierarchy"
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    run = _launch(name, dep)
    powers = {run.outputs[o].state for o in (2, 3)}
    assert len(powers) == 1
    assert [run.outputs[o].state_offsets for o in range(4)] == [(0, 2, 4, 5), (1, 3, 4, 5), (4, 5), (4, 5)]
    assert all(run.outputs[o].state[-2:] == run.outputs[2].state for o in range(4))


# seven owners at fan-out 2 ----------------------------------------------------------------

def test_seven_owners_fully_partitioned_adam_equals_replicated_hierarchy():
    name = "lsq_adam_partitioned_hierarchy7"
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    assert dep.owners == 7 and isinstance(dep.topology, n.Hierarchy) and dep.topology.fanout == 2
    run = _launch(name, dep)
    assert [len(run.outputs[o].params) for o in range(7)] == [1, 1, 1, 1, 1, 0, 0]
    assert [len(run.outputs[o].state) for o in range(7)] == [4, 4, 4, 4, 4, 2, 2]
    assert _assemble(dep, run) == _replicated_words(name + "-replicated", _replicated(dep))


# five coordinates on four owners: slices of different sizes -------------------------------

def test_five_coordinates_on_four_owners_equal_the_replicated_star():
    name = "lsq_momentum_partitioned_star5"
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    assert (dep.owners, dep.learner.k, dep.learner.samples.shares) == (4, 5, (2, 0, 1, 3))
    run = _launch(name, dep)
    assert [run.outputs[o].param_coords for o in range(4)] == [(0, 4), (1,), (2,), (3,)]
    assert _assemble(dep, run) == _replicated_words(name + "-replicated", _replicated(dep))


# gradient partitioning off vs on ------------------------------------------------------------

def test_gradient_partitioning_off_and_on_give_the_same_words():
    name = "lsq_momentum_partitioned_star"
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    off = dataclasses.replace(dep, partitioning=dataclasses.replace(dep.partitioning, gradients=n.Replicate()))
    assert session.plan(name, dep).protocol_id != session.plan(name + "-grad-off", off).protocol_id
    on_run = _launch(name, dep)
    off_run = _launch(name + "-grad-off", off)
    for o in range(4):
        a, b = on_run.outputs[o], off_run.outputs[o]
        assert (a.params, a.state, a.param_coords, a.state_offsets) == \
            (b.params, b.state, b.param_coords, b.state_offsets)


def test_optimizer_state_alone_assembles_parameters_by_selection():
    """Only Adam's moments partitioned: every owner updates its coordinates' parameters and
    the selection assembly installs all of them, so every owner holds the replicated words."""
    name = "lsq_adam_partitioned_hierarchy"
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    state_only = dataclasses.replace(dep, partitioning=dataclasses.replace(
        dep.partitioning, parameters=n.Replicate(), gradients=n.Replicate()))
    run = _launch(name + "-state-only", state_only)
    rep = session.deployment(f"{SPECS}/lsq_adam_hierarchy.alpha")
    want_params, want_state = _replicated_words("lsq_adam_hierarchy", rep)
    for o in range(4):
        assert run.outputs[o].params == want_params
        assert run.outputs[o].param_coords == (0, 1)
    assert _assemble(state_only, run) == (want_params, want_state)


def test_gradients_alone_deliver_slices_and_assemble_everything_else():
    """Only gradients partitioned: each owner receives its coordinates' sums alone, updates
    its coordinates, and the selection assembly installs parameters and moments; every owner
    ends with the replicated learner's words (format 2, all positions held)."""
    name = "lsq_adam_partitioned_hierarchy"
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    grads = dataclasses.replace(dep, partitioning=dataclasses.replace(
        dep.partitioning, parameters=n.Replicate(), optimizer_state=n.Replicate()))
    run = _launch(name + "-grads-only", grads)
    rep = session.deployment(f"{SPECS}/lsq_adam_hierarchy.alpha")
    want = _replicated_words("lsq_adam_hierarchy", rep)
    for o in range(4):
        out = run.outputs[o]
        assert (out.params, out.state) == want
        assert (out.param_coords, out.state_offsets) == ((0, 1), tuple(range(6)))

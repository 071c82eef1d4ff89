"""End-to-end gates: native owners over TCP on 127.0.0.1 finish bit-identical to the oracle.

Each (spec variant, role, target) is built once per test session (alphac.testing.session);
AArch64 owners are statically linked and run under qemu-aarch64.
"""

import dataclasses
import shutil
from pathlib import Path

import pytest

from alphac.testing import session
from alphac.launch.report import compare

SPECS = Path(__file__).resolve().parents[2] / "specs"

needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None
                                or shutil.which("aarch64-linux-gnu-gcc") is None,
                                reason="qemu-aarch64 / aarch64-linux-gnu-gcc not installed")

LSQ = [f"lsq_{u}_{t}" for u in ("plain", "momentum", "adam") for t in ("star", "hierarchy")]


def _oracle(dep, rounds):
    from alphac.oracle import evaluate

    return evaluate(dep, rounds)


def _words(x):
    return x.as_tuple() if hasattr(x, "as_tuple") else tuple(int(w) for w in x)


def _launch(key, dep, rounds=None):
    run = session.run(key, dep, updates=rounds, timeout_ms=20000)
    n = dep.updates if rounds is None else rounds
    report = compare(session.plan(key, dep), run, _oracle(dep, n), n)
    assert report.failures == (), "\n".join(report.failures) + "\n" + "\n".join(
        report.stderr.values())
    return run, report


def _final(run, dep):
    """Every owner's (version, params, state), from its output file."""
    return [(run.outputs[o].version, run.outputs[o].params, run.outputs[o].state)
            for o in range(dep.owners)]


@pytest.mark.parametrize("name", LSQ)
def test_lsq_four_owners_bit_identical_to_oracle(name):
    dep = session.deployment(f"{SPECS}/{name}.alpha")
    assert dep.owners == 4
    assert dep.learner.samples.shares == (1, 2, 3, 0)
    assert dep.updates == 5
    run, report = _launch(name, dep)
    assert report.match
    oracle = _oracle(dep, 5)
    for o in range(4):
        out = run.outputs[o]
        assert out.owner == o and out.version == 5
        assert out.params == _words(oracle.owners[o].params)
        assert out.state == _words(oracle.owners[o].state)
        assert out.protocol == session.plan(name, dep).protocol_id
    # the update moved the parameters away from the initial words
    assert run.outputs[0].params != dep.learner.initial.as_tuple()


@needs_qemu
def test_alternating_x86_64_and_aarch64_same_bits_as_all_x86_64():
    base = session.deployment(f"{SPECS}/lsq_adam_hierarchy.alpha")
    mixed = dataclasses.replace(base, placement=("x86_64", "aarch64") * 2)
    native = dataclasses.replace(base, placement=("x86_64",) * 4)
    # the spec's own placement alternates already: its cached build is reused
    key = "lsq_adam_hierarchy" if mixed == base else "lsq_adam_hierarchy-mixed"
    run_m, rep_m = _launch(key, mixed)
    run_n, rep_n = _launch("lsq_adam_hierarchy-x86", native)
    assert rep_m.match and rep_n.match
    assert [r.target for r in rep_m.rows] == ["x86_64", "aarch64", "x86_64", "aarch64"]
    assert _final(run_m, mixed) == _final(run_n, native)
    assert len({(p, s) for _, p, s in _final(run_m, mixed)}) == 1  # every replica agrees


def test_ten_owners_star_and_hierarchy_each_match_their_oracle_and_differ():
    star = session.deployment(f"{SPECS}/order10_star.alpha")
    hier = session.deployment(f"{SPECS}/order10_hierarchy.alpha")
    assert star.owners == hier.owners == 10
    run_s, rep_s = _launch("order10_star", star)
    run_h, rep_h = _launch("order10_hierarchy", hier)
    assert rep_s.match and rep_h.match
    fs, fh = _final(run_s, star), _final(run_h, hier)
    assert fs[0] != fh[0], "star and hierarchy orders gave the same bits: order not shown"
    # which order ran: the star owners' words are the star oracle's, not the hierarchy's
    oh = _oracle(hier, hier.updates)
    assert fs[0][1] != _words(oh.owners[0].params) or fs[0][2] != _words(oh.owners[0].state)
    assert rep_s.protocol != rep_h.protocol

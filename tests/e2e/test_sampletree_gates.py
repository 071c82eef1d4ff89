"""The sample tree end to end (native owners over TCP on 127.0.0.1, AArch64 ones under
qemu): the gate's 13 samples on 1, 2, 3, 4, 7 and 8 owners with unequal shares, zero shares
and mixed instruction sets give every owner the same bits, the oracle's; a star on the same
data gives other bits; every partitioning gives the replicated bits; a checkpoint taken on 4
owners resumes on 7 under the same contract and ends bit-identical to the uninterrupted
4-owner run; resumes across N or from a star refuse by code."""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess

import numpy as np
import pytest

from alphac.ir import nodes as n
from alphac.launch.checkpoints import run_arguments
from alphac.launch.report import compare
from alphac.oracle import evaluate
from alphac.plan.protocol import OP_CODE
from alphac.testing import session
from alphac.testing.outputs import refusal_code
from alphac.launch.ports import free_ports
from test_checkpoints import _restore  # owner 0 alone restoring a checkpoint before it connects
from test_sampletree import GATE4, GATE7, PARTS, ROWS, on

HAVE_AARCH64 = shutil.which("qemu-aarch64") is not None and shutil.which("aarch64-linux-gnu-gcc") is not None
X, A = "x86_64", "aarch64"

# (shares, placement): 1..8 owners, zero shares, star-like and uneven splits
RUNS = {
    "1": ((13,), (X,)),
    "2-zero-first": ((0, 13), (X, A)),
    "3-uneven": ((1, 7, 5), (A, X, A)),
    "4-gate": ((6, 1, 0, 6), (X, A, X, A)),
    "7-gate": ((0, 3, 1, 4, 0, 0, 5), (A, X, A, X, X, A, X)),
    "8-star-like": ((12, 0, 0, 0, 0, 0, 0, 1), (X,) * 8),
    "8-uneven": ((2, 0, 5, 1, 0, 1, 3, 1), (X, A, X, X, A, X, X, A)),
}


def _native(placement):
    return placement if HAVE_AARCH64 else tuple(X for _ in placement)


def _run(key, dep, extra=()):
    """Every owner of `dep` (built once under `key`), each given `extra` (one run id)."""
    return session.run(key, dep, timeout_ms=20000, deadline_s=120,
                       extra_argv={o: tuple(extra) for o in range(dep.owners)})


def _matched(key, dep):
    """Run every owner of `dep`; every owner's words must be the oracle's."""
    run = _run(key, dep)
    report = compare(session.plan(key, dep), run, evaluate(dep), dep.updates)
    assert report.match, report.failures
    return run


def _words(run, dep):
    """Every owner's (version, params, state) from its output file."""
    assert run.committed, [oc.stderr for oc in run.result.outcomes]
    return [(run.outputs[o].version, run.outputs[o].params, run.outputs[o].state) for o in range(dep.owners)]


@pytest.fixture(scope="module")
def gate_words():
    oracle = evaluate(GATE4)
    return (GATE4.updates, oracle.params, oracle.state)


@pytest.mark.parametrize("name", list(RUNS))
def test_every_owner_count_and_share_gives_the_oracles_bits(name, gate_words):
    shares, placement = RUNS[name]
    dep = on(shares, placement=_native(placement))
    run = _matched(f"st-{name}", dep)
    assert set(_words(run, dep)) == {gate_words}, "every owner, the 4-owner gate's bits"


@pytest.mark.parametrize("spec", ["lsq_adam_sampletree", "lsq_adam_sampletree7"])
def test_the_specs_match_the_oracle_and_each_other(spec, gate_words):
    dep = GATE4 if spec == "lsq_adam_sampletree" else GATE7
    dep = dataclasses.replace(dep, placement=_native(dep.placement), checkpoint=n.Checkpoint())
    run = _matched(spec, dep)
    assert set(_words(run, dep)) == {gate_words}


def test_a_star_on_the_same_data_and_shares_gives_other_bits(gate_words):
    dep = on((6, 1, 0, 6), n.Star())
    run = _matched("st-star4", dep)
    (version, params, state), = set(_words(run, dep))
    assert params != gate_words[1] and state != gate_words[2]


@pytest.mark.parametrize("part", [p for p in PARTS if p != "replicated"])
def test_every_partitioning_gives_the_replicated_bits(part, gate_words):
    dep = on((6, 1, 0, 6), part=PARTS[part], placement=_native((X, A, X, A)))
    run = _matched(f"st-part-{part}", dep)
    logical = evaluate(dataclasses.replace(dep, partitioning=n.Partitioning()))
    assert (logical.params, logical.state) == gate_words[1:]


def test_a_non_finite_sum_refuses_inside_a_block_and_at_a_branch():
    """Samples 6 and 7 each contribute about 1e308: their sum overflows, inside one owner's
    block (one owner) or at the branch s[6,8) that owner 1 runs (the gate's shares)."""
    rows = ROWS.copy()
    rows[6] = rows[7] = np.array([1e154, 0.0, -1e154]).view(np.uint64)
    for shares, where in (((13,), "owner 0"), ((6, 1, 0, 6), "owner 1")):
        dep = on(shares, rows=rows)
        run = _run(f"st-overflow-{len(shares)}", dep)
        assert not run.committed
        lines = [oc.refusal() for oc in run.result.outcomes if refusal_code(oc.stderr) == "non-finite"]
        assert lines == [f"refused: non-finite: combine coordinate 0 at update 0 ({where})"], \
            [oc.stderr for oc in run.result.outcomes]


# ----------------------------------------------------------------------------- resume

def _checkpointing(dep):
    return dataclasses.replace(dep, placement=_native(dep.placement), checkpoint=n.Checkpoint(2, ""))


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """The 4-owner gate run uninterrupted, checkpointing every 2 updates: its checkpoint
    directory and its owners' output files."""
    dep = _checkpointing(GATE4)
    d = tmp_path_factory.mktemp("st-ckpt4")
    run = _run("st-ckpt4", dep, run_arguments(d))
    _words(run, dep)
    return d, {o: (run.run_dir / f"owner-{o}.out").read_bytes() for o in range(dep.owners)}, run


def test_a_four_owner_checkpoint_resumes_on_seven_under_the_same_contract(four, tmp_path):
    """No --new-contract: the order digest is the 4-owner run's. Every one of the 7 owners
    ends with the uninterrupted 4-owner run's words and version."""
    d, outs, run4 = four
    dep = dataclasses.replace(GATE7, placement=_native(GATE7.placement))
    run = _run("st-resume7", dep, run_arguments(tmp_path / "c", d / "ckpt-2"))
    four_words = {(r.version, r.params, r.state) for r in run4.outputs.values()}
    assert set(_words(run, dep)) == four_words
    assert len(four_words) == 1
    # and the 4 -> 4 resume gives the very output files
    again = _run("st-ckpt4", _checkpointing(GATE4), run_arguments(tmp_path / "c4", d / "ckpt-4"))
    assert {o: (again.run_dir / f"owner-{o}.out").read_bytes() for o in range(4)} == outs


def test_a_resume_onto_another_number_of_samples_refuses_the_order(four, tmp_path):
    d, _, _ = four
    dep = on((6, 1, 0, 5), rows=ROWS[:12])  # the same learner over 12 samples
    rc, err = _restore(tmp_path, d / "ckpt-2", dep, "st-12")  # the restore refuses before it connects
    assert rc == 1 and err.startswith("refused: numerical-order-mismatch: "), err
    assert "resume with --new-contract" in err
    rc, err = _restore(tmp_path, d / "ckpt-2", dep, "st-12", ["--new-contract"])
    assert rc == 1 and err.startswith("refused: connect-timeout: "), err  # restored; alone, no peers


def test_a_resume_from_a_star_checkpoint_refuses_the_order(tmp_path):
    star = dataclasses.replace(on((6, 1, 0, 6), n.Star()), checkpoint=n.Checkpoint(2, ""))
    d = tmp_path / "star"
    _words(_run("st-star-ckpt", star, run_arguments(d)), star)
    seven = dataclasses.replace(GATE7, placement=(X,) * 7)
    rc, err = _restore(tmp_path, d / "ckpt-2", seven, "st-7-x86")
    assert rc == 1 and err.startswith("refused: numerical-order-mismatch: "), err


def test_a_sample_block_outside_the_owners_share_is_a_corrupt_executable(tmp_path):
    """An op table whose block names a sample past the owner's share (patched into the
    executable's image) refuses by name before reading outside the samples."""
    dep = on((13,))
    exe = session.built("st-1", dep)[("coordinator", X)]
    op = struct.pack("<7q", OP_CODE["sample-block"], -1, 1, 0, 13, 0, -1)
    data = exe.read_bytes()
    assert data.count(op) == 1
    bad = tmp_path / "exe"
    bad.write_bytes(data.replace(op, struct.pack("<7q", OP_CODE["sample-block"], -1, 1, 1, 13, 0, -1)))
    bad.chmod(0o755)
    (tmp_path / "peers").write_text(f"0 127.0.0.1:{free_ports(1)[0]}\n")
    done = subprocess.run([str(bad), "--owner", "0", "--peers", str(tmp_path / "peers"), "--out",
                           str(tmp_path / "o"), "--insecure"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        1, "refused: corrupt-executable: owner 0: corrupt op table (sample block at 1)\n")
    assert not (tmp_path / "o").exists()


def test_a_contribution_slot_never_written_stays_plus_zero_on_the_stack():
    """The oracle starts every contribution slot at +0.0; the stack's levels hold +0.0 in a
    slot the program never writes (sums of +0.0), through merges and across updates."""
    dep = on((6, 1, 0, 6))
    one = dataclasses.replace(dep.learner.contribution, body=dep.learner.contribution.body[:1])
    dep = dataclasses.replace(dep, learner=dataclasses.replace(dep.learner, contribution=one))
    run = _matched("st-one-slot", dep)
    state = run.outputs[0].state  # the second coordinate's two moments: +0.0 throughout
    assert state[1] == state[3] == 0

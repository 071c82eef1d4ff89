"""binary32 storage (alphac/plan/storage.py, docs/language.md "binary32 storage"): a learner
under the binary32 profile holds, sends and checkpoints two binary32 values a word; its
combine adds and divides in binary32; replicated and partitioned, it launches on mixed
x86-64 and AArch64 owners equal to the oracle, resumes on the other instruction set and on
one owner, and never reads a binary64 checkpoint of the same learner (nor the reverse)."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from llvmlite import ir as llir

from alphac import driver
from alphac.commands import main
from alphac.ir import nodes as n
from alphac.ir.words import to_bits
from alphac.oracle import evaluate
from alphac.oracle.words import storage_floats, storage_words
from alphac.plan import storage
from shape_gates import needs_qemu, resume_across_instruction_sets

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "logistic_regression_storage32.alpha"
MIXED = ROOT / "specs" / "logistic_regression_binary32.alpha"  # the same model, binary64 words
ADAM = ROOT / "specs" / "adam_storage32.alpha"


def binary64_twin(dep):
    """The same learner and deployment under the binary64 profile."""
    return dataclasses.replace(dep, contract=dataclasses.replace(
        dep.contract, profile=dataclasses.replace(dep.contract.profile, format="binary64")))


def test_packing_puts_value_2j_in_the_low_half_of_word_j():
    values = np.array([1.5, -2.0, 0.25], dtype=np.float64).view(np.uint64)
    words = storage.pack(values, "binary32")
    assert words.tolist() == [0xC00000003FC00000, 0x000000003E800000]  # padded with +0.0
    # the oracle's own packing agrees
    assert storage_words(values, "binary32").tolist() == words.tolist()
    assert storage_floats(words, 3, "binary32").tolist() == [1.5, -2.0, 0.25]
    assert storage.words(9, "binary32") == 5 and storage.words(9, "binary64") == 9


def test_half_the_words_move_and_are_held():
    """Per update, a frame of 9 sums and a count is 5 + 1 words, not 9 + 1 (owners 0 and 1
    send two each); an owner holds 40 parameter bytes, not 72; a checkpoint's region has 5
    words."""
    def per_owner(spec):
        out = CliRunner().invoke(main, ["plan", str(spec), "--deployment", "run", "--json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["per_owner"]

    ours, mixed = per_owner(SPEC), per_owner(MIXED)
    assert [o["sent_words"] for o in ours] == [12, 12, 6, 6]
    assert [o["sent_words"] for o in mixed] == [20, 20, 10, 10]
    assert [o["bytes"]["parameters"] for o in ours] == [40] * 4
    assert [o["bytes"]["parameters"] for o in mixed] == [72] * 4
    plan = driver.plan(driver.deployment(str(SPEC), "run"))
    assert plan.shard_maps[0].region.domain == 5
    assert plan.shard_maps[0].region.representation == "binary32 pairs"


def test_the_oracle_combines_in_binary32():
    """Every word the oracle reports is a binary32 pair; the binary64 combine of the same
    binary32 contributions (the twin under the binary64 profile) gives other values: the
    data tell a binary32 combine from a binary64 one."""
    dep = driver.deployment(str(SPEC), "run")
    ours = evaluate(dep)
    assert len(ours.params) == 5 and ours.storage == "binary32"
    values = storage_floats(ours.params, dep.learner.k, "binary32")
    twin = evaluate(binary64_twin(dep))
    wide = np.asarray(twin.params, dtype=np.uint64).view(np.float64)
    assert not np.array_equal(values[:-1], wide[:-1])
    assert np.abs(values[:-1] - wide[:-1]).max() < 1e-6
    # the scalar and vector engines agree; numba has no binary32 combine
    assert evaluate(dep, engine="vector").params == evaluate(dep, engine="scalar").params == ours.params
    with pytest.raises(ValueError, match="binary32"):
        evaluate(dep, engine="numba")


@needs_qemu
@pytest.mark.parametrize("deployment, words", [("run", [5] * 4), ("partitioned", [2, 1, 1, 1])])
def test_the_gate_launches_equal_to_the_oracle(tmp_path, deployment, words):
    """Replicated, every owner holds the 5 words of 9 values; partitioned in blocks of 2
    coordinates, owner 0 holds coordinates 0, 1 and 8 (2 words), the others 2 each."""
    out = CliRunner().invoke(main, ["launch", str(SPEC), "--deployment", deployment,
                                    "-o", str(tmp_path / "out"), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert [o["match"] for o in got["owners"]] == [True] * 4
    assert [len(o["params"]) for o in got["owners"]] == words
    assert {o["target"] for o in got["owners"]} == {"x86_64", "aarch64"}


EXHAUSTIVE = pytest.mark.exhaustive  # make test-exhaustive; make test runs the rest


@needs_qemu
@pytest.mark.parametrize("deployment", ["run", pytest.param("partitioned", marks=EXHAUSTIVE)])
def test_a_checkpoint_resumes_on_the_other_instruction_set(tmp_path, deployment):
    resume_across_instruction_sets(tmp_path, f"storage32-{deployment}",
                                   driver.deployment(str(SPEC), deployment), 4)


@needs_qemu
@pytest.mark.parametrize("deployment", [pytest.param("run", marks=EXHAUSTIVE), "partitioned"])
def test_adam_with_partitioned_moments_launches_and_resumes(tmp_path, deployment):
    """Adam stored in binary32: each owner's moments are whole words of its coordinates, the
    two shared bias corrections one word; it launches equal to the oracle and resumes on
    the other instruction set and on one owner."""
    resume_across_instruction_sets(tmp_path, f"adam32-{deployment}",
                                   driver.deployment(str(ADAM), deployment), 3)


@needs_qemu
@pytest.mark.parametrize("case", ["sample-tree", pytest.param("hierarchy-3", marks=EXHAUSTIVE),
                                  pytest.param("block-owners", marks=EXHAUSTIVE), "adam-block-owners"])
def test_the_other_trees_and_the_block_placement(case):
    """The sample tree (binary32 adds level by level), another hierarchy, and the block
    placement's ordered reduce-scatter over binary32 words, each equal to the oracle."""
    from alphac.testing import session
    from alphac.launch.report import compare

    never = n.Checkpoint()
    base = driver.deployment(str(SPEC), "run")
    dep = {
        "sample-tree": lambda: dataclasses.replace(base, topology=n.SampleTree(), checkpoint=never),
        "hierarchy-3": lambda: dataclasses.replace(base, topology=n.Hierarchy(3), checkpoint=never),
        "block-owners": lambda: dataclasses.replace(driver.deployment(str(SPEC), "partitioned"),
                                                    combine_placement=n.CombinePlacement.BLOCK_OWNERS,
                                                    checkpoint=never),
        "adam-block-owners": lambda: dataclasses.replace(driver.deployment(str(ADAM), "partitioned"),
                                                         combine_placement=n.CombinePlacement.BLOCK_OWNERS,
                                                         checkpoint=never),
    }[case]()
    dep = dataclasses.replace(dep, name=f"storage32_{case.replace('-', '_')}")
    run = session.run(dep.name, dep)
    report = compare(session.plan(dep.name, dep), run, evaluate(dep), dep.updates)
    assert report.match, report.failures


def test_partitioning_changes_no_bit():
    """The partitioned Adam's words are the replicated one's (the oracle's full vectors), and
    its owners hold 1 parameter word and 2 moment words of their 2 coordinates, and the
    shared word."""
    run, part = (driver.deployment(str(ADAM), d) for d in ("run", "partitioned"))
    a, b = evaluate(run), evaluate(part)
    assert (a.params, a.state) == (b.params, b.state)
    assert len(a.params) == 2 and len(a.state) == 5
    assert [(len(o.params), len(o.state)) for o in b.owners] == [(1, 3), (1, 3)]
    assert b.owners[0].state[-1] == b.owners[1].state[-1] == a.state[4]  # the shared word, last


def test_partitioned_words_are_held_by_the_owner_of_both_values():
    """Blocks of 2 coordinates are blocks of one word; the oracle's owners hold the words of
    their coordinates; the plan's layout is the same one over words."""
    dep = driver.deployment(str(SPEC), "partitioned")
    plan = driver.plan(dep)
    assert plan.layout.k == 5 and plan.layout.block_words == 1
    assert [plan.layout.params_count(o) for o in range(4)] == [2, 1, 1, 1]
    result = evaluate(dep)
    full = np.asarray(result.params, dtype=np.uint64)
    assert [list(o.params) for o in result.owners] == [
        [int(full[0]), int(full[4])], [int(full[1])], [int(full[2])], [int(full[3])]]


def test_a_binary32_checkpoint_is_never_read_as_binary64_nor_the_reverse(tmp_path):
    """The learner line names the storage, so a binary64 twin of the same learner refuses
    the binary32 checkpoint (and the reverse), even under a new contract."""
    from alphac.image.ckpt import write_plan_checkpoint
    from alphac.oracle import Refusal

    dep = driver.deployment(str(SPEC), "run")
    twin = binary64_twin(dep)
    for writer, reader in ((dep, twin), (twin, dep)):
        plan = driver.plan(writer)
        result = evaluate(writer, 2)
        ckpt = tmp_path / f"{writer.contract.profile.format}" / "ckpt-2"
        write_plan_checkpoint(plan, ckpt, 2, np.asarray(result.params, dtype=np.uint64),
                              np.zeros(0, dtype=np.uint64))
        for mode in ("same", "new"):
            resumed = dataclasses.replace(reader, resume=n.Resume(str(ckpt), mode))
            with pytest.raises(Refusal) as refused:
                driver.oracle(resumed)
            assert refused.value.code == "checkpoint-learner-mismatch"


def test_the_rules_refuse_by_code():
    """A store without round32, a value binary32 cannot hold, and what is not built."""
    from alphac.diagnostics import CompileError

    dep = driver.deployment(str(SPEC), "run")
    L = dep.learner
    loss = L.contribution.body[-1]
    assert isinstance(loss, n.Assign) and loss.value.op == "round32"
    bare = dataclasses.replace(L.contribution, body=L.contribution.body[:-1] + (
        dataclasses.replace(loss, value=loss.value.arg),))
    cases = {
        "binary32-narrowing": dataclasses.replace(dep, learner=dataclasses.replace(L, contribution=bare)),
        "binary32-inexact": dataclasses.replace(dep, learner=dataclasses.replace(
            L, rate=to_bits(0.0002))),
        "binary32-unsupported": dataclasses.replace(dep, partitioning=n.Partitioning(
            parameters=n.Shard(), optimizer_state=n.Shard(), gradients=n.Shard())),  # blocks of 1 coordinate
    }
    for code, bad in cases.items():
        with pytest.raises(CompileError) as refused:
            driver.plan(bad)
        assert [d.code for d in refused.value.diagnostics] == [code]


# ----------------------------------------------------------------------------- kernels

class Arith:
    """The binary32 arithmetic kernels (alphac/codegen/arith.py) in a shared object."""

    def __init__(self, tmp_path):
        from alphac.codegen.arith import emit_arith
        from alphac.targets import compile_object

        module = llir.Module("arith32")
        emit_arith(module, "binary32")
        obj = tmp_path / "arith32.o"
        obj.write_bytes(compile_object(module, "x86_64"))
        so = tmp_path / "arith32.so"
        subprocess.run(["cc", "-shared", "-o", str(so), str(obj)], check=True)
        self.lib = ctypes.CDLL(str(so))
        for name in ("alphac_add_range", "alphac_local_first", "alphac_local_add", "alphac_mean",
                     "alphac_first_nonfinite"):
            getattr(self.lib, name).restype = ctypes.c_int64

    def __getattr__(self, name):
        return getattr(self.lib, f"alphac_{name}")


def ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


def f32(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32)


def test_the_binary32_kernels_compute_in_binary32(tmp_path):
    """Counts and bounds are words (two values each), indices are values; adds and
    quotients are float32's own; +0.0 + -0.0 is +0.0; the first non-finite value's index."""
    k = Arith(tmp_path)
    rng = np.random.default_rng(7)
    a = f32(rng.standard_normal(8))
    b = f32(rng.standard_normal(8) * 1e-3)
    dst = np.zeros(8, dtype=np.float32)
    assert k.add_range(ptr(dst), ptr(a), ptr(b), ctypes.c_int64(1), ctypes.c_int64(3)) == 0
    assert dst[:2].tolist() == [0.0, 0.0] and dst[6:].tolist() == [0.0, 0.0]
    assert dst[2:6].tobytes() == (a[2:6] + b[2:6]).tobytes()
    acc = f32([-0.0, 1.0, 2.5, -0.0])
    assert k.local_first(ptr(acc), ctypes.c_int64(2)) == -1
    assert acc.view(np.uint32).tolist() == f32([0.0, 1.0, 2.5, 0.0]).view(np.uint32).tolist()
    c = f32([1.0, 1.0, 1.0, 3.0e38])
    assert k.local_add(ptr(acc), ptr(f32([1.0, 2.0, 3.0, 3.0e38])), ctypes.c_int64(2)) == -1
    assert acc.tolist() == [1.0, 3.0, 5.5, np.float32(3.0e38)]
    assert k.local_add(ptr(acc), ptr(c), ctypes.c_int64(2)) == 3  # 3e38 + 3e38 overflows binary32 (not binary64)
    g = f32(rng.standard_normal(6))
    want = (g / np.float32(3)).tobytes()
    assert k.mean(ptr(g), ctypes.c_int64(3), ctypes.c_int64(3)) == -1
    assert g.tobytes() == want
    h = f32([1.0, 2.0, np.inf, 4.0])
    assert k.first_nonfinite(ptr(h), ctypes.c_int64(0), ctypes.c_int64(2)) == 2

"""Checkpoints and coordinate blocks (docs/checkpoints.md): the layout line records B
(`block-words B`, absent for B = 1), manifests with it round-trip and verify, old lines
parse as B = 1, and a checkpoint taken under one B restores under another — by the oracle,
and by real owners, which select fragments by coordinate."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest

from alphac import driver
from alphac.checkpoint import CheckpointError, logical_words, parse, render, verify
from alphac.checkpoint.inspect import describe_checkpoint, layout_fields
from alphac.image.ckpt import checkpoint_lines, owner_fragments, write_plan_checkpoint
from alphac.ir import nodes as ir
from alphac.oracle import evaluate
from alphac.plan import plan
from test_plan_support import adam_partitioning, deployment

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/errors/checkpoints/lsq-star-v2"
K = 7
OLD_LAYOUT = "owners 4 parameters partitioned state partitioned words-per-coordinate 2 shared 14,15"


def adam(B: int, n: int = 4, **kw) -> ir.Deployment:
    part = dataclasses.replace(adam_partitioning(K), block_words=B)
    return deployment(n, ir.Hierarchy(2), k=K, kind="adam", partitioning=part,
                      placement=["x86_64"] * n, **kw)


def checkpoint_of(dep: ir.Deployment, d: Path, version: int = 2, key: bytes | None = None):
    """What dep's owners would publish after `version` updates: the oracle's words in the
    plan's fragments (with a run's `key`, tagged under it)."""
    words = evaluate(dep, version)
    return write_plan_checkpoint(plan(dep), d, version, words.params, words.state, key=key)


def test_the_layout_line_records_the_block_size_only_where_not_1():
    assert checkpoint_lines(plan(adam(1))).layout == OLD_LAYOUT
    assert checkpoint_lines(plan(adam(3))).layout == OLD_LAYOUT + " block-words 3"
    rep = dataclasses.replace(deployment(4, k=K, kind="adam"), partitioning=ir.Partitioning(block_words=5))
    assert checkpoint_lines(plan(rep)).layout.endswith(" shared - block-words 5")
    # the checkpoint identity covers the layout line, so B
    assert len({checkpoint_lines(plan(adam(B))).identity for B in (1, 2, 3)}) == 3


def test_a_manifest_with_blocks_round_trips_and_verifies(tmp_path):
    d = tmp_path / "ckpt-2"
    root = checkpoint_of(adam(3), d)
    text = (d / "manifest.txt").read_text()
    assert text.splitlines()[6] == f"layout {OLD_LAYOUT} block-words 3"
    again = parse(text, str(d / "manifest.txt"))
    assert again == root and render(again) == text
    assert verify(d) == root
    fields = describe_checkpoint(d)["layout"]
    assert fields["block_words"] == 3 and fields["owners"] == 4 and fields["shared"] == [14, 15]
    # blocks of 3 over 4 owners of 7 coordinates: 0..2 at owner 0, 3..5 at 1, 6 at 2
    frags = {(f.owner, f.region): f.runs for f in root.fragments}
    assert frags[(0, "parameters")] == ((0, 1, 3),) and frags[(2, "parameters")] == ((6, 1, 1),)
    assert (3, "parameters") not in frags  # an owner without blocks has no fragment


def test_old_layout_lines_parse_as_one_word_blocks():
    assert layout_fields(OLD_LAYOUT)["block_words"] == 1
    assert describe_checkpoint(FIXTURE)["layout"]["block_words"] == 1
    assert layout_fields(OLD_LAYOUT + " block-words 12")["block_words"] == 12


@pytest.mark.parametrize("tail", [" block-words 0", " block-words", " block-words x", " blocks 3",
                                  " block-words 3 block-words 3"])
def test_a_malformed_block_size_is_a_located_manifest_refusal(tmp_path, tail):
    d = tmp_path / "ckpt-2"
    checkpoint_of(adam(1), d)
    lines = (d / "manifest.txt").read_text().splitlines()[:-1]  # without the trailer
    lines[6] += tail
    body = "".join(line + "\n" for line in lines)  # and the trailer recomputed: only the line is wrong
    text = body + f"sha256 {hashlib.sha256(body.encode()).hexdigest()}\n"
    with pytest.raises(CheckpointError) as err:
        parse(text, "m.txt")
    assert (err.value.code, err.value.line, err.value.message) == (
        "checkpoint-manifest", 7, "malformed 'layout' line")


@pytest.mark.parametrize("src", [1, 2, 3, K, K + 5])
def test_a_checkpoint_under_one_block_size_resumes_under_another_in_the_oracle(tmp_path, src):
    d = tmp_path / "ckpt-2"
    checkpoint_of(adam(src), d)
    whole = evaluate(adam(1))
    words = logical_words(d, verify(d))
    two = evaluate(adam(1), 2)
    assert words["parameters"].tolist() == list(two.params) and words["state"].tolist() == list(two.state)
    for dst in (1, 2, 3, K + 5):
        got = driver.oracle(driver.resumed(adam(dst), d))  # the same contract: B changes no order
        assert (got.params, got.state) == (whole.params, whole.state), (src, dst)
        assert [o.params for o in got.owners] == [o.params for o in evaluate(adam(dst)).owners]


def test_owners_restore_a_checkpoint_taken_under_another_block_size(tmp_path):
    """Owners of the one-word layout (which the executables run) resume from a checkpoint
    whose fragments are blocks of 3: each selects its coordinates' words from the fragments
    that hold them, and the run ends equal to the uninterrupted one."""
    from alphac.testing import session
    from alphac.checkpoint.manifest import read_key
    from alphac.launch.checkpoints import checkpoint_key_file, run_arguments
    from alphac.launch.report import compare

    src, dep = adam(3), adam(1)
    d = tmp_path / "ckpt-2"
    # tagged as the launcher's runs tag theirs: the keyed owners take no untagged checkpoint
    checkpoint_of(src, d, key=read_key(checkpoint_key_file()))
    assert owner_fragments(plan(src)) != owner_fragments(plan(dep))
    args = run_arguments(None, d)
    r = session.run("blocks-resume-adam7", dep, timeout_ms=10000, deadline_s=60,
                    extra_argv={o: args for o in range(dep.owners)})
    report = compare(session.plan("blocks-resume-adam7", dep), r, evaluate(dep), dep.updates)
    assert report.match, (report.failures, report.stderr)
    assert np.array_equal(np.array(evaluate(dep).params, dtype=np.uint64),
                          np.array(driver.oracle(driver.resumed(dep, d)).params, dtype=np.uint64))

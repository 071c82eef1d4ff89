"""The checkpoint formats (docs/checkpoints.md): the writer's shard and manifest bytes, the
manifest's parse/render round trip, every refusal of `verify`, and the committed fixtures,
which regenerate byte for byte."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from alphac.checkpoint import CheckpointError, logical_words, parse, read_manifest, render, verify
from alphac.checkpoint.manifest import SHARD_MAGIC, identity_of, shard_digest, with_trailer
from alphac.checkpoint.write import shard_file, write_checkpoint

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import make_checkpoint  # noqa: E402

H = "ab" * 32
LEARNER = f"contribution {H} update {'cd' * 32} k 4 m 3 s 2"
INPUTS = f"samples {'12' * 32} rate 3f50624dd2f1a9fc"
CONTRACT = f"binary64 nearest-even preserve finite-or-refuse exact {'ef' * 32} hierarchy 2"
LAYOUT = "owners 4 parameters partitioned state replicated words-per-coordinate 0 shared -"
PARAMS = np.arange(100, 104, dtype=np.uint64)
STATE = np.arange(200, 203, dtype=np.uint64)
CHILDREN = {0: (1, 2), 1: (3,), 2: (), 3: ()}


def fragments(params=PARAMS, state=STATE):
    """Four owners; parameter coordinate i at owner i (partitioned), the state at owner 0."""
    out = {o: [("parameters", ((o, 1, 1),), params[o:o + 1])] for o in range(4)}
    out[0].append(("state", ((0, 1, 3),), state))
    return out


def write(d: Path, *, version=3, frags=None, children=CHILDREN, resumed=None, regions=None, key=None):
    return write_checkpoint(d, version=version, learner=LEARNER, inputs=INPUTS, contract=CONTRACT,
                            layout=LAYOUT, regions=regions or {"parameters": 4, "state": 3},
                            fragments=frags if frags is not None else fragments(),
                            children=children, resumed=resumed, key=key)


def refusal(d: Path) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        verify(d)
    return info.value


# ----------------------------------------------------------------------------- the writer

def test_a_shard_is_its_header_fragment_table_and_words(tmp_path):
    identity = identity_of(LEARNER, INPUTS, CONTRACT, LAYOUT)
    data, entries = shard_file(identity, 2, 7, [("parameters", ((0, 2, 2), (5, 1, 1)), [11, 12, 13]),
                                                ("state", (), [])])
    words = struct.unpack(f"<{len(data) // 8}Q", data)
    assert words[:6] == (SHARD_MAGIC, 2, identity, 2, 7, 2)
    assert words[6:9] == (1, 3, 2) and words[9:15] == (0, 2, 2, 5, 1, 1)
    assert words[15:18] == (2, 0, 0)
    assert words[18:] == (11, 12, 13)
    assert [(e.region, e.offset, e.words) for e in entries] == [("parameters", 144, 3), ("state", 168, 0)]
    assert entries[0].sha256 == hashlib.sha256(struct.pack("<3Q", 11, 12, 13)).hexdigest()
    assert entries[1].sha256 == hashlib.sha256(b"").hexdigest()
    empty, none = shard_file(identity, 1, 7, [])
    assert len(empty) == 48 and none == ()


def test_the_written_tree_of_manifests_and_shards(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d)
    assert sorted(p.name for p in d.iterdir()) == [
        "manifest-1.txt", "manifest.txt", "shard-0.bin", "shard-1.bin", "shard-2.bin", "shard-3.bin"]
    text = (d / "manifest.txt").read_text()
    lines = text.splitlines()
    assert lines[:3] == ["alphac-checkpoint 3", "version 3", f"identity {root.identity:016x}"]
    assert lines[3:7] == [f"learner {LEARNER}", f"inputs {INPUTS}", f"contract {CONTRACT}", f"layout {LAYOUT}"]
    assert lines[7:10] == ["region parameters 4", "region state 3", "owners 0 1 2 3"]
    child = (d / "manifest-1.txt").read_bytes()
    assert lines[10] == f"manifest 1 manifest-1.txt {hashlib.sha256(child).hexdigest()}"
    assert lines[-2] == "auth none" and "auth" not in child.decode()
    assert [x.split()[:2] for x in lines if x.startswith("shard ")] == [
        ["shard", "0"], ["shard", "1"], ["shard", "2"], ["shard", "3"]]
    assert lines[-1] == "sha256 " + hashlib.sha256(text[:text.rindex("sha256 ")].encode()).hexdigest()
    for s in root.shards:  # each byte hashed once: the header, then each fragment's sha256
        raw = (d / s.file).read_bytes()
        frags = [f for f in root.fragments if f.owner == s.owner]
        head = frags[0].offset if frags else len(raw)
        assert head == 48 + sum(24 + 24 * len(f.runs) for f in frags)
        want = hashlib.sha256(raw[:head] + b"".join(bytes.fromhex(f.sha256) for f in frags)).hexdigest()
        assert s.bytes == len(raw) and s.sha256 == want and want != hashlib.sha256(raw).hexdigest()
    sub = read_manifest(d, "manifest-1.txt")
    assert sub.owners == (1, 3) and [s.owner for s in sub.shards] == [1, 3] and sub.manifests == {}
    assert root.identity == identity_of(LEARNER, INPUTS, CONTRACT, LAYOUT)
    verify(d)
    words = logical_words(d)
    assert words["parameters"].tolist() == PARAMS.tolist() and words["state"].tolist() == STATE.tolist()


def test_without_children_the_root_manifest_lists_every_shard_alone(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d, children=None)
    assert sorted(p.name for p in d.iterdir())[:2] == ["manifest.txt", "shard-0.bin"]
    assert root.manifests == {} and root.owners == (0, 1, 2, 3)
    verify(d)


def test_files_are_never_overwritten(tmp_path):
    d = tmp_path / "ckpt-3"
    write(d)
    with pytest.raises(FileExistsError):
        write(d)


def test_parse_and_render_round_trip(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d, resumed=("12" * 32, 1, "new"))
    text = (d / "manifest.txt").read_text()
    assert render(root) == text
    again = parse(text, str(d / "manifest.txt"))
    assert again == root and again.resumed == ("12" * 32, 1, "new")
    assert render(again) == text
    fixture = ROOT / "tests/errors/checkpoints/lsq-star-v2/manifest.txt"
    assert render(parse(fixture.read_text())) == fixture.read_text()


# ----------------------------------------------------------------------------- refusals

def test_a_flipped_byte_in_a_shard_is_a_hash_mismatch(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d)
    raw = bytearray((d / "shard-0.bin").read_bytes())
    raw[-3] ^= 0x40
    (d / "shard-0.bin").write_bytes(bytes(raw))
    err = refusal(d)
    assert err.code == "checkpoint-hash-mismatch" and "shard-0.bin" in err.message
    assert err.line == root.line_of["shard 0"]


def test_a_flipped_byte_in_a_manifest_is_a_hash_mismatch(tmp_path):
    d = tmp_path / "ckpt-3"
    write(d)
    text = (d / "manifest.txt").read_text()
    (d / "manifest.txt").write_text(text.replace("version 3", "version 4", 1))
    err = refusal(d)
    assert err.code == "checkpoint-hash-mismatch" and err.line == len(text.splitlines())
    write(tmp_path / "b")
    child = tmp_path / "b" / "manifest-1.txt"
    child.write_text(child.read_text().replace("owners 1 3", "owners 1 2"))
    err = refusal(tmp_path / "b")
    assert err.code == "checkpoint-hash-mismatch" and "manifest-1.txt" in err.message
    assert err.line == read_manifest(tmp_path / "b").line_of["manifest 1"]


def test_a_fragment_whose_words_do_not_match_its_hash(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d)
    text = (d / "manifest.txt").read_text()
    f = next(f for f in root.fragments if f.owner == 0 and f.region == "state")
    bad = dataclasses.replace(root, fragments=tuple(
        dataclasses.replace(x, sha256="0" * 64) if x == f else x for x in root.fragments))
    (d / "manifest.txt").write_text(render(bad))
    err = refusal(d)
    assert err.code == "checkpoint-hash-mismatch" and "state fragment" in err.message
    assert err.line == root.line_of["fragment 0 state"]
    assert text != render(bad)


def test_a_fragment_not_where_its_shard_lays_it_is_malformed(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d)
    f = next(f for f in root.fragments if f.owner == 0 and f.region == "state")
    bad = dataclasses.replace(root, fragments=tuple(
        dataclasses.replace(x, offset=x.offset - 8) if x == f else x for x in root.fragments))
    (d / "manifest.txt").write_text(render(bad))
    err = refusal(d)
    assert err.code == "checkpoint-manifest" and "state fragment lies outside its shard" in err.message
    assert err.line == root.line_of["fragment 0 state"]


def test_a_deleted_shard_or_child_manifest_is_missing(tmp_path):
    d = tmp_path / "ckpt-3"
    write(d)
    (d / "shard-2.bin").unlink()
    err = refusal(d)
    assert err.code == "checkpoint-shard-missing" and "shard-2.bin" in err.message
    write(tmp_path / "b")
    (tmp_path / "b" / "manifest-1.txt").unlink()
    assert refusal(tmp_path / "b").code == "checkpoint-shard-missing"


def test_a_child_manifest_of_another_version(tmp_path):
    d = tmp_path / "ckpt-3"
    root = write(d)
    child = read_manifest(d, "manifest-1.txt")
    other = render(dataclasses.replace(child, version=2))
    (d / "manifest-1.txt").write_text(other)
    fixed = dataclasses.replace(root, manifests={1: ("manifest-1.txt", hashlib.sha256(other.encode()).hexdigest())})
    (d / "manifest.txt").write_text(render(fixed))
    err = refusal(d)
    assert err.code == "checkpoint-version" and "version 2" in err.message


def test_a_shard_of_another_version(tmp_path):
    write(tmp_path / "ckpt-3")
    write(tmp_path / "ckpt-2", version=2)
    d = tmp_path / "ckpt-3"
    shutil.copy(tmp_path / "ckpt-2" / "shard-3.bin", d / "shard-3.bin")
    root = read_manifest(d)
    raw = (d / "shard-3.bin").read_bytes()
    (f,) = [f for f in root.fragments if f.owner == 3]
    sha = shard_digest(raw[:f.offset], [f.sha256])
    shards = tuple(dataclasses.replace(s, sha256=sha) if s.owner == 3 else s for s in root.shards)
    (d / "manifest.txt").write_text(render(dataclasses.replace(root, shards=shards)))
    err = refusal(d)
    assert err.code == "checkpoint-version" and "version 2" in err.message


@pytest.mark.parametrize("keep", [0, 40, 200, 600, -1])
def test_a_truncated_manifest_is_located_at_its_last_line(tmp_path, keep):
    d = tmp_path / "ckpt-3"
    write(d)
    text = (d / "manifest.txt").read_text()
    cut = text[:keep] if keep >= 0 else text[:text.rindex("sha256 ")]
    (d / "manifest.txt").write_text(cut)
    err = refusal(d)
    assert err.code == "checkpoint-manifest"
    assert err.path == str(d / "manifest.txt")
    assert err.line == max(1, len(cut.split("\n")) - (1 if cut.endswith("\n") else 0))
    diag = err.diagnostic()
    assert (diag.span.file, diag.span.line) == (str(d / "manifest.txt"), max(err.line, 1))


def test_a_malformed_line_is_located(tmp_path):
    d = tmp_path / "ckpt-3"
    write(d)
    lines = (d / "manifest.txt").read_text().splitlines(keepends=True)
    lines[6] = "region parameters four\n"
    (d / "manifest.txt").write_text("".join(lines))
    err = refusal(d)
    assert (err.code, err.line) == ("checkpoint-manifest", 7) and "malformed 'region'" in err.message


def test_a_missing_directory_and_a_partial_one(tmp_path):
    assert refusal(tmp_path / "nope").code == "checkpoint-manifest"
    d = tmp_path / "ckpt-3.partial-0123456789abcdef"
    write(d)
    err = refusal(d)
    assert err.code == "checkpoint-manifest" and "partial" in err.message


@pytest.mark.parametrize("case, code", [
    ("missing", "shard-coverage-missing"),
    ("duplicated", "shard-coverage-duplicated"),
    ("outside", "shard-coverage-outside"),
])
def test_coverage(tmp_path, case, code):
    frags = fragments()
    if case == "missing":
        frags[3] = []
    elif case == "duplicated":
        frags[3] = [("parameters", ((2, 1, 2),), PARAMS[2:4])]
    else:
        frags[3] = [("parameters", ((3, 1, 2),), [PARAMS[3], 7])]
    d = tmp_path / "ckpt-3"
    root = write(d, frags=frags)
    err = refusal(d)
    assert err.code == code
    want = root.line_of["fragment 3 parameters"] if case == "outside" else root.line_of["region parameters"]
    assert err.line == want


# ----------------------------------------------------------------------------- fixtures

@pytest.mark.parametrize("fixture", make_checkpoint.FIXTURES, ids=[f[2] for f in make_checkpoint.FIXTURES])
def test_regenerating_a_fixture_gives_the_same_bytes(tmp_path, fixture):
    spec, version, directory, root_only = fixture
    out = tmp_path / Path(directory).name
    make_checkpoint.make(ROOT / spec, version, out, root_only)
    committed = ROOT / directory
    names = sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names
    for name in names:
        assert (out / name).read_bytes() == (committed / name).read_bytes(), name
    m = verify(committed)
    assert m.version == version


def test_a_fixture_holds_the_oracle_words_at_its_version():
    from alphac import driver

    spec, version, directory, _ = make_checkpoint.FIXTURES[0]
    dep = driver.deployment(str(ROOT / spec))
    words = logical_words(ROOT / directory)
    res = driver.oracle(dep, rounds=version)
    assert words["parameters"].tolist() == list(res.params)
    assert words["state"].tolist() == list(res.state)


def test_a_fixture_of_the_one_writer_replicated_layout_still_reads():
    """tests/errors/checkpoints/lsq-star-v2-one-writer is the fixture as it was written
    before the owners of a replicated region each wrote a block of it: owner 0's shard holds
    every word, the other shards a header alone. The same lines and identity, the same
    words: readers go by the fragment table, whoever wrote what."""
    spec, version, directory, _ = make_checkpoint.FIXTURES[0]
    old, new = ROOT / "tests/errors/checkpoints/lsq-star-v2-one-writer", ROOT / directory
    m = verify(old)
    assert m.version == version and {f.owner for f in m.fragments} == {0}
    assert {f.owner for f in verify(new).fragments} == {0, 1}
    now = read_manifest(new)
    assert (m.identity, m.learner, m.inputs, m.contract, m.layout) == (
        now.identity, now.learner, now.inputs, now.contract, now.layout)
    a, b = logical_words(old), logical_words(new)
    assert a["parameters"].tolist() == b["parameters"].tolist() and a["state"].tolist() == b["state"].tolist()


def test_a_plan_checkpoint_with_inner_owners_and_partitioned_words(tmp_path):
    """Written as the owners of a partitioned deployment on a hierarchy would: every owner's
    own fragments, the inner owners' manifests; the words assemble to the oracle's."""
    from alphac import driver

    spec = tmp_path / "h.alpha"
    text = (ROOT / "specs/lsq_momentum_partitioned_star.alpha").read_text()
    spec.write_text(text.replace("DataParallelStar", "DataParallelHierarchy { dataParallelFanout = 2 }"))
    shutil.copytree(ROOT / "specs/Gates", tmp_path / "Gates")
    d = tmp_path / "ckpt-2"
    root = make_checkpoint.make(spec, 2, d)
    assert set(root.manifests) == {1}
    assert len({f.owner for f in root.fragments}) > 1
    words = logical_words(d)
    res = driver.oracle(driver.deployment(str(spec)), rounds=2)
    assert words["parameters"].tolist() == list(res.params) and words["state"].tolist() == list(res.state)


def _resigned(text: str) -> str:
    return with_trailer(text[:text.rindex("sha256 ")].encode()).decode()


def test_a_number_of_more_than_18_digits_is_malformed_not_an_error_of_python(tmp_path):
    """The restore reads at most 18 digits of a number; so does the Python reader (int() of
    more than 4300 digits raised ValueError, a traceback in alphac inspect)."""
    d = tmp_path / "ckpt-3"
    write(d, children=None)
    text = (d / "manifest.txt").read_text()
    for digits in ("9" * 19, "9" * 5000):
        with pytest.raises(CheckpointError) as info:
            parse(_resigned(text.replace("version 3\n", f"version {digits}\n", 1)))
        assert (info.value.code, info.value.line, info.value.message) == (
            "checkpoint-manifest", 2, "malformed 'version' line")


def test_a_shard_shorter_than_its_header_is_malformed(tmp_path):
    """A shard holding no fragment, cut below its 48-byte header with the manifest's size
    and sha256 made to agree: refused by name (struct.error, a traceback, before)."""
    frags = fragments()
    frags[0][0] = ("parameters", ((0, 3, 2),), PARAMS[[0, 3]])
    frags[3] = []
    d = tmp_path / "ckpt-3"
    write(d, frags=frags, children=None)
    short = (d / "shard-3.bin").read_bytes()[:10]
    (d / "shard-3.bin").write_bytes(short)
    text = (d / "manifest.txt").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("shard 3 "))
    (d / "manifest.txt").write_text(_resigned(text.replace(
        line, f"shard 3 shard-3.bin 10 {shard_digest(short, [])}")))
    err = refusal(d)
    assert (err.code, err.message) == ("checkpoint-manifest", f"{d / 'shard-3.bin'}: shorter than a shard's header")

"""`alphac inspect PATH` on a checkpoint directory (verified) and on an owner's output file."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from click.testing import CliRunner

from alphac import driver
from alphac.checkpoint.write import write_checkpoint
from alphac.commands import main
from alphac.launch.results import OwnerResult
from alphac.testing.outputs import encode_result

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "errors" / "checkpoints" / "lsq-star-v2"
sys.path.insert(0, str(ROOT / "tests"))
from test_checkpoint_format import CONTRACT, INPUTS, LAYOUT, LEARNER, fragments  # noqa: E402


def inspect(*args):
    return CliRunner().invoke(main, ["inspect", *args])


def test_the_fixture_as_json():
    out = inspect(str(FIXTURE), "--json")
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    manifest = (FIXTURE / "manifest.txt").read_text().splitlines()
    assert got["version"] == 2 and got["identity"] == manifest[2].split()[1]
    assert got["learner"]["k"] == 2 and got["learner"]["m"] == 2 and got["learner"]["s"] == 3
    assert got["learner"]["line"] == manifest[3][len("learner "):]
    assert got["contract"]["topology"] == "star" and got["contract"]["relation"] == "exact"
    assert got["inputs"]["line"] == manifest[4][len("inputs "):] and got["inputs"]["rate"] == "3fc0000000000000"
    assert got["auth"] == {"tagged": False, "checked": False}
    assert got["layout"] == {"line": manifest[6][len("layout "):], "owners": 4,
                             "parameters": "replicated", "state": "replicated",
                             "words_per_coordinate": 0, "shared": [], "block_words": 1}
    assert got["regions"] == {"parameters": 2, "state": 2}
    assert [m["file"] for m in got["manifests"]] == ["manifest.txt"]
    assert got["manifests"][0]["owner"] is None and got["manifests"][0]["owners"] == [0, 1, 2, 3]
    # replicated: each owner writes its block of ceil(2 / 4) = 1 word of each region
    assert [(s["owner"], s["file"], len(s["fragments"])) for s in got["shards"]] == [
        (0, "shard-0.bin", 2), (1, "shard-1.bin", 2), (2, "shard-2.bin", 0), (3, "shard-3.bin", 0)]
    assert got["shards"][1]["fragments"][0] == {
        "region": "parameters", "offset": 144, "words": 1, "runs": "1+1x1",
        "sha256": manifest[14].split()[-1]}
    assert got["resumed_from"] is None
    assert got["verified"] == {"ok": True, "manifests": 1, "shards": 4, "fragments": 4, "hashes": 9}
    assert (got.pop("format"), got.pop("ok"), got.pop("kind")) == ("alphac-inspect-1", True, "checkpoint")
    assert {k: got.pop(k) for k in ("diagnostics", "refusals", "suppressed", "suppressed_codes")} == {
        "diagnostics": [], "refusals": [], "suppressed": 0, "suppressed_codes": {}}
    words = driver.checkpoint_words(FIXTURE)
    assert got.pop("words") == {
        "params": {"hex": [f"{w:016x}" for w in words["parameters"]],
                   "values": list(words["parameters"].view("<f8"))},
        "state": {"hex": [f"{w:016x}" for w in words["state"]],
                  "values": list(words["state"].view("<f8"))}}
    assert got == driver.inspect_checkpoint(FIXTURE) | {"checkpoint": str(FIXTURE),
                                                        "manifest": str(FIXTURE / "manifest.txt")}


def test_the_fixture_as_text():
    out = inspect(str(FIXTURE))
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == f"checkpoint    {FIXTURE}"
    assert lines[1] == "version       2"
    assert any(x.startswith("verified      ok: 9 sha256 hashes (1 manifest, 4 shards, 4 fragments)")
               for x in lines)
    assert "resumed-from  -" in lines
    assert "  manifest.txt  root: owners 0 1 2 3; child manifests -; sha256 " + \
        (FIXTURE / "manifest.txt").read_text().splitlines()[-1].split()[1][:16] in lines
    assert any(x.startswith("    parameters offset 144 words 1 runs 1+1x1 sha256 ") for x in lines)


def test_a_tree_of_manifests_and_a_resumed_from_line(tmp_path):
    d = tmp_path / "ckpt-3"
    write_checkpoint(d, version=3, learner=LEARNER, inputs=INPUTS, contract=CONTRACT, layout=LAYOUT,
                     regions={"parameters": 4, "state": 3}, fragments=fragments(),
                     children={0: (1, 2), 1: (3,)}, resumed=("12" * 32, 1, "new"))
    got = json.loads(inspect(str(d), "--json").stdout)
    assert [(m["file"], m["owner"], m["owners"]) for m in got["manifests"]] == [
        ("manifest.txt", None, [0, 1, 2, 3]), ("manifest-1.txt", 1, [1, 3])]
    assert got["manifests"][0]["children"][0]["owner"] == 1
    assert got["resumed_from"] == {"sha256": "12" * 32, "version": 1, "contract": "new"}
    assert got["layout"]["parameters"] == "partitioned"
    assert got["verified"]["hashes"] == 2 + 1 + 4 + 5
    text = inspect(str(d)).stdout
    assert "  manifest-1.txt  owner 1: owners 1 3; child manifests -" in text
    assert "child manifests manifest-1.txt (owner 1)" in text
    assert "resumed-from  version 1 (new contract), manifest sha256 1212121212121212" in text


def test_a_checkpoint_that_does_not_verify_is_refused(tmp_path):
    d = tmp_path / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    raw = bytearray((d / "shard-0.bin").read_bytes())
    raw[150] ^= 0x10
    (d / "shard-0.bin").write_bytes(bytes(raw))
    out = inspect(str(d))
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr == (f"alphac: error[checkpoint-hash-mismatch]: {d}/manifest.txt:11: "
                          f"{d}/shard-0.bin: its sha256 is not the manifest's\n")
    (d / "shard-3.bin").unlink()
    shutil.copy(FIXTURE / "shard-0.bin", d / "shard-0.bin")
    out = inspect(str(d), "--json")
    doc = json.loads(out.stdout)
    assert out.exit_code == 1 and out.stderr == "" and doc["ok"] is False
    assert [r["code"] for r in doc["refusals"]] == ["checkpoint-shard-missing"]
    out = inspect(str(tmp_path))
    assert out.exit_code == 1 and out.stderr.startswith("alphac: error[checkpoint-manifest]: ")


def test_a_malformed_manifest_is_its_located_diagnostic(tmp_path):
    d = tmp_path / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    text = (d / "manifest.txt").read_text()
    (d / "manifest.txt").write_text(text[:text.index("\nregion state") + 1] + "region sta")
    out = inspect(str(d))
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr == (f"{d}/manifest.txt:9:1: error[checkpoint-manifest]: the manifest is "
                          "truncated (its last line has no end)\n  region sta\n  ^\n")


def test_an_owner_output_file(tmp_path):
    p = tmp_path / "out-1.bin"
    p.write_bytes(encode_result(OwnerResult(1, 5, 0xABCDEF0123456789, (1, 2), (3, 4, 5))))
    got = json.loads(inspect(str(p), "--json").stdout)
    assert {k: got[k] for k in ("format", "ok", "kind", "refusals")} == {
        "format": "alphac-inspect-1", "ok": True, "kind": "output", "refusals": []}
    assert {k: got[k] for k in ("output", "output_format", "owner", "version", "protocol", "k",
                                "m", "params", "state", "holds", "param_coords", "words")} == {
        "output": str(p), "output_format": 1, "owner": 1, "version": 5,
        "protocol": "abcdef0123456789", "k": 2, "m": 3, "params": 2, "state": 3,
        "holds": "every word", "param_coords": None,
        "words": {"params": {"hex": ["0000000000000001", "0000000000000002"],
                             "values": [5e-324, 1e-323]},
                  "state": {"hex": ["0000000000000003", "0000000000000004", "0000000000000005"],
                            "values": [1.5e-323, 2e-323, 2.5e-323]}}}
    owned = tmp_path / "out-2.bin"
    owned.write_bytes(encode_result(OwnerResult(2, 4, 7, (9,), (8, 7), (2,), (0, 2)), k=4, m=3))
    got = json.loads(inspect(str(owned), "--json").stdout)
    assert (got["output_format"], got["k"], got["m"], got["params"], got["state"], got["holds"]) == (
        2, 4, 3, 1, 2, "owned words")
    assert (got["param_coords"], got["state_offsets"]) == ([2], [0, 2])
    text = inspect(str(owned)).stdout
    assert "owner     2" in text and "learner   k 4 m 3" in text
    bad = tmp_path / "bad.bin"
    bad.write_bytes(p.read_bytes()[:-8])
    out = inspect(str(bad))
    assert out.exit_code == 1 and out.stderr.startswith("alphac: error[bad-output]: ")


def test_anything_else_is_read_as_an_executable(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"not an elf file at all")
    out = inspect(str(p))
    assert out.exit_code == 1 and out.stderr.startswith("alphac: error[not-an-alphac-executable]: ")
    assert driver.path_kind(p) == "executable" and driver.path_kind(tmp_path) == "checkpoint"


def test_an_output_file_decoded_and_exported(tmp_path):
    import numpy as np

    words = (0x3FD0000000000000, 0xBFE8000000000000)  # 0.25, -0.75
    p = tmp_path / "out-0.bin"
    p.write_bytes(encode_result(OwnerResult(0, 3, 7, words, (0x3FF0000000000000,))))
    out = inspect(str(p), "--npy", str(tmp_path / "w.npy"))
    assert out.exit_code == 0
    assert out.stdout.splitlines()[-2:] == [
        "  params 2 words: 0.25 (3fd0000000000000), -0.75 (bfe8000000000000)",
        "  state  1 word: 1.0 (3ff0000000000000)"]
    assert np.load(tmp_path / "w.npy").tolist() == [0.25, -0.75]
    full = inspect(str(p), "--full").stdout.splitlines()
    assert full[-2:] == ["  params 3fd0000000000000 bfe8000000000000", "  state  3ff0000000000000"]


def test_the_logical_words_of_a_checkpoint_exported(tmp_path):
    import numpy as np

    out = inspect(str(FIXTURE), "--npy", str(tmp_path / "c.npy"))
    assert out.exit_code == 0 and "logical words (version 2):" in out.stdout.splitlines()
    want = driver.checkpoint_words(FIXTURE)["parameters"].view("<f8").tolist()
    assert np.load(tmp_path / "c.npy").tolist() == want


def test_npy_of_an_executable_is_refused(tmp_path):
    from alphac.testing import session

    spec = str(Path(__file__).resolve().parents[2] / "specs" / "lsq_plain_star.alpha")
    exe = session.built("lsq_plain_star", session.deployment(spec))[("coordinator", "x86_64")]
    out = inspect(str(exe), "--npy", str(tmp_path / "x.npy"))
    assert out.exit_code == 1 and not (tmp_path / "x.npy").exists()
    assert out.stderr == ("alphac: error[usage]: --npy exports the words of a checkpoint or an "
                          "owner's output file\n")

"""Checkpoint tags (docs/checkpoints.md, "Tags"; docs/security.md): a keyed run writes its root
manifest's `auth` line as HMAC-SHA-256 under the checkpoint key, and a keyed restore refuses
`checkpoint-auth` a manifest that is untagged, tagged under another key, or changed after it
was tagged (its sha256 trailer made right again); an unkeyed run reads tagged and untagged
checkpoints alike. The Python readers check the tag given the key file, and say so when not."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.checkpoint import CheckpointError, read_key, read_manifest, render, verify
from alphac.checkpoint.manifest import checkpoint_key, manifest_tag, with_trailer
from alphac.commands import main
from alphac.launch.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
CKPTS = ROOT / "tests" / "errors" / "checkpoints"
SPEC = CKPTS / "lsq-star.alpha"
FIXTURE = CKPTS / "lsq-star-v2"


def key_file(path: Path, fill: bytes) -> Path:
    path.write_bytes(fill * 32)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("keys")
    return key_file(d / "a.key", b"a"), key_file(d / "b.key", b"b")


@pytest.fixture(scope="module")
def exe(tmp_path_factory) -> Path:
    plan = driver.plan(driver.deployment(str(SPEC)))
    return driver.build(plan, "coordinator", "x86_64", tmp_path_factory.mktemp("auth-exe"))


def tagged(d: Path, key: Path) -> Path:
    """A copy of the fixture at `d`, its root manifest tagged under the run key in `key`."""
    shutil.copytree(FIXTURE, d)
    m = read_manifest(d)
    (d / "manifest.txt").write_text(render(dataclasses.replace(
        m, auth=f"hmac-sha256 {manifest_tag(m, read_key(key))}")))
    return d


def resign(path: Path, body: bytes) -> None:
    path.write_bytes(with_trailer(body))


def restore(exe: Path, ckpt: Path, tmp_path: Path, *keys: str) -> str:
    """Owner 0 alone restoring `ckpt` with the options `keys` (default --insecure): its
    refusal (a restore that passes goes on to connect: connect-timeout)."""
    peers = tmp_path / "peers"
    peers.write_text("".join(f"{o} 127.0.0.1:{p}\n" for o, p in enumerate(free_ports(4))))
    out = tmp_path / "o0"
    for stale in (out, Path(f"{out}.tmp")):
        stale.unlink(missing_ok=True)
    done = subprocess.run([str(exe), "--owner", "0", "--peers", str(peers), "--out", str(out),
                           *(keys or ("--insecure",)), "--resume", str(ckpt), "--timeout-ms", "300"],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 1, (done.returncode, done.stderr)
    return done.stderr.strip()


def test_the_tag_is_hmac_sha256_under_the_derived_key_over_the_bytes_before_its_line(keys, tmp_path):
    d = tagged(tmp_path / "ckpt-2", keys[0])
    text = (d / "manifest.txt").read_text()
    lines = text.splitlines()
    assert lines[-2].startswith("auth hmac-sha256 ") and lines[-1].startswith("sha256 ")
    import hmac

    derived = hmac.new(read_key(keys[0]), b"alphac-checkpt-1", hashlib.sha256).digest()
    assert derived == checkpoint_key(read_key(keys[0]))
    signed = text[:text.index("\nauth ") + 1].encode()
    assert lines[-2] == "auth hmac-sha256 " + hmac.new(derived, signed, hashlib.sha256).hexdigest()


# ----------------------------------------------------------------------------- the executables

def test_a_keyed_restore_takes_a_checkpoint_tagged_under_its_key(exe, keys, tmp_path):
    d = tagged(tmp_path / "ckpt-2", keys[0])
    assert restore(exe, d, tmp_path, "--insecure", "--checkpoint-key", str(keys[0])).startswith(
        "refused: connect-timeout: ")
    # the run's key is the checkpoint key when no --checkpoint-key is given
    assert restore(exe, d, tmp_path, "--key", str(keys[0])).startswith("refused: connect-timeout: ")


def test_a_keyed_restore_refuses_an_untagged_checkpoint(exe, keys, tmp_path):
    m = FIXTURE / "manifest.txt"
    want = (f"refused: checkpoint-auth: {m} is not tagged (written by an unkeyed run); a keyed run resumes only "
            "checkpoints tagged under its checkpoint key")
    assert restore(exe, FIXTURE, tmp_path, "--insecure", "--checkpoint-key", str(keys[0])) == want
    assert restore(exe, FIXTURE, tmp_path, "--key", str(keys[0])) == want


def test_a_keyed_restore_refuses_another_keys_or_a_forged_tag(exe, keys, tmp_path):
    d = tagged(tmp_path / "ckpt-2", keys[0])
    m = d / "manifest.txt"
    want = (f"refused: checkpoint-auth: {m}: its tag is not the one this run's checkpoint key makes (another key's "
            "checkpoint, or a forged one)")
    assert restore(exe, d, tmp_path, "--insecure", "--checkpoint-key", str(keys[1])) == want
    assert restore(exe, d, tmp_path, "--key", str(keys[0]), "--checkpoint-key", str(keys[1])) == want
    # another rate written in, its sha256 trailer made right: the hashes verify, the tag does not
    body = m.read_bytes().rsplit(b"sha256 ", 1)[0]
    resign(m, body.replace(b" rate 3fc0000000000000", b" rate 3fb0000000000000"))
    assert restore(exe, d, tmp_path, "--insecure", "--checkpoint-key", str(keys[0])) == want


def test_an_unkeyed_restore_reads_tagged_and_untagged_checkpoints(exe, keys, tmp_path):
    assert restore(exe, FIXTURE, tmp_path).startswith("refused: connect-timeout: ")
    assert restore(exe, tagged(tmp_path / "ckpt-2", keys[0]), tmp_path).startswith("refused: connect-timeout: ")


def _fixture_copy(tmp_path) -> tuple[Path, Path, bytes]:
    """A copy of the fixture: its directory, its root manifest and that manifest's bytes
    before the sha256 trailer."""
    d = tmp_path / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    m = d / "manifest.txt"
    return d, m, m.read_bytes().rsplit(b"sha256 ", 1)[0]


def test_a_root_manifest_without_its_auth_line_or_with_a_line_after_it_is_malformed(exe, tmp_path):
    d, m, body = _fixture_copy(tmp_path)
    resign(m, body.replace(b"auth none\n", b""))
    assert restore(exe, d, tmp_path) == f"refused: checkpoint-manifest: {m} has no auth line"
    with pytest.raises(CheckpointError) as err:
        verify(d)
    assert (err.value.code, err.value.message) == (
        "checkpoint-manifest", "no 'auth' line (the root manifest says whether it is tagged)")
    resign(m, body + b"owners 0\n")
    assert restore(exe, d, tmp_path) == f"refused: checkpoint-manifest: {m} line 20: a line after the auth line"
    with pytest.raises(CheckpointError) as err:
        verify(d)
    assert (err.value.code, err.value.line) == ("checkpoint-manifest", 20)


def test_a_format_2_manifest_is_refused_by_name(exe, tmp_path):
    d, m, body = _fixture_copy(tmp_path)
    resign(m, body.replace(b"alphac-checkpoint 3\n", b"alphac-checkpoint 2\n"))
    assert restore(exe, d, tmp_path) == (
        f"refused: checkpoint-manifest: {m} line 1: format 2 is not read: it names neither the learner's inputs "
        "nor an auth line (expected 'alphac-checkpoint 3')")
    with pytest.raises(CheckpointError) as err:
        verify(d)
    assert err.value.code == "checkpoint-manifest" and err.value.message.startswith("format 2 is not read")


# ----------------------------------------------------------------------------- the Python readers

def test_verify_checks_the_tag_given_a_key(keys, tmp_path):
    d = tagged(tmp_path / "ckpt-2", keys[0])
    assert verify(d, read_key(keys[0])).auth.startswith("hmac-sha256 ")
    for ckpt, key, says in ((d, keys[1], "tag is not the one this key makes"), (FIXTURE, keys[0], "is not tagged")):
        with pytest.raises(CheckpointError) as err:
            verify(ckpt, read_key(key))
        assert err.value.code == "checkpoint-auth" and says in err.value.message
        assert err.value.line == 19


def test_a_key_file_is_checked_as_the_executables_check_theirs(tmp_path):
    loose = key_file(tmp_path / "loose.key", b"x")
    loose.chmod(0o644)
    short = key_file(tmp_path / "short.key", b"")
    with pytest.raises(CheckpointError) as err:
        read_key(loose)
    assert (err.value.code, err.value.message) == (
        "key-file", f"the key file {loose} has mode 0644; it must be private to its owner (chmod 600)")
    with pytest.raises(CheckpointError) as err:
        read_key(short)
    assert err.value.message == f"the key file {short} holds 0 bytes; a key is 32 to 4096 bytes"
    os.mkfifo(tmp_path / "fifo.key")
    with pytest.raises(CheckpointError) as err:
        read_key(tmp_path / "fifo.key")
    assert err.value.code == "key-file" and "not a regular file" in err.value.message


def test_inspect_checks_the_tag_given_the_key_and_says_when_it_did_not(keys, tmp_path):
    d = tagged(tmp_path / "ckpt-2", keys[0])
    run = CliRunner()
    unchecked = run.invoke(main, ["inspect", str(d)])
    assert unchecked.exit_code == 0
    assert "tag           hmac-sha256, NOT checked (no --key): its hashes prove it whole, not who wrote it" in \
        unchecked.stdout.splitlines()
    checked = run.invoke(main, ["inspect", str(d), "--key", str(keys[0]), "--json"])
    assert checked.exit_code == 0 and json.loads(checked.stdout)["auth"] == {"tagged": True, "checked": True}
    assert json.loads(run.invoke(main, ["inspect", str(d), "--json"]).stdout)["auth"] == {
        "tagged": True, "checked": False}
    wrong = run.invoke(main, ["inspect", str(d), "--key", str(keys[1])])
    assert wrong.exit_code == 1 and wrong.stderr == (
        f"alphac: error[checkpoint-auth]: {d}/manifest.txt:19: {d}/manifest.txt's tag is not the one this key "
        "makes (another key's checkpoint, or a forged one)\n")
    none = run.invoke(main, ["inspect", str(FIXTURE)])
    assert "tag           none: the checkpoint is not tagged (written by an unkeyed run)" in none.stdout.splitlines()


def test_the_oracle_checks_the_tag_given_the_key_and_says_when_it_did_not(keys, tmp_path):
    d = tagged(tmp_path / "ckpt-2", keys[0])
    run = CliRunner()

    def resumed_from(*args: str) -> dict:
        out = run.invoke(main, ["oracle", str(SPEC), "--resume", str(d), "--json", *args])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["resumed_from"]

    assert resumed_from("--key", str(keys[0]))["tag"] == "checked"
    assert resumed_from()["tag"] == "unchecked"
    table = run.invoke(main, ["oracle", str(SPEC), "--resume", str(d)]).stdout.splitlines()[0]
    assert table.endswith(f"from version 2 of {d} (same contract; its tag NOT checked (no --key)), version 5")
    wrong = run.invoke(main, ["oracle", str(SPEC), "--resume", str(d), "--key", str(keys[1])])
    assert wrong.exit_code == 1 and wrong.stderr.startswith(
        f"refused: checkpoint-auth: {d}/manifest.txt's tag is not the one this key makes")
    plain = run.invoke(main, ["oracle", str(SPEC), "--resume", str(FIXTURE), "--key", str(keys[0])])
    assert plain.exit_code == 1 and plain.stderr.startswith("refused: checkpoint-auth: ")
    usage = run.invoke(main, ["oracle", str(SPEC), "--key", str(keys[0])])
    assert usage.exit_code == 1 and "--key checks a resumed checkpoint's tag: give --resume PATH" in usage.stderr

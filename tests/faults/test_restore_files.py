"""The executables' restore of damaged checkpoint files (docs/checkpoints.md, "Restoring"):
owner 0 of the fixture's deployment restoring a copy of tests/errors/checkpoints/lsq-star-v2
(owner 0 holds every word: it reads shards 0 and 1, which hold them, and checks shards 2 and
3, headers only, without reading fragments). A restore that passes goes on
to connect and is refused connect-timeout; every damaged copy is refused by its code first,
within a subprocess timeout (a hang or a crash fails)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from alphac import driver
from alphac.checkpoint.manifest import with_trailer
from alphac.launch.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "errors" / "checkpoints" / "lsq-star-v2"
SPEC = ROOT / "tests" / "errors" / "checkpoints" / "lsq-star.alpha"


@pytest.fixture(scope="module")
def exe(tmp_path_factory) -> Path:
    plan = driver.plan(driver.deployment(str(SPEC)))
    return driver.build(plan, "coordinator", "x86_64", tmp_path_factory.mktemp("restore-exe"))


def restore(exe: Path, ckpt: Path, tmp_path: Path) -> str:
    peers = tmp_path / "peers"
    peers.write_text("".join(f"{o} 127.0.0.1:{p}\n" for o, p in enumerate(free_ports(4))))
    done = subprocess.run([str(exe), "--owner", "0", "--peers", str(peers), "--out", str(tmp_path / "o0"),
                           "--insecure", "--resume", str(ckpt), "--timeout-ms", "300"], capture_output=True, text=True,
                          timeout=10)
    assert done.returncode == 1, (done.returncode, done.stderr)
    return done.stderr.strip()


def copy(tmp_path: Path) -> Path:
    d = tmp_path / "ck" / "ckpt-2"
    shutil.copytree(FIXTURE, d)
    return d


def resign(path: Path, body: bytes) -> None:
    path.write_bytes(with_trailer(body))


def body(d: Path) -> bytes:
    return (d / "manifest.txt").read_bytes().rsplit(b"sha256 ", 1)[0]


@pytest.mark.parametrize("fixture", ["lsq-star-v2", "lsq-star-v2-one-writer"])
def test_the_fixture_restores(exe, tmp_path, fixture):
    d = tmp_path / "ck" / "ckpt-2"
    shutil.copytree(FIXTURE.parent / fixture, d)
    assert restore(exe, d, tmp_path).startswith("refused: connect-timeout: ")


def test_a_nul_byte_before_a_matching_sha256_line_is_a_malformed_manifest(exe, tmp_path):
    d = copy(tmp_path)
    resign(d / "manifest.txt", body(d)[:-1] + b"\0\n")
    assert restore(exe, d, tmp_path) == f"refused: checkpoint-manifest: {d / 'manifest.txt'} line 19: holds a NUL byte"


@pytest.mark.parametrize("item", ["version", "identity", "learner", "inputs", "contract", "layout", "owners"])
def test_an_item_given_twice_is_refused_by_restore_and_inspect(exe, tmp_path, item):
    """Re-signed, a manifest with one of its items twice: the restore took the last version
    line (and the first learner line), the Python reader refused it; both refuse it now."""
    from alphac.checkpoint import CheckpointError, verify

    d = copy(tmp_path)
    lines = body(d).decode().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(item + " "))
    resign(d / "manifest.txt", "".join(lines[:at + 1] + lines[at:]).encode())
    assert restore(exe, d, tmp_path) == \
        f"refused: checkpoint-manifest: {d / 'manifest.txt'} line {at + 2}: an item given twice"
    with pytest.raises(CheckpointError) as info:
        verify(d)
    assert (info.value.code, info.value.line) == ("checkpoint-manifest", at + 2)


def test_a_fifo_as_a_shard_or_manifest_is_refused_not_waited_on(exe, tmp_path):
    d = copy(tmp_path)
    (d / "shard-0.bin").unlink()
    os.mkfifo(d / "shard-0.bin")
    assert restore(exe, d, tmp_path) == \
        f"refused: checkpoint-shard-missing: '{d / 'shard-0.bin'}' is not a regular file"
    (d / "manifest.txt").unlink()
    os.mkfifo(d / "manifest.txt")
    (tmp_path / "o0.tmp").unlink(missing_ok=True)
    assert restore(exe, d, tmp_path) == f"refused: checkpoint-manifest: '{d / 'manifest.txt'}' is not a regular file"


def test_a_deleted_header_only_shard_is_refused(exe, tmp_path):
    d = copy(tmp_path)
    (d / "shard-2.bin").unlink()
    assert restore(exe, d, tmp_path) == f"refused: checkpoint-shard-missing: '{d / 'shard-2.bin'}' is missing"


def test_a_flipped_header_only_shard_is_refused(exe, tmp_path):
    d = copy(tmp_path)
    data = bytearray((d / "shard-2.bin").read_bytes())
    data[20] ^= 1
    (d / "shard-2.bin").write_bytes(bytes(data))
    assert restore(exe, d, tmp_path) == (f"refused: checkpoint-hash-mismatch: {d / 'shard-2.bin'}: its sha256 is "
                                         f"not the one {d / 'manifest.txt'} names")


def test_a_shard_path_outside_the_checkpoint_is_refused_by_restore_and_inspect(exe, tmp_path):
    from alphac.checkpoint import CheckpointError, verify

    d = copy(tmp_path)
    (d.parent / "outside").mkdir()
    shutil.move(d / "shard-1.bin", d.parent / "outside" / "shard-1.bin")
    resign(d / "manifest.txt", body(d).replace(b" shard-1.bin ", b" ../outside/shard-1.bin "))
    assert restore(exe, d, tmp_path) == \
        f"refused: checkpoint-manifest: {d / 'manifest.txt'} line 14: unknown or malformed item"
    with pytest.raises(CheckpointError) as info:
        verify(d)
    assert (info.value.code, info.value.line) == ("checkpoint-manifest", 14)


@pytest.mark.parametrize("kind", ["fifo", "link"])
@pytest.mark.parametrize("name", ["manifest.txt", "shard-1.bin"])
def test_the_python_reader_refuses_a_fifo_or_a_link_without_waiting(tmp_path, kind, name):
    """`alphac inspect` (and the oracle's resume) read a checkpoint as the executables'
    restore does: a FIFO does not block it, a link (to a good copy) is refused."""
    ckpt = copy(tmp_path)
    target = ckpt / name
    data = target.read_bytes()
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "elsewhere").write_bytes(data)
        target.symlink_to(tmp_path / "elsewhere")
    done = subprocess.run([sys.executable, "-m", "alphac", "inspect", str(ckpt)], capture_output=True, text=True,
                          timeout=30)
    code = "checkpoint-manifest" if name == "manifest.txt" else "checkpoint-shard-missing"
    assert done.returncode == 1 and code in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert ("symbolic link" if kind == "link" else "not a regular file") in done.stderr, done.stderr


@pytest.mark.parametrize("item,old,new", [
    ("layout", b"words-per-coordinate 0", b"words-per-coordinate 7"),
    ("inputs", b" rate 3f", b" rate 3e"),
])
def test_a_child_manifest_whose_learner_lines_are_not_the_root_s_is_refused_by_both_readers(exe, tmp_path, item,
                                                                                            old, new):
    """A child manifest is named by its right sha256 from the root, but one of the lines the
    identity stands for differs from the root's: the restore read only the child's version
    and identity (the Python reader its format), so another layout or rate passed there."""
    from alphac.checkpoint import CheckpointError, verify

    d = copy(tmp_path)
    root = body(d)
    assert old in root
    child = d / "manifest-1.txt"
    resign(child, root.replace(old, new, 1))
    line = f"manifest 1 manifest-1.txt {hashlib.sha256(child.read_bytes()).hexdigest()}\n".encode()
    resign(d / "manifest.txt", root.replace(b"owners 0 1 2 3\n", b"owners 0 1 2 3\n" + line, 1))
    assert restore(exe, d, tmp_path) == f"refused: checkpoint-manifest: {child}: its {item} line is not the root's"
    with pytest.raises(CheckpointError) as err:
        verify(d)
    assert (err.value.code, err.value.message) == ("checkpoint-manifest", f"{child}: its {item} line is not the root's")
    resign(child, root)  # the same lines: both read on
    resign(d / "manifest.txt", root.replace(b"owners 0 1 2 3\n", b"owners 0 1 2 3\n" + (
        f"manifest 1 manifest-1.txt {hashlib.sha256(child.read_bytes()).hexdigest()}\n".encode()), 1))
    assert restore(exe, d, tmp_path).startswith("refused: connect-timeout: ")
    verify(d)

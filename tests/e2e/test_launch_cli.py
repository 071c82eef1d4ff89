"""`alphac launch` and `python -m alphac.demo` as a person runs them (subprocesses)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-aarch64 not installed")
def test_demo_ends_with_the_bit_identical_line(tmp_path):
    p = _run("-m", "alphac.demo", "specs/demo.alpha", "-o", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    from alphac.check import load_deployment

    dep = load_deployment(str(ROOT / "specs/demo.alpha"))
    assert set(dep.placement) == {"x86_64", "aarch64"}
    assert lines[-1] == f"demo: {dep.owners} owners, x86_64+aarch64, bit-identical to the oracle"
    rows = [l.split() for l in lines if l.split() and l.split()[0].isdigit()]
    assert [r[0] for r in rows] == [str(o) for o in range(dep.owners)]
    assert [r[2] for r in rows] == list(dep.placement)
    assert all(r[-1] == "match" for r in rows)


def test_launch_json_has_the_oracle_keys_plus_match_and_measured_bytes(tmp_path):
    spec = "specs/lsq_momentum_star.alpha"
    p = _run("-m", "alphac", "launch", spec, "--json", "--rounds", "3", "-o", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout)
    q = _run("-m", "alphac", "oracle", spec, "--json", "--rounds", "3")
    assert q.returncode == 0, q.stderr
    want = json.loads(q.stdout)
    assert got["match"] is True
    assert set(got) == set(want) | {"match", "run_dir"}
    assert (got["format"], want["format"]) == ("alphac-launch-1", "alphac-oracle-1")
    for key in set(want) - {"owners", "protocol", "format"}:
        assert got[key] == want[key], key
    # the oracle is independent of the planner and may leave the protocol out (null)
    from alphac.check import load_deployment
    from alphac.plan import plan

    assert got["protocol"] == plan(load_deployment(str(ROOT / spec))).protocol_hex
    assert want["protocol"] in (None, got["protocol"])
    assert len(got["owners"]) == len(want["owners"]) == 4
    laws = plan(load_deployment(str(ROOT / spec))).owners
    peers = {0: [1, 2, 3], 1: [0], 2: [0], 3: [0]}  # a star: the hub and each worker
    # without --transport, shared memory (unless $ALPHAC_TRANSPORT says tcp)
    used = "tcp" if os.environ.get("ALPHAC_TRANSPORT") == "tcp" else "shm"
    for g, w, law in zip(got["owners"], want["owners"], laws):
        assert g.pop("match") is True
        # what the executable measured is the plan's law
        assert (g.pop("persistent_bytes"), g.pop("peak_bytes")) == (law.persistent_bytes, law.peak_bytes)
        assert g.pop("transport") == used
        connections = g.pop("connections")
        assert [(c["peer"], c["transport"]) for c in connections] == [(p, used) for p in peers[g["owner"]]]
        assert g == w
    # the second launch reuses the executables (their inputs hash the same) and writes to a
    # fresh run directory
    before = {f: f.stat().st_mtime_ns for f in tmp_path.iterdir() if f.is_file()}
    # coordinator-x86_64, worker-aarch64, worker-x86_64, each with its record of inputs
    assert sorted(f.suffix for f in before) == ["", "", "", ".deps", ".deps", ".deps"]
    p2 = _run("-m", "alphac", "launch", spec, "-o", str(tmp_path))
    assert p2.returncode == 0, p2.stderr
    assert "build" not in p2.stderr
    assert {f: f.stat().st_mtime_ns for f in tmp_path.iterdir() if f.is_file()} == before
    assert len(list((tmp_path / "runs").iterdir())) == 2
    assert p2.stdout.splitlines()[0].split() == ["owner", "role", "target", "transport", "version", "digest",
                                                 "oracle"]


def test_launch_bad_spec_is_a_located_diagnostic(tmp_path):
    bad = tmp_path / "bad.alpha"
    bad.write_text("value x : Nat = )\n")
    p = _run("-m", "alphac", "launch", str(bad), "-o", str(tmp_path))
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    assert p.stderr.splitlines()[0] == f"{bad}:1:17: error[syntax-error]: unexpected ')'"
    assert p.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_on_launch_leaves_no_owner_behind(tmp_path):
    import os
    import signal
    import time

    from alphac.testing import session

    # executables built beforehand, with their records of inputs, so the launch starts owners
    # at once
    from alphac.launch.cache import deps_path

    dep = session.deployment(str(ROOT / "specs/lsq_plain_hierarchy.alpha"))
    for exe in session.built("lsq_plain_hierarchy", dep).values():
        shutil.copy2(exe, tmp_path / exe.name)
        shutil.copy2(deps_path(exe), deps_path(tmp_path / exe.name))
    p = subprocess.Popen([sys.executable, "-m", "alphac", "launch",
                          "specs/lsq_plain_hierarchy.alpha", "--rounds", str(10**7),
                          "-o", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    owners: list[int] = []
    deadline = time.monotonic() + 60
    while len(owners) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
        owners = [int(x) for x in os.popen(f"pgrep -P {p.pid}").read().split()]
    assert len(owners) == 4, owners
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "interrupted; every owner was stopped" in err
    assert "Traceback" not in err
    time.sleep(0.2)
    alive = [o for o in owners if os.path.exists(f"/proc/{o}")
             and open(f"/proc/{o}/stat").read().split(")")[-1].split()[0] != "Z"]
    assert alive == []


def test_launch_writes_checkpoints_and_a_launch_resumed_from_one_matches_the_oracle(tmp_path):
    """`alphac launch --checkpoint-dir`, then `alphac launch --resume` from its ckpt-4 (of
    5 updates): both runs compare equal with the oracle, the second from the checkpoint's
    words; the resumed run's outputs equal the uninterrupted run's byte for byte."""
    spec = "specs/lsq_adam_hierarchy_ckpt.alpha"
    ck = tmp_path / "ck"
    first = _run("-m", "alphac", "launch", spec, "--json", "-o", str(tmp_path / "a"),
                 "--checkpoint-dir", str(ck))
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(p.name for p in ck.iterdir()) == ["ckpt-2", "ckpt-4"]
    again = _run("-m", "alphac", "launch", spec, "--json", "-o", str(tmp_path / "b"),
                 "--checkpoint-dir", str(tmp_path / "ck2"), "--resume", str(ck / "ckpt-4"))
    assert again.returncode == 0, again.stdout + again.stderr
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert a["match"] is True and b["match"] is True
    assert [(o["params"], o["state"]) for o in a["owners"]] == [(o["params"], o["state"]) for o in b["owners"]]
    assert [o["version"] for o in b["owners"]] == [5] * 4


def test_launch_resume_of_a_damaged_checkpoint_refuses_before_any_owner_runs(tmp_path):
    spec = "specs/lsq_adam_hierarchy_ckpt.alpha"
    ck = tmp_path / "ck"
    assert _run("-m", "alphac", "launch", spec, "-o", str(tmp_path / "a"),
                "--checkpoint-dir", str(ck)).returncode == 0
    shard = next(p for p in (ck / "ckpt-2").rglob("*") if p.is_file() and p.suffix != ".manifest"
                 and p.name != "MANIFEST")
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    p = _run("-m", "alphac", "launch", spec, "-o", str(tmp_path / "b"), "--resume", str(ck / "ckpt-2"))
    assert p.returncode != 0
    assert "checkpoint-hash-mismatch" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "b" / "runs").exists() or not any((tmp_path / "b" / "runs").iterdir())

"""The runner starts owners in their own process groups and never leaves one behind."""

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from alphac.launch import runner
from alphac.testing.outputs import refusal_code
from alphac.launch.ports import free_ports
from alphac.launch.runner import OwnerCommand, owner_argv, remove_segments, run_owners, write_peers


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is reaped when /proc shows it gone or 'Z'
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(6)
    assert len(set(ports)) == 6
    for p in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", p))
        s.close()


def test_peers_file_lines(tmp_path, monkeypatch):
    monkeypatch.delenv("ALPHAC_TRANSPORT", raising=False)
    p = write_peers(tmp_path / "x.peers", [4000, 4001, 4002])
    assert p.read_text() == "0 127.0.0.1:4000 shm\n1 127.0.0.1:4001 shm\n2 127.0.0.1:4002 shm\n"
    p = write_peers(tmp_path / "y.peers", [4000, 4001], transport="tcp")
    assert p.read_text() == "0 127.0.0.1:4000\n1 127.0.0.1:4001\n"
    monkeypatch.setenv("ALPHAC_TRANSPORT", "shm-only")
    p = write_peers(tmp_path / "z.peers", [4000])
    assert p.read_text() == "0 127.0.0.1:4000 shm-only\n"
    p = write_peers(tmp_path / "v.peers", [4000, 4001], transport=["tcp", "shm"])
    assert p.read_text() == "0 127.0.0.1:4000\n1 127.0.0.1:4001 shm\n"
    monkeypatch.setenv("ALPHAC_TRANSPORT", "udp")
    with pytest.raises(ValueError, match="ALPHAC_TRANSPORT='udp': expected one of tcp, shm, shm-only"):
        write_peers(tmp_path / "w.peers", [4000])


def test_segments_of_ended_owners_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "SHM_DIR", tmp_path)
    for name in ("alphac-41-aa", "alphac-41-bb", "alphac-410-cc", "alphac-7-dd", "other-41-ee"):
        (tmp_path / name).write_bytes(b"")
    assert sorted(remove_segments([41, 5])) == ["alphac-41-aa", "alphac-41-bb"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alphac-410-cc", "alphac-7-dd", "other-41-ee"]


def test_owner_argv_puts_runner_first():
    argv = owner_argv("out/a-worker-aarch64", 2, "p.peers", "r/o2.out", ("qemu-aarch64",),
                      updates=5, timeout_ms=3000)
    assert argv == ("qemu-aarch64", "out/a-worker-aarch64", "--owner", "2", "--peers",
                    "p.peers", "--out", "r/o2.out", "--insecure", "--updates", "5", "--timeout-ms", "3000")
    assert owner_argv("e", 0, "p", "o", key="r/run.key")[7:] == ("--key", "r/run.key")
    assert owner_argv("e", 0, "p", "o", connections="r/o0.connections")[-2:] == (
        "--connections", "r/o0.connections")


def test_all_exit_codes_and_stderr_collected(tmp_path):
    cmds = [OwnerCommand(0, _py("import sys; sys.exit(0)"), tmp_path / "0"),
            OwnerCommand(1, _py("import sys; print('refused: frame-checksum: x', file=sys.stderr);"
                                " sys.exit(1)"), tmp_path / "1")]
    r = run_owners(cmds, 20, tmp_path / "log")
    assert not r.timed_out and not r.ok
    assert [o.returncode for o in r.outcomes] == [0, 1]
    assert r.outcomes[1].refusal() == "refused: frame-checksum: x"
    assert refusal_code(r.outcomes[1].stderr) == "frame-checksum"
    assert r.outcomes[0].refusal() is None


def test_deadline_kills_and_reaps_every_group(tmp_path):
    # each owner also forks a grandchild, as a runner might; both must be gone afterwards
    pidfile = tmp_path / "pids"
    code = ("import os, subprocess, sys, time;"
            "c = subprocess.Popen(['sleep', '60']);"
            f"open({str(pidfile)!r} + sys.argv[1], 'w').write(f'{{os.getpid()}} {{c.pid}}');"
            "time.sleep(60)")
    cmds = [OwnerCommand(i, (*_py(code), str(i)), tmp_path / str(i)) for i in range(3)]
    t0 = time.monotonic()
    r = run_owners(cmds, 1.5, tmp_path / "log")
    assert time.monotonic() - t0 < 10
    assert r.timed_out and not r.ok
    assert sorted(r.killed) == [0, 1, 2]
    assert all(o.timed_out for o in r.outcomes)
    pids = [int(x) for i in range(3) for x in (tmp_path / f"pids{i}").read_text().split()]
    time.sleep(0.2)
    assert [p for p in pids if _alive(p)] == []


def test_finished_owner_is_not_reported_killed(tmp_path):
    cmds = [OwnerCommand(0, _py("pass"), tmp_path / "0"),
            OwnerCommand(1, ("sleep", "60"), tmp_path / "1")]
    r = run_owners(cmds, 1.0, tmp_path / "log")
    assert r.killed == [1]
    assert r.outcomes[0].returncode == 0 and r.outcomes[1].timed_out


def test_ctrl_c_kills_every_owner(tmp_path):
    cmds = [OwnerCommand(i, ("sleep", "60"), tmp_path / str(i)) for i in range(2)]
    seen = []

    def interrupt():
        time.sleep(0.7)
        for pid in map(int, os.popen(f"pgrep -P {os.getpid()} -x sleep").read().split()):
            seen.append(pid)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    th = threading.Thread(target=interrupt)
    th.start()
    with pytest.raises(KeyboardInterrupt):
        run_owners(cmds, 30, tmp_path / "log")
    th.join()
    assert len(seen) == 2
    assert [p for p in seen if _alive(p)] == []


def test_sigterm_to_the_launcher_kills_every_owner(tmp_path):
    import subprocess

    code = f"""
import sys, os
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from alphac.launch.runner import OwnerCommand, run_owners
cmds = [OwnerCommand(i, ('sleep', '60'), None) for i in range(3)]
run_owners(cmds, 60, {str(tmp_path / 'log')!r})
"""
    p = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    kids = []
    while time.monotonic() < deadline and len(kids) < 3:
        time.sleep(0.1)
        kids = [int(x) for x in os.popen(f"pgrep -P {p.pid} -x sleep").read().split()]
    assert len(kids) == 3
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) != 0
    time.sleep(0.2)
    assert [k for k in kids if _alive(k)] == []


def test_free_ports_lie_below_the_ephemeral_range_and_bind():
    """Ports the kernel hands to outgoing connections never collide with an owner's: the
    ports are drawn below that range, distinct, free; contiguous ones are consecutive."""
    import socket

    from alphac.launch import ports

    floor = ports._ephemeral_floor()
    for contiguous in (False, True):
        got = free_ports(6, contiguous=contiguous)
        assert len(set(got)) == 6 and all(ports.FLOOR <= p < floor for p in got)
        if contiguous:
            assert got == list(range(got[0], got[0] + 6))
        for p in got:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", p))


def test_an_earlier_launch_s_interrupt_does_not_stop_a_later_oracle():
    """The oracle beside the owners stops once its own command is interrupted, not because
    an earlier one in the same process was (a library caller that goes on after catching
    `Interrupted`, or the next test in a test process)."""
    import os
    import signal as sig

    from alphac.launch.interrupts import Interrupted, interruptible
    from alphac.launch.beside import OracleProgress

    with pytest.raises(Interrupted):
        with interruptible():
            os.kill(os.getpid(), sig.SIGINT)
            time.sleep(5)
    later = OracleProgress(0, 3)
    later.tick(0)  # not stopped: nothing has interrupted it
    with pytest.raises(Interrupted):
        with interruptible() as st:
            inside = OracleProgress(0, 3)
            with pytest.raises(Interrupted):
                st.handler(sig.SIGTERM, None)  # this command's interrupt ...
            inside.tick(1)  # ... stops its oracle at the next step

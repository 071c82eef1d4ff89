"""Refusals executed by real owners: a peer of the other topology, frames with a bad
checksum, a stale version or an oversized length (sent by a Python peer), a NaN produced
by an update, and a killed owner. Each is refused by its code; nothing is published."""

import dataclasses
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from alphac.image.image import run_id_of
from alphac.launch.commit import resolve
from alphac.launch.runs import new_run_dir
from alphac.launch.roles import runner_for
from alphac.launch.ports import free_ports
from alphac.launch.runner import default_transport, owner_argv, run_owners, write_peers, OwnerCommand
from alphac.testing import frames, session
from alphac.testing.frames import Frame
from alphac.testing.outputs import refusal_code
from alphac.testing.session import owner_exes
from alphac.ir.words import to_bits

SPECS = Path(__file__).resolve().parents[2] / "specs"

SPEC = f"{SPECS}/lsq_plain_star.alpha"
KEY = "lsq_plain_star"


def _assert_nothing_published(run):
    assert sorted(p.name for p in run.run_dir.glob("owner-*.out*")) == []


def _codes(run):
    return [refusal_code(oc.stderr) for oc in run.result.outcomes]


def test_star_owner_refuses_hierarchy_peers():
    star = session.deployment(SPEC)
    hier = session.deployment(f"{SPECS}/lsq_plain_hierarchy.alpha")
    exes = owner_exes(hier, session.built("lsq_plain_hierarchy", hier))
    exes[0] = owner_exes(star, session.built(KEY, star))[0]
    run = session.run("mixed-topology", star, exes=exes, timeout_ms=1500, deadline_s=30)
    codes = _codes(run)
    assert codes[0] == "frame-protocol", run.result.outcomes[0].stderr
    assert all(oc.returncode == 1 for oc in run.result.outcomes), codes
    assert not run.result.timed_out
    _assert_nothing_published(run)


class PlayedPeer:
    """Real owners of the star deployment except owner 1, whose part a Python socket plays."""

    def __init__(self, tmp_key: str, timeout_ms: int = 4000):
        self.dep = session.deployment(SPEC)
        self.plan = session.plan(KEY, self.dep)
        exes = owner_exes(self.dep, session.built(KEY, self.dep))
        self.run_dir = new_run_dir(session.root(), tmp_key)
        self.ports = free_ports(self.dep.owners)
        # owner 1, played here, speaks TCP
        peers = write_peers(self.run_dir / "p.peers", self.ports,
                            transport=["tcp" if o == 1 else default_transport() for o in range(self.dep.owners)])
        self.cmds = [OwnerCommand(o, owner_argv(exes[o], o, peers, self.run_dir / f"owner-{o}.out",
                                                runner_for(self.dep.placement[o]), None,
                                                timeout_ms), self.run_dir / f"owner-{o}.out")
                     for o in range(self.dep.owners) if o != 1]
        ops = self.plan.owners[1].protocol.update_ops
        self.send_step = next(i for i, op in enumerate(ops) if op.kind == "send")
        self.k = self.dep.learner.k
        self.pid = self.plan.protocol_id

    def connect(self) -> frames.Connection:
        deadline = time.monotonic() + 10
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", self.ports[0]), timeout=5)
                return frames.Connection(s, self.pid, 1, 0, self.dep.updates, run_id=run_id_of(self.plan))
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def combine(self, version: int, **kw) -> Frame:
        payload = frames.combine_payload([0] * self.k, self.dep.learner.samples.shares[1])
        return Frame(self.pid, 1, 0, version, self.send_step, frames.COMBINE, payload, **kw)


def _play(tmp_key, act):
    """Start owners 0, 2, 3; run `act(peer, sock)` as owner 1; return owner 0's outcome."""
    peer = PlayedPeer(tmp_key)
    import threading

    box = {}

    def drive():
        try:
            s = peer.connect()
            act(peer, s)
            box["sock"] = s
        except Exception as exc:  # reported by the assertion below
            box["error"] = exc

    th = threading.Thread(target=drive)
    th.start()
    res = run_owners(peer.cmds, 30, peer.run_dir)
    th.join()
    assert "error" not in box, box.get("error")
    box["sock"].sock.close()
    assert not res.timed_out
    assert sorted(p.name for p in peer.run_dir.glob("owner-*.out*")) == []
    assert all(oc.returncode == 1 for oc in res.outcomes), [oc.stderr for oc in res.outcomes]
    return res.outcomes[0]


def test_bad_checksum_frame_refused():
    def act(peer, s):
        f = peer.combine(0)
        s.send(dataclasses.replace(f, checksum=f.correct_checksum() ^ 1))
        time.sleep(0.5)

    oc = _play("bad-checksum", act)
    assert refusal_code(oc.stderr) == "frame-checksum", oc.stderr


def test_oversized_frame_refused_before_its_payload():
    def act(peer, s):
        # only the header goes out: the owner must refuse without waiting for 2**40 words
        s.send(None, raw=peer.combine(0).encode(length=1 << 40)[:64])
        time.sleep(0.5)

    oc = _play("oversized", act)
    assert refusal_code(oc.stderr) == "frame-oversized", oc.stderr


def test_stale_version_frame_refused():
    def act(peer, s):
        s.send(peer.combine(0))  # update 0, played correctly
        back = s.recv()          # the replicated total of update 0
        assert (back.kind, back.version, back.receiver) == (frames.COMBINE, 0, 1)
        s.send(peer.combine(0))  # update 1, sent as version 0 again
        time.sleep(0.5)

    oc = _play("stale-version", act)
    assert refusal_code(oc.stderr) == "frame-version", oc.stderr


def test_update_overflow_refused_as_non_finite_on_every_owner():
    dep = session.deployment(SPEC)
    huge = to_bits(1e308)
    bad = dataclasses.replace(dep, learner=dataclasses.replace(dep.learner, rate=huge))
    run = session.run("overflow", bad, timeout_ms=5000, deadline_s=30)
    assert not run.result.timed_out
    assert _codes(run) == ["non-finite"] * dep.owners, [oc.stderr for oc in run.result.outcomes]
    line = run.result.outcomes[0].refusal()
    assert "update" in line  # names the program, its statement and coordinate
    _assert_nothing_published(run)


def test_killed_owner_makes_the_others_refuse_within_their_deadline():
    dep = session.deployment(SPEC)
    exes = owner_exes(dep, session.built(KEY, dep))
    run_dir = new_run_dir(session.root(), "killed")
    peers = write_peers(run_dir / "p.peers", free_ports(dep.owners))
    procs = []
    try:
        for o in range(dep.owners):
            argv = owner_argv(exes[o], o, peers, run_dir / f"owner-{o}.out",
                              runner_for(dep.placement[o]), 10**9, 3000)
            err = open(run_dir / f"owner-{o}.stderr", "wb")
            procs.append(subprocess.Popen(argv, stderr=err, stdout=subprocess.DEVNULL,
                                          start_new_session=True))
        time.sleep(1.0)
        assert all(p.poll() is None for p in procs), "owners stopped before the kill"
        os.killpg(procs[2].pid, signal.SIGKILL)
        t0 = time.monotonic()
        rcs = {}
        for o, p in enumerate(procs):
            if o != 2:
                rcs[o] = p.wait(timeout=15)
        waited = time.monotonic() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert rcs == {0: 1, 1: 1, 3: 1}
    assert waited < 3.0 * 2 + 1.0
    for o in rcs:
        text = (run_dir / f"owner-{o}.stderr").read_text()
        code = refusal_code(text) or text
        assert code in ("peer-closed", "peer-timeout"), (o, text)
    # the killed owner could not remove its staged output: settling the run does
    assert sorted(p.name for p in run_dir.glob("owner-*.out*")) == ["owner-2.out.tmp"]
    res = resolve({o: run_dir / f"owner-{o}.out" for o in range(dep.owners)}, 0)
    assert not res.committed and [p.name for p in res.removed] == ["owner-2.out.tmp"]
    assert sorted(p.name for p in run_dir.glob("owner-*.out*")) == []


@pytest.mark.parametrize("code, mutate", [
    ("frame-magic", lambda f: dataclasses.replace(f, magic=f.magic ^ 1)),
    ("frame-protocol", lambda f: dataclasses.replace(f, protocol=f.protocol ^ 1)),
    ("frame-sender", lambda f: dataclasses.replace(f, sender=2)),
    ("frame-receiver", lambda f: dataclasses.replace(f, receiver=3)),
    ("frame-version", lambda f: dataclasses.replace(f, version=1)),
    ("frame-step", lambda f: dataclasses.replace(f, step=f.step + 1)),
    ("frame-kind", lambda f: dataclasses.replace(f, kind=frames.DIGEST)),
    ("frame-length", lambda f: dataclasses.replace(f, payload=f.payload[:-1])),
])
def test_each_wrong_header_field_refused_by_its_code(code, mutate):
    def act(peer, s):
        s.send(mutate(peer.combine(0)))
        time.sleep(0.5)

    oc = _play(code, act)
    assert refusal_code(oc.stderr) == code, oc.stderr


def test_launch_reports_that_the_oracle_refuses_the_same_way(tmp_path):
    import io

    from alphac.commands.launch import print_failures
    from alphac.launch.launcher import launch

    dep = session.deployment(SPEC)
    huge = to_bits(1e308)
    bad = dataclasses.replace(dep, learner=dataclasses.replace(dep.learner, rate=huge))
    report = launch(bad, out_dir=tmp_path, deadline_s=30, timeout_ms=5000)
    assert not report.match
    assert report.oracle_refusal.startswith("non-finite: ")
    assert report.refusals_agree
    assert [r.why.split(":", 1)[0] for r in report.rows] == ["owner-failed"] * 4
    err = io.StringIO()
    print_failures(report, err)
    # one root cause, once: the code every owner refused by, not four owner-failed lines
    lines = err.getvalue().splitlines()
    assert [ln for ln in lines if ln.startswith("alphac: error[")] == [
        "alphac: error[non-finite]: 4 owners refused non-finite; the first, owner 0 (coordinator on "
        "x86_64): " + report.rows[0].why.split("refused: non-finite: ", 1)[1]]
    assert lines[0].startswith("alphac: error[non-finite]: 4 owners refused non-finite; the first, owner 0 "
                               "(coordinator on x86_64): update statement 'slot 0 (Lsq.alpha:29:5)'")
    assert "alphac: note: the oracle refuses: non-finite: " in err.getvalue()
    assert [ln for ln in lines if ln.startswith("--- owner")] == [
        "--- owner 0 stderr (owners 1, 2, 3 refused alike) ---"]
    [(code, message, owner)] = report.causes()
    assert (code, owner) == ("non-finite", None) and message.startswith("4 owners refused non-finite; ")
    assert report.as_json()["oracle_refusal"] == report.oracle_refusal

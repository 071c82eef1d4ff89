"""Reliability and security of a run, with real owners: peers without the key, built from
other data, or lying about their counts are refused; a squatter on the hub's port makes no
owner publish; planted, shared or unusable output locations are refused before the first
update; a trickling peer is refused on time; and kill -9 of any owner at any moment leaves
the run directory's final names holding the whole run or nothing of it before any
settling, either every output committed or none after it, and no shared-memory segment
once the launcher's cleanup ran (the owners use shared memory unless $ALPHAC_TRANSPORT=tcp; scripts/kill-trials
runs many more)."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from alphac import wire
from alphac.image.image import run_id_of
from alphac.launch.commit import resolve, staged_path
from alphac.launch.plan_run import write_key
from alphac.launch.report import compare
from alphac.launch.runs import new_run_dir
from alphac.launch.roles import runner_for
from alphac.launch.ports import free_ports
from alphac.launch.runner import SHM_DIR, default_transport, owner_argv, remove_segments, write_peers
from alphac.plan.protocol import OP_CODE
from alphac.testing import frames as fr
from alphac.testing import session
from alphac.testing.outputs import refusal_code
from alphac.testing.session import owner_exes

SPECS = Path(__file__).resolve().parents[2] / "specs"
SPEC = f"{SPECS}/lsq_plain_star.alpha"


def _star(placement=("x86_64",) * 4):
    dep = session.deployment(SPEC)
    return dataclasses.replace(dep, placement=tuple(placement))


DEP = _star()
KEY = "reliability_star"


class Owners:
    """Some or all owners of DEP started as processes in a fresh run directory."""

    def __init__(self, name, owners=None, timeout_ms=2000, key=True, exes=None, outs=None, env=None,
                 ports=None, key_bytes=None, run_id=None):
        self.dep = DEP
        self.plan = session.plan(KEY, DEP)
        # a test build: its runtime has the fault-injection hooks (ALPHAC_DELAY_*) some tests use
        exes = exes or owner_exes(DEP, session.built(KEY, DEP, faults=env is not None))
        self.dir = new_run_dir(session.root(), name)
        self.ports = ports or free_ports(DEP.owners)
        # an owner the test plays speaks TCP: its line says so
        played = [owners is not None and o not in owners for o in range(DEP.owners)]
        self.peers = write_peers(self.dir / "peers", self.ports,
                                 transport=[("tcp" if p else default_transport()) for p in played])
        self.key = write_key(self.dir / "run.key") if key else None
        if key_bytes is not None:  # a key reused from an earlier run
            self.key.write_bytes(key_bytes)
        self.outs = outs or {o: self.dir / f"owner-{o}.out" for o in range(DEP.owners)}
        self.procs = {}
        for o in (range(DEP.owners) if owners is None else owners):
            argv = owner_argv(exes[o], o, self.peers, self.outs[o], runner_for(DEP.placement[o]), None,
                              timeout_ms, key=self.key) + (
                                  ("--run-id", f"{run_id:x}") if run_id is not None else ())
            err = open(self.dir / f"owner-{o}.stderr", "wb")
            self.procs[o] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                             env={**os.environ, **(env or {}).get(o, {})},
                                             start_new_session=True)

    def wait(self, limit_s=10.0) -> dict[int, tuple[int, str]]:
        end = time.monotonic() + limit_s
        out = {}
        for o, p in self.procs.items():
            try:
                rc = p.wait(timeout=max(0.01, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = None
            out[o] = (rc, (self.dir / f"owner-{o}.stderr").read_text())
        return out

    def settle(self):
        return resolve(self.outs, self.plan.tree.owner)

    def published(self) -> list[str]:
        return sorted(p.name for p in self.dir.iterdir() if p.name.startswith("owner-")
                      and not p.name.endswith(".stderr"))

    def whole(self) -> list[str]:
        """The final names of a whole run: every output and the root's commit record."""
        return sorted([p.name for p in self.outs.values()] + [f"{self.outs[self.plan.tree.owner].name}.commit"])


def _code(err: str) -> str:
    return refusal_code(err) or err


PID = session.plan(KEY, DEP).protocol_id
RUN_ID = run_id_of(session.plan(KEY, DEP))  # the owners are started without --run-id
SEND_STEP = 1  # a worker's ops: local (0), send (1), ...


def _value(count=2) -> fr.Frame:
    return fr.Frame(PID, 1, 0, 0, SEND_STEP, fr.COMBINE, fr.combine_payload([0, 0], count))


# -- injection -------------------------------------------------------------------------------

@pytest.mark.parametrize("peer_key", [os.urandom(32), None], ids=["another-key", "no-key"])
def test_a_peer_without_the_key_cannot_get_a_contribution_accepted(peer_key):
    """The peer knows the protocol identity (it is public) but not the run's key."""
    run = Owners("nokey", owners=[0, 2, 3])
    sock = fr.connect(run.ports[0])
    try:
        sock.sendall(fr.hello(PID, 1, 0, DEP.updates, (1, 2)).encode(key=peer_key))
        try:
            sock.sendall(_value().encode(key=peer_key, seq=1))
        except OSError:  # the hub may have refused the hello already
            pass
        res = run.wait()
    finally:
        sock.close()
    assert _code(res[0][1]) == "frame-auth", res[0]
    assert all(rc == 1 for rc, _ in res.values()), res
    assert not run.settle().committed and run.published() == []


class Recording:
    """A socket that keeps every byte sent through it."""

    def __init__(self, sock):
        self.sock, self.sent = sock, bytearray()

    def sendall(self, data):
        self.sent += data
        self.sock.sendall(data)

    def recv(self, n):
        return self.sock.recv(n)

    def recv_into(self, buf, n=0):
        return self.sock.recv_into(buf, n)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def _recorded_owner_1(run_id):
    """Owner 1 played honestly in a run under `run_id` (the others real): the key and the
    bytes it sent (its hello and its first contribution)."""
    run = Owners(f"record-{run_id:x}", owners=[0, 2, 3], run_id=run_id)
    sock = Recording(fr.connect(run.ports[0]))
    try:
        conn = fr.Connection(sock, PID, 1, 0, DEP.updates, key=run.key.read_bytes(), run_id=run_id,
                             nonce=(0x0123456789abcdef, 0xfedcba9876543210))
        conn.send(_value(DEP.learner.samples.shares[1]))
    finally:
        run.wait()
        sock.close()
    return run.key.read_bytes(), bytes(sock.sent)


@pytest.mark.parametrize("same_run_id", [True, False])
def test_a_hello_recorded_in_an_earlier_run_is_refused_under_the_same_key(same_run_id):
    """The bytes owner 1 sent in one run, replayed to the next run's hub under the same key.
    With a fresh run id (as every launch and every run of the emitted files has) the hello
    itself is refused; with the run id reused too, the hub's fresh nonce makes another
    session key, so the recorded contribution's tag does not verify."""
    key, recorded = _recorded_owner_1(0x1111)
    run = Owners("replay", owners=[0, 2, 3], key_bytes=key, run_id=0x1111 if same_run_id else 0x2222)
    sock = fr.connect(run.ports[0])
    try:
        try:
            sock.sendall(recorded)
        except OSError:  # the hub may have refused the hello already
            pass
        res = run.wait()
    finally:
        sock.close()
    if same_run_id:
        assert _code(res[0][1]) == "frame-auth", res[0]
    else:
        assert res[0] == (1, "refused: frame-protocol: owner 0: owner 1 runs as run 0000000000001111, "
                             "this owner 0000000000002222 (another --run-id)\n"), res[0]
    assert all(rc == 1 for rc, _ in res.values()), res
    assert not run.settle().committed and run.published() == []


def test_a_worker_built_from_other_samples_refuses_at_hello():
    learner = DEP.learner
    rows = learner.samples.words.copy()
    rows[0, 0] ^= 1
    other = dataclasses.replace(DEP, learner=dataclasses.replace(
        learner, samples=dataclasses.replace(learner.samples, words=rows)))
    exes = owner_exes(DEP, session.built(KEY, DEP))
    exes[2] = owner_exes(other, session.built("reliability_other_samples", other))[2]
    run = Owners("other-samples", exes=exes)
    res = run.wait()
    assert _code(res[0][1]) == "frame-protocol" or _code(res[2][1]) == "frame-protocol", res
    assert all(rc == 1 for rc, _ in res.values()), res
    assert not run.settle().committed and run.published() == []


@pytest.mark.parametrize("count", [2**64 - 1, 10**6, 0])
def test_a_count_other_than_the_declared_share_is_refused(count):
    run = Owners(f"count-{count}", owners=[0, 2, 3])
    sock = fr.connect(run.ports[0])
    try:
        conn = fr.Connection(sock, PID, 1, 0, DEP.updates, key=run.key.read_bytes(), run_id=RUN_ID)
        conn.send(_value(count))
        res = run.wait()
    finally:
        sock.close()
    share = DEP.learner.samples.shares[1]
    assert res[0] == (1, f"refused: frame-count: owner 0: frame from owner 1: {count} samples, the plan "
                         f"declares {share} beneath this value\n")
    assert not run.settle().committed and run.published() == []


def test_a_squatter_on_the_hubs_port_makes_no_owner_publish():
    """A process holding the hub's port first answers the workers' hellos: without the key it
    cannot tag its frames, so every worker refuses, and the real hub cannot listen."""
    ports = free_ports(DEP.owners)
    squat = socket.socket()
    squat.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squat.bind(("127.0.0.1", ports[0]))
    squat.listen(8)
    squat.settimeout(5)
    run = None
    conns = []
    try:
        run = Owners("squatter", ports=ports)
        for _ in range(3):
            try:
                c, _ = squat.accept()
            except socket.timeout:
                break
            conns.append(c)
            reply = fr.hello(PID, 0, 9, DEP.updates, (5, 6))
            c.sendall(fr.Frame(**{**reply.__dict__, "receiver": 1}).encode(key=os.urandom(32)))
        res = run.wait()
    finally:
        for c in conns:
            c.close()
        squat.close()
    assert _code(res[0][1]) == "io-error", res[0]
    assert [_code(res[o][1]) for o in (1, 2, 3)].count("frame-auth") >= 1, res
    assert all(rc == 1 for rc, _ in res.values()), res
    assert not run.settle().committed and run.published() == []


# -- output locations ---------------------------------------------------------------------------

def test_a_link_planted_at_a_staged_path_is_refused_before_the_first_update(tmp_path):
    precious = tmp_path / "precious"
    precious.write_bytes(b"precious")
    outs = {o: tmp_path / f"o{o}" for o in range(DEP.owners)}
    staged_path(outs[2]).symlink_to(precious)
    t0 = time.monotonic()
    run = Owners("planted", outs=outs)
    res = run.wait()
    assert res[2] == (1, f"refused: output-exists: '{outs[2]}.tmp' exists (a file or link planted there, or "
                         "another owner staging the same output); nothing was written\n")
    assert run.procs[2].returncode == 1 and time.monotonic() - t0 < 5
    assert all(rc == 1 for rc, _ in res.values()), res
    assert precious.read_bytes() == b"precious" and staged_path(outs[2]).is_symlink()
    assert not run.settle().committed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o2.tmp", "precious"]


def test_two_owners_given_the_same_output_leave_nothing(tmp_path):
    outs = {o: tmp_path / f"o{o}" for o in range(DEP.owners)}
    outs[2] = outs[1]
    run = Owners("shared", outs=outs)
    res = run.wait()
    assert sorted(_code(res[o][1]) for o in (1, 2))[0] == "output-exists", res
    assert all(rc == 1 for rc, _ in res.values()), res
    assert not run.settle().committed and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["missing", "unwritable"])
def test_an_unusable_output_directory_is_refused_before_the_first_update(tmp_path, where):
    outs = {o: tmp_path / f"o{o}" for o in range(DEP.owners)}
    bad = tmp_path / "bad"
    if where == "unwritable":
        bad.mkdir()
        bad.chmod(0o500)
        if os.access(bad, os.W_OK):  # root writes anywhere: a file in place of the directory
            bad.chmod(0o700)
            bad.rmdir()
            bad.write_bytes(b"")
    outs[3] = bad / "o3"
    run = Owners(f"dir-{where}", outs=outs)
    res = run.wait()
    assert res[3][0] == 1 and res[3][1].startswith(f"refused: io-error: cannot create '{outs[3]}.tmp' ("), res[3]
    assert all(rc == 1 for rc, _ in res.values()), res
    assert not run.settle().committed
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if where == "missing" else ["bad"])


# -- deadlines -------------------------------------------------------------------------------

def test_a_trickling_peer_is_refused_within_the_deadline():
    run = Owners("trickle", owners=[0, 2, 3], timeout_ms=300, key=False)
    sock = fr.connect(run.ports[0])
    try:
        fr.Connection(sock, PID, 1, 0, DEP.updates, run_id=RUN_ID)
        data = _value().encode()
        t0 = time.monotonic()
        for byte in data:  # one byte every 50 ms: each read succeeds, the frame never completes
            if run.procs[0].poll() is not None:
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)
        res = run.wait()
        elapsed = time.monotonic() - t0
    finally:
        sock.close()
    assert res[0] == (1, "refused: peer-timeout: owner 0: reading from owner 1 took longer than 300 ms\n")
    assert elapsed < 1.5


# -- kill trials ---------------------------------------------------------------------------------

def test_only_a_test_build_has_the_fault_injection_hooks():
    """The kill trials' ALPHAC_DELAY_* hook is compiled into a test build's runtime only: a
    product executable never reads those variables."""
    product = owner_exes(DEP, session.built(KEY, DEP))[0].read_bytes()
    test_build = owner_exes(DEP, session.built(KEY, DEP, faults=True))[0].read_bytes()
    assert b"ALPHAC_DELAY_AT" not in product and b"ALPHAC_DELAY_MS" not in product
    assert b"ALPHAC_DELAY_AT" in test_build and b"ALPHAC_DELAY_MS" in test_build


def test_an_owner_killed_after_prepared_leaves_the_run_whole_under_its_final_names():
    """Owner 3 dies after it said "prepared" and before it hears the verdict. The root
    commits and publishes every output of the run directory, owner 3's too, before it tells
    any owner: before any settling the final names are the whole run, nothing is left
    staged, and every survivor exits 0."""
    env = {3: {"ALPHAC_DELAY_AT": str(OP_CODE["publish-recv"]), "ALPHAC_DELAY_MS": "3000"}}
    run = Owners("prepared-then-killed", env=env, timeout_ms=5000)
    record = run.dir / f"{run.outs[run.plan.tree.owner].name}.commit"
    end = time.monotonic() + 10
    while not record.exists() and time.monotonic() < end:
        time.sleep(0.005)
    os.killpg(run.procs[3].pid, signal.SIGKILL)
    res = run.wait()
    assert {o: rc for o, (rc, _) in res.items()} == {0: 0, 1: 0, 2: 0, 3: -signal.SIGKILL}, res
    assert run.published() == run.whole() == ["owner-0.out", "owner-0.out.commit", "owner-1.out",
                                               "owner-2.out", "owner-3.out"]
    settled = run.settle()
    assert settled.committed and settled.errors == {} and settled.finalized == [] and settled.removed == []


def test_a_record_that_cannot_be_linked_leaves_no_output_under_its_final_name():
    """A file appears at the commit record's name while the root lingers before its commit:
    the root links every output, then fails to link the record (link(2) never overwrites),
    removes those links again and refuses, so no final name says the run was published."""
    root = 0  # the star's hub
    env = {root: {"ALPHAC_DELAY_AT": str(OP_CODE["commit"]), "ALPHAC_DELAY_MS": "1500"}}
    run = Owners("record-planted", env=env, timeout_ms=5000)
    assert run.plan.tree.owner == root
    record = run.dir / f"{run.outs[root].name}.commit"
    staged = run.dir / f"{record.name}.tmp"
    end = time.monotonic() + 10
    while not staged.exists() and time.monotonic() < end:
        time.sleep(0.005)
    record.write_bytes(b"planted\n")
    res = run.wait()
    assert res[root][0] == 1 and _code(res[root][1]) == "output-exists", res[root]
    assert final_names(run) == [record.name] and record.read_bytes() == b"planted\n"


# Where an owner may be made to linger, so that a kill lands in that window: before the
# root commits (every owner has prepared), before an owner finalizes, before "prepared".
WINDOWS = ("commit", "finalize", "digest-send", "stage", "publish-recv")


def _committed_run(tmp_path) -> tuple[Path, dict[int, Path]]:
    """A copy of a committed, settled run directory of DEP and its outputs."""
    run = session.run(KEY, DEP)
    assert run.committed
    copy = tmp_path / "run"
    copy.mkdir()
    for p in run.run_dir.iterdir():
        if p.name.startswith("owner-") and ".out" in p.name:
            shutil.copy2(p, copy / p.name)
    return copy, {o: copy / f"owner-{o}.out" for o in range(DEP.owners)}


def test_settling_removes_the_staged_name_of_a_linked_commit_record(tmp_path):
    """The root died after linking its record and the outputs, before removing the .tmp names."""
    d, outs = _committed_run(tmp_path)
    os.link(d / "owner-0.out.commit", d / "owner-0.out.commit.tmp")
    os.link(outs[2], staged_path(outs[2]))
    res = resolve(outs, 0)
    assert res.committed and res.errors == {} and res.finalized == []
    assert sorted(p.name for p in d.iterdir()) == ["owner-0.out", "owner-0.out.commit", "owner-1.out",
                                                   "owner-2.out", "owner-3.out"]


def test_settling_without_a_record_removes_final_names_linked_to_staged_files(tmp_path):
    """A machine that crashed before the root's directory was durable may keep the links of
    the outputs and not the record's: nothing was published, so both names of each go."""
    d, outs = _committed_run(tmp_path)
    (d / "owner-0.out.commit").unlink()
    for out in outs.values():
        os.link(out, staged_path(out))
    (d / "owner-3.out").unlink()  # its link did not reach the disk
    res = resolve(outs, 0)
    assert not res.committed
    assert sorted(p.name for p in res.removed) == ["owner-0.out", "owner-0.out.tmp", "owner-1.out",
                                                   "owner-1.out.tmp", "owner-2.out", "owner-2.out.tmp",
                                                   "owner-3.out.tmp"]
    assert list(d.iterdir()) == []


def kill_trial(seed: int, name: str = "kill") -> str:
    """One trial: every owner started, one of them killed with SIGKILL after a random delay
    (an owner lingering 200 ms before one of WINDOWS), the final names looked at once every
    owner has ended, then the run settled. Returns
    "committed" or "none"; raises AssertionError if any invariant fails."""
    rng = random.Random(seed)
    victim = rng.randrange(DEP.owners)
    window = rng.choice(WINDOWS)
    slow = 0 if window == "commit" else rng.randrange(DEP.owners)
    env = {slow: {"ALPHAC_DELAY_AT": str(OP_CODE[window]), "ALPHAC_DELAY_MS": "200"}}
    run = Owners(f"{name}-{seed}", env=env, timeout_ms=1500)
    time.sleep(rng.uniform(0.0, 0.15))
    if run.procs[victim].poll() is None:
        os.killpg(run.procs[victim].pid, signal.SIGKILL)
    t0 = time.monotonic()
    res = run.wait(limit_s=8)
    assert all(rc is not None for rc, _ in res.values()), f"seed {seed}: an owner outlived its deadline"
    assert time.monotonic() - t0 < 5, f"seed {seed}: survivors took too long"
    # before any settling, the final names hold a whole run or nothing of it
    whole = final_names(run)
    assert whole in ([], run.whole()), f"seed {seed}: before settling the final names are {whole}"
    settled = run.settle()
    left = sorted(p.name for p in run.dir.iterdir() if p.name.endswith(".tmp"))
    assert left == [], f"seed {seed}: staged files outlived the run: {left}"
    # a survivor unlinks every segment it created; only the victim, killed between creating
    # one and its peer's mapping it, may leave one, which the launcher's cleanup removes
    pids = {o: p.pid for o, p in run.procs.items()}
    survivors = [pid for o, pid in pids.items() if o != victim]
    assert segments(survivors) == [], f"seed {seed}: a survivor left a segment"
    remove_segments([pids[victim]])
    assert segments(pids.values()) == [], f"seed {seed}: a segment outlived the run"
    outs = [p for p in run.outs.values() if p.exists()]
    if settled.committed:
        assert settled.errors == {}, (seed, settled.errors)
        assert len(outs) == DEP.owners, seed
        from alphac.launch.plan_run import PlanRun
        from alphac.launch.results import read_result
        from alphac.launch.runner import OwnerOutcome, RunResult

        plan_run = PlanRun(run.dir, run.peers, RunResult(tuple(
            OwnerOutcome(o, "", (), run.outs[o], 0) for o in range(DEP.owners)), False, 0.0))
        plan_run.resolution = settled
        plan_run.outputs = {o: read_result(run.outs[o]) for o in range(DEP.owners)}
        from alphac.oracle import evaluate

        report = compare(run.plan, plan_run, evaluate(DEP), DEP.updates)
        assert report.match, (seed, report.failures)
        return "committed"
    assert outs == [], f"seed {seed}: outputs without a commit record: {outs}"
    assert rc_refused(res, victim), (seed, res)
    return "none"


def final_names(run: Owners) -> list[str]:
    """The run's files under their final names: its outputs and the root's commit record."""
    return [p for p in run.published() if not p.endswith(".tmp")]


def segments(pids) -> list[str]:
    """The shared-memory segments named after these processes (alphac/runtime/ring.c)."""
    return sorted(p.name for pid in pids for p in SHM_DIR.glob(f"{wire.SHM_PREFIX}{pid}-*"))


def rc_refused(res, victim) -> bool:
    """Every survivor exited 1 with a refusal, or 0 (it had finalized before the kill)."""
    return all(rc in (0, 1) for o, (rc, _) in res.items() if o != victim)


def test_kill_trials_leave_every_output_committed_or_none():
    outcomes = [kill_trial(seed) for seed in range(50)]
    # the trials must reach both sides of the commit point
    assert outcomes.count("committed") >= 3 and outcomes.count("none") >= 3, outcomes

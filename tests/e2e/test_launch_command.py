"""The launcher's run / compare / report path, driven by stand-in owner executables (small
scripts following the command line and output format of the executable contract)."""

import json
import os
import stat
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from pathlib import Path

from alphac.ir import nodes as N
from alphac.commands.launch import table
from alphac.driver import needed
from alphac.launch.plan_run import run_plan
from alphac.launch.report import compare
from alphac.launch.runs import new_run_dir

ROOT = Path(__file__).resolve().parents[2]
PARAMS = (0x3FF0000000000000, 0x4000000000000000)
STATE = (0x3FB999999999999A,)


def _dep(n=3, placement=None):
    prog = N.Program(1, ())
    learner = N.Learner("l", 2, 1, 1, prog, prog, N.Words(PARAMS), N.Words(STATE), 0,
                        N.Samples(1, (0,) * n, np.zeros((0, 1), dtype=np.uint64)))
    return N.Deployment("run", learner, n, N.Star(), N.Partitioning(),
                        (N.Role("coordinator", (0,)), N.Role("worker", tuple(range(1, n)))),
                        tuple(placement or ["x86_64"] * n), 5, N.Contract(), N.Checkpoint(),
                        source_file="specs/fake.alpha")


def _script(path, body):
    # a stand-in owner: parses the contract's options, then runs `body`
    path.write_text(f"""#!{sys.executable}
import argparse, sys, struct, time
sys.path.insert(0, {str(ROOT)!r})
from alphac.launch.results import OwnerResult
from alphac.testing.outputs import encode_result
ap = argparse.ArgumentParser()
ap.add_argument('--owner', type=int); ap.add_argument('--peers'); ap.add_argument('--out')
ap.add_argument('--updates', type=int, default=5); ap.add_argument('--timeout-ms', type=int)
ap.add_argument('--key'); ap.add_argument('--stats'); ap.add_argument('--connections')
a = ap.parse_args()
peers = open(a.peers).read().splitlines()
assert all(len(line.split()) in (2, 3) for line in peers), peers
n = len(peers)
{COMMIT}
{body}
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# The root of a stand-in run (owner 0 of a star) commits it as the real one does, once every
# owner's output is there: a record naming each output's sha256 (alphac/launch/commit.py).
COMMIT = """
import hashlib, os
def commit(names=None):
    if a.owner != 0:
        return
    outs = [os.path.join(os.path.dirname(a.out), f'owner-{i}.out') for i in range(n)]
    end = time.time() + 1.5
    while names is None and not all(map(os.path.exists, outs)) and time.time() < end:
        time.sleep(0.01)
    sha = names or [hashlib.sha256(open(o, 'rb').read()).hexdigest() for o in outs if os.path.exists(o)]
    if len(sha) < n:
        return
    lines = ['alphac-commit 1', 'protocol 0000000000000abc', f'updates {a.updates}', f'owners {n}']
    open(a.out + '.commit', 'w').write('\\n'.join(lines + [f'owner {i} {h}' for i, h in enumerate(sha)]) + '\\n')
"""

# a stand-in's measured bytes (docs/runtime.md "Measured bytes"): 24 persistent, 100 at the peak
STATS = ("open(a.stats, 'w').write('alphac-stats 1\\nowner %d\\nstatus ok\\n' % a.owner + ''.join("
         "'bytes %s 0 %d\\n' % (c, 8 * (c == 'state') + 16 * (c == 'parameters')) for c in "
         "('parameters', 'state', 'replica', 'registers', 'scratch', 'samples')) + 'persistent 24\\npeak 100\\nrss_kb 0 0\\n')\n")
WRITE = (STATS + "r = OwnerResult(a.owner, a.updates, 0xabc, {p}, {s})\n"
         "open(a.out + '.tmp', 'wb').write(encode_result(r))\n"
         "import os; os.rename(a.out + '.tmp', a.out)\n"
         "commit()\n")


# a connections report as the executables write it (owner 0 talks to 1 over shared memory,
# to 2 over TCP)
CONNECTIONS = ("open(a.connections, 'w').write('1 shm\\n2 tcp the peers file says tcp for owner 2\\n'"
               " if a.owner == 0 else '0 shm\\n')\n")


def _oracle(n, version=5):
    return SimpleNamespace(owners=[SimpleNamespace(params=PARAMS, state=N.Words(STATE),
                                                   version=version) for _ in range(n)])


def test_needed_lists_role_target_pairs_in_owner_order():
    dep = _dep(4, ["x86_64", "aarch64", "x86_64", "aarch64"])
    assert needed(dep) == [("coordinator", "x86_64"), ("worker", "aarch64"), ("worker", "x86_64")]


def test_every_owner_matching(tmp_path):
    dep = _dep()
    good = _script(tmp_path / "good", CONNECTIONS + WRITE.format(p=PARAMS, s=STATE))
    exes = {("coordinator", "x86_64"): good, ("worker", "x86_64"): good}
    run = run_plan(dep, exes, new_run_dir(tmp_path, "fake"), deadline_s=20, root=0)
    assert run.committed
    rep = compare(SimpleNamespace(deployment=dep, protocol_hex="0000000000000abc"), run,
                  _oracle(3), 5)
    assert [r.transport for r in rep.rows] == ["shm+tcp", "shm", "shm"]
    assert rep.match and rep.failures == ()
    assert [r.match for r in rep.rows] == [True, True, True]
    assert run.peers.name == "fake.peers" and run.peers.parent == run.run_dir
    j = rep.as_json()
    assert j["match"] is True and j["rounds"] == 5 and j["protocol"] == "0000000000000abc"
    assert j["owners"][1] == {"owner": 1, "role": "worker", "target": "x86_64", "version": 5,
                              "params": ["3ff0000000000000", "4000000000000000"],
                              "state": ["3fb999999999999a"], "digest": rep.rows[1].digest,
                              "match": True, "transport": "shm",
                              "connections": [{"peer": 0, "transport": "shm"}],
                              "persistent_bytes": 24, "peak_bytes": 100}
    assert run.stats[2].high == {"parameters": 16, "state": 8, "replica": 0, "registers": 0,
                                 "scratch": 0, "samples": 0}
    assert j["owners"][0]["connections"] == [
        {"peer": 1, "transport": "shm"},
        {"peer": 2, "transport": "tcp", "why": "the peers file says tcp for owner 2"}]
    lines = table(rep).splitlines()
    assert lines[0].split() == ["owner", "role", "target", "transport", "version", "digest", "oracle"]
    assert lines[1].split()[:4] == ["0", "coordinator", "x86_64", "shm+tcp"]
    assert lines[2].split() == ["1", "worker", "x86_64", "shm", "5", rep.rows[1].digest[:16], "match"]
    import hashlib, struct
    assert rep.rows[1].digest == hashlib.sha256(struct.pack("<3Q", *PARAMS, *STATE)).hexdigest()
    json.dumps(j)


def test_refusal_and_timeout_each_reported_and_nothing_published(tmp_path):
    dep = _dep()
    refuse = _script(tmp_path / "refuse",
                     "if a.owner == 1:\n"
                     "    print('refused: frame-checksum: from owner 2', file=sys.stderr); sys.exit(1)\n"
                     "if a.owner == 2:\n    time.sleep(60)\n"
                     + WRITE.format(p=PARAMS, s=STATE))
    run = run_plan(dep, [refuse] * 3, new_run_dir(tmp_path, "fake"), deadline_s=3, root=0)
    assert not run.committed and run.outputs == {}
    rep = compare(SimpleNamespace(deployment=dep, protocol_hex="0"), run, _oracle(3), 5)
    assert not rep.match
    codes = [r.why.split(":", 1)[0] for r in rep.rows]
    assert codes == ["run-not-committed", "owner-failed", "launch-timeout"]
    assert "refused: frame-checksum: from owner 2" in rep.rows[1].why
    assert rep.stderr[1].strip() == "refused: frame-checksum: from owner 2"
    assert table(rep).splitlines()[3].split()[-1] == "launch-timeout"


def test_a_committed_mismatch_is_reported_word_for_word(tmp_path):
    dep = _dep()
    wrong = _script(tmp_path / "wrong", WRITE.format(p=(PARAMS[0], PARAMS[1] + 1), s=STATE))
    run = run_plan(dep, [wrong] * 3, new_run_dir(tmp_path, "fake"), deadline_s=20, root=0)
    rep = compare(SimpleNamespace(deployment=dep, protocol_hex="0"), run, _oracle(3), 5)
    assert [r.why.split(":", 1)[0] for r in rep.rows] == ["oracle-mismatch"] * 3
    assert rep.rows[0].why.endswith("params[1] = 4000000000000001, the oracle has 4000000000000000")


def test_version_mismatch_and_a_committed_output_that_is_gone(tmp_path):
    dep = _dep(2)
    # owner 0 writes version 4 and commits the run naming a digest for owner 1, which
    # writes nothing
    stale = _script(tmp_path / "v", WRITE.format(p=PARAMS, s=STATE).replace("a.updates,", "4,")
                    .replace("commit()", "commit([hashlib.sha256(open(a.out, 'rb').read()).hexdigest(), "
                                         "'1' * 64])"))
    silent = _script(tmp_path / "s", "pass")
    run = run_plan(dep, [stale, silent], new_run_dir(tmp_path, "fake"), deadline_s=20, root=0)
    assert run.committed
    rep = compare(SimpleNamespace(deployment=dep, protocol_hex="0"), run, _oracle(2), 5)
    assert rep.rows[0].why == "oracle-mismatch: owner 0 (coordinator on x86_64): version 4, the oracle has 5"
    assert rep.rows[1].why == "bad-output: owner 1: committed, but its output is gone"


def test_failures_printed_one_line_each_then_the_owner_stderr(tmp_path):
    import io

    from alphac.commands.launch import print_failures

    dep = _dep(2)
    refuse = _script(tmp_path / "r", "code = ['peer-timeout', 'peer-closed'][a.owner]\n"
                                     "print(f'refused: {code}: owner {a.owner}: x', file=sys.stderr)\n"
                                     "sys.exit(1)")
    run = run_plan(dep, [refuse, refuse], new_run_dir(tmp_path, "fake"), deadline_s=20, root=0)
    rep = compare(SimpleNamespace(deployment=dep, protocol_hex="0"), run, _oracle(2), 5)
    err = io.StringIO()
    print_failures(rep, err)
    assert err.getvalue().splitlines() == [
        "alphac: error[owner-failed]: owner 0 (coordinator on x86_64) exited 1: "
        "refused: peer-timeout: owner 0: x",
        "alphac: error[owner-failed]: owner 1 (worker on x86_64) exited 1: "
        "refused: peer-closed: owner 1: x",
        "--- owner 0 stderr ---", "refused: peer-timeout: owner 0: x",
        "--- owner 1 stderr ---", "refused: peer-closed: owner 1: x",
    ]


def test_every_owner_refusing_by_one_code_is_one_cause(tmp_path):
    import io

    from alphac.commands.launch import print_failures

    dep = _dep(3)
    refuse = _script(tmp_path / "r", "print(f'refused: checkpoint-exists: owner {a.owner}: x exists', "
                                     "file=sys.stderr)\nsys.exit(1)")
    run = run_plan(dep, [refuse] * 3, new_run_dir(tmp_path, "fake"), deadline_s=20, root=0)
    rep = compare(SimpleNamespace(deployment=dep, protocol_hex="0"), run, _oracle(3), 5)
    assert rep.causes() == [("checkpoint-exists", "3 owners refused checkpoint-exists; the first, owner 0 "
                             "(coordinator on x86_64): owner 0: x exists", None)]
    err = io.StringIO()
    print_failures(rep, err)
    assert err.getvalue().splitlines() == [
        "alphac: error[checkpoint-exists]: 3 owners refused checkpoint-exists; the first, owner 0 "
        "(coordinator on x86_64): owner 0: x exists",
        "--- owner 0 stderr (owners 1, 2 refused alike) ---", "refused: checkpoint-exists: owner 0: x exists",
    ]


def test_an_owner_that_cannot_start_stops_the_others(tmp_path):
    import pytest

    from alphac.launch.errors import LaunchError

    dep = _dep(2)
    sleeper = _script(tmp_path / "z", "time.sleep(60)")
    with pytest.raises(LaunchError) as e:
        run_plan(dep, [sleeper, tmp_path / "absent"], new_run_dir(tmp_path, "fake"), deadline_s=20, root=0)
    assert e.value.code == "owner-failed"
    assert "absent" in e.value.message
    target = str(tmp_path / "z").encode()
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            state = open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0]
        except OSError:
            continue
        if target in argv and state != "Z":
            left.append(pid)
    assert left == []


def test_an_unknown_transport_in_the_environment_is_a_one_line_error(tmp_path, monkeypatch):
    from alphac.launch.errors import LaunchError

    monkeypatch.setenv("ALPHAC_TRANSPORT", "udp")
    with pytest.raises(LaunchError) as err:
        run_plan(_dep(), [tmp_path / "never-started"] * 3, new_run_dir(tmp_path, "fake"), root=0)
    assert (err.value.code, err.value.message) == (
        "usage", "ALPHAC_TRANSPORT='udp': expected one of tcp, shm, shm-only")

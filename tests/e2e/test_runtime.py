"""The role runtime end to end: owners as real processes on 127.0.0.1 finish with the words
of a Python-float evaluation of the declared order; command-line refusals; reproducible
builds. (Frame-level refusals against a misbehaving peer: test_runtime_frames.py.)"""

from __future__ import annotations

import subprocess
import time

import pytest

from alphac import wire
from alphac.plan.steps import op_steps
from alphac.launch.commit import resolve
from alphac.ir import nodes as n
from test_runtime_support import (
    HAVE_AARCH64, OUT_MAGIC, Run, build, deployment, owner_command, plan_of, read_output, reference,
    refusal_code, run_dir)

STAR_PLAIN = deployment(kind="plain", stem="rt_star_plain")
HIER_MOMENTUM = deployment(kind="momentum", topology=n.Hierarchy(2), stem="rt_hier_momentum")
MIXED = deployment(kind="momentum", topology=n.Hierarchy(2), stem="rt_mixed",
                   placement=("x86_64", "aarch64", "x86_64", "aarch64"))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("runtime")


def _run_all(dep, work, name, extra=()):
    exes = build(dep, work / "bin")
    run = Run(dep, exes, run_dir(work, name), extra=("--timeout-ms", "20000", *extra))
    return run, run.finish(60)


def _check_outputs(dep, run, updates=None):
    params, state = reference(dep, updates)
    pid = plan_of(dep).protocol_id
    for o in range(dep.owners):
        out = read_output(run.outs[o])
        assert (out["magic"], out["format"], out["owner"]) == (OUT_MAGIC, 1, o)
        assert out["version"] == (dep.updates if updates is None else updates)
        assert out["protocol"] == pid
        assert out["params"] == params
        assert out["state"] == state


def test_star_plain_steps_match_the_reference(work):
    run, res = _run_all(STAR_PLAIN, work, "star")
    assert res == {o: (0, "") for o in range(4)}
    _check_outputs(STAR_PLAIN, run)
    assert not any(p.with_name(p.name + ".tmp").exists() for p in run.outs.values())


def test_hierarchy_momentum_matches_the_reference_and_differs_from_star(work):
    run, res = _run_all(HIER_MOMENTUM, work, "hier")
    assert res == {o: (0, "") for o in range(4)}
    _check_outputs(HIER_MOMENTUM, run)
    star = deployment(kind="momentum", stem="rt_star_momentum")
    assert plan_of(star).protocol_id != plan_of(HIER_MOMENTUM).protocol_id


def test_updates_option_overrides_the_deployment(work):
    run, res = _run_all(STAR_PLAIN, work, "updates", extra=("--updates", "2"))
    assert res == {o: (0, "") for o in range(4)}
    _check_outputs(STAR_PLAIN, run, updates=2)


@pytest.mark.skipif(not HAVE_AARCH64, reason="qemu-aarch64 / aarch64-linux-gnu-gcc missing")
def test_mixed_x86_64_and_aarch64_owners_match(work):
    run, res = _run_all(MIXED, work, "mixed")
    assert res == {o: (0, "") for o in range(4)}, res
    _check_outputs(MIXED, run)


@pytest.mark.skipif(not HAVE_AARCH64, reason="qemu-aarch64 / aarch64-linux-gnu-gcc missing")
def test_peers_by_host_name_and_ipv6_match(work):
    """Owner 0 listens on [::1] (its children connect over IPv6), owner 1 on `localhost`
    (resolved by getaddrinfo, also inside the static AArch64 executables under qemu)."""
    exes = build(MIXED, work / "bin")
    run = Run(MIXED, exes, run_dir(work, "hosts"), extra=("--timeout-ms", "20000"),
              hosts=["[::1]", "localhost", "127.0.0.1", "[::1]"])
    assert run.finish(60) == {o: (0, "") for o in range(4)}
    _check_outputs(MIXED, run)


def test_ten_owners_star_and_hierarchy_run_their_own_order(work):
    shares = (1, 2, 3, 0, 1, 2, 3, 1, 2, 1)
    outs = {}
    for topo in (n.Star(), n.Hierarchy(3)):
        dep = deployment(owners=10, topology=topo, shares=shares, updates=3, seed=7,
                         stem=f"rt_ten_{type(topo).__name__.lower()}")
        run, res = _run_all(dep, work, f"ten_{type(topo).__name__}")
        assert res == {o: (0, "") for o in range(10)}
        _check_outputs(dep, run)
        outs[type(topo).__name__] = read_output(run.outs[0])["params"]
    # the two trees round differently on this data: the bits show which order ran
    assert outs["Star"] != outs["Hierarchy"]


# ----------------------------------------------------------------------------- command line

def _one(dep, work, name, argv_tail, owner=0):
    exes = build(dep, work / "bin")
    d = run_dir(work, name)
    import subprocess

    role = dep.role_of(owner).name
    exe = exes[(role, dep.placement[owner])]
    # an owner runs without a key only when told so; --help and --version answer before that
    tail = [*argv_tail, "--insecure"] if argv_tail and argv_tail[0].startswith("--owner") else argv_tail
    return subprocess.run([str(exe), *tail], capture_output=True, text=True, timeout=30), d


def test_help_prints_usage_and_exits_zero(work):
    done, _ = _one(STAR_PLAIN, work, "help", ["--help"])
    assert done.returncode == 0
    assert done.stdout.startswith("usage: EXE --owner I --peers FILE --out PATH")
    assert "role coordinator (owners 0)" in done.stdout
    assert f"protocol {plan_of(STAR_PLAIN).protocol_hex}" in done.stdout


def test_version_names_the_build_and_exits_zero(work):
    done, _ = _one(STAR_PLAIN, work, "version", ["--version"])
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"rt_star_plain-coordinator-x86_64: deployment run_rt_star_plain, role "
                           f"coordinator of 4 owners, target x86_64, cpu baseline (LLVM cpu x86-64), "
                           f"protocol {plan_of(STAR_PLAIN).protocol_hex}, wire format {wire.WIRE_FORMAT}\n")


@pytest.mark.parametrize("argv", [
    [],
    ["--owner"],
    ["--owner", "x1", "--peers", "p", "--out", "o"],
    ["--owner", "0", "--peers", "p"],
    ["--owner", "0", "--peers", "p", "--out", "o", "--bogus", "1"],
    ["--owner", "0", "--peers", "p", "--out", "o", "--timeout-ms", "0"],
    ["--owner", "0", "--peers", "p", "--out", "o", "--timeout-ms", "2147483648"],
    ["--owner", "0", "--peers", "p", "--out", "o", "--updates", "-1"],
    ["--owner", "0", "--peers", "p", "--out", "o", "--updates", "99999999999999999999"],
])
def test_bad_usage_exits_two(work, argv):
    done, _ = _one(STAR_PLAIN, work, "usage", argv)
    assert done.returncode == 2
    assert refusal_code(done.stderr) == "usage"
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("key, message", [
    ((), "no --key: give the run's key file, or --insecure to run without authentication, where anyone "
         "who can reach an owner's port can play an owner (try --help)"),
    (("--key", "k", "--insecure"), "--key and --insecure exclude each other (try --help)"),
])
def test_an_owner_runs_without_a_key_only_when_told_insecure(work, key, message):
    import subprocess

    exe = build(STAR_PLAIN, work / "bin")[("coordinator", STAR_PLAIN.placement[0])]
    done = subprocess.run([str(exe), "--owner", "0", "--peers", "p", "--out", "o", *key], capture_output=True,
                          text=True, timeout=30, cwd=run_dir(work, "insecure"))
    assert (done.returncode, done.stderr) == (2, f"refused: usage: {message}\n")


def test_owner_outside_the_role_refuses(work):
    done, d = _one(STAR_PLAIN, work, "notinrole",
                   ["--owner", "2", "--peers", "nowhere", "--out", "x"], owner=0)
    assert done.returncode == 1
    assert done.stderr == ("refused: owner-not-in-role: owner 2 is not in role coordinator "
                           "(owners 0) of deployment run_rt_star_plain\n")


def test_existing_output_is_never_overwritten(work):
    d = run_dir(work, "exists")
    out = d / "o"
    out.write_bytes(b"keep")
    done, _ = _one(STAR_PLAIN, work, "exists2", ["--owner", "0", "--peers", "p", "--out", str(out)])
    assert done.returncode == 1
    assert refusal_code(done.stderr) == "output-exists"
    assert out.read_bytes() == b"keep"


def test_an_output_created_while_the_owner_runs_is_never_overwritten(work):
    """The start-up check passes; PATH appears before the owner publishes: link(2) refuses."""
    exes = build(STAR_PLAIN, work / "bin")
    run = Run(STAR_PLAIN, exes, run_dir(work, "race"), owners=[0], extra=("--timeout-ms", "20000"))
    time.sleep(0.3)  # owner 0 is past its start-up check, waiting for its peers
    run.outs[0].write_bytes(b"keep")
    for o in range(1, STAR_PLAIN.owners):
        cmd = owner_command(STAR_PLAIN, exes, o, run.peers, run.outs[o], "--timeout-ms", "20000")
        run.procs[o] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    res = run.finish(60)
    # the run committed (every owner had staged its output); owner 0 alone cannot link its
    # output over the file that appeared, and says its staged words stay
    assert res[0][0] == 1 and refusal_code(res[0][1]) == "output-exists"
    assert res[0][1].endswith("; the run is committed: its staged output stays for the launcher to "
                              "finalize\n")
    assert run.outs[0].read_bytes() == b"keep"
    assert all(res[o] == (0, "") for o in range(1, STAR_PLAIN.owners))
    settled = resolve(run.outs, 0)
    assert settled.committed and list(settled.errors) == [0]
    assert run.outs[0].read_bytes() == b"keep"


@pytest.mark.parametrize("text,code,status", [
    ("0 127.0.0.1:1\n1 127.0.0.1\n", "usage", 2),
    ("0 127.0.0.1:1\n0 127.0.0.1:2\n", "usage", 2),
    ("0 127.0.0.1:70000\n", "usage", 2),
    ("0 nohost:5\n", "usage", 2),
    ("# only owner 1\n1 127.0.0.1:5\n", "usage", 2),
])
def test_malformed_peers_file_refuses(work, text, code, status):
    d = run_dir(work, "peersfile")
    (d / "peers").write_text(text)
    done, _ = _one(STAR_PLAIN, work, "peersfile2",
                   ["--owner", "0", "--peers", str(d / "peers"), "--out", str(d / "o")])
    assert (done.returncode, refusal_code(done.stderr)) == (status, code), done.stderr
    assert not (d / "o").exists()


def test_missing_peers_file_is_an_io_error(work):
    d = run_dir(work, "nopeers")
    done, _ = _one(STAR_PLAIN, work, "nopeers2",
                   ["--owner", "0", "--peers", str(d / "absent"), "--out", str(d / "o")])
    assert (done.returncode, refusal_code(done.stderr)) == (1, "io-error")


# ----------------------------------------------------------------------------- arithmetic refusals

def test_overflowing_update_refuses_on_every_owner_and_publishes_nothing(work):
    dep = deployment(kind="plain", rate=1e308, stem="rt_overflow")
    run, res = _run_all(dep, work, "overflow")
    for o in range(4):
        status, err = res[o]
        assert status == 1
        assert err.startswith("refused: non-finite: update statement 'w[0] (")
        assert err.endswith("coordinate -1 at update 1\n")  # update 0 stays finite
        assert not run.outs[o].exists()


def test_owner_without_samples_everywhere_refuses_the_mean(work):
    dep = deployment(owners=2, shares=(0, 0), stem="rt_nosamples")
    run, res = _run_all(dep, work, "nosamples")
    for o in range(2):
        assert res[o][0] == 1
        assert res[o][1] == f"refused: non-finite: mean coordinate 0 at update 0 (owner {o}, 0 samples)\n"
        assert not run.outs[o].exists()


# ----------------------------------------------------------------------------- builds and tables

def test_builds_are_reproducible(tmp_path):
    from alphac.driver import build as build_executable

    p = plan_of(STAR_PLAIN)
    targets = ["x86_64"] + (["aarch64"] if HAVE_AARCH64 else [])
    for target in targets:
        a = build_executable(p, "worker", target, tmp_path / "a")
        b = build_executable(p, "worker", target, tmp_path / "b")
        assert a.name == f"rt_star_plain-worker-{target}"
        x, y = a.read_bytes(), b.read_bytes()
        first = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), None)
        assert (len(x), first) == (len(y), None), f"{target}: builds differ at byte {first}"


def test_receive_steps_name_the_matching_send():
    p = plan_of(STAR_PLAIN)
    protos = tuple(o.protocol for o in p.owners)
    steps = op_steps(protos)
    # the hub receives owner j's local value: owner j's op 1 (after `local`)
    hub = protos[0]
    recvs = [(op.peer, s) for op, s in zip(hub.update_ops, steps[0]) if op.kind == "recv-add-right"]
    assert recvs == [(1, 1), (2, 1), (3, 1)]
    # workers receive the total from the hub's sends, ops 4, 5, 6 (owners 3, 2, 1; each
    # receive added on arrival is one op)
    for o, want in ((1, 6), (2, 5), (3, 4)):
        ops = protos[o].update_ops
        assert [s for op, s in zip(ops, steps[o]) if op.kind == "recv-update"] == [want]


def test_first_contribution_minus_zero_sums_to_plus_zero(work):
    """+0.0 + -0.0 is +0.0: the local sum must not take a -0.0 contribution as it is. Here
    c[0] = -0.5 * 0.0 = -0.0, and w[0] = -0.0 - rate * mean[0] keeps -0.0 only if mean[0]
    is +0.0 (a -0.0 mean would give +0.0)."""
    import dataclasses

    import numpy as np

    from test_runtime_support import word

    learner = dataclasses.replace(
        deployment(owners=1, shares=(1,)).learner,
        initial=n.Words((word(-0.0), word(0.5))),
        samples=n.Samples(3, (1,), np.array([[word(0.0), word(1.0), word(1.0)]], dtype=np.uint64)))
    dep = n.Deployment("run_rt_negzero", learner, 1, n.Star(), n.Partitioning(),
                       (n.Role("solo", (0,)),), ("x86_64",), 1, n.Contract(), n.Checkpoint(),
                       source_file="rt_negzero.alpha")
    run, res = _run_all(dep, work, "negzero")
    assert res == {0: (0, "")}
    out = read_output(run.outs[0])
    assert out["params"] == reference(dep)[0]
    assert out["params"][0] == word(-0.0)


def _solo(stem, rows, initial=(0.5, -0.25)):
    import dataclasses

    import numpy as np

    from test_runtime_support import word

    learner = dataclasses.replace(
        deployment(owners=1, shares=(len(rows),)).learner,
        initial=n.Words(tuple(word(v) for v in initial)),
        samples=n.Samples(3, (len(rows),), np.array([[word(v) for v in r] for r in rows], dtype=np.uint64)))
    return n.Deployment(f"run_{stem}", learner, 1, n.Star(), n.Partitioning(), (n.Role("solo", (0,)),),
                        ("x86_64",), 1, n.Contract(), n.Checkpoint(), source_file=f"{stem}.alpha")


@pytest.mark.parametrize("rows,message", [
    # c[0] = (0.5 * 1e154) * 1e154 = 5e307 per sample: the fourth addition overflows
    ([(1e154, 0.0, 0.0)] * 4, "local sum coordinate 0 at update 0 (owner 0, sample 3)"),
    # (0.5 * 1e200) * 1e200 overflows inside the contribution program
    ([(1.0, 0.0, 0.0), (1e200, 0.0, 0.0)],
     "contribution statement 'c[0] (<none>:0:0)' coordinate -1 at update 0 (owner 0, sample 1)"),
])
def test_overflowing_contributions_refuse_by_name(work, rows, message):
    dep = _solo(f"rt_overflow_{len(rows)}", rows)
    run, res = _run_all(dep, work, f"contrib_{len(rows)}")
    assert res == {0: (1, f"refused: non-finite: {message}\n")}
    assert not run.outs[0].exists()


def test_overflowing_combine_refuses_at_the_hub_and_its_peer_sees_it_close(work):
    import dataclasses

    import numpy as np

    from test_runtime_support import word

    # each owner's c[0] = (0.5 * 1.4e154) * 1.4e154 = 9.8e307; the hub's sum overflows
    base = deployment(owners=2, shares=(1, 1), stem="rt_combine_overflow")
    learner = dataclasses.replace(
        base.learner, samples=n.Samples(3, (1, 1), np.array([[word(v) for v in (1.4e154, 0.0, 0.0)]] * 2,
                                                             dtype=np.uint64)))
    dep = dataclasses.replace(base, learner=learner)
    run, res = _run_all(dep, work, "combine_overflow")
    assert res[0] == (1, "refused: non-finite: combine coordinate 0 at update 0 (owner 0)\n")
    assert res[1][0] == 1 and refusal_code(res[1][1]) == "peer-closed"
    assert not run.outs[0].exists() and not run.outs[1].exists()


def test_power_of_two_count_mean_rounds_like_a_division(work):
    """count 4: the mean is taken as x * 0.25, which must give x / 4 bit for bit, here on a
    subnormal that rounds: c[0] = (w0 x0) x0 with w0 = 2^-1074 is 1, 1, 1 and 4 units, the
    sum 7 units, 7 / 4 = 1.75 rounds to 2 units, and with rate 1 w0 becomes 1 - 2 = -1 unit
    (a mean of 1 unit would give +0.0)."""
    import dataclasses

    from test_runtime_support import word

    tiny = 5e-324
    dep = _solo("rt_mean_pow2", [(1.0, 0.0, 0.0)] * 3 + [(2.0, 0.0, 0.0)], initial=(tiny, 0.5))
    dep = dataclasses.replace(dep, learner=dataclasses.replace(dep.learner, rate=word(1.0)))
    run, res = _run_all(dep, work, "mean_pow2")
    assert res == {0: (0, "")}
    out = read_output(run.outs[0])
    assert out["params"] == reference(dep)[0]
    assert out["params"][0] == word(-tiny)


def test_combine_added_on_arrival_refuses_at_its_first_bad_coordinate(work):
    """k = 100000 (a frame received in many pieces, each added as it arrives): both owners'
    c[70000] = 1.5e308, so the hub's combine overflows there and only there."""
    import numpy as np

    from test_runtime_support import word

    k = 100_000
    i = n.Index(0, "i")
    contribution = n.Program(2 * k + 1, (n.Loop("i", 0, k, (
        n.Assign(n.Index(k + 1, "i"), n.Binary("mul", n.SlotRef(i), n.SlotRef(n.Index(k))),
                 label="c[i]"),)),))
    update = n.Program(2 * k + 1, (n.Loop("i", 0, k, (n.Assign(i, n.Binary(
        "sub", n.SlotRef(i), n.Binary("mul", n.SlotRef(n.Index(2 * k)), n.SlotRef(n.Index(k, "i")))),
        label="w[i]"),)),))
    w0 = np.linspace(-1.0, 1.0, k)
    w0[70_000] = 1.5e308
    learner = n.Learner("big", k, 1, 0, contribution, update, n.Words(w0.view(np.uint64)), n.Words(()),
                        word(0.01), n.Samples(1, (1, 1), np.array([[word(1.0)], [word(1.0)]], dtype=np.uint64)))
    dep = n.Deployment("run_rt_big_combine", learner, 2, n.Star(), n.Partitioning(),
                       (n.Role("coordinator", (0,)), n.Role("worker", (1,))), ("x86_64",) * 2, 1,
                       n.Contract(), n.Checkpoint(), source_file="rt_big_combine.alpha")
    run, res = _run_all(dep, work, "big_combine")
    assert res[0] == (1, "refused: non-finite: combine coordinate 70000 at update 0 (owner 0)\n")
    assert res[1][0] == 1 and refusal_code(res[1][1]) == "peer-closed"
    assert not run.outs[0].exists() and not run.outs[1].exists()

"""The peers file (with its optional transport column) and the command line of the C runtime,
in-process (owner 1 of a star talks to owner 0 only)."""

from __future__ import annotations

import ctypes
import re
import socket
from pathlib import Path

import pytest

from alphac import wire

SPECS = Path(__file__).resolve().parents[2] / "specs"


def _endpoint(rtlib, text: str):
    host = ctypes.create_string_buffer(256)
    port = ctypes.c_int(-1)
    rc = rtlib.lib.rt_parse_endpoint(text.encode(), host, 256, ctypes.byref(port))
    return (host.value.decode(), port.value) if rc == 0 else None


@pytest.mark.parametrize("text,want", [
    ("127.0.0.1:47000", ("127.0.0.1", 47000)),
    ("localhost:1", ("localhost", 1)),
    ("node-7.cluster:65535", ("node-7.cluster", 65535)),
    ("[::1]:5", ("::1", 5)),
    ("[fe80::1%eth0]:80", ("fe80::1%eth0", 80)),
    ("127.0.0.1", None), ("127.0.0.1:", None), ("127.0.0.1:0", None), ("127.0.0.1:65536", None),
    ("127.0.0.1:99999999999", None), ("127.0.0.1:-1", None), ("127.0.0.1:5x", None),
    (":5", None), ("::1:5", None), ("[::1]5", None), ("[::1", None), ("[]:5", None),
    ("h" * 256 + ":5", None),
])
def test_endpoints_split_into_host_and_port(rtlib, text, want):
    assert _endpoint(rtlib, text) == want


def _peers(rtlib, tmp_path, text: str):
    path = tmp_path / "peers"
    path.write_text(text)
    rt = rtlib.owner(1, str(path))
    return rtlib.result(rt, rtlib.lib.rt_read_peers(rt)), str(path)


@pytest.mark.parametrize("text", [
    "0 127.0.0.1:47000\n1 127.0.0.1:47001\n",
    "# a comment\n\n   \n0 localhost:47000\n\t1\t127.0.0.1:47001   \n",
    "0 [::1]:47000\n1 [::1]:47001\n",
    # the optional third column: what each owner may use
    "0 127.0.0.1:47000 shm\n1 127.0.0.1:47001 tcp\n",
    "0 127.0.0.1:47000 shm-only\n1 127.0.0.1:47001\tshm  \n",
    # owners this one does not talk to are checked, never resolved
    "0 127.0.0.1:47000\n1 127.0.0.1:47001\n2 no-such-host.invalid:5\n3 [::1]:6\n",
])
def test_well_formed_peers_files_are_read(rtlib, tmp_path, text):
    assert _peers(rtlib, tmp_path, text)[0] == ("ok", "")


EXPECTED = "expected 'OWNER HOST:PORT [tcp|shm|shm-only]' with OWNER in 0..3 and PORT in 1..65535"


@pytest.mark.parametrize("text,message", [
    ("0 127.0.0.1:1\n1 127.0.0.1\n", f"line 2: {EXPECTED}"),
    ("0 127.0.0.1:70000\n", f"line 1: {EXPECTED}"),
    ("4 127.0.0.1:5\n", f"line 1: {EXPECTED}"),
    ("-1 127.0.0.1:5\n", f"line 1: {EXPECTED}"),
    ("0 127.0.0.1:5 extra\n", f"line 1: {EXPECTED}"),
    ("0 127.0.0.1:5 shm extra\n", f"line 1: {EXPECTED}"),
    ("0 127.0.0.1:5 SHM\n", f"line 1: {EXPECTED}"),
    ("0 127.0.0.1:5 shm-\n", f"line 1: {EXPECTED}"),
    ("0 ::1:5\n", f"line 1: {EXPECTED}"),
    ("x 127.0.0.1:5\n", f"line 1: {EXPECTED}"),
    ("0 127.0.0.1:5\n1 127.0.0.1:6\n1 127.0.0.1:7\n", "line 3: owner 1 is listed twice"),
    ("0 127.0.0.1:5\n", "has no endpoint for owner 1"),
    ("1 127.0.0.1:5\n", "has no endpoint for owner 0"),
    ("0 " + "h" * 1100 + ":5\n", "line 1 is longer than 1022 characters"),
])
def test_malformed_peers_files_are_usage_errors(rtlib, tmp_path, text, message):
    (code, msg), path = _peers(rtlib, tmp_path, text)
    assert (code, msg) == ("usage", f"peers file '{path}' {message}")


def test_a_host_that_does_not_resolve_is_a_usage_error(rtlib, tmp_path):
    (code, msg), path = _peers(rtlib, tmp_path, "0 no-such-host.invalid:5\n1 127.0.0.1:6\n")
    assert code == "usage"
    assert msg.startswith(f"peers file '{path}' line 1: host 'no-such-host.invalid' does not resolve (")


def test_a_missing_peers_file_is_an_io_error(rtlib, tmp_path):
    rt = rtlib.owner(1, str(tmp_path / "absent"))
    assert rtlib.result(rt, rtlib.lib.rt_read_peers(rt)) == (
        "io-error", f"cannot read the peers file '{tmp_path / 'absent'}'")


# -- the command line ----------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["--owner", "2", "--peers", "p", "--out", "o"],
    ["--owner=2", "--peers=p", "--out=o"],
    ["--out", "o", "--timeout-ms=1", "--updates", "0", "--peers", "p", "--owner", "2"],
])
def test_options_with_or_without_equals(rtlib, argv):
    rt = rtlib.new()
    assert rtlib.parse(rt, *argv) == 0
    assert rtlib.lib.rt_select_owner(rt) == 0


@pytest.mark.parametrize("argv,message", [
    ([], "--owner is required unless SLURM_PROCID or OMPI_COMM_WORLD_RANK is set (try --help)"),
    (["--owner"], "'--owner' is an option with a value (try --help)"),
    (["--owner", "x1", "--peers", "p", "--out", "o"], "--owner needs a non-negative integer, got 'x1' (try --help)"),
    (["--owner", "0", "--peers", "p"], "--out or --out-dir is required (try --help)"),
    (["--owner", "0", "--out", "o"],
     "--peers is required unless --nodelist, --hostfile or SLURM_STEP_NODELIST names the hosts (try --help)"),
    (["--owner", "0", "--peers", "p", "--out", "o", "--bogus", "1"], "unknown option '--bogus' (try --help)"),
    (["--owner", "0", "--peers", "p", "--out", "o", "extra"], "unexpected argument 'extra' (try --help)"),
    (["--owner", "0", "--peers", "p", "--out", "o", "--timeout-ms", "0"], "--timeout-ms must be in 1..2147483647"),
    (["--owner", "0", "--peers", "p", "--out", "o", "--timeout-ms", "2147483648"],
     "--timeout-ms must be in 1..2147483647"),
    (["--owner", "0", "--peers", "p", "--out", "o", "--updates", "-1"],
     "--updates needs a non-negative integer, got '-1' (try --help)"),
    (["--owner", "0", "--peers", "p", "--out", "o", "--updates", "99999999999999999999"],
     "--updates needs a non-negative integer, got '99999999999999999999' (try --help)"),
    (["--help=1"], "unknown option '--help=1' (try --help)"),
])
def test_bad_command_lines_are_usage_errors(rtlib, argv, message):
    rt = rtlib.new()
    assert rtlib.result(rt, rtlib.parse(rt, *argv)) == ("usage", message)


@pytest.mark.parametrize("name, value", wire.OPTIONS)
def test_every_option_of_the_table_is_parsed_with_its_value_rule(rtlib, name, value):
    """The getopt table is generated from alphac/wire.py OPTIONS: an option that takes a
    value refuses to go without one; one that takes none refuses one given with '='."""
    rt = rtlib.new()
    if value:
        assert rtlib.result(rt, rtlib.parse(rt, f"--{name}")) == (
            "usage", f"'--{name}' is an option with a value (try --help)")
    else:
        assert rtlib.result(rt, rtlib.parse(rt, f"--{name}=1")) == (
            "usage", f"unknown option '--{name}=1' (try --help)")


@pytest.mark.parametrize("target", ["x86_64", "sm86"])
def test_the_usage_names_exactly_the_options_of_the_table(target):
    """--help names every option of the table and no other (--gpu: SM86 executables only)."""
    from alphac import driver
    from alphac.image.image import usage_text

    p = driver.plan(driver.deployment(str(SPECS / "demo.alpha")))
    named = set(re.findall(r"--([a-z][a-z-]*)", usage_text(p, "worker", target, (1,))))
    assert named == {n for n, _ in wire.OPTIONS} - ({"gpu"} if target != "sm86" else set())


@pytest.mark.parametrize("flag,start", [("--help", "usage: EXE --owner I --peers FILE --out PATH"),
                                        ("--version", "lsq_plain_star-worker-x86_64: deployment run, role worker")])
def test_help_and_version_print_and_end_the_run(rtlib, capfd, flag, start):
    rt = rtlib.new()
    assert rtlib.parse(rt, "--owner", "1", flag) == -1
    out = capfd.readouterr().out
    assert out.startswith(start)
    assert f"protocol {rtlib.plan.protocol_hex}" in out


def test_an_owner_outside_the_role_is_refused(rtlib):
    rt = rtlib.new()
    assert rtlib.parse(rt, "--owner", "0", "--peers", "p", "--out", "o") == 0
    assert rtlib.result(rt, rtlib.lib.rt_select_owner(rt)) == (
        "owner-not-in-role", "owner 0 is not in role worker (owners 1, 2, 3) of deployment run")


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]"])
def test_the_wildcard_address_is_refused_unless_asked_for(rtlib, tmp_path, host):
    path = tmp_path / "peers"
    path.write_text(f"0 127.0.0.1:47000\n1 {host}:47001\n")
    rt = rtlib.owner(1, str(path))
    assert rtlib.result(rt, rtlib.lib.rt_read_peers(rt)) == (
        "usage", f"peers file '{path}' line 2 names the wildcard address '{host[1:-1] if host[0] == '[' else host}' "
                 "for owner 1; an owner listens only on its own address (--listen-any to listen on every "
                 "interface)")
    rt = rtlib.owner(1, str(path), "out", "--listen-any")
    assert rtlib.result(rt, rtlib.lib.rt_read_peers(rt)) == ("ok", "")


def test_a_dial_connected_to_itself_is_seen(rtlib):
    # TCP's simultaneous open: a socket bound to a port and connected to that same port is
    # connected to itself, as a retried dial at a port nobody listens on can be.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.connect(s.getsockname())
        assert s.getsockname() == s.getpeername()
        assert rtlib.lib.rt_self_connected(s.fileno()) == 1
    with socket.create_server(("127.0.0.1", 0)) as srv, socket.create_connection(srv.getsockname()) as c:
        a, _ = srv.accept()
        with a:
            assert rtlib.lib.rt_self_connected(c.fileno()) == 0
            assert rtlib.lib.rt_self_connected(a.fileno()) == 0
    with socket.socket() as unconnected:
        assert rtlib.lib.rt_self_connected(unconnected.fileno()) == 0

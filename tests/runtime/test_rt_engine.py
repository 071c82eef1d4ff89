"""Owner index and hosts from an engine (alphac/runtime/engine.c), in-process: --owner,
SLURM_PROCID and OMPI_COMM_WORLD_RANK; --nodelist, --hostfile and srun's
SLURM_STEP_NODELIST with SLURM_STEP_TASKS_PER_NODE; --base-port plus the owner's place on
its host; the engines' local ranks. The library is the worker role of a 4-owner star
(owners 1, 2, 3; owner 1 talks to owner 0)."""

from __future__ import annotations

import ctypes

import pytest

NODES = ["--base-port", "47000", "--out", "o"]


def _parse(rtlib, *argv):
    rt = rtlib.new()
    return rt, rtlib.result(rt, rtlib.parse(rt, *argv))


def _out(rtlib, rt) -> str:
    return rtlib.lib.rt_out_path(rt).decode()


def _endpoints(rtlib, rt) -> list[str | None]:
    buf = ctypes.create_string_buffer(300)
    return [buf.value.decode() if rtlib.lib.rt_endpoint_text(rt, o, buf, 300) == 0 else None
            for o in range(4)]


def _peers(rtlib, *argv):
    """Parse, place in the role, read the peers: (code, message) and the endpoints."""
    rt, parsed = _parse(rtlib, *argv)
    if parsed != ("ok", ""):
        return parsed, None
    assert rtlib.lib.rt_select_owner(rt) == 0, rtlib.message(rt)
    return rtlib.result(rt, rtlib.lib.rt_read_peers(rt)), _endpoints(rtlib, rt)


# -- the owner index --------------------------------------------------------------------

@pytest.mark.parametrize("argv,env,owner", [
    (["--owner", "2"], {}, 2),
    ([], {"SLURM_PROCID": "2"}, 2),
    ([], {"OMPI_COMM_WORLD_RANK": "3"}, 3),
    (["--owner", "1"], {"SLURM_PROCID": "1", "OMPI_COMM_WORLD_RANK": "1"}, 1),
    ([], {"SLURM_PROCID": "3", "OMPI_COMM_WORLD_RANK": "3"}, 3),
])
def test_the_owner_index_comes_from_the_command_line_or_an_engine(rtlib, monkeypatch, tmp_path, argv, env, owner):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rt, parsed = _parse(rtlib, *argv, "--peers", "p", "--out-dir", str(tmp_path))
    assert parsed == ("ok", "")
    assert _out(rtlib, rt) == str(tmp_path / f"owner-{owner}.out")
    assert rtlib.lib.rt_select_owner(rt) == 0


@pytest.mark.parametrize("argv,env,message", [
    (["--owner", "1"], {"SLURM_PROCID": "2"},
     "owner 1 from --owner, but SLURM_PROCID=2: two sources of the owner index disagree"),
    (["--owner", "1"], {"OMPI_COMM_WORLD_RANK": "0"},
     "owner 1 from --owner, but OMPI_COMM_WORLD_RANK=0: two sources of the owner index disagree"),
    ([], {"SLURM_PROCID": "1", "OMPI_COMM_WORLD_RANK": "2"},
     "owner 1 from SLURM_PROCID, but OMPI_COMM_WORLD_RANK=2: two sources of the owner index disagree"),
])
def test_two_sources_that_disagree_refuse_owner_ambiguous(rtlib, monkeypatch, argv, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _parse(rtlib, *argv, "--peers", "p", "--out", "o")[1] == ("owner-ambiguous", message)


@pytest.mark.parametrize("name,value", [("SLURM_PROCID", "x"), ("SLURM_PROCID", ""),
                                        ("OMPI_COMM_WORLD_RANK", "-1"), ("SLURM_PROCID", "1 ")])
def test_an_engine_variable_that_is_no_index_is_a_usage_error(rtlib, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert _parse(rtlib, "--owner", "1", "--peers", "p", "--out", "o")[1] == (
        "usage", f"{name}='{value}' is not a non-negative integer")


# -- where the hosts come from -------------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["--peers", "p", "--nodelist", "a", "--base-port", "1", "--out", "o"],
     "--peers, --nodelist and --hostfile each name every owner's host: give one (try --help)"),
    (["--hostfile", "h", "--nodelist", "a", "--base-port", "1", "--out", "o"],
     "--peers, --nodelist and --hostfile each name every owner's host: give one (try --help)"),
    (["--nodelist", "a", "--out", "o"], "--base-port is required with the hosts of --nodelist (try --help)"),
    (["--hostfile", "h", "--out", "o"], "--base-port is required with the hosts of --hostfile (try --help)"),
    (["--peers", "p", "--base-port", "47000", "--out", "o"],
     "--base-port goes with the hosts of a node list, not with --peers (try --help)"),
    (["--peers", "p", "--out", "o", "--out-dir", "d"], "give --out or --out-dir, not both (try --help)"),
    (["--nodelist", "a", "--base-port", "0", "--out", "o"], "--base-port must be in 1..65535"),
    (["--nodelist", "a", "--base-port", "65536", "--out", "o"], "--base-port must be in 1..65535"),
])
def test_conflicting_or_missing_host_options_are_usage_errors(rtlib, argv, message):
    assert _parse(rtlib, "--owner", "1", *argv)[1] == ("usage", message)


@pytest.mark.parametrize("out", ["", "/", "dir/", ".", "..", "run/.", "run/.."])
def test_an_output_path_that_names_no_file_is_a_usage_error(rtlib, out):
    assert _parse(rtlib, "--owner", "1", "--peers", "p", "--out", out)[1] == (
        "usage", f"--out '{out}' names no file: give the output file's path (PATH.tmp and "
        "PATH.commit go beside it)")


def test_an_empty_output_directory_is_a_usage_error(rtlib):
    assert _parse(rtlib, "--owner", "1", "--peers", "p", "--out-dir", "")[1] == (
        "usage", "--out-dir is empty: name the run's directory")


@pytest.mark.parametrize("out", ["o", "./o", "run/owner-0.out", "/tmp/x.out", "..o", ".o"])
def test_an_output_path_that_names_a_file_is_taken(rtlib, out):
    assert _parse(rtlib, "--owner", "1", "--peers", "p", "--out", out)[1] == ("ok", "")


def test_srun_s_node_list_needs_a_base_port(rtlib, monkeypatch):
    monkeypatch.setenv("SLURM_STEP_NODELIST", "localhost")
    assert _parse(rtlib, "--owner", "1", "--out", "o")[1] == (
        "usage", "--base-port is required with the hosts of SLURM_STEP_NODELIST (try --help)")


def test_a_peers_file_wins_over_srun_s_node_list(rtlib, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_STEP_NODELIST", "nowhere[1-4]")
    peers = tmp_path / "peers"
    peers.write_text("0 127.0.0.1:5000\n1 127.0.0.1:5001\n")
    assert _peers(rtlib, "--owner", "1", "--peers", str(peers), "--out", "o") == (
        ("ok", ""), ["127.0.0.1:5000", "127.0.0.1:5001", None, None])


# -- owner i on the i-th host, at the base port plus its place on that host ---------------

def test_an_explicit_node_list_places_owner_i_on_its_i_th_entry(rtlib):
    assert _peers(rtlib, "--owner", "1", "--nodelist", "localhost,localhost,127.0.0.1,localhost", *NODES) == (
        ("ok", ""), ["localhost:47000", "localhost:47001", "127.0.0.1:47000", "localhost:47002"])


@pytest.mark.parametrize("nodes,tasks,want", [
    ("localhost", "4", ["localhost:47000", "localhost:47001", "localhost:47002", "localhost:47003"]),
    ("localhost,127.0.0.1", "2(x2)", ["localhost:47000", "localhost:47001", "127.0.0.1:47000",
                                      "127.0.0.1:47001"]),
    ("localhost,127.0.0.1", "3,1", ["localhost:47000", "localhost:47001", "localhost:47002",
                                    "127.0.0.1:47000"]),
    ("localhost,127.0.0.[1-3]", None, ["localhost:47000", "127.0.0.1:47000", "127.0.0.2:47000",
                                       "127.0.0.3:47000"]),
])
def test_srun_s_nodes_hold_their_task_counts_in_blocks(rtlib, monkeypatch, nodes, tasks, want):
    monkeypatch.setenv("SLURM_STEP_NODELIST", nodes)
    if tasks is not None:
        monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", tasks)
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert _peers(rtlib, *NODES) == (("ok", ""), want)


@pytest.mark.parametrize("nodes,tasks,message", [
    ("localhost,127.0.0.1", "4",
     "SLURM_STEP_TASKS_PER_NODE '4' and SLURM_STEP_NODELIST 'localhost,127.0.0.1' disagree: 1 task counts, 2 nodes"),
    ("localhost", "2(x3)",
     "SLURM_STEP_TASKS_PER_NODE '2(x3)' and SLURM_STEP_NODELIST 'localhost' disagree: 3 task counts, 1 nodes"),
    ("localhost", "3", "SLURM_STEP_NODELIST 'localhost' with SLURM_STEP_TASKS_PER_NODE '3' places 3 owners; "
                       "the deployment has 4"),
    ("localhost", None, "SLURM_STEP_NODELIST 'localhost' places 1 owners; the deployment has 4"),
    ("localhost", "4(x)", "SLURM_STEP_TASKS_PER_NODE '4(x)': bad entry '4(x)' at character 1: expected N or "
                          "N(xM), N and M in 1..65536"),
    ("a,b", "2,0", "SLURM_STEP_TASKS_PER_NODE '2,0': bad entry '0' at character 3: expected N or N(xM), N and M "
                   "in 1..65536"),
    ("n[1-2", "4", "SLURM_STEP_NODELIST 'n[1-2': unclosed '[' at character 2"),
    ("n[1-2]", "2(x2)", "SLURM_STEP_NODELIST, the host of owner 1: host 'n1' does not resolve ("),
])
def test_a_bad_slurm_node_list_is_a_usage_error(rtlib, monkeypatch, nodes, tasks, message):
    monkeypatch.setenv("SLURM_STEP_NODELIST", nodes)
    if tasks is not None:
        monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", tasks)
    (code, msg), _ = _peers(rtlib, "--owner", "1", *NODES)
    assert code == "usage" and msg.startswith(message), msg
    assert msg == message or message.endswith("(")


def test_a_port_past_65535_is_a_usage_error(rtlib):
    assert _peers(rtlib, "--owner", "1", "--nodelist", "localhost,localhost,a,a", "--base-port", "65535",
                  "--out", "o")[0] == ("usage", "owner 1 would listen on port 65536 (--base-port 65535 + its place "
                                                "1 among the owners of host 'localhost'), above 65535")


def test_a_hostfile_s_slots_are_filled_in_order_and_a_host_listed_again_is_merged(rtlib, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# owners 0, 1 and 2 on localhost\nlocalhost slots=2\n\n127.0.0.1   # one slot\n"
                     "localhost\t slots=1\n127.0.0.1 slots=5\n")
    assert _peers(rtlib, "--owner", "1", "--hostfile", str(hosts), *NODES) == (
        ("ok", ""), ["localhost:47000", "localhost:47001", "localhost:47002", "127.0.0.1:47000"])


@pytest.mark.parametrize("text,message", [
    ("localhost slots=0\n", "line 1: expected 'HOST' or 'HOST slots=N' (N in 1..65536)"),
    ("localhost\nlocalhost slots=x\n", "line 2: expected 'HOST' or 'HOST slots=N' (N in 1..65536)"),
    ("localhost cpus=4\n", "line 1: expected 'HOST' or 'HOST slots=N' (N in 1..65536)"),
    ("localhost slots=4 max_slots=4\n", "line 1: expected 'HOST' or 'HOST slots=N' (N in 1..65536)"),
    ("local/host\n", "line 1: expected 'HOST' or 'HOST slots=N' (N in 1..65536)"),
    ("# nothing\n\n", "names no host"),
    ("localhost slots=2\n", "has 2 slots for 4 owners"),
    ("localhost slots=60000\nb slots=6000\n", "has more than 65536 slots"),
])
def test_a_bad_hostfile_is_a_usage_error(rtlib, tmp_path, text, message):
    hosts = tmp_path / "hosts"
    hosts.write_text(text)
    assert _peers(rtlib, "--owner", "1", "--hostfile", str(hosts), *NODES)[0] == (
        "usage", f"hostfile '{hosts}' {message}")


def test_a_missing_hostfile_is_an_io_error(rtlib, tmp_path):
    hosts = tmp_path / "absent"
    assert _peers(rtlib, "--owner", "1", "--hostfile", str(hosts), *NODES)[0] == (
        "io-error", f"cannot read the hostfile '{hosts}' (No such file or directory)")


# -- the engines' local ranks ------------------------------------------------------------

@pytest.mark.parametrize("name", ["SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"])
def test_an_engine_s_local_rank_must_be_the_owner_s_place_on_its_host(rtlib, monkeypatch, name):
    argv = ("--owner", "1", "--nodelist", "localhost,localhost,a,a", *NODES)
    monkeypatch.setenv(name, "1")
    assert _peers(rtlib, *argv)[0] == ("ok", "")
    monkeypatch.setenv(name, "0")
    assert _peers(rtlib, *argv)[0] == (
        "local-rank-mismatch", f"{name}=0, but the hosts of --nodelist put owner 1 at place 1 among the owners of "
                               "host 'localhost'")


def test_a_local_rank_is_checked_only_against_a_node_list(rtlib, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_LOCALID", "7")
    peers = tmp_path / "peers"
    peers.write_text("0 127.0.0.1:5000\n1 127.0.0.1:5001\n")
    assert _peers(rtlib, "--owner", "1", "--peers", str(peers), "--out", "o")[0] == ("ok", "")

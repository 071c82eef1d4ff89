"""The emitters' hostlist parser (alphac/launch/hostlist.py) on the shared table of cases,
and the table's expansions against Slurm's own `scontrol show hostnames` where installed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from alphac.launch.hostlist import HostlistError, expand
from hostlist_cases import EXPANDS, REFUSED


@pytest.mark.parametrize("text,hosts", EXPANDS)
def test_a_host_list_expands_as_slurm_expands_it(text, hosts):
    assert expand(text) == hosts


@pytest.mark.parametrize("text,message", REFUSED)
def test_a_bad_host_list_is_refused_with_one_line(text, message):
    with pytest.raises(HostlistError) as info:
        expand(text)
    assert str(info.value) == message


def test_the_largest_list_is_accepted_whole():
    hosts = expand("n[0-65535]")
    assert (len(hosts), hosts[0], hosts[-1]) == (65536, "n0", "n65535")


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol (slurm-wlm) is not installed")
def test_the_table_is_what_slurm_prints(tmp_path):
    conf = tmp_path / "slurm.conf"  # scontrol reads a configuration even to expand a list
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\n")
    for text, hosts in EXPANDS:
        done = subprocess.run(["scontrol", "show", "hostnames", text], capture_output=True,
                              text=True, timeout=30, env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"})
        assert done.stdout.split() == hosts, (text, done.stdout, done.stderr)

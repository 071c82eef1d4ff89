"""Readable results and progress: word summaries, the owners' status channel
(--status-fd) and what a launch shows while it runs."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

from click.testing import CliRunner

from alphac.commands import main
from alphac.commands.words import decimal, lines, summary
from alphac.testing import session
from alphac.launch.progress import Progress, StatusChannel, counts

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "lsq_plain_star.alpha")


class Stream(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_a_summary_shows_the_first_words_in_decimal_and_hex():
    assert decimal(0x3FD0000000000000) == "0.25" and decimal(0x3FB999999999999A) == "0.1"
    assert summary("params", [0x3FD0000000000000, 0xBFE8000000000000]) == (
        "  params 2 words: 0.25 (3fd0000000000000), -0.75 (bfe8000000000000)")
    assert summary("state", [0x3FF0000000000000] * 6) == (
        "  state  6 words: " + ", ".join(["1.0 (3ff0000000000000)"] * 4)
        + ", ... 2 more (--full shows every word)")
    assert summary("state", []) == "  state  (none)"
    assert lines("params", list(range(5)), True) == [
        "  params 0000000000000000 0000000000000001 0000000000000002 0000000000000003",
        "         0000000000000004"]


def test_the_oracle_summarises_by_default():
    out = CliRunner().invoke(main, ["oracle", SPEC, "--rounds", "0"])
    assert out.exit_code == 0
    assert out.stdout.splitlines()[2:4] == [
        "  params 2 words: 0.0012 (3f53a92a30553261), -3.75 (c00e000000000000)", "  state  (none)"]


def test_counts():
    assert counts({1: 3, 0: 2}, 5) == "owner 0 2/5, owner 1 3/5"
    assert counts({o: o for o in range(10)}, 9) == "10 owners: 0 to 9 of 9"


def test_the_status_channel_reads_whole_lines():
    stream = Stream()
    channel = StatusChannel([0, 1], Progress(stream), 3)
    os.write(channel.child_fds(0)[0], b"update 1\nupdate 2\nupd")
    os.write(channel.child_fds(1)[0], b"update 1\n")
    channel.poll()
    assert channel.versions == {0: 2, 1: 1}
    os.write(channel.child_fds(0)[0], b"ate 3\n")
    channel.close()
    assert channel.versions == {0: 3, 1: 1}
    assert stream.getvalue().splitlines() == ["alphac: updates owner 0 2/3, owner 1 1/3",
                                              "alphac: updates owner 0 3/3, owner 1 1/3"]


def test_a_quiet_progress_says_nothing():
    assert not Progress.for_stderr(quiet=True, forced=True).enabled
    assert Progress.for_stderr(quiet=False, forced=True).enabled


def test_a_launch_shows_its_owners_and_their_updates():
    dep = session.deployment(SPEC)
    stream = Stream()
    run = session.run("lsq_plain_star", dep, progress=Progress(stream))
    assert run.committed
    shown = stream.getvalue().splitlines()
    assert shown[0] == f"alphac: started 4 owners; run directory {run.run_dir}"
    assert shown[-1] == "alphac: updates " + ", ".join(f"owner {o} 5/5" for o in range(4))


def test_an_executable_refuses_a_status_fd_that_is_not_open_for_writing(tmp_path):
    dep = session.deployment(SPEC)
    exe = session.built("lsq_plain_star", dep)[("coordinator", "x86_64")]
    r, w = os.pipe()
    try:
        for fd in (r, 99):
            p = subprocess.run([str(exe), "--owner", "0", "--peers", "/dev/null", "--out",
                                str(tmp_path / "o"), "--insecure", "--status-fd", str(fd)], pass_fds=(r,),
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            assert p.returncode == 2  # a usage refusal
            assert p.stderr == f"refused: usage: --status-fd {fd} is not a descriptor open for writing\n"
    finally:
        os.close(r)
        os.close(w)

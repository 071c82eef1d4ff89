"""`alphac verify RUN_DIR SPEC`: a run directory judged by its commit record, read and never
changed, each owner's words against the oracle, the table and exit status of `alphac
launch`. The runs here are local launches, copied and then altered."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from alphac.testing import session
from alphac.launch.errors import LaunchError
from alphac.launch.verify import verify

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "lsq_plain_star.alpha"
OTHER = ROOT / "specs" / "lsq_plain_hierarchy.alpha"


@pytest.fixture(scope="module")
def committed():
    """A committed local run of lsq_plain_star (4 owners, 5 updates)."""
    dep = session.deployment(str(SPEC))
    run = session.run("lsq_plain_star", dep)
    assert run.committed and sorted(run.outputs) == [0, 1, 2, 3]
    return run.run_dir


@pytest.fixture
def run_dir(committed, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(committed, copy)
    return copy


def _listing(d: Path) -> dict[str, bytes | None]:
    """Each file's bytes (None for a directory or a FIFO, never opened here)."""
    return {p.name: p.read_bytes() if p.is_file() else None for p in sorted(d.iterdir())}


def _verify(run_dir: Path, spec: Path = SPEC, **kw):
    dep = session.deployment(str(spec))
    before = _listing(run_dir)
    checked = verify(dep, run_dir, spec=str(spec), **kw)
    assert _listing(run_dir) == before  # read, never changed
    return checked


def _verdicts(checked) -> list[str]:
    return ["match" if r.match else r.why.split(":", 1)[0] for r in checked.report.rows]


def test_a_committed_run_matches(run_dir):
    checked = _verify(run_dir)
    assert checked.report.match and _verdicts(checked) == ["match"] * 4
    assert checked.report.rounds == 5 and checked.notes == []
    assert checked.report.seconds is None


def test_a_run_without_its_commit_record_published_nothing(run_dir):
    (run_dir / "owner-0.out.commit").unlink()
    (run_dir / "owner-3.out.tmp").write_bytes(b"staged")
    (run_dir / "owner-1.stderr").write_text("refused: peer-closed: owner 0 closed its connection\n")
    checked = _verify(run_dir)
    assert _verdicts(checked) == ["run-not-committed"] * 4
    assert checked.report.failures[0] == ("run-not-committed: owner 0 (coordinator on x86_64): the run has no "
                                          "commit record: nothing is published")
    assert checked.report.stderr == {1: "refused: peer-closed: owner 0 closed its connection\n"}
    assert checked.notes == ["1 staged file(s) remain (owner-3.out.tmp, ...): the run is still going, or it "
                             "ended before its commit"]


def test_an_output_that_is_not_the_committed_one_is_a_bad_output(run_dir):
    data = bytearray((run_dir / "owner-2.out").read_bytes())
    data[-1] ^= 1
    (run_dir / "owner-2.out").write_bytes(bytes(data))
    (run_dir / "owner-3.out").unlink()
    checked = _verify(run_dir)
    assert _verdicts(checked) == ["match", "match", "bad-output", "bad-output"]
    assert checked.report.failures == (
        "bad-output: owner 2: its output's sha256 is not the one the commit record names",
        "bad-output: owner 3: committed, but its output is gone")


def test_a_committed_output_still_staged_is_read_where_it_is(run_dir):
    (run_dir / "owner-2.out").rename(run_dir / "owner-2.out.tmp")
    checked = _verify(run_dir)
    assert checked.report.match
    assert checked.notes[0].startswith("1 committed output(s) are still staged (owner-2.out.tmp, ...)")
    assert not (run_dir / "owner-2.out").exists()


def test_another_update_count_is_refused_before_the_oracle_runs(run_dir):
    # 10**7 updates would take the oracle minutes: the commit record's 5 refuses it first
    with pytest.raises(LaunchError) as info:
        _verify(run_dir, rounds=10**7)
    assert info.value.code == "run-rounds-mismatch"
    assert info.value.message == (f"{run_dir / 'owner-0.out.commit'} commits 5 updates; --rounds asks for "
                                  "10000000 (leave it out to verify the run's own count)")


def test_the_run_of_another_plan_is_refused_whole(run_dir):
    with pytest.raises(LaunchError) as info:
        _verify(run_dir, OTHER)
    assert info.value.code == "run-protocol-mismatch"
    assert info.value.message.startswith(f"{run_dir / 'owner-0.out.commit'} names protocol ")


def _cli(*argv: str):
    return subprocess.run([sys.executable, "-m", "alphac", "verify", *argv], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_command_prints_launch_s_table_and_exits_by_the_verdict(run_dir):
    done = _cli(str(run_dir), str(SPEC))
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["owner", "role", "target", "transport", "version", "digest", "oracle"]
    assert [ln.split()[-1] for ln in lines[1:]] == ["match"] * 4
    as_json = json.loads(_cli(str(run_dir), str(SPEC), "--json").stdout)
    assert (as_json["match"], as_json["rounds"], len(as_json["owners"])) == (True, 5, 4)
    (run_dir / "owner-0.out.commit").unlink()
    done = _cli(str(run_dir), str(SPEC))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == ("alphac: error[run-not-committed]: owner 0 (coordinator on x86_64): "
                                           "the run has no commit record: nothing is published")


def test_the_command_s_usage_errors(run_dir, tmp_path):
    assert _cli(str(tmp_path / "absent"), str(SPEC)).returncode == 2
    done = _cli(str(run_dir), str(SPEC), "--new-contract")
    assert (done.returncode, done.stderr) == (2, "alphac: error[usage]: --new-contract goes with --resume PATH\n")
    done = _cli(str(run_dir), str(OTHER))
    assert done.returncode == 1
    assert done.stderr.startswith("alphac: error[run-protocol-mismatch]: ")


# -- what is not a run's file -------------------------------------------------------------

def test_an_output_that_is_a_directory_is_not_a_file(run_dir):
    (run_dir / "owner-2.out").unlink()
    (run_dir / "owner-2.out").mkdir()
    checked = _verify(run_dir)
    assert _verdicts(checked) == ["match", "match", "run-output-not-file", "match"]
    assert checked.report.failures == (
        f"run-output-not-file: owner 2: its output {run_dir / 'owner-2.out'} is a directory, not a "
        "regular file",)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _cli_bounded(*argv: str):
    """The command, which must end by itself well within the bound (a FIFO never blocks it)."""
    return subprocess.run([sys.executable, "-m", "alphac", "verify", *argv], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_an_output_that_is_a_fifo_does_not_block(run_dir):
    _fifo(run_dir / "owner-1.out")
    done = _cli_bounded(str(run_dir), str(SPEC))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (f"alphac: error[run-output-not-file]: owner 1: its output "
                                           f"{run_dir / 'owner-1.out'} is a FIFO, not a regular file")


def test_a_commit_record_that_is_a_fifo_does_not_block(run_dir):
    _fifo(run_dir / "owner-0.out.commit")
    done = _cli_bounded(str(run_dir), str(SPEC))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"alphac: error[commit-record-invalid]: {run_dir / 'owner-0.out.commit'} is a "
                           "FIFO, not a regular file; the run cannot be judged: restore the root's record "
                           "or verify a copy of the run\n")


def test_a_commit_record_that_is_not_utf8_is_invalid(run_dir):
    record = run_dir / "owner-0.out.commit"
    record.write_bytes(record.read_bytes().replace(b"protocol", b"pr\xffotocol"))
    with pytest.raises(LaunchError) as info:
        _verify(run_dir)
    assert info.value.code == "commit-record-invalid"
    assert info.value.message == (f"{record}: not UTF-8 text (byte 18 is 0xff); not an alphac commit "
                                  "record; the run cannot be judged: restore the root's record or verify "
                                  "a copy of the run")


def test_a_malformed_commit_record_is_invalid_not_absent(run_dir):
    record = run_dir / "owner-0.out.commit"
    record.write_text(record.read_text().replace("updates 5", "updates five"))
    with pytest.raises(LaunchError) as info:
        _verify(run_dir)
    assert info.value.code == "commit-record-invalid"
    assert info.value.message.startswith(f"{record}:3: malformed line 'updates five'; ")


def test_files_added_to_a_committed_run_are_named(run_dir):
    shutil.copy(run_dir / "owner-3.out", run_dir / "owner-4.out")
    shutil.copy(run_dir / "owner-1.out", run_dir / "owner-1.out.tmp")  # a copy, not its link
    shutil.copy(run_dir / "owner-0.out.commit", run_dir / "owner-2.out.commit")
    (run_dir / "stray.tmp").write_text("")
    checked = _verify(run_dir)
    assert checked.report.match
    assert [p.name for p in checked.foreign] == ["owner-1.out.tmp", "owner-2.out.commit", "owner-4.out",
                                                 "stray.tmp"]
    want = (f"{run_dir} holds 4 file(s) no owner of this committed run of 4 owners writes there: "
            "owner-1.out.tmp, owner-2.out.commit, owner-4.out, stray.tmp")
    assert checked.foreign_error() == want
    done = _cli_bounded(str(run_dir), str(SPEC))
    assert done.returncode == 1
    assert done.stderr == f"alphac: error[run-foreign-files]: {want}\n"


def test_a_staged_output_its_owner_linked_but_has_not_removed_is_not_foreign(run_dir):
    os.link(run_dir / "owner-2.out", run_dir / "owner-2.out.tmp")
    checked = _verify(run_dir)
    assert checked.report.match and checked.foreign == ()

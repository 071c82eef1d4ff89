"""The command line's hygiene: --deployment where a file holds several, `check -` from
stdin, bounded numeric options, the run directories' retention and `alphac clean`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from alphac import driver
from alphac.commands import main
from alphac.launch.runs import KEEP_RUNS, clean, new_run_dir, prune_runs, runs_of

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
STAR = (SPECS / "lsq_plain_star.alpha").read_text()
SECOND = """
value second : Deployment = DeploymentOf {
  deploymentLearner = lsqPlain,
  deploymentOwners = 4,
  deploymentTopology = DataParallelHierarchy { dataParallelFanout = 2 },
  deploymentPartitioning = DataParallelReplicated,
  deploymentRoles = [RoleOf { roleName = "worker", roleOwners = [0 .. 4] }],
  deploymentPlacement = [TargetX86_64, TargetX86_64, TargetX86_64, TargetX86_64],
  deploymentUpdates = 3,
  deploymentContract = binary64Exact,
  deploymentCheckpoint = CheckpointNever,
}
"""


@pytest.fixture
def two(tmp_path, monkeypatch) -> str:
    shutil.copytree(SPECS / "Gates", tmp_path / "Gates")
    monkeypatch.chdir(tmp_path)
    Path("two.alpha").write_text(STAR + SECOND)
    return "two.alpha"


def test_two_deployments_check_and_need_a_name(two):
    out = CliRunner().invoke(main, ["check", two])
    assert out.exit_code == 0 and out.stdout.endswith(" families, 1 learner, 2 deployments\n")
    out = CliRunner().invoke(main, ["oracle", two])
    assert out.exit_code == 1 and out.stderr == """\
two.alpha:22:29: error[no-deployment]: two.alpha defines 2 deployments; name one with --deployment NAME
  value second : Deployment = DeploymentOf {
                              ^
  note: its deployments: run, second
"""


def test_deployment_selects_one(two):
    out = CliRunner().invoke(main, ["oracle", two, "--deployment", "second"])
    assert out.exit_code == 0 and out.stdout.startswith("oracle: second (two.alpha) after 3 updates")
    out = CliRunner().invoke(main, ["oracle", two, "--deployment", "run", "--rounds", "1"])
    assert out.exit_code == 0 and out.stdout.startswith("oracle: run (two.alpha) after 1 updates")
    out = CliRunner().invoke(main, ["plan", two, "--deployment", "second"])
    assert out.exit_code == 0 and out.stdout.startswith("plan second: 4 owners, hierarchy 2"), out.output
    # a misspelt name is located at the deployment it means, not at line 1
    for command in ("oracle", "plan", "check", "build", "launch"):
        extra = ["--all"] if command == "build" else []
        out = CliRunner().invoke(main, [command, two, "--deployment", "secnd", *extra])
        assert out.exit_code == 1, (command, out.output)
        assert out.stderr.splitlines()[:3] == [
            "two.alpha:22:29: error[no-deployment]: two.alpha defines no deployment named secnd; "
            "did you mean second?",
            "  value second : Deployment = DeploymentOf {",
            "                              ^"], (command, out.stderr)


def test_every_command_that_takes_a_spec_takes_deployment():
    for command in ("check", "plan", "oracle", "build", "launch", "verify"):
        out = CliRunner().invoke(main, [command, "--help"])
        assert "--deployment NAME" in out.output, command


def test_check_of_one_deployment_plans_it_alone(two):
    out = CliRunner().invoke(main, ["check", two, "--deployment", "second"])
    assert out.exit_code == 0 and out.stdout.endswith(" families, 1 learner, 2 deployments\n")


def test_check_reads_stdin(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["check", "-"], input="value k : Nat = 2\nvalue n : Nat = kk\n")
    assert out.exit_code == 1 and out.stderr == """\
<stdin>:2:17: error[unknown-name]: no value or constructor named kk is in scope
  value n : Nat = kk
                  ^~
  note: did you mean k?
"""
    out = CliRunner().invoke(main, ["check", "-"], input="value k : Nat = 2\n")
    assert out.exit_code == 0 and out.stdout.startswith("ok: <stdin>: ")


@pytest.mark.parametrize("args,bad", [
    (["launch", "x.alpha", "--timeout", "-5"], "'--timeout'"),
    (["launch", "x.alpha", "--timeout", "0"], "'--timeout'"),
    (["launch", "x.alpha", "--rounds", str(10**20)], "'--rounds'"),
    (["oracle", "x.alpha", "--rounds", str(driver.MAX_ROUNDS + 1)], "'--rounds'"),
    (["oracle", "x.alpha", "--rounds", "-1"], "'--rounds'"),
])
def test_numeric_options_are_bounded(args, bad):
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2 and f"Invalid value for {bad}" in out.stderr


@pytest.mark.parametrize("command", ["oracle", "launch", "verify"])
@pytest.mark.parametrize("value,why", [
    ("-1", "-1 is not in the range 0<=x<=10000000."),
    ("10000001", "10000001 is not in the range 0<=x<=10000000."),
    ("2.5", "'2.5' is not a whole number of updates; give 0 to 10000000"),
    ("1e9", "'1e9' is not a whole number of updates; give 0 to 10000000"),
    ("", "'' is not a whole number of updates; give 0 to 10000000"),
])
def test_rounds_is_a_whole_number_of_updates_in_range(tmp_path, command, value, why):
    args = [command, *([str(tmp_path)] if command == "verify" else []), "x.alpha", "--rounds", value]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2, out.output
    assert out.stderr.splitlines()[-1] == f"Error: Invalid value for '--rounds': {why}"


def test_only_the_newest_runs_are_kept(tmp_path):
    made = []
    for i in range(KEEP_RUNS + 3):
        made.append(new_run_dir(tmp_path, "s"))
        t = 1_000_000 + i
        os.utime(made[-1], (t, t))
    assert runs_of(tmp_path) == list(reversed(made[-KEEP_RUNS:]))
    assert prune_runs(tmp_path, keep=2) == list(reversed(made[-KEEP_RUNS:-2]))
    assert runs_of(tmp_path) == [made[-1], made[-2]]


def test_clean_removes_runs_and_what_alphac_built_only(tmp_path):
    from alphac.testing import session

    dep = session.deployment(str(SPECS / "lsq_plain_star.alpha"))
    exe = next(iter(session.built("lsq_plain_star", dep).values()))
    shutil.copy2(exe, tmp_path / exe.name)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".x.1234.partial").mkdir()
    new_run_dir(tmp_path, "s")
    assert clean(tmp_path, runs_only=True) == [tmp_path / "runs"]
    new_run_dir(tmp_path, "s")
    out = CliRunner().invoke(main, ["clean", "-o", str(tmp_path)])
    assert out.exit_code == 0 and out.stdout == (
        f"removed {tmp_path / 'runs'}\nremoved {tmp_path / '.x.1234.partial'}\n"
        f"removed {tmp_path / exe.name}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    out = CliRunner().invoke(main, ["clean", "-o", str(tmp_path)])
    assert out.stdout == f"clean: nothing of alphac's in {tmp_path}\n"


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-aarch64 missing")
def test_launch_prints_its_run_directory_and_a_summary(tmp_path):
    p = subprocess.run([sys.executable, "-m", "alphac", "launch", "specs/lsq_plain_star.alpha",
                        "--rounds", "2", "-o", str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # not a terminal: no progress
    lines = p.stdout.splitlines()
    run = runs_of(tmp_path)[0]
    assert lines[-1] == f"run directory: {run}"
    assert lines[5].startswith("digest ") and lines[5].endswith(": owners 0, 1, 2, 3")
    assert lines[6].startswith("  params 2 words: ") and lines[7] == "  state  (none)"


def _imported(*argv: str) -> set[str]:
    """The modules `python -m alphac ARGV` imports (from -X importtime)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "alphac", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_version_imports_no_command_nor_stage():
    # `alphac --version` is the interpreter's start and click: no command module is loaded
    found = _imported("--version")
    assert "click" in found
    assert not {m for m in found if m.startswith("alphac.") and m != "alphac.commands"}, sorted(
        m for m in found if m.startswith("alphac."))
    assert "numpy" not in found


def test_help_lists_every_command_without_importing_one():
    found = _imported("--help")
    assert not {m for m in found if m.startswith("alphac.") and m != "alphac.commands"}, sorted(
        m for m in found if m.startswith("alphac."))


@pytest.mark.parametrize("limit", [20, 45, 66, 200])
def test_the_listed_summaries_are_the_commands_own(limit):
    import importlib
    import inspect

    import click

    from alphac.commands import COMMANDS, SUMMARIES

    assert tuple(SUMMARIES) == COMMANDS
    for name in COMMANDS:
        command = importlib.import_module(f"alphac.commands.{name}").command
        assert SUMMARIES[name] == inspect.cleandoc(command.help).split("\n\n")[0].replace("\n", " "), name
        listed = click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit)
        assert listed == command.get_short_help_str(limit), name


def test_check_imports_neither_the_launcher_nor_the_code_generator():
    found = _imported("check", "specs/demo.alpha")
    assert {"alphac.driver", "alphac.check", "alphac.plan"} <= found
    later = {m for m in found if m.split(".")[:2] in (["alphac", "launch"], ["alphac", "codegen"],
                                                       ["alphac", "image"], ["alphac", "oracle"])}
    assert later == set() and "llvmlite" not in found and "numba" not in found, sorted(later)
    assert {"alphac.commands.build", "alphac.commands.launch"} & found == set()


def test_a_closed_pipe_ends_the_command_quietly_with_exit_0(tmp_path):
    # 20,000 words with --full: far more than a pipe holds, so the write after the reader
    # has gone fails with EPIPE (`alphac oracle ... | head -1`)
    text = (SPECS / "bench" / "big_lsq.alpha").read_text()
    text = text.replace("value k : Nat = 1000000", "value k : Nat = 20000").replace(
        'load "../../out/data/big_samples.npy" shares [3, 2, 3, 0]', "[[repeat k + 1 of 0.5], [], [], []]")
    spec = tmp_path / "wide.alpha"
    spec.write_text(text.replace("module Bench.BigLsq", "module Wide"))
    p = subprocess.Popen([sys.executable, "-m", "alphac", "oracle", str(spec), "--full", "--rounds", "0"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().startswith(b"oracle: run (")
    p.stdout.close()
    err = p.stderr.read()
    assert (p.wait(timeout=60), err) == (0, b"")


def test_emit_with_json_writes_nothing_to_stderr(tmp_path):
    import json

    out = CliRunner().invoke(main, ["launch", str(SPECS / "lsq_plain_star.alpha"), "--emit", "mpirun",
                                    "-o", str(tmp_path / "out"), "--json"])
    assert (out.exit_code, out.stderr) == (0, "")
    doc = json.loads(out.stdout)
    assert doc["ok"] is True and doc["engine"] == "mpirun" and len(doc["executables"]) == 3


def test_build_help_names_every_buildable_target():
    out = CliRunner().invoke(main, ["build", "--help"])
    assert "The target: aarch64, sm86, x86_64;" in " ".join(out.stdout.split())

"""`alphac launch --emit`: the role table and its ranges, the exact srun --multi-prog lines,
sbatch directives, mpirun app contexts and hostfiles the emitters write from it, and what
they refuse. The engines themselves run in tests/e2e/test_engines.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from alphac.testing import session
from alphac.launch.emit import emit, host_slots
from alphac.launch.errors import LaunchError
from alphac.launch.roles import owner_ranges, role_table
from alphac.launch.runner import owner_environment
from alphac.wire import ENGINE_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "lsq_plain_star.alpha"


@pytest.fixture(scope="module")
def dep():
    """lsq_plain_star on x86-64, AArch64, AArch64, x86-64: the ranges 0, 1-2, 3."""
    return dataclasses.replace(session.deployment(str(SPEC)), placement=("x86_64", "aarch64", "aarch64", "x86_64"))


@pytest.fixture(scope="module")
def plan(dep):
    return session.plan("lsq_plain_star-x-a-a-x", dep)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    """One build directory for the module: each emit reuses the executables built there."""
    return tmp_path_factory.mktemp("emit") / "out"


def test_the_role_table_has_a_row_per_owner_and_runs_of_one_command(dep, tmp_path):
    exes = {("coordinator", "x86_64"): tmp_path / "c", ("worker", "aarch64"): tmp_path / "wa",
            ("worker", "x86_64"): tmp_path / "wx"}
    table = role_table(dep, exes)
    assert [(e.owner, e.role, e.target, e.exe.name, e.runner) for e in table] == [
        (0, "coordinator", "x86_64", "c", ()), (1, "worker", "aarch64", "wa", ("qemu-aarch64",)),
        (2, "worker", "aarch64", "wa", ("qemu-aarch64",)), (3, "worker", "x86_64", "wx", ())]
    assert [(r.ranks, r.count, r.entry.label) for r in owner_ranges(table)] == [
        ("0", 1, "coordinator/x86_64"), ("1-2", 2, "worker/aarch64"), ("3", 1, "worker/x86_64")]
    assert [e.command for e in role_table(dep, exes, native=("aarch64",))][1] == (str(tmp_path / "wa"),)


def test_slurm_gets_one_multi_prog_line_per_range_and_a_batch_script(plan, out):
    done = emit(plan, "slurm", out, base_port=40000, updates=3, deadline_s=30.0)
    args = "--base-port 40000 --updates 3 --timeout-ms 10000 --key run.key --run-id @RUN_ID@ --out owner-%t.out"
    conf, batch = done.files
    assert [ln for ln in conf.read_text().splitlines() if not ln.startswith("#")] == [
        f"0 {out}/lsq_plain_star-coordinator-x86_64 {args}",
        f"1-2 qemu-aarch64 {out}/lsq_plain_star-worker-aarch64 {args}",
        f"3 {out}/lsq_plain_star-worker-x86_64 {args}"]
    text = batch.read_text()
    assert [ln for ln in text.splitlines() if ln.startswith("#SBATCH")] == [
        "#SBATCH --job-name=alphac-lsq_plain_star", "#SBATCH --ntasks=4",
        f"#SBATCH --output={out}/runs/slurm-%j.out"]
    assert text.splitlines()[-2:] == [
        f'sed "s/@RUN_ID@/$run_id/" {conf} > "$run/owners.multi-prog"',
        'srun --chdir="$run" --distribution=block --kill-on-bad-exit=1 --error="$run/owner-%t.stderr" '
        '--multi-prog "$run/owners.multi-prog"']
    assert os.access(batch, os.X_OK) and subprocess.run(["bash", "-n", str(batch)]).returncode == 0
    assert (done.start, done.run_dir) == (f"sbatch {batch}", f"{out}/runs/<job id>")
    assert [p.name for p in done.executables] == ["lsq_plain_star-coordinator-x86_64",
                                                  "lsq_plain_star-worker-aarch64", "lsq_plain_star-worker-x86_64"]
    assert all(p.is_file() for p in done.executables)  # built now: a run builds nothing


def test_slurm_hosts_become_sbatch_directives(plan, out):
    done = emit(plan, "slurm", out, hosts="node[1-2]")
    assert [ln for ln in done.files[1].read_text().splitlines() if ln.startswith("#SBATCH --nod")] == [
        "#SBATCH --nodes=2", "#SBATCH --nodelist=node[1-2]"]


def test_mpirun_gets_one_app_context_per_range_and_a_hostfile(plan, out):
    done = emit(plan, "mpirun", out, base_port=40000)
    hostfile, script = done.files
    assert hostfile.read_text() == "localhost slots=4\n"
    lines = script.read_text().splitlines()
    mpirun = lines.index('exec mpirun --hostfile "$hostfile" --map-by slot --bind-to none "$@" \\')
    common = '--hostfile "$hostfile" --out-dir . --base-port 40000 --timeout-ms 30000 --key run.key --run-id "$run_id"'
    assert lines[mpirun + 1:] == [
        f'    -np 1 --wdir "$run" env -u SLURM_PROCID -u SLURM_LOCALID {out}/lsq_plain_star-coordinator-x86_64 '
        f"{common} : \\",
        f'    -np 2 --wdir "$run" env -u SLURM_PROCID -u SLURM_LOCALID qemu-aarch64 '
        f"{out}/lsq_plain_star-worker-aarch64 {common} : \\",
        f'    -np 1 --wdir "$run" env -u SLURM_PROCID -u SLURM_LOCALID {out}/lsq_plain_star-worker-x86_64 {common}']
    assert os.access(script, os.X_OK) and subprocess.run(["bash", "-n", str(script)]).returncode == 0


@pytest.mark.parametrize("engine", ["slurm", "mpirun"])
def test_every_run_of_the_emitted_files_gets_a_fresh_run_id(plan, out, tmp_path, engine):
    """The emitted script's run-directory lines, run three times: three run directories, each
    with its own non-zero 64-bit run id (so a hello recorded in one run is refused in the
    next even under the same key)."""
    done = emit(plan, engine, out)
    script = done.files[1].read_text().splitlines()
    start = script.index("set -euo pipefail")
    lines = [ln for ln in script[start:] if ln.startswith(("run", "umask", "mkdir", "if", "while", "echo \"$run_id"))]
    ids = []
    for i in range(3):
        run = tmp_path / f"run-{i}"
        ran = subprocess.run(["bash", "-c", "set -euo pipefail\n" + "\n".join(lines)], capture_output=True,
                             text=True, env={**os.environ, "ALPHAC_RUN_DIR": str(run)})
        assert ran.returncode == 0, ran.stderr
        ids.append((run / "run.id").read_text())
    assert all(len(i) == 17 and i.endswith("\n") and int(i, 16) != 0 for i in ids), ids
    assert len(set(ids)) == 3


def test_mpirun_hosts_hold_the_owners_in_blocks_and_native_owners_have_no_runner(plan, out):
    done = emit(plan, "mpirun", out, hosts="a,b[1-2]", native=("aarch64",))
    assert done.files[0].read_text() == "a slots=2\nb1 slots=1\nb2 slots=1\n"
    assert "qemu-aarch64" not in done.files[1].read_text()


@pytest.mark.parametrize("hosts,owners,want", [
    (None, 4, [("localhost", 4)]), ("a", 3, [("a", 3)]), ("a,b", 5, [("a", 3), ("b", 2)]),
    ("n[1-4]", 4, [("n1", 1), ("n2", 1), ("n3", 1), ("n4", 1)]),
    ("n[1-3]", 8, [("n1", 3), ("n2", 3), ("n3", 2)]),
])
def test_owners_go_to_hosts_in_blocks_the_first_ones_one_more(hosts, owners, want):
    assert host_slots(hosts, owners) == want


@pytest.mark.parametrize("hosts,message", [
    ("n[1-", "--hosts 'n[1-': unclosed '[' at character 2"),
    ("a,b,a", "--hosts 'a,b,a' names host 'a' twice"),
    ("n[1-5]", "--hosts 'n[1-5]' names 5 hosts for 4 owners"),
])
def test_bad_hosts_are_refused_before_anything_is_built(plan, tmp_path, hosts, message):
    with pytest.raises(LaunchError) as info:
        emit(plan, "mpirun", tmp_path / "never", hosts=hosts)
    assert (info.value.code, info.value.message) == ("usage", message)
    assert not (tmp_path / "never").exists()


def test_a_path_a_multi_prog_line_cannot_carry_is_refused(plan, out, tmp_path):
    with pytest.raises(LaunchError) as info:
        emit(plan, "slurm", out, checkpoint_dir=tmp_path / "with space")
    assert info.value.code == "usage"
    assert info.value.message.startswith(f"'{tmp_path / 'with space'}' cannot be written in an srun --multi-prog line")


def test_the_command_prints_what_it_wrote(tmp_path):
    cmd = [sys.executable, "-m", "alphac", "launch", str(SPEC), "--emit", "mpirun", "-o", str(tmp_path / "o")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    o = tmp_path / "o"
    assert done.stdout.splitlines() == [f"wrote {o}/lsq_plain_star.hostfile", f"wrote {o}/lsq_plain_star.mpirun",
                                        f"start:  {o}/lsq_plain_star.mpirun",
                                        f"verify: alphac verify {o}/runs/mpirun-<time>-<pid> {SPEC}"]


@pytest.mark.parametrize("argv,message", [
    (["--base-port", "5"], "alphac: error[usage]: --base-port goes with --emit slurm|mpirun\n"),
    (["--hosts", "a"], "alphac: error[usage]: --hosts goes with --emit slurm|mpirun\n"),
    (["--emit", "slurm", "--hosts", "a,a"], "alphac: error[usage]: --hosts 'a,a' names host 'a' twice\n"),
])
def test_engine_options_without_emit_or_with_bad_hosts_are_usage_errors(tmp_path, argv, message):
    cmd = [sys.executable, "-m", "alphac", "launch", str(SPEC), "-o", str(tmp_path / "o"), *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message)


def test_the_local_launcher_keeps_an_engine_s_variables_from_its_owners(monkeypatch):
    for name in ENGINE_VARIABLES:
        monkeypatch.setenv(name, "3")
    env = owner_environment()
    assert [v for v in ENGINE_VARIABLES if v in env] == []
    dep = session.deployment(str(SPEC))
    run = session.run("lsq_plain_star", dep)  # inside a job step whose SLURM_PROCID is 3
    assert sorted(run.outputs) == [0, 1, 2, 3], run.result.outcomes

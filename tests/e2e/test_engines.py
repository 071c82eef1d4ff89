"""Real engines start the owners from the files `alphac launch --emit` writes, and `alphac
verify` matches the run: Open MPI (mpirun, MPMD, x86-64 and AArch64 app contexts) and Slurm
(slurmctld and slurmd started here on localhost, the batch script submitted with sbatch,
its srun --multi-prog step). Skipped, with the reason, where an engine is not installed or
cannot run here."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from alphac.testing import session
from alphac.launch.emit import emit
from alphac.launch.ports import free_ports
from alphac.launch.runner import die_with_parent
from alphac.launch.verify import verify

SPECS = Path(__file__).resolve().parents[2] / "specs"
DEMO = SPECS / "demo.alpha"  # 6 owners: x86-64 and AArch64 alternating

pytestmark = pytest.mark.engines


def _needs(*tools: str):
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")


def _demo():
    dep = session.deployment(str(DEMO))
    return dep, session.plan("demo", dep)


def _check_private(run_dir: Path) -> None:
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((run_dir / "run.key").stat().st_mode) == 0o600
    assert (run_dir / "run.key").stat().st_size == 32


def _matched(dep, plan, run_dir: Path) -> None:
    checked = verify(dep, run_dir, plan=plan)
    report = checked.report
    assert report.failures == (), "\n".join(report.failures) + "\n" + "\n".join(report.stderr.values())
    assert [(r.owner, r.target, r.version, r.match) for r in report.rows] == [
        (o, dep.placement[o], dep.updates, True) for o in range(dep.owners)]
    assert checked.notes == []
    assert sorted(p.name for p in run_dir.glob("owner-*.out")) == [f"owner-{o}.out" for o in range(dep.owners)]


# -- Open MPI ---------------------------------------------------------------------------

@_needs("mpirun", "qemu-aarch64")
def test_mpirun_runs_a_mixed_deployment_from_the_emitted_script_and_verify_matches(tmp_path):
    dep, plan = _demo()
    done = emit(plan, "mpirun", tmp_path / "out", base_port=free_ports(dep.owners, contiguous=True)[0])
    run_dir = tmp_path / "run"
    env = {**os.environ, "ALPHAC_RUN_DIR": str(run_dir)}
    t0 = time.monotonic()
    ran = subprocess.run([done.start, "--allow-run-as-root", "--oversubscribe"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert time.monotonic() - t0 < 30
    assert f"alphac: run directory {run_dir}" in ran.stderr
    _check_private(run_dir)
    _matched(dep, plan, run_dir)


@_needs("mpirun", "qemu-aarch64")
def test_mpirun_owners_given_a_key_of_their_own_use_it(tmp_path):
    dep, plan = _demo()
    done = emit(plan, "mpirun", tmp_path / "out", base_port=free_ports(dep.owners, contiguous=True)[0])
    key = tmp_path / "my.key"
    key.write_bytes(bytes(range(40)))
    run_dir = tmp_path / "run"
    env = {**os.environ, "ALPHAC_RUN_DIR": str(run_dir), "ALPHAC_KEY": str(key)}
    ran = subprocess.run([done.start, "--allow-run-as-root", "--oversubscribe"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (run_dir / "run.key").read_bytes() == key.read_bytes()
    assert int((run_dir / "run.id").read_text(), 16) != 0  # the key is reused: the run id is fresh
    assert stat.S_IMODE((run_dir / "run.key").stat().st_mode) == 0o600
    _matched(dep, plan, run_dir)


# -- Slurm ------------------------------------------------------------------------------

SLURM_CONF = """\
ClusterName=alphac
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser={user}
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=64 State=UNKNOWN
PartitionName=alphac Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
"""


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


class Slurm:
    """A one-node Slurm on localhost: slurmctld and slurmd as children of this process
    (in the foreground, -D; each dies with it), stopped and reaped by `stop`."""

    def __init__(self, base: Path):
        self.base = base
        self.procs: list[subprocess.Popen] = []
        ctld, d = free_ports(2)
        for sub in ("state", "spool"):
            (base / sub).mkdir(parents=True)
        self.conf = base / "slurm.conf"
        self.conf.write_text(SLURM_CONF.format(ctld_port=ctld, d_port=d, user="root", base=base,
                                               state=base / "state", spool=base / "spool"))
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def _daemon(self, name: str, *argv: str) -> None:
        log = open(self.base / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen([name, "-D", "-f", str(self.conf), *argv], stdout=log,
                                           stderr=subprocess.STDOUT, env=self.env,
                                           preexec_fn=die_with_parent()))

    def log_tail(self) -> str:
        return " | ".join(f"{p.name}: " + " / ".join(p.read_text(errors="replace").strip().splitlines()[-3:])
                          for p in sorted(self.base.glob("*.log")))

    def start(self, timeout_s: float = 30.0) -> None:
        """Both daemons up and the node idle; RuntimeError with the reason otherwise."""
        self._daemon("slurmctld")
        self._daemon("slurmd", "-N", "localhost")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead[0]} exited {self.procs[0].returncode}: {self.log_tail()}")
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                                   env=self.env, timeout=10).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError(f"the node is not idle after {timeout_s:.0f} s: {self.log_tail()}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            _stop(p)

    def run_job(self, script: Path, env: dict, timeout_s: float = 120.0) -> tuple[str, str]:
        """Submit a batch script, wait for it to end (polling, not sbatch --wait's 10 s
        steps): (its state, its exit code)."""
        job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                             env={**env, **self.env}, timeout=30)
        assert job.returncode == 0, job.stderr
        job_id = job.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                                  text=True, env=self.env, timeout=10).stdout
            fields = dict(f.split("=", 1) for f in info.split() if "=" in f)
            if fields.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
                return fields["JobState"], fields.get("ExitCode", "")
            time.sleep(0.1)
        subprocess.run(["scancel", job_id], env=self.env, timeout=10)
        raise AssertionError(f"job {job_id} still running after {timeout_s:.0f} s")


@pytest.fixture
def slurm(tmp_path):
    missing = [t for t in ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    if os.geteuid() != 0:
        pytest.skip("slurmd runs jobs as their users only when started as root")
    cluster = Slurm(tmp_path / "slurm")
    try:
        try:
            cluster.start()
        except RuntimeError as exc:
            pytest.skip(f"Slurm cannot run here: {exc}")
        yield cluster
    finally:
        cluster.stop()
    assert all(p.poll() is not None for p in cluster.procs)


@_needs("qemu-aarch64")
def test_slurm_runs_the_emitted_batch_script_and_verify_matches(slurm, tmp_path):
    dep, plan = _demo()
    done = emit(plan, "slurm", tmp_path / "out", base_port=free_ports(dep.owners, contiguous=True)[0])
    run_dir = tmp_path / "run"
    state, code = slurm.run_job(done.files[1], {"ALPHAC_RUN_DIR": str(run_dir)})
    log = "\n".join(p.read_text() for p in (tmp_path / "out" / "runs").glob("slurm-*.out"))
    assert (state, code) == ("COMPLETED", "0:0"), log
    _check_private(run_dir)
    assert sorted(p.name for p in run_dir.glob("owner-*.stderr")) == [f"owner-{o}.stderr" for o in range(6)]
    _matched(dep, plan, run_dir)

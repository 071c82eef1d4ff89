"""No owner outlives `alphac launch`: SIGTERM, SIGHUP and SIGINT in each phase (building,
running, evaluating the oracle) stop every owner and leave no partial file; SIGKILL of the
launcher kills its owners through their parent-death signal (AArch64 ones under qemu too).
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alphac.launch.cache import deps_path
from alphac.launch.interrupts import Interrupted, interrupt_status, interruptible
from alphac.launch.runner import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs/lsq_plain_hierarchy.alpha"  # four owners, x86-64 and AArch64
AARCH64 = shutil.which("qemu-aarch64") and shutil.which("aarch64-linux-gnu-gcc")


# --- processes --------------------------------------------------------------------------

def _state(pid: int) -> str | None:
    """The state letter of `pid` (R, S, Z, ...), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z")


def _pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _owners(out: Path) -> list[int]:
    """Live owner processes started from an executable under `out` (also `qemu-aarch64 EXE`)."""
    prefix = str(out) + os.sep
    found = []
    for pid in _pids():
        argv = _argv(pid)
        if "--owner" not in argv:
            continue
        exe = argv[1] if os.path.basename(argv[0]).startswith("qemu-") else argv[0]
        if exe.startswith(prefix) and _alive(pid):
            found.append(pid)
    return found


def _working_in(d: Path) -> list[int]:
    """Live processes whose working directory is under `d` (a build's cc, as, ld)."""
    found = []
    for pid in _pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(d) + os.sep) and _alive(pid):
            found.append(pid)
    return found


def _wait_for(cond, timeout: float, step: float = 0.02):
    end = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > end:
            return value
        time.sleep(step)


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


class Command:
    """`python -m alphac ARGS` in the background, stdout and stderr in files."""

    def __init__(self, tmp: Path, *args: str, **env: str):
        self.err_path = tmp / "stderr"
        with open(tmp / "stdout", "w") as out, open(self.err_path, "w") as err:
            self.p = subprocess.Popen([sys.executable, "-m", "alphac", *args], cwd=ROOT,
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                      env=_env(**env))

    def err(self) -> str:
        return self.err_path.read_text()

    def finish(self, timeout: float = 30) -> int:
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"still running {timeout} s after the signal:\n{self.err()}")


# --- specs and executables ----------------------------------------------------------------

@pytest.fixture(scope="module")
def x86_spec(tmp_path_factory) -> Path:
    """The four-owner spec with every owner on x86-64 (runs without qemu)."""
    d = tmp_path_factory.mktemp("spec")
    shutil.copytree(ROOT / "specs/Gates", d / "Gates")
    spec = d / "lsq_plain_x86.alpha"
    spec.write_text(SPEC.read_text().replace("TargetAArch64", "TargetX86_64"))
    return spec


def _prebuilt(spec: Path, dest: Path) -> dict:
    from alphac import driver
    from alphac.launch.cache import ensure_built

    return ensure_built(driver.plan(driver.deployment(str(spec))), dest)


@pytest.fixture(scope="module")
def x86_exes(x86_spec, tmp_path_factory) -> dict:
    return _prebuilt(x86_spec, tmp_path_factory.mktemp("x86-exes"))


def _out_with(tmp: Path, exes: dict) -> Path:
    out = tmp / "out"
    out.mkdir()
    for exe in exes.values():
        shutil.copy2(exe, out / exe.name)
        shutil.copy2(deps_path(exe), deps_path(out / exe.name))
    return out


def _partials(d: Path) -> list[Path]:
    return list(d.rglob("*.partial"))


def _message(sig: int) -> str:
    by = "" if sig == signal.SIGINT else f" by {signal.Signals(sig).name}"
    return f"alphac: interrupted{by}; every owner was stopped"


# --- the run phase ------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_while_owners_run_leaves_no_owner(tmp_path, x86_spec, x86_exes, sig):
    out = _out_with(tmp_path, x86_exes)
    cmd = Command(tmp_path, "launch", str(x86_spec), "--rounds", str(10**7), "-o", str(out))
    owners = _wait_for(lambda: (lambda o: o if len(o) == 4 else None)(_owners(out)), 60)
    assert owners, cmd.err()
    assert "build" not in cmd.err()  # the prebuilt executables were reused
    cmd.p.send_signal(sig)
    rc = cmd.finish()
    # SIGKILL: the kernel kills each owner through its parent-death signal
    assert _wait_for(lambda: not any(_alive(p) for p in owners), 3)
    assert _owners(out) == []
    assert _partials(out) == []
    assert list(out.glob("runs/*/owner-*.out")) == []  # nobody published
    if sig == signal.SIGKILL:
        assert rc == -signal.SIGKILL
    else:
        assert rc == 128 + sig, cmd.err()
        assert _message(sig) in cmd.err()
        assert "Traceback" not in cmd.err()
        # the stopped run was settled: no staged output or commit record is left
        assert [p.name for p in out.glob("runs/*/*") if ".out" in p.name] == []


@pytest.mark.skipif(not AARCH64, reason="qemu-aarch64 or the AArch64 cross compiler missing")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_aarch64_owners_under_qemu_die_with_the_launcher(tmp_path, sig):
    from alphac.testing import session

    exes = session.built("lsq_plain_hierarchy", session.deployment(str(SPEC)))
    out = _out_with(tmp_path, exes)
    cmd = Command(tmp_path, "launch", str(SPEC), "--rounds", str(10**7), "-o", str(out))
    owners = _wait_for(lambda: (lambda o: o if len(o) == 4 else None)(_owners(out)), 60)
    assert owners, cmd.err()
    under_qemu = [p for p in owners if os.path.basename(_argv(p)[0]) == "qemu-aarch64"]
    assert len(under_qemu) == 2
    time.sleep(0.3)  # let qemu get going
    cmd.p.send_signal(sig)
    rc = cmd.finish()
    assert _wait_for(lambda: not any(_alive(p) for p in owners), 3)
    assert rc == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig), cmd.err()
    assert list(out.glob("runs/*/owner-*.out")) == []


# --- the build phase ----------------------------------------------------------------------

def _start_build(tmp_path: Path, *args: str):
    """A command whose build compiles the C runtime afresh (an empty ALPHAC_CACHE), with its
    temporary files under tmp_path/tmp, so that it can be caught in the middle."""
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    cache.mkdir()
    tmp.mkdir()
    return Command(tmp_path, *args, ALPHAC_CACHE=str(cache), TMPDIR=str(tmp)), cache, tmp


def _assert_build_left_nothing(out: Path, cache: Path, tmp: Path):
    assert _wait_for(lambda: not _working_in(tmp), 3), "a compiler is still running"
    assert _partials(out) == []
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else []) == []
    assert sorted(p.name for p in tmp.iterdir()) == []  # temporary dirs and cc's files
    # no runtime object and nothing partial: only whole kernel objects emitted before the
    # signal, and the grammar's tables (written whole, under a name of their own, or not at all)
    left = [p for p in cache.rglob("*") if p.is_file() and p.parent != cache / "grammar"]
    assert all(p.parent == cache / "objects" and p.suffix == ".o" and p.read_bytes()[:4] == b"\x7fELF"
               for p in left), left
    assert all(p.suffix == ".lark" and not p.name.startswith(".") for p in (cache / "grammar").glob("*"))


@pytest.mark.parametrize("sig,when", [(signal.SIGTERM, "at the start"), (signal.SIGTERM, "in cc"),
                                      (signal.SIGHUP, "in cc"), (signal.SIGINT, "in cc")],
                         ids=["SIGTERM-start", "SIGTERM-cc", "SIGHUP-cc", "SIGINT-cc"])
def test_a_signal_while_launch_builds_leaves_nothing(tmp_path, x86_spec, sig, when):
    out = tmp_path / "out"
    cmd, cache, tmp = _start_build(tmp_path, "launch", str(x86_spec), "--progress", "-o", str(out))
    assert _wait_for(lambda: "alphac: build " in cmd.err(), 60), cmd.err()
    if when == "in cc":  # the C compiler of the runtime is running
        assert _wait_for(lambda: _working_in(tmp), 30), cmd.err()
    cmd.p.send_signal(sig)
    rc = cmd.finish()
    assert rc == 128 + sig, cmd.err()
    assert _message(sig) in cmd.err()
    assert "Traceback" not in cmd.err()
    assert not (out / "runs").exists()  # caught before any owner started
    _assert_build_left_nothing(out, cache, tmp)


def test_sigterm_while_alphac_build_compiles_leaves_nothing(tmp_path, x86_spec):
    out = tmp_path / "out"
    cmd, cache, tmp = _start_build(tmp_path, "build", str(x86_spec), "--all", "-o", str(out))
    assert _wait_for(lambda: _working_in(tmp), 60), cmd.err()
    cmd.p.send_signal(signal.SIGTERM)
    rc = cmd.finish()
    assert rc == 143, cmd.err()
    assert cmd.err().strip().splitlines()[-1] == "alphac: interrupted by SIGTERM"
    _assert_build_left_nothing(out, cache, tmp)


def test_an_interrupted_link_leaves_no_partial_file(tmp_path, monkeypatch, x86_spec):
    import alphac.targets as targets
    from alphac import driver

    plan = driver.plan(driver.deployment(str(x86_spec)))
    seen = []

    def link_bytes(obj, target, exe_path, extra=()):
        Path(exe_path).write_bytes(b"half an executable")
        seen.append(Path(exe_path))
        raise KeyboardInterrupt

    monkeypatch.setattr(targets, "compile_object", lambda module, target: b"")
    monkeypatch.setattr(targets, "runtime_object", lambda target, pic=False, sanitize=False, faults=False: tmp_path / "rt.o")
    monkeypatch.setattr(targets, "libraries_object", lambda target, runtime: ())
    monkeypatch.setattr(targets, "link_bytes", link_bytes)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        driver.build(plan, "worker", "x86_64", out)
    assert seen and seen[0].parent.name.endswith(".partial")
    assert seen[0].name == "lsq_plain_x86-worker-x86_64"
    assert list(out.iterdir()) == []


# --- the oracle phase ---------------------------------------------------------------------

def _kill_owners_as_they_start(cmd: "Command", out: Path, n: int = 4) -> None:
    """SIGKILL the n owners of `cmd` under `out` once all have started: the launcher then
    has only the oracle left to wait for."""
    owners = _wait_for(lambda: (lambda o: o if len(o) == n else None)(_owners(out)), 60)
    assert owners, cmd.err()
    for pid in owners:
        os.kill(pid, signal.SIGKILL)


def test_sigterm_while_the_oracle_evaluates(tmp_path, x86_spec, x86_exes):
    # the owners are killed as they start; the oracle then has 10**7 updates to evaluate,
    # and the launcher says (with --progress) when it waits for it
    out = _out_with(tmp_path, x86_exes)
    cmd = Command(tmp_path, "launch", str(x86_spec), "--rounds", str(10**7), "--timeout", "120",
                  "--progress", "-o", str(out))
    _kill_owners_as_they_start(cmd, out)
    assert _wait_for(lambda: not _owners(out), 10)
    assert _wait_for(lambda: "comparing with the oracle's" in cmd.err(), 60), cmd.err()
    time.sleep(0.3)
    assert cmd.p.poll() is None, cmd.err()
    cmd.p.send_signal(signal.SIGTERM)
    assert cmd.finish(timeout=15) == 143, cmd.err()
    assert _message(signal.SIGTERM) in cmd.err()


# --- --timeout: the whole command -----------------------------------------------------------

def _timed(cmd: "Command", limit: float) -> tuple[int, float]:
    t0 = time.monotonic()
    rc = cmd.finish(timeout=limit + 30)
    return rc, time.monotonic() - t0


def test_the_timeout_bounds_the_owners_and_the_oracle(tmp_path, x86_spec, x86_exes):
    # 10**7 updates: neither the owners nor the oracle end within 2 s
    out = _out_with(tmp_path, x86_exes)
    cmd = Command(tmp_path, "launch", str(x86_spec), "--rounds", str(10**7), "--timeout", "2",
                  "-o", str(out))
    rc, seconds = _timed(cmd, 2)
    assert rc == 1, cmd.err()
    assert seconds < 2 + 6, seconds  # the interpreter's start, then 2 s, then the cleanup
    err = cmd.err()
    assert err.startswith("alphac: error[launch-timeout]: --timeout 2 s ran out while the owners ran "
                          "(the oracle evaluated updates 0 to 9,999,999, "), err
    assert err.rstrip().endswith(" done); every owner was stopped"), err
    assert "Traceback" not in err
    assert _owners(out) == [] and _partials(out) == []
    assert list(out.glob("runs/*/owner-*.out")) == []  # nobody published
    # the stopped run was settled: no staged output or commit record is left
    (run,) = out.glob("runs/*")
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["lsq_plain_x86.peers", "run.key"] + [f"owner-{o}.{what}" for o in range(4)
                                              for what in ("connections", "stats", "stderr")])


def test_owners_past_the_runs_deadline_leave_no_staged_file(tmp_path, x86_spec, x86_exes):
    # run_plan's own deadline (no --timeout): the owners are killed and the run settled
    from alphac import driver
    from alphac.launch.plan_run import run_plan

    dep = driver.deployment(str(x86_spec))
    run = run_plan(dep, x86_exes, tmp_path / "run", updates=10**7, deadline_s=1.5, root=driver.plan(dep).tree.owner)
    assert run.result.timed_out and not run.committed
    assert sorted(p.name for p in run.run_dir.iterdir()) == sorted(
        ["lsq_plain_x86.peers", "run.key"] + [f"owner-{o}.{what}" for o in range(4)
                                              for what in ("connections", "stats", "stderr")])


def test_the_timeout_bounds_the_oracle_after_the_owners(tmp_path, x86_spec, x86_exes):
    # the owners die at once (killed); the oracle's 10**7 updates are then cut at 3 s, and
    # --json reports it in the envelope alone
    out = _out_with(tmp_path, x86_exes)
    cmd = Command(tmp_path, "launch", str(x86_spec), "--rounds", str(10**7), "--timeout", "3",
                  "--json", "-o", str(out))
    _kill_owners_as_they_start(cmd, out)
    rc, seconds = _timed(cmd, 3)
    assert (rc, cmd.err()) == (1, "")
    doc = json.loads((tmp_path / "stdout").read_text())
    assert doc["ok"] is False
    [refusal] = doc["refusals"]
    assert refusal["code"] == "launch-timeout"
    # the launcher may still be reaping the killed owners when it runs out (its cleanup
    # waits for the interpreter's lock), or already waiting for the oracle
    assert re.fullmatch(r"--timeout 3 s ran out while (the owners ran \(the oracle evaluated updates 0 to "
                        r"9,999,999, [\d,]+ done\)|the oracle evaluated updates 0 to 9,999,999, [\d,]+ "
                        r"done \(the owners had ended\)); every owner was stopped", refusal["message"]), refusal


def test_the_timeout_bounds_loading_and_building_too(tmp_path, x86_spec):
    # nothing prebuilt and an empty cache (the runtime is compiled afresh, seconds of cc):
    # a bound far below a build's time runs out before any owner starts
    out = tmp_path / "out"
    cmd, cache, tmp = _start_build(tmp_path, "launch", str(x86_spec), "--timeout", "0.3", "-o", str(out))
    rc, seconds = _timed(cmd, 0.3)
    assert rc == 1, cmd.err()
    assert re.fullmatch(r"alphac: error\[launch-timeout\]: --timeout 0\.3 s ran out while (loading and "
                        r"checking the spec|planning|building the executables); every owner was stopped\n",
                        cmd.err()), cmd.err()
    assert not (out / "runs").exists()
    _assert_build_left_nothing(out, cache, tmp)  # no compiler left, nothing partial


def test_verify_is_bounded_by_its_timeout(tmp_path, x86_spec):
    run = tmp_path / "run"
    run.mkdir()  # no commit record: --rounds names the count, here one the oracle cannot finish
    cmd = Command(tmp_path, "verify", str(run), str(x86_spec), "--rounds", str(10**7), "--timeout", "1")
    rc, seconds = _timed(cmd, 1)
    assert rc == 1, cmd.err()
    assert seconds < 1 + 6, seconds
    assert cmd.err().startswith("alphac: error[launch-timeout]: --timeout 1 s ran out while the oracle "
                                "evaluated updates 0 to 9,999,999"), cmd.err()


# --- in-process: handlers, planning -------------------------------------------------------

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture
def default_handlers():
    """Each test below sends itself signals: only with the default handlers in place."""
    before = {s: signal.getsignal(s) for s in SIGNALS}
    if any(h not in (signal.SIG_DFL, signal.default_int_handler) for h in before.values()):
        pytest.skip("a signal handler is installed by the test runner")
    yield before
    for s, h in before.items():
        signal.signal(s, h)


def test_interruptible_raises_once_then_restores_the_handlers(default_handlers):
    with pytest.raises(Interrupted) as info:
        with interruptible() as st:
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            with interruptible():  # nested: shares the outer one
                try:
                    os.kill(os.getpid(), signal.SIGHUP)
                    time.sleep(5)
                finally:
                    os.kill(os.getpid(), signal.SIGTERM)  # ignored while unwinding
                    time.sleep(0.05)
    assert info.value.signum == signal.SIGHUP and st.fired == signal.SIGHUP
    assert interrupt_status(info.value) == 129
    assert {s: signal.getsignal(s) for s in SIGNALS} == default_handlers


def test_an_ignored_signal_stays_ignored(default_handlers):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with interruptible():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.05)
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_exit_statuses():
    assert interrupt_status(KeyboardInterrupt()) == 130
    assert interrupt_status(Interrupted(signal.SIGINT)) == 130
    assert interrupt_status(Interrupted(signal.SIGTERM)) == 143
    assert interrupt_status(Interrupted(signal.SIGHUP)) == 129
    assert isinstance(Interrupted(signal.SIGTERM), KeyboardInterrupt)


def test_sigterm_while_planning_in_process(tmp_path, monkeypatch, capsys, default_handlers):
    from alphac import driver
    from alphac.commands import launch as launch_command

    def deployment(spec, name=None):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        raise AssertionError("not interrupted")

    monkeypatch.setattr(driver, "deployment", deployment)
    assert launch_command.run("x.alpha", None, False, str(tmp_path), 10.0) == 143
    assert capsys.readouterr().err == _message(signal.SIGTERM) + "\n"
    assert {s: signal.getsignal(s) for s in SIGNALS} == default_handlers


def test_launch_as_a_library_raises_interrupted_and_restores(monkeypatch, default_handlers):
    from alphac import driver
    from alphac.launch.launcher import launch

    def plan(dep, mutant=None):
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(5)

    monkeypatch.setattr(driver, "plan", plan)
    with pytest.raises(Interrupted) as info:
        launch(None)
    assert info.value.signum == signal.SIGHUP
    assert {s: signal.getsignal(s) for s in SIGNALS} == default_handlers


# --- the parent-death signal --------------------------------------------------------------

PR_GET_PDEATHSIG = 2


def test_preexec_sets_the_parent_death_signal():
    code = ("import ctypes; v = ctypes.c_int(); "
            f"ctypes.CDLL(None).prctl({PR_GET_PDEATHSIG}, ctypes.byref(v), 0, 0, 0); print(v.value)")
    p = subprocess.run([sys.executable, "-c", code], preexec_fn=die_with_parent(),
                       capture_output=True, text=True, timeout=30)
    assert p.stdout.strip() == str(int(signal.SIGKILL)), p.stderr


def test_preexec_kills_a_child_whose_parent_is_already_gone():
    # as if the launcher had died between fork and prctl: the parent is not the one named
    p = subprocess.Popen(["sleep", "30"], preexec_fn=die_with_parent(parent=0))
    assert p.wait(timeout=10) == -signal.SIGKILL


def test_a_child_dies_when_its_parent_is_killed(tmp_path):
    code = f"""
import subprocess, sys, time
sys.path.insert(0, {str(ROOT)!r})
from alphac.launch.runner import die_with_parent
c = subprocess.Popen(['sleep', '60'], start_new_session=True, preexec_fn=die_with_parent())
print(c.pid, flush=True)
time.sleep(60)
"""
    middle = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(middle.stdout.readline())
    assert _alive(child)
    middle.kill()
    middle.wait(timeout=10)
    assert _wait_for(lambda: not _alive(child), 3)


def test_the_descendants_are_found_by_the_children_files_and_by_the_scan_alike():
    from alphac.launch import interrupts

    kids = [subprocess.Popen([sys.executable, "-c", "import time, subprocess, sys; "
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                              "time.sleep(30)"]) for _ in range(2)]
    try:
        assert _wait_for(lambda: len(interrupts._descendants()) == 4, 10), interrupts._descendants()
        assert sorted(interrupts._descendants()) == sorted(interrupts._descendants_by_scan())
        assert {k.pid for k in kids} <= set(interrupts._descendants())
    finally:
        for pid in reversed(interrupts._descendants()):  # grandchildren first
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for k in kids:
            k.wait()

"""`alphac qualify`: a run of a small gate selection, recorded in the tracker row for row
(host, build, gates, digests, executables); the verdict's rules; the history as a table and
as a page; trackers that are not this format's."""

from __future__ import annotations

import hashlib
import platform
import re
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import alphac
from alphac import driver
from alphac.qualify.gates import default_specs
from alphac.qualify.host import cpu_model, gpus, this_host
from alphac.qualify.suite import qualify, verdict
from alphac.qualify.tracker import SCHEMA_VERSION, GateRecord, TrackerError, connect, history

ROOT = Path(__file__).resolve().parents[2]


def _digest(owner) -> str:
    words = tuple(owner.params.as_tuple() if hasattr(owner.params, "as_tuple") else owner.params)
    words += tuple(owner.state.as_tuple() if hasattr(owner.state, "as_tuple") else owner.state)
    return hashlib.sha256(struct.pack(f"<{len(words)}Q", *words)).hexdigest()


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two real runs into one tracker: the order gate, then the SM86 gate alone."""
    base = tmp_path_factory.mktemp("qualify")
    db, work = base / "q.db", base / "work"
    first = qualify(db, ["order"], work=work)
    second = qualify(db, ["sm86"], work=base / "work2")
    return db, work, first, second


def test_a_run_is_recorded_row_for_row(recorded):
    db, work, run, _ = recorded
    host = this_host()
    con = sqlite3.connect(db)
    (row,) = con.execute("SELECT * FROM runs WHERE id = ?", (run.id,)).fetchall()
    rid, started, seconds, result, version, tree, dirty, cpu, kernel, qemu, names, uuids, drivers = row
    assert re.fullmatch(r"[0-9a-f]{16}", rid) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started)
    assert (result, version) == ("passed", alphac.__version__) and seconds > 0
    assert (tree, dirty) == (_git("rev-parse", "HEAD^{tree}"), int(bool(_git("status", "--porcelain"))))
    assert cpu == cpu_model(Path("/proc/cpuinfo").read_text())
    assert kernel == f"{platform.system()} {platform.release()} {platform.machine()}"
    qemu_line = subprocess.run(["qemu-aarch64", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert qemu == qemu_line
    assert (names, uuids, drivers) == (("; ".join(g.name for g in host.gpus) or None),
                                       ("; ".join(g.uuid for g in host.gpus) or None),
                                       ("; ".join(g.driver for g in host.gpus) or None))
    shadow = "no GPU on this host" if not host.gpus else ("sm86 executables are not built yet: there is no "
                                                          "device state to shadow")
    assert [r[:6] for r in con.execute("SELECT * FROM gates WHERE run = ? ORDER BY position", (rid,))] == [
        (rid, 0, "order", "gate", "passed", "star and hierarchy each equal their oracle, and differ"),
        (rid, 1, "refusal", "control", "passed", "mutant swap-branch ran to the end and every owner was refused"),
        (rid, 2, "host-shadow", "control", "not-run", shadow)]

    def oracle(stem, mutant=None):
        return _digest(driver.oracle(driver.deployment(str(default_specs() / f"{stem}.alpha")), mutant=mutant).owners[0])

    assert sorted(con.execute("SELECT gate, what, sha256 FROM digests WHERE run = ?", (rid,))) == sorted([
        ("order", "order10_star", oracle("order10_star")), ("order", "order10_hierarchy", oracle("order10_hierarchy")),
        ("refusal", "order10_hierarchy as swap-branch", oracle("order10_hierarchy", "swap-branch"))])
    exes = [(gate, p) for gate, key in (("order", "order10_star"), ("order", "order10_hierarchy"),
                                        ("refusal", "control-swap-branch"))
            for p in (work / key).iterdir() if p.is_file() and p.suffix != ".deps"]  # not the depfiles
    assert len(exes) == 9
    assert sorted(con.execute("SELECT gate, name, sha256 FROM executables WHERE run = ?", (rid,))) == sorted(
        (gate, p.name, _sha(p)) for gate, p in exes)


def test_the_second_run_has_its_own_rows_and_the_history_reads_both(recorded):
    db, _, first, second = recorded
    con = sqlite3.connect(db)
    assert sorted(r[0] for r in con.execute("SELECT id FROM runs")) == sorted([first.id, second.id])
    assert [(r[2], r[4]) for r in con.execute("SELECT * FROM gates WHERE run = ? ORDER BY position", (second.id,))] == [
        ("sm86", "not-run"), ("refusal", "passed"), ("host-shadow", "not-run")]
    assert second.result == "passed"
    assert {r.id: r for r in history(db)} == {first.id: first, second.id: second}


def _cli(*argv: str):
    return subprocess.run([sys.executable, "-m", "alphac", "qualify", *argv], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def test_the_report_has_a_line_and_the_page_a_row_per_run(recorded, tmp_path):
    db, _, first, second = recorded
    page = tmp_path / "runs.html"
    done = _cli("--db", str(db), "--report", "--html", str(page))
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0].split()[:6] == ["run", "started", "result", "version", "tree", "host"]
    assert sorted(ln.split()[0] for ln in lines[1:]) == sorted([first.id, second.id])
    assert all(" passed " in ln and "refusal:passed" in ln for ln in lines[1:])
    text = page.read_text()
    assert text.count("<tr><td>") == 2 and text.count(f"<td>{first.id}</td>") == 1
    assert '<td class="passed" title="star and hierarchy each equal their oracle, and differ">passed</td>' in text


@pytest.mark.parametrize("statuses,want", [
    ({"order": "passed", "refusal": "passed", "host-shadow": "not-run"}, "passed"),
    ({"order": "failed", "refusal": "passed", "host-shadow": "not-run"}, "failed"),
    ({"order": "passed", "refusal": "failed", "host-shadow": "not-run"}, "invalid"),
    ({"order": "failed", "refusal": "not-run", "host-shadow": "not-run"}, "invalid"),
    ({"sm86": "not-run", "refusal": "passed", "host-shadow": "not-run"}, "passed"),
    ({"sm86": "passed", "refusal": "passed", "host-shadow": "not-run"}, "invalid"),
    ({"sm86": "passed", "refusal": "passed", "host-shadow": "passed"}, "passed"),
])
def test_a_run_whose_controls_did_not_pass_is_invalid_not_failed(statuses, want):
    kinds = {"refusal": "control", "host-shadow": "control"}
    records = [GateRecord(n, kinds.get(n, "gate"), s, "", 0.0) for n, s in statuses.items()]
    assert verdict(records) == want


def test_a_tracker_of_another_format_or_no_database_is_refused(tmp_path):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    with pytest.raises(TrackerError) as info:
        connect(other, create=True)
    assert info.value.message == f"{other}: tracker format {SCHEMA_VERSION + 1}, this alphac reads {SCHEMA_VERSION}"
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, not even close" * 40)
    done = _cli("--db", str(junk), "--report")
    assert done.returncode == 1 and done.stderr.startswith(f"alphac: error[qualify-db]: {junk}: ")
    # a tracker not made yet is an empty history: --report and --html run nothing, exit 0
    done = _cli("--db", str(tmp_path / "absent.db"), "--report", "--html", str(tmp_path / "none.html"))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"qualify: no run recorded in {tmp_path / 'absent.db'} yet\n"
    assert "<table" in (tmp_path / "none.html").read_text() and not (tmp_path / "absent.db").exists()


def test_host_facts_are_read_from_cpuinfo_and_nvidia_smi():
    assert cpu_model("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n") == "Intel(R) Xeon(R) Processor"
    assert cpu_model("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n") == "implementer 0x41 part 0xd40"
    (g,) = gpus("NVIDIA H200, GPU-8f2c0d1e-aaaa-bbbb-cccc-0123456789ab, 570.124.06\n")
    assert (g.name, g.uuid, g.driver) == ("NVIDIA H200", "GPU-8f2c0d1e-aaaa-bbbb-cccc-0123456789ab", "570.124.06")
    assert gpus(None) == () and gpus("No devices were found\n") == ()


def test_run_options_with_the_report_are_usage_errors(tmp_path):
    done = _cli("--db", str(tmp_path / "q.db"), "--report", "--gate", "order")
    assert (done.returncode, done.stderr) == (2, "alphac: error[usage]: --gate goes with a run, not with --report "
                                                 "or --html\n")


def test_json_without_gate_specs_is_an_envelope(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from alphac.commands import main
    from alphac.qualify import gates

    monkeypatch.setattr(gates, "default_specs", lambda: tmp_path / "no-specs")
    out = CliRunner().invoke(main, ["qualify", "--json", "--db", str(tmp_path / "q.db")])
    assert (out.exit_code, out.stderr) == (2, "")
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and [r["code"] for r in doc["refusals"]] == ["usage"]
    assert doc["refusals"][0]["message"].startswith(f"no gate specs at {tmp_path / 'no-specs'} ")

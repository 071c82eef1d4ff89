"""`alphac oracle`: the table, the JSON keys, refusals on stderr, diagnostics, exit codes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import alphac.driver
from alphac.commands import main
from alphac.diagnostics import CompileError, Diagnostic, Span
from alphac.ir import nodes as n
from alphac.oracle import evaluate
from alphac.plan import plan

from test_oracle_learners import GATE_ROWS, GATE_SHARES, GATE_W0, deployment, gate, lsq_learner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(monkeypatch, tmp_path):
    """A spec path whose deployment is the four-owner Adam gate (or `spec.dep`)."""
    path = tmp_path / "gate.alpha"
    path.write_text("-- a spec\nvalue broken : Nat = \n")
    box = {"dep": gate("adam", updates=2)}

    def load(p, name=None):
        assert p == str(path) and name is None
        if isinstance(box["dep"], Exception):
            raise box["dep"]
        return box["dep"]
    monkeypatch.setattr(alphac.driver, "deployment", load, raising=False)
    return str(path), box


def test_json_lists_every_owner_with_hex_words_version_and_digest(spec):
    path, box = spec
    out = CliRunner().invoke(main, ["oracle", path, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert list(doc) == ["format", "ok", "diagnostics", "refusals", "suppressed",
                         "suppressed_codes", "spec", "deployment", "rounds", "protocol", "owners"]
    assert (doc["spec"], doc["deployment"], doc["rounds"], doc["protocol"]) == (
        path, "lsq_adam_indexed", 2, plan(box["dep"]).protocol_hex)
    assert len(doc["protocol"]) == 16 and int(doc["protocol"], 16) == plan(box["dep"]).protocol_id
    want = evaluate(box["dep"])
    assert len(doc["owners"]) == 4
    for o, row in enumerate(doc["owners"]):
        assert list(row) == ["owner", "role", "target", "version", "params", "state", "digest"]
        assert (row["owner"], row["version"]) == (o, 2)
        assert row["params"] == [f"{w:016x}" for w in want.params]
        assert all(len(w) == 16 and w == w.lower() for w in row["params"] + row["state"])
        words = [int(w, 16) for w in row["params"] + row["state"]]
        assert row["digest"] == hashlib.sha256(struct.pack(f"<{len(words)}Q", *words)).hexdigest()
    assert doc["owners"][1]["role"] == "worker" and doc["owners"][1]["target"] == "aarch64"


def test_rounds_override_and_initial_words(spec):
    path, box = spec
    box["dep"] = gate("plain", updates=5)
    out = CliRunner().invoke(main, ["oracle", path, "--json", "--rounds", "0"])
    doc = json.loads(out.output)
    assert doc["rounds"] == 0
    assert doc["owners"][0]["params"] == ["3fd0000000000000", "bfe8000000000000"]  # 0.25, -0.75
    assert doc["owners"][0]["state"] == []


def test_table(spec):
    path, box = spec
    box["dep"] = gate("momentum", updates=1)
    out = CliRunner().invoke(main, ["oracle", path, "--full"])
    assert out.exit_code == 0
    lines = out.output.splitlines()
    r = evaluate(box["dep"])
    assert lines[0] == f"oracle: lsq_momentum_indexed ({path}) after 1 updates"
    assert lines[1] == (f"owner 0  role coordinator  target x86_64  version 1  "
                        f"digest {r.owners[0].digest[:16]}")
    assert lines[2] == "  params " + " ".join(f"{w:016x}" for w in r.params)
    assert lines[3] == "  state  " + " ".join(f"{w:016x}" for w in r.state)
    assert len(lines) == 1 + 4 * 3


def test_a_refusal_prints_one_line_on_stderr_and_exits_1(spec):
    path, box = spec
    rows = [list(r) for r in GATE_ROWS]
    rows[0][2] = 1e308
    rows[0][0] = 1e10
    box["dep"] = deployment(lsq_learner("plain", "indexed", rows, GATE_SHARES, GATE_W0, 0.1), 4)
    out = CliRunner(mix_stderr=False).invoke(main, ["oracle", path]) if _mix() else \
        CliRunner().invoke(main, ["oracle", path])
    assert out.exit_code == 1
    assert out.stdout == ""
    assert out.stderr == ("refused: non-finite: update 0: contribution of owner 0 sample 0: "
                          "`c[i]` at i=0: non-finite result of mul\n")


def test_compile_errors_are_rendered_with_the_source_line(spec):
    path, box = spec
    box["dep"] = CompileError(Diagnostic("syntax-error", "expected an expression",
                                         Span(path, 2, 20, 2, 21)))
    out = CliRunner(mix_stderr=False).invoke(main, ["oracle", path]) if _mix() else \
        CliRunner().invoke(main, ["oracle", path])
    assert out.exit_code == 1
    assert out.stderr.splitlines() == [
        f"{path}:2:20: error[syntax-error]: expected an expression",
        "  value broken : Nat = ",
        "                     ^",
    ]


def _mix() -> bool:
    """click < 8.2 mixes stderr into output unless told not to."""
    import inspect
    return "mix_stderr" in inspect.signature(CliRunner.__init__).parameters


def test_json_protocol_is_the_one_alphac_plan_prints():
    out = CliRunner().invoke(main, ["oracle", "specs/demo.alpha", "--json", "--rounds", "1"])
    assert out.exit_code == 0, out.output
    planned = CliRunner().invoke(main, ["plan", "specs/demo.alpha", "--json"])
    assert planned.exit_code == 0, planned.output
    want = json.loads(planned.output)["protocol"]
    assert json.loads(out.output)["protocol"] == want
    assert len(want) == 16 and want == want.lower()


def test_json_protocol_follows_the_topology(spec):
    path, box = spec
    got = []
    for topo in (n.Star(), n.Hierarchy(2)):
        box["dep"] = gate("plain", topology=topo)
        out = CliRunner().invoke(main, ["oracle", path, "--json"])
        assert out.exit_code == 0, out.output
        got.append(json.loads(out.output)["protocol"])
        assert got[-1] == plan(box["dep"]).protocol_hex
    assert got[0] != got[1]


# ---------------------------------------------------------------- --timeout

MUTANTS = sorted((Path(__file__).resolve().parents[1] / "mutants").glob("*.alpha"))
TIMED_OUT = re.compile(r"alphac: error\[launch-timeout\]: --timeout 2 s ran out while the oracle evaluated "
                       r"updates to [0-9,]+\n")


def _timed_oracle(path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "alphac", "oracle", str(path), "--timeout", "2", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL)
    return done, time.monotonic() - start


@pytest.mark.parametrize("mutant", MUTANTS, ids=[p.stem for p in MUTANTS])
def test_a_mutant_of_many_updates_ends_at_the_oracle_s_timeout(mutant, tmp_path):
    # spec mutants of the fault pass (scripts/fault-pass) that check clean with 565536 or
    # 10000000 updates: the oracle ran for 1 to 50 minutes and the pass called it a hang
    shutil.copytree(ROOT / "specs" / "Gates", tmp_path / "Gates")
    path = tmp_path / mutant.name
    shutil.copy(mutant, path)
    assert alphac.driver.check(str(path)).ok
    done, seconds = _timed_oracle(path)
    assert seconds < 30 and (done.returncode, done.stdout) == (1, ""), (seconds, done.stderr)
    assert TIMED_OUT.fullmatch(done.stderr), done.stderr
    if mutant == MUTANTS[0]:  # the report's JSON form is one path for every mutant
        done, _ = _timed_oracle(path, "--json")
        assert done.returncode == 1 and [r["code"] for r in json.loads(done.stdout)["refusals"]] == ["launch-timeout"]


def test_the_independent_state_oracle_times_out_between_updates(tmp_path):
    # its updates did not reach the command's tick: the report said no update was done
    shutil.copytree(ROOT / "specs" / "Gates", tmp_path / "Gates")
    path = tmp_path / "star.alpha"
    path.write_text((ROOT / "specs" / "local_correlation_star.alpha").read_text()
                    .replace("independentUpdates = 5", "independentUpdates = 10000000"))
    done, seconds = _timed_oracle(path)
    assert seconds < 30 and done.returncode == 1
    assert TIMED_OUT.fullmatch(done.stderr), done.stderr
    assert int(done.stderr.rsplit(" ", 1)[1].replace(",", "")) > 0


def test_an_oracle_within_its_timeout_prints_its_words():
    done, _ = _timed_oracle(ROOT / "specs" / "lsq_plain_star.alpha", "--json")
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout)["rounds"] == 5

"""`alphac conform` (alphac/qualify/conform.py): the arguments it draws, the errors it measures, the
record it stores and the table it prints. Kernels here are stand-ins passed explicitly (numpy's
functions, or the oracle itself with a word changed), so what is measured is known; the real
kernels are measured by tests/e2e/test_json_schemas.py and test_the_host_kernels below."""

from __future__ import annotations

import json
import math
import shutil

import mpmath
import numpy as np
import pytest

from alphac.qualify import arguments as A
from alphac.qualify import conform as C
from alphac.oracle import elementary as E
from alphac.plan import evidence


# ----------------------------------------------------------------------------- stand-ins

def numpy_stand_in(name: str):
    """numpy's (libm-like) functions: not correctly rounded, so they must be caught."""
    return {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1,
            "sigmoid": _numpy_sigmoid, "tanh": np.tanh}[name]


def _numpy_sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def oracle_stand_in(name: str, wrong_at: float | None = None):
    """The oracle's own values, with one word moved by an ulp at `wrong_at`."""
    def run(xs):
        ys = E.evaluate_array(name, xs)
        if wrong_at is not None:
            hit = xs == wrong_at
            ys[hit] = np.nextafter(ys[hit], np.inf)
        return ys
    return run


def true_ulps(name: str, x: float, k: float) -> float:
    """|k - f(x)| / ulp(f(x)) by mpmath at 300 bits, independently of alphac.conform."""
    real = {"exp": mpmath.exp, "log": mpmath.log, "log1p": mpmath.log1p, "expm1": mpmath.expm1,
            "sigmoid": lambda v: 1 / (1 + mpmath.exp(-v)), "tanh": mpmath.tanh}[name]
    with mpmath.workprec(300):
        y = real(mpmath.mpf(x))
        e = max(int(mpmath.floor(mpmath.log(abs(y), 2))) - 52, -1074) if y != 0 else -1074
        return float(abs(mpmath.mpf(k) - y) / mpmath.mpf(2) ** e)


# ----------------------------------------------------------------------------- thresholds, hard cases

def test_the_thresholds_are_where_their_names_say():
    assert math.isfinite(E.correctly_rounded("exp", A.EXP_MAX))
    assert E.correctly_rounded("exp", math.nextafter(A.EXP_MAX, math.inf)) == math.inf
    assert E.correctly_rounded("exp", A.EXP_ZERO) == 0.0
    assert E.correctly_rounded("exp", math.nextafter(A.EXP_ZERO, 0.0)) == 5e-324
    assert E.correctly_rounded("exp", A.EXP_SUBNORMAL) < 2.0 ** -1022
    assert E.correctly_rounded("exp", math.nextafter(A.EXP_SUBNORMAL, 0.0)) >= 2.0 ** -1022


def hardness(name: str, x: float) -> float:
    """How near f(x) is to a midpoint or a binary64 number, in ulps of its binade."""
    real = {"exp": mpmath.exp, "log": mpmath.log, "log1p": mpmath.log1p, "expm1": mpmath.expm1}[name]
    with mpmath.workprec(400):
        y = abs(real(mpmath.mpf(x)))
        e = int(mpmath.floor(mpmath.log(y, 2))) - 52
        f = y / mpmath.mpf(2) ** e
        frac = f - mpmath.floor(f)
        return float(min(frac, 1 - frac, abs(frac - mpmath.mpf(0.5))))


@pytest.mark.parametrize("name, hexx", [(n, h) for n, cases in A.HARD_CASES.items() for h, _ in cases])
def test_every_hard_case_is_hard(name, hexx):
    """Each listed value is within 2^-40 of an ulp of a midpoint or a binary64 number (the
    literature's within 2^-57), and the oracle rounds it as mpmath at 400 bits does."""
    x = float.fromhex(hexx)
    assert hardness(name, x) < 2.0 ** -40
    real = {"exp": mpmath.exp, "log": mpmath.log, "log1p": mpmath.log1p, "expm1": mpmath.expm1}[name]
    with mpmath.workprec(400):
        assert E.correctly_rounded(name, x) == float(real(mpmath.mpf(x)))


def test_hard_cases_name_their_source():
    assert all(source for cases in A.HARD_CASES.values() for _, source in cases)
    assert any("Lefevre & Muller 2001" in s for _, s in A.HARD_CASES["exp"])
    assert any("Lefevre & Muller 2001" in s for _, s in A.HARD_CASES["log"])


# ----------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("name", C.FUNCTIONS)
def test_arguments_are_the_count_in_the_domain_and_depend_on_the_seed_alone(name):
    regions = C.arguments(name, 5000, seed=3)
    xs = np.concatenate([regions[r] for r in C.REGIONS])
    assert len(xs) == 5000 and A.in_domain(name, xs).all()
    assert len(regions["boundary"]) == (5000 - len(regions["hard-cases"])) // 5
    again = C.arguments(name, 5000, seed=3)
    assert all(np.array_equal(regions[r].view(np.uint64), again[r].view(np.uint64)) for r in C.REGIONS)
    other = C.arguments(name, 5000, seed=4)
    assert not np.array_equal(regions["linear"], other["linear"])
    finite = np.array([E.evaluate(name, x) for x in xs[:: 25]])
    assert np.isfinite(finite).all()


def test_boundary_regions_reach_their_thresholds():
    exp = C.arguments("exp", 60000, 0)["boundary"]
    assert A.EXP_MAX in exp and A.EXP_ZERO in exp
    assert ((exp > -745.2) & (exp < A.EXP_SUBNORMAL)).sum() > 1000
    assert (np.abs(exp) < 2.0 ** -1022).sum() > 0  # subnormal arguments
    tanh = C.arguments("tanh", 60000, 0)["boundary"]
    assert 20.0 in tanh and -20.0 in tanh and math.nextafter(20.0, 0.0) in tanh
    log = C.arguments("log", 60000, 0)["boundary"]
    assert 1.0 in log and math.nextafter(1.0, 0.0) in log and (log < 2.0 ** -1022).sum() > 0
    log1p = C.arguments("log1p", 60000, 0)["boundary"]
    assert math.nextafter(-1.0, 0.0) in log1p and -1.0 not in log1p
    assert len(C.arguments("exp", 3, 0)["hard-cases"]) == 3


# ----------------------------------------------------------------------------- measuring

def test_a_kernel_one_ulp_off_at_one_argument_is_caught():
    x = C.arguments("exp", 500, 0)["linear"][7]
    entry = C.measure("exp", oracle_stand_in("exp", wrong_at=x), 500, 0, jobs=1)
    assert entry["mismatches_vs_correctly_rounded"] == 1 and entry["first_mismatch"] == x.hex()
    assert entry["worst_argument"] == x.hex()
    assert 0.5 < float(entry["max_ulps"]) <= 1.5
    assert float(entry["max_ulps"]) == pytest.approx(
        true_ulps("exp", x, float(np.nextafter(E.evaluate("exp", x), np.inf))), abs=1e-3)


def test_the_oracle_itself_conforms():
    for name in C.FUNCTIONS:
        entry = C.measure(name, oracle_stand_in(name), 600, 1, jobs=1)
        assert entry["arguments"] == 600
        if name in E.CORRECTLY_ROUNDED:
            assert entry["mismatches_vs_correctly_rounded"] == 0
            assert entry["mismatches_vs_declared_algorithm"] is None
            assert entry["max_ulps"] == "0.500"  # below one half, rounded up
        else:
            assert entry["mismatches_vs_declared_algorithm"] == 0
            assert entry["mismatches_vs_correctly_rounded"] is None
            assert 0.5 < float(entry["max_ulps"]) < 4.0


@pytest.mark.parametrize("name", C.FUNCTIONS)
def test_numpy_is_measured_as_it_is(name):
    """numpy's functions: the largest error is the one an independent computation finds,
    and every word that is not the oracle's is counted."""
    n = 1500
    entry = C.measure(name, numpy_stand_in(name), n, 2, jobs=1)
    regions = C.arguments(name, n, 2)
    xs = np.concatenate([regions[r] for r in C.REGIONS])
    with np.errstate(all="ignore"):
        ks = numpy_stand_in(name)(xs)
    expected = sum(not (k == E.evaluate(name, x) or (math.isnan(k) and math.isnan(E.evaluate(name, x))))
                   for x, k in zip(xs.tolist(), ks.tolist()))
    key = "mismatches_vs_correctly_rounded" if name in E.CORRECTLY_ROUNDED else \
        "mismatches_vs_declared_algorithm"
    assert entry[key] == expected
    worst = float.fromhex(entry["worst_argument"])
    k = float(numpy_stand_in(name)(np.array([worst]))[0])
    assert entry["worst_result"] == k.hex()
    if math.isfinite(k):
        measured = true_ulps(name, worst, k)
        assert float(entry["max_ulps"]) == pytest.approx(math.ceil(measured * 1000) / 1000, abs=1e-9)
    else:
        assert entry["max_ulps"] == "inf"


def test_jobs_do_not_change_the_measurement():
    one = C.measure("tanh", numpy_stand_in("tanh"), 3 * C.CHUNK, 5, jobs=1)
    two = C.measure("tanh", numpy_stand_in("tanh"), 3 * C.CHUNK, 5, jobs=2)
    assert one == two


def test_ulps_text_rounds_up():
    from mpmath.libmp import from_float, from_man_exp

    assert C.ulps_text(from_float(0.4999999)) == "0.500"
    assert C.ulps_text(from_float(2.0)) == "2.000"
    assert C.ulps_text(from_man_exp(1, -2000)) == "0.001"
    assert C.ulps_text(from_float(0.0)) == "0.000"
    assert C.ulps_text(C.INF) == "inf"
    assert C.ulps_text(from_float(12345.0001)) == "12345.001"


def test_a_non_finite_kernel_result_is_an_infinite_error():
    def broken(xs):
        ys = E.evaluate_array("log", xs)
        ys[0] = np.nan
        return ys
    entry = C.measure("log", broken, 50, 0, jobs=1)
    assert entry["max_ulps"] == "inf" and entry["mismatches_vs_correctly_rounded"] == 1


# ----------------------------------------------------------------------------- the record

def record(tmp_path, **kwargs):
    kernels = {"exp": oracle_stand_in("exp"), "tanh": oracle_stand_in("tanh")}
    return C.conform(200, 0, 1, ("exp", "tanh"), kernels.__getitem__,
                     {"source": "test stand-in"}, **kwargs)


def test_the_record_is_stored_under_its_hash_and_validates(tmp_path):
    import jsonschema
    from pathlib import Path

    rec = record(tmp_path)
    assert rec["format"] == "alphac-evidence-1" and list(rec["functions"]) == ["exp", "tanh"]
    assert rec["count"] == 200 and rec["seed"] == 0 and rec["kernels"] == {"source": "test stand-in"}
    name, path = evidence.write(rec, tmp_path / "store")
    data = path.read_bytes()
    import hashlib

    assert path.name == f"{name}.json" and hashlib.sha256(data).hexdigest() == name
    assert json.loads(data) == rec and evidence.validate(rec) == []
    assert evidence.write(rec, tmp_path / "store") == (name, path)  # the same bytes again
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "conform.json").read_text())
    jsonschema.Draft202012Validator({**schema["$defs"]["evidence"], "$defs": schema["$defs"]}).validate(rec)


def test_the_table_is_what_was_measured_and_parses(tmp_path):
    rec = record(tmp_path)
    text = C.table(rec)
    assert text.splitlines()[0] == "| function | level | largest error (ulps) | arguments tested |"
    rows = C.parse_table("intro\n\n" + text + "\nafter\n")
    assert list(rows) == ["exp", "tanh"]
    assert rows["exp"] == {"level": "correctly rounded", "max_ulps": rec["functions"]["exp"]["max_ulps"],
                           "arguments": 200}
    assert rows["tanh"]["level"] == "declared"


def test_the_command_prints_hash_table_and_counts(tmp_path, capsys):
    from alphac.commands import conform as command

    kernels = {"log1p": numpy_stand_in("log1p")}
    status = command.run(300, 0, 1, ("log1p",), str(tmp_path / "ev"), str(tmp_path / "t.md"), True,
                         kernels=kernels.__getitem__, kernel_identity={"source": "numpy stand-in"})
    out = capsys.readouterr().out
    assert status == 0
    name = out.splitlines()[0].split()[1]
    assert (tmp_path / "ev" / f"{name}.json").is_file()
    table = (tmp_path / "t.md").read_text()
    assert table in out and "| log1p | correctly rounded |" in table
    assert "log1p: " in out and "differ from the correctly rounded result" in out


@pytest.mark.slow
def test_the_host_kernels_conform():
    """alphac's own kernels: no word differs from the oracle's, and the correctly rounded
    ones err by at most half an ulp."""
    pytest.importorskip("llvmlite")
    rec = C.conform(3000, 0, 2)
    for name, entry in rec["functions"].items():
        if entry["level"] == "correctly-rounded":
            assert entry["mismatches_vs_correctly_rounded"] == 0, (name, entry)
            assert entry["max_ulps"] == "0.500"
        else:
            assert entry["mismatches_vs_declared_algorithm"] == 0, (name, entry)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-aarch64 or aarch64-linux-gnu-gcc missing")
def test_the_aarch64_kernels_conform_under_qemu(tmp_path):
    from click.testing import CliRunner

    from alphac.commands import main

    out = CliRunner().invoke(main, ["conform", "--count", "400", "--target", "aarch64", "--jobs", "1",
                                    "--store", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["record"]["kernels"]["target"] == "aarch64"
    for name, entry in doc["record"]["functions"].items():
        key = "mismatches_vs_correctly_rounded" if entry["level"] == "correctly-rounded" else \
            "mismatches_vs_declared_algorithm"
        assert entry[key] == 0, (name, entry)


def test_target_and_cpu_are_checked_before_any_work():
    from click.testing import CliRunner

    from alphac.commands import main

    for args in (["--target", "sm86"], ["--target", "aarch64", "--cpu", "host"], ["--count", "0"]):
        out = CliRunner().invoke(main, ["conform", *args])
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output

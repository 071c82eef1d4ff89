"""`alphac check` on hostile input: mutated and truncated real specs, odd paths, huge files.

Every run must end with exit 0 or 1 and output made only of located diagnostics (with their
source and caret lines) or one `alphac: error:` line: never a traceback, never a hang.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alphac.commands.check import run

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.alpha")) + sorted((ROOT / "specs" / "Gates").glob("*.alpha"))
TEXTS = [p.read_text(encoding="utf-8") for p in SPECS]
HEAD = re.compile(r"^\S.*:\d+:\d+: error\[[a-z0-9]+(-[a-z0-9]+)*\]: \S")
TOKENS = ["(", ")", "[", "]", "{", "}", ",", ":=", "=", "..", ".", "-", "+", "*", "/", "slot",
          "view", "for", "sum", "of", "in", "let", "pointwise", "family", "end-family", "value",
          "0", "1e400", "0x1p-1074", "word(0x7FF0000000000000)", "\"", "--", "\n", "k", "repeat",
          "load", "\u00e9", "\x00", "999999999999999999999"]


def check_output(path: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run(path, False)
    return rc, out.getvalue(), err.getvalue()


def assert_well_formed(rc: int, out: str, err: str) -> None:
    assert rc in (0, 1), (rc, out, err)
    assert "Traceback" not in out + err
    assert "internal error" not in err, err
    if rc == 0:
        assert out.count("\n") == 1 and out.startswith("ok: "), out
        assert err == ""
        return
    lines = err.splitlines()
    assert lines, "a refusal says why"
    one_line = len(lines) == 1 and lines[0].startswith("alphac: error: ")
    assert one_line or HEAD.match(lines[0]), lines[0]
    for line in lines:
        assert HEAD.match(line) or line.startswith("  "), line


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    # Mutants live beside copies of the modules the real specs import.
    base = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(ROOT / "specs" / "Gates", base / "Gates")
    return base


@st.composite
def mutants(draw) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "delete", "insert", "duplicate", "swap"]))
        n = len(text)
        a = draw(st.integers(0, n))
        b = draw(st.integers(a, min(n, a + 40)))
        if kind == "truncate":
            text = text[:a]
        elif kind == "delete":
            text = text[:a] + text[b:]
        elif kind == "insert":
            piece = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=6)))
            text = text[:a] + piece + text[a:]
        elif kind == "duplicate":
            text = text[:b] + text[a:b] + text[b:]
        else:
            c = draw(st.integers(0, n))
            text = text[:a] + text[c:c + (b - a)] + text[b:]
    return text


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=mutants())
def test_mutated_specs_never_crash(workdir: Path, text: str):
    path = workdir / "mutant.alpha"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_well_formed(*check_output(str(path)))


# Names inside a program's views, indices, ranges and loops: the places where a name must
# be a Nat, a view or a loop variable. `view w = slot kk` with kk undefined once crashed the
# checker; mutations of exactly these names would have found it.
NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
KEYWORDS = {"slot", "view", "for", "sum", "of", "in", "let", "pointwise", "sqrt", "f64"}
IN_PROGRAM = re.compile(r"^\s*(view |for |let |\S+\[|g\[|.*\bsum\b)|\[[^\]]*\]|\.\.")
PROGRAM_TEXTS = [t for t in TEXTS if "pointwise" in t]


def program_names(text: str) -> list[tuple[int, int]]:
    """(start, end) of every name on a program line of `text` that is not a keyword."""
    out, at = [], 0
    for line in text.splitlines(keepends=True):
        if IN_PROGRAM.search(line):
            out += [(at + m.start(), at + m.end()) for m in NAME.finditer(line)
                    if m.group() not in KEYWORDS]
        at += len(line)
    return out


@st.composite
def renamed(draw) -> str:
    """A program's spec with one to three names in views, indices, ranges and loops replaced:
    by an unknown name, a near miss, another name of the text, a view's name, a number."""
    text = draw(st.sampled_from(PROGRAM_TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        spots = program_names(text)
        if not spots:
            break
        a, b = draw(st.sampled_from(spots))
        old = text[a:b]
        others = sorted({text[x:y] for x, y in spots} - {old}) or ["k"]
        new = draw(st.one_of(st.just("kk"), st.just(old + "q"), st.just(old[:-1] or "q"),
                             st.sampled_from(others), st.sampled_from(["0", "1.5", "k + 1", "i - 9"])))
        text = text[:a] + new + text[b:]
    return text


def test_the_renaming_fuzzer_reaches_views_and_indices():
    assert PROGRAM_TEXTS, "some spec writes a pointwise program"
    demo = (ROOT / "specs" / "demo.alpha").read_text(encoding="utf-8")
    names = {demo[a:b] for a, b in program_names(demo)}
    assert {"k", "w", "x", "g", "i", "j", "m1"} <= names, names


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=renamed())
def test_renamed_program_names_never_crash(workdir: Path, text: str):
    path = workdir / "renamed.alpha"
    path.write_text(text, encoding="utf-8")
    assert_well_formed(*check_output(str(path)))


def test_a_view_over_an_unknown_nat_is_one_located_unknown_name(workdir: Path):
    text = (ROOT / "specs" / "demo.alpha").read_text(encoding="utf-8")
    text = text.replace("    view w = slot 0 .. k\n    view x", "    view w = slot kk\n    view x", 1)
    path = workdir / "view_kk.alpha"
    path.write_text(text, encoding="utf-8")
    rc, out, err = check_output(str(path))
    assert_well_formed(rc, out, err)
    heads = [line for line in err.splitlines() if HEAD.match(line)]
    # one diagnostic, at the name; the uses of the refused view w are not reported again
    assert heads == [f"{path}:15:19: error[unknown-name]: no Nat value named kk is in scope"], err


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_binary_garbage_is_refused_cleanly(workdir: Path, data: bytes):
    path = workdir / "garbage.alpha"
    path.write_bytes(data)
    rc, out, err = check_output(str(path))
    assert_well_formed(rc, out, err)


def test_real_specs_check_clean():
    for spec in SPECS:
        rc, out, err = check_output(str(spec))
        assert (rc, err) == (0, ""), err


def test_a_directory_is_refused(tmp_path: Path):
    rc, out, err = check_output(str(tmp_path))
    assert_well_formed(rc, out, err)
    assert "error[io-error]: is a directory" in err


def test_a_missing_path_is_refused(tmp_path: Path):
    rc, out, err = check_output(str(tmp_path / "absent.alpha"))
    assert_well_formed(rc, out, err)
    assert "error[io-error]: no such file" in err


def test_a_50_megabyte_file_is_refused_without_reading_it(tmp_path: Path):
    path = tmp_path / "huge.alpha"
    with open(path, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    start = time.perf_counter()
    rc, out, err = check_output(str(path))
    assert time.perf_counter() - start < 1.0
    assert_well_formed(rc, out, err)
    assert "error[file-too-large]" in err


def test_100k_nested_parentheses_are_refused_fast(tmp_path: Path):
    path = tmp_path / "deep.alpha"
    path.write_text("value x : StdU64 = " + "(" * 100_000 + "1.0" + ")" * 100_000 + "\n")
    start = time.perf_counter()
    rc, out, err = check_output(str(path))
    assert time.perf_counter() - start < 2.0
    assert_well_formed(rc, out, err)
    assert ":1:84: error[nesting-too-deep]" in err


def test_a_long_operator_chain_is_refused_not_overflowed(tmp_path: Path):
    path = tmp_path / "chain.alpha"
    path.write_text("value x : StdU64 = " + " + ".join(["1.0"] * 5000) + "\n")
    rc, out, err = check_output(str(path))
    assert_well_formed(rc, out, err)
    assert "error[nesting-too-deep]" in err


def test_a_pipe_is_refused_without_blocking(tmp_path: Path):
    import os

    path = tmp_path / "pipe.alpha"
    os.mkfifo(path)
    rc, out, err = check_output(str(path))
    assert_well_formed(rc, out, err)
    assert "error[io-error]: is not a regular file" in err

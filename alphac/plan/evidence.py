"""Conformance evidence: the records `alphac conform` writes, and the check that makes a
bounded numerical relation executable.

A record is one JSON document (format `alphac-evidence-1`): for each elementary function it
measured, its level (`correctly-rounded` or `declared`), the largest error of the kernels
against the real function in units in the last place (`max_ulps`, a decimal string rounded
up to 3 digits after the point, or `inf`), the number of arguments tested and what the
kernels' words disagreed with; then the host, the kernels' identity, the seed and the count.
It is stored as its canonical JSON (sorted keys, no spaces) in a file named by the sha256
of those bytes, `<sha256>.json`, in the store (`store_dir()`, `alphac conform --store`).

`NumericalBoundedUlps { numericalBoundUlps = N, numericalEvidence = E }` names a record by
its sha256 (found in the store, or beside the file that declares the contract) or by a path
to it, relative to that file. It is accepted when the record is there, its bytes hash to its
name and N is at least the measured error of every function the learner's programs call (of
every function in the record when they call none). The launch still compares every word with
the oracle bit for bit: the bound relates the words to the real functions, not to the oracle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from urllib.parse import unquote

from alphac.diagnostics import DiagnosticBag, Span
from alphac.ir import nodes as ir

FORMAT = "alphac-evidence-1"
FUNCTIONS = ("exp", "log", "log1p", "expm1", "sigmoid", "tanh")
LEVELS = ("correctly-rounded", "declared")
HASH = re.compile(r"[0-9a-f]{64}")
ULPS = re.compile(r"(?:[0-9]+\.[0-9]{3}|inf)")
MAX_RECORD_BYTES = 1 << 20
HOW = "`alphac conform` measures this host's kernels and stores the record; name the sha256 it prints"


class EvidenceError(Exception):
    """A record that cannot be used: `code` (numerical-evidence-corrupt) and a message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# ----------------------------------------------------------------------------- the store

def store_dir() -> Path:
    """Where `alphac conform` keeps its records: $ALPHAC_CACHE/evidence (alphac.resources
    cache_dir: $XDG_CACHE_HOME/alphac or ~/.cache/alphac otherwise)."""
    from alphac.resources import cache_dir

    return cache_dir() / "evidence"


def encode(record: dict) -> bytes:
    """The canonical JSON of a record: the bytes stored and hashed."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def record_hash(record: dict) -> str:
    return hashlib.sha256(encode(record)).hexdigest()


def write(record: dict, directory: "str | os.PathLike") -> tuple[str, Path]:
    """Store the record as DIR/<sha256>.json (written whole, then renamed into place; a
    record already there has the same bytes); its hash and path. OSError when DIR cannot be
    written."""
    data = encode(record)
    name = hashlib.sha256(data).hexdigest()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    if not path.is_file():
        staging = directory / f".{name}.json.{os.getpid()}.tmp"
        try:
            with open(staging, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(staging, path)
        finally:
            if staging.exists():
                staging.unlink()
    return name, path


# ----------------------------------------------------------------------------- reading

def validate(record) -> list[str]:
    """What makes `record` no evidence record of this format; [] when it is one."""
    if not isinstance(record, dict):
        return ["the document is not a JSON object"]
    problems = []
    if record.get("format") != FORMAT:
        problems.append(f"format is {record.get('format')!r}, not {FORMAT!r}")
    functions = record.get("functions")
    if not isinstance(functions, dict) or not functions:
        return problems + ["it names no measured function"]
    for name, entry in functions.items():
        if name not in FUNCTIONS:
            problems.append(f"function {name!r} is none of {', '.join(FUNCTIONS)}")
            continue
        if not isinstance(entry, dict):
            problems.append(f"{name}: not an object")
            continue
        if entry.get("level") not in LEVELS:
            problems.append(f"{name}: level {entry.get('level')!r} is none of {', '.join(LEVELS)}")
        if not isinstance(entry.get("max_ulps"), str) or not ULPS.fullmatch(entry["max_ulps"]):
            problems.append(f"{name}: max_ulps {entry.get('max_ulps')!r} is not a decimal string")
        arguments = entry.get("arguments")
        if not isinstance(arguments, int) or isinstance(arguments, bool) or arguments < 1:
            problems.append(f"{name}: arguments {arguments!r} is not a positive count")
    return problems


def read(path: "str | os.PathLike", name: str) -> dict:
    """The record at `path`, verified: its bytes hash to `name` and it is a record of
    FORMAT. EvidenceError (numerical-evidence-corrupt) otherwise; OSError when unreadable."""
    with open(path, "rb") as f:
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise EvidenceError("numerical-evidence-corrupt",
                            f"evidence {path} is larger than {MAX_RECORD_BYTES} bytes")
    actual = hashlib.sha256(data).hexdigest()
    if actual != name:
        raise EvidenceError("numerical-evidence-corrupt",
                            f"evidence {path} does not hash to its name: its sha256 is {actual}")
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise EvidenceError("numerical-evidence-corrupt", f"evidence {path} is not JSON: {exc}") from None
    problems = validate(record)
    if problems:
        raise EvidenceError("numerical-evidence-corrupt",
                            f"evidence {path} is not an {FORMAT} record: " + "; ".join(problems))
    return record


def measured(entry: dict) -> Fraction | None:
    """A function's largest measured error in ulps, exactly as recorded; None for inf."""
    text = entry["max_ulps"]
    return None if text == "inf" else Fraction(text)


# ----------------------------------------------------------------------------- the relation

@dataclass(frozen=True)
class Bounded:
    bound: int
    evidence: str  # as written: a sha256, a path, or "" for none


def parse_relation(relation: str) -> Bounded | None:
    """`ulps:N` or `ulps:N@EVIDENCE` (alphac/check/lower.py bounded_relation); None for
    another relation."""
    m = re.fullmatch(r"ulps:([0-9]+)(?:@(.*))?", relation, re.S)
    if m is None:
        return None
    return Bounded(int(m.group(1)), unquote(m.group(2) or ""))


def locate(evidence: str, declared_in: str) -> tuple[str, list[Path]]:
    """The record's name (its sha256) and where it may be, in order: a bare sha256 in the
    store, then beside the declaring file; a path relative to the declaring file (or
    absolute) there alone. EvidenceError for a path not named <sha256>.json."""
    base = Path(declared_in).parent if declared_in and not declared_in.startswith("<") else Path(".")
    if HASH.fullmatch(evidence):
        return evidence, [store_dir() / f"{evidence}.json", base / f"{evidence}.json"]
    path = Path(os.path.expanduser(evidence))
    path = path if path.is_absolute() else base / path
    stem = path.name[:-len(".json")] if path.name.endswith(".json") else None
    if stem is None or not HASH.fullmatch(stem):
        raise EvidenceError("numerical-evidence-corrupt",
                            f"evidence {evidence!r} is neither a sha256 nor a path to a record "
                            "named by its sha256 (<sha256>.json)")
    return stem, [path]


def used_functions(learner: ir.Learner | None) -> tuple[str, ...]:
    """The elementary functions the learner's programs call, in FUNCTIONS order."""
    if learner is None:
        return ()
    found: set[str] = set()
    stack = [s for p in (learner.contribution, learner.update) if p is not None for s in p.body]
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ir.Loop):
            stack.extend(stmt.body)
            continue
        for e in ir.subexpressions(stmt.value):
            if isinstance(e, ir.Unary) and e.op in FUNCTIONS:
                found.add(e.op)
    return tuple(f for f in FUNCTIONS if f in found)


def measured_kernels(relation: str, declared_in: str) -> str | None:
    """The IR sha256 of the kernels a bounded relation's evidence measured (its record's
    `kernels.ir_sha256`); None for another relation, or a record without one. The planner
    has verified the record (`check`); EvidenceError or OSError if it changed since."""
    bounded = parse_relation(relation)
    if bounded is None or not bounded.evidence:
        return None
    name, places = locate(bounded.evidence, declared_in)
    path = next((p for p in places if p.is_file()), places[0])
    kernels = read(path, name).get("kernels")
    return kernels.get("ir_sha256") if isinstance(kernels, dict) else None


def check(relation: str, learner: ir.Learner | None, span: Span, bag: DiagnosticBag) -> None:
    """A bounded relation is accepted with evidence that bounds it (module docstring);
    numerical-relation-unverified, numerical-evidence-corrupt or
    numerical-bound-below-evidence otherwise."""
    bounded = parse_relation(relation)
    if bounded is None:
        bag.error("numerical-relation-unverified", f"relation {relation!r} is neither exact nor a "
                  "bound in ulps", span, ["declare NumericalExact or NumericalBoundedUlps"])
        return
    shown = f"ulps:{bounded.bound}"
    if not bounded.evidence:
        bag.error("numerical-relation-unverified",
                  f"relation {shown!r} names no conformance evidence (numericalEvidence)", span,
                  [HOW, "or declare the relation exact"])
        return
    try:
        name, places = locate(bounded.evidence, span.file)
    except EvidenceError as exc:
        bag.error(exc.code, exc.message, span, [HOW])
        return
    path = next((p for p in places if p.is_file()), None)
    if path is None:
        bag.error("numerical-relation-unverified",
                  f"relation {shown!r} names conformance evidence {name[:16]}..., which is not "
                  "found", span, [f"looked for {', '.join(str(p) for p in places)}", HOW])
        return
    try:
        record = read(path, name)
    except EvidenceError as exc:
        bag.error(exc.code, exc.message, span, [HOW])
        return
    except OSError as exc:
        bag.error("numerical-relation-unverified",
                  f"conformance evidence {path} cannot be read: {exc.strerror or exc}", span, [HOW])
        return
    functions = record["functions"]
    used = used_functions(learner)
    missing = [f for f in used if f not in functions]
    if missing:
        bag.error("numerical-relation-unverified",
                  f"the programs call {', '.join(missing)}, which evidence {name[:16]}... does not "
                  "measure", span, [f"it measures {', '.join(functions)}", HOW])
        return
    compared = used or tuple(f for f in FUNCTIONS if f in functions)
    over = [(f, measured(functions[f])) for f in compared]
    over = [(f, m) for f, m in over if m is None or m > bounded.bound]
    if not over:
        return
    worst, value = max(over, key=lambda fm: (fm[1] is None, fm[1] or 0))
    what = "the programs call" if used else "the programs call none of the six; the record holds"
    notes = [f"{f}: {functions[f]['max_ulps']} ulps over {functions[f]['arguments']} arguments "
             f"({functions[f]['level']})" for f, _ in over]
    notes += [f"{what} {', '.join(compared)}; evidence {path}",
              f"declare numericalBoundUlps = {_ceiling(value)} or more"
              if value is not None else "no finite bound holds: a measured error is infinite"]
    bag.error("numerical-bound-below-evidence",
              f"the declared bound of {_ulps(bounded.bound)} is below the measured largest error of "
              f"{worst}, {functions[worst]['max_ulps']} ulps", span, notes)


def _ulps(n: int) -> str:
    return f"{n} ulp" if n == 1 else f"{n} ulps"


def _ceiling(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)

"""The qualification tracker: every `alphac qualify` run, recorded in one SQLite file
(docs/qualify.md "The tracker"), in one transaction once the run has ended, so the file
never holds half a run. Format version SCHEMA_VERSION (`PRAGMA user_version`); a file of
another version, or not a database, is refused (`qualify-db`), never rewritten."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from alphac.qualify.host import Build, Gpu, Host

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY,              -- 16 hex digits
    started TEXT NOT NULL,            -- UTC, ISO 8601, to the second
    seconds REAL NOT NULL,
    result TEXT NOT NULL CHECK (result IN ('passed', 'failed', 'invalid')),
    version TEXT NOT NULL,            -- alphac's
    git_tree TEXT,                    -- HEAD's tree in the checkout run from, else NULL
    git_dirty INTEGER,                -- 1: the checkout had changes HEAD does not hold
    cpu TEXT NOT NULL,
    kernel TEXT NOT NULL,
    qemu TEXT,                        -- qemu-aarch64 --version, NULL when not installed
    gpu_names TEXT,                   -- every GPU, '; ' between them; NULL when none
    gpu_uuids TEXT,
    gpu_drivers TEXT
);
CREATE TABLE gates (
    run TEXT NOT NULL REFERENCES runs (id),
    position INTEGER NOT NULL,        -- the order the run ran them in
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('gate', 'control')),
    status TEXT NOT NULL CHECK (status IN ('passed', 'failed', 'not-run')),
    detail TEXT NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (run, name)
);
CREATE TABLE digests (                -- what a gate saw: words, checkpoints (sha256)
    run TEXT NOT NULL REFERENCES runs (id),
    gate TEXT NOT NULL,
    what TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (run, gate, what)
);
CREATE TABLE executables (            -- every executable a gate ran
    run TEXT NOT NULL REFERENCES runs (id),
    gate TEXT NOT NULL,
    name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (run, gate, name)
);
"""


class TrackerError(Exception):
    code = "qualify-db"

    def __init__(self, message: str):
        super().__init__(f"{self.code}: {message}")
        self.message = message


@dataclass(frozen=True)
class GateRecord:
    name: str
    kind: str
    status: str
    detail: str
    seconds: float
    digests: dict[str, str] = field(default_factory=dict)
    executables: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    id: str
    started: str
    seconds: float
    result: str
    build: Build
    host: Host
    gates: tuple[GateRecord, ...]

    def as_json(self) -> dict:
        return {"id": self.id, "started": self.started, "seconds": round(self.seconds, 3), "result": self.result,
                "version": self.build.version, "git_tree": self.build.git_tree, "git_dirty": self.build.git_dirty,
                "host": {"cpu": self.host.cpu, "kernel": self.host.kernel, "qemu": self.host.qemu,
                         "gpus": [g.__dict__ for g in self.host.gpus]},
                "gates": [{"name": g.name, "kind": g.kind, "status": g.status, "detail": g.detail,
                           "seconds": round(g.seconds, 3), "digests": g.digests, "executables": g.executables}
                          for g in self.gates]}


def default_db() -> Path:
    """$XDG_DATA_HOME/alphac/qualify.db (XDG_DATA_HOME defaults to ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "alphac" / "qualify.db"


def connect(path: str | Path, create: bool) -> sqlite3.Connection:
    """The tracker at `path`, made (with its schema) when `create` and absent; TrackerError
    for a file that is not a tracker of this format."""
    path = Path(path)
    if not path.exists() and not create:
        raise TrackerError(f"{path}: no such tracker (no qualification run recorded there yet)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except (OSError, sqlite3.Error) as exc:
        raise TrackerError(f"{path}: {exc}") from None
    if version == 0 and tables == 0:
        with db:
            db.executescript(SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
    elif version != SCHEMA_VERSION:
        db.close()
        raise TrackerError(f"{path}: tracker format {version}, this alphac reads {SCHEMA_VERSION}")
    return db


def _joined(gpus: tuple[Gpu, ...], attr: str) -> str | None:
    return "; ".join(getattr(g, attr) for g in gpus) or None


def record(path: str | Path, run: RunRecord) -> None:
    """Add `run`, whole, in one transaction."""
    db = connect(path, create=True)
    b, h = run.build, run.host
    try:
        with db:
            db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (run.id, run.started, run.seconds, run.result, b.version, b.git_tree,
                        None if b.git_dirty is None else int(b.git_dirty), h.cpu, h.kernel, h.qemu,
                        _joined(h.gpus, "name"), _joined(h.gpus, "uuid"), _joined(h.gpus, "driver")))
            for i, g in enumerate(run.gates):
                db.execute("INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (run.id, i, g.name, g.kind, g.status, g.detail, g.seconds))
                db.executemany("INSERT INTO digests VALUES (?, ?, ?, ?)",
                               [(run.id, g.name, what, d) for what, d in g.digests.items()])
                db.executemany("INSERT INTO executables VALUES (?, ?, ?, ?)",
                               [(run.id, g.name, name, d) for name, d in g.executables.items()])
    except sqlite3.Error as exc:
        raise TrackerError(f"{path}: {exc}") from None
    finally:
        db.close()


def _gpus(names, uuids, drivers) -> tuple[Gpu, ...]:
    if names is None:
        return ()
    return tuple(Gpu(*t) for t in zip(names.split("; "), uuids.split("; "), drivers.split("; ")))


def history(path: str | Path) -> list[RunRecord]:
    """Every run recorded, oldest first, with its gates, digests and executables."""
    db = connect(path, create=False)
    try:
        runs = db.execute("SELECT * FROM runs ORDER BY started, id").fetchall()
        gates = db.execute("SELECT run, name, kind, status, detail, seconds FROM gates ORDER BY run, position").fetchall()
        digests = db.execute("SELECT run, gate, what, sha256 FROM digests ORDER BY rowid").fetchall()
        exes = db.execute("SELECT run, gate, name, sha256 FROM executables ORDER BY rowid").fetchall()
    except sqlite3.Error as exc:
        raise TrackerError(f"{path}: {exc}") from None
    finally:
        db.close()

    def extra(rows, run, gate):
        return {what: d for r, g, what, d in rows if (r, g) == (run, gate)}

    out = []
    for (rid, started, seconds, result, version, tree, dirty, cpu, kernel, qemu, names, uuids, drivers) in runs:
        gs = tuple(GateRecord(name, kind, status, detail, secs, extra(digests, rid, name), extra(exes, rid, name))
                   for r, name, kind, status, detail, secs in gates if r == rid)
        out.append(RunRecord(rid, started, seconds, result, Build(version, tree, None if dirty is None else bool(dirty)),
                             Host(cpu, kernel, qemu, _gpus(names, uuids, drivers)), gs))
    return out

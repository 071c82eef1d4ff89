"""The checkpoint manifest and shard files (docs/checkpoints.md): parse and render; a
checkpoint directory is checked by alphac/checkpoint/directory.py.

    parse(text, path) -> Manifest          CheckpointError (located: line, column)
    read_manifest(ckpt_dir) -> Manifest    its manifest.txt, trailer hash checked
    checkpoint_key(run_key) -> bytes       the key a checkpoint's tag is made with
    manifest_tag(manifest, run_key) -> str  the tag a keyed run writes on the root manifest
    check_tag(manifest, run_key)           CheckpointError(checkpoint-auth) unless it has it
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from alphac.resources import NotRegular, open_regular

# Format 3 names the learner's inputs (the `inputs` line) and carries the root manifest's
# `auth` line; format 2 named neither, and is refused.
HEAD = "alphac-checkpoint 3"
# the label of the checkpoint key: HMAC-SHA-256(run key, CHECKPOINT_KEY_LABEL) (16 bytes)
CHECKPOINT_KEY_LABEL = "alphac-checkpt-1"
ROOT_MANIFEST = "manifest.txt"
SHARD_MAGIC = 0x54504B4341484C41  # "ALHACKPT"
SHARD_FORMAT = 2
SCHEDULE_MAGIC = 0x4441455241484C41  # "ALHAREAD": an owner's schedule file under bounded staleness
# history: fixed staleness's earlier versions; outer: local steps' outer momentum; states:
# local steps' every owner's own optimizer state
REGIONS = {"parameters": 1, "state": 2, "history": 3, "outer": 4, "states": 5}
REGION_NAMES = {v: k for k, v in REGIONS.items()}
Run = tuple[int, int, int]  # (start, step, count): positions start, start + step, ... (count of them)


def positions(runs) -> np.ndarray:
    """Every position the runs hold, in the runs' order."""
    parts = [start + step * np.arange(count, dtype=np.int64) for start, step, count in runs]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


class CheckpointError(Exception):
    """A checkpoint that does not verify: a stable code, a message, and where (file, line,
    column; line 0 for a file as a whole)."""

    def __init__(self, code: str, message: str, path: str = "", line: int = 0, col: int = 1):
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, code
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.path, self.line, self.col = code, message, path, line, col

    def diagnostic(self, fallback=None, notes: tuple[str, ...] = ()):
        """The located diagnostic: at the line of the manifest it names, or, for a file as a
        whole (line 0), at `fallback` when given (the declaration that names the checkpoint)."""
        from alphac.diagnostics import Diagnostic, Span

        if self.line == 0 and fallback is not None:
            return Diagnostic(self.code, self.message, fallback, tuple(notes))
        return Diagnostic(self.code, self.message, Span(self.path, max(self.line, 1), self.col),
                          tuple(notes))


@dataclass(frozen=True)
class ShardEntry:
    owner: int
    file: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class FragmentEntry:
    owner: int
    region: str
    offset: int          # byte offset of its words in the shard file
    words: int
    runs: tuple[Run, ...]
    sha256: str

    def positions(self) -> np.ndarray:
        return positions(self.runs)


@dataclass(frozen=True)
class ReadsEntry:
    """Bounded staleness: owner's schedule file, the versions its contributions to updates
    first .. first + count - 1 read (docs/checkpoints.md, "The schedule file")."""

    owner: int
    file: str
    first: int
    count: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    path: str
    version: int
    identity: int
    learner: str         # the line's text after "learner "
    inputs: str          # the line's text after "inputs ": the samples' sha256 and the rate
    contract: str
    layout: str
    regions: dict[str, int]
    owners: tuple[int, ...]
    manifests: dict[int, tuple[str, str]]  # child owner -> (file, sha256)
    shards: tuple[ShardEntry, ...]
    fragments: tuple[FragmentEntry, ...]
    resumed: tuple[str, int, str] | None   # (sha256, version, "same" | "new")
    sha256: str          # the trailer: sha256 of every byte before it
    # the root manifest's `auth` line: "none", or "hmac-sha256 HEX" (the tag); None in a
    # child manifest, which the root's hashes cover
    auth: str | None = None
    text: str = field(default="", compare=False, repr=False)  # as read (parse)
    # item -> the line of its first occurrence; also "manifest O", "shard O", "region NAME",
    # "fragment O REGION"
    line_of: dict[str, int] = field(default_factory=dict, compare=False)
    reads: tuple[ReadsEntry, ...] = ()  # bounded staleness: each owner's schedule file


def identity_of(learner: str, inputs: str, contract: str, layout: str) -> int:
    """The checkpoint identity: 8 bytes of the sha256 of the canonical JSON of the lines."""
    doc = json.dumps({"contract": contract, "inputs": inputs, "layout": layout, "learner": learner},
                     sort_keys=True, separators=(",", ":"))
    return int(hashlib.sha256(doc.encode()).hexdigest()[:16], 16)


def shard_digest(head: bytes, fragment_sha256s) -> str:
    """A shard's sha256: of its header and fragment table (`head`, every byte before its
    fragments' words) followed by each fragment's sha256 (32 bytes), in the file's order."""
    h = hashlib.sha256(head)
    for sha in fragment_sha256s:
        h.update(bytes.fromhex(sha))
    return h.hexdigest()


def runs_text(runs) -> str:
    return ",".join(f"{s}+{st}x{c}" for s, st, c in runs) if runs else "-"


def render(m: Manifest) -> str:
    """The canonical text of `m` (its trailer recomputed)."""
    lines = [HEAD, f"version {m.version}", f"identity {m.identity:016x}", f"learner {m.learner}",
             f"inputs {m.inputs}", f"contract {m.contract}", f"layout {m.layout}"]
    lines += [f"region {name} {words}" for name, words in m.regions.items()]
    lines.append("owners " + " ".join(str(o) for o in m.owners))
    lines += [f"manifest {o} {f} {h}" for o, (f, h) in sorted(m.manifests.items())]
    for s in m.shards:
        lines.append(f"shard {s.owner} {s.file} {s.bytes} {s.sha256}")
        lines += [f"fragment {f.owner} {f.region} {f.offset} {f.words} {runs_text(f.runs)} {f.sha256}"
                  for f in m.fragments if f.owner == s.owner]
        lines += [f"reads {r.owner} {r.file} {r.first} {r.count} {r.sha256}" for r in m.reads if r.owner == s.owner]
    if m.resumed:
        lines.append(f"resumed-from {m.resumed[0]} {m.resumed[1]} {m.resumed[2]}")
    if m.auth is not None:
        lines.append(f"auth {m.auth}")
    return with_trailer("".join(line + "\n" for line in lines).encode()).decode()


def with_trailer(body: bytes) -> bytes:
    """A manifest's bytes `body` followed by its sha256 trailer, the hash of every byte
    before it (the line every reader checks first)."""
    return body + b"sha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n"


_HEX64 = r"[0-9a-f]{64}"
_PATTERNS = {
    "version": r"version (\d+)",
    "identity": r"identity ([0-9a-f]{16})",
    "learner": r"learner (contribution " + _HEX64 + r" update " + _HEX64 + r"(?: storage binary32)? k \d+ m \d+ s \d+)",
    "inputs": r"inputs (samples " + _HEX64 + r" rate [0-9a-f]{16})",
    "contract": r"contract (\S+ \S+ \S+ \S+ \S+ " + _HEX64 + r" .+)",
    "layout": r"layout (owners \d+ parameters (?:replicated|partitioned) state (?:replicated|partitioned) "
              r"words-per-coordinate \d+ shared (?:-|\d+(?:,\d+)*)(?: block-words [1-9]\d*)?)",
    "region": r"region (parameters|state|history|outer|states) (\d+)",
    "owners": r"owners (\d+(?: \d+)*)",
    "manifest": r"manifest (\d+) (manifest-\d+\.txt) (" + _HEX64 + ")",
    "shard": r"shard (\d+) (shard-\d+\.bin) (\d+) (" + _HEX64 + ")",
    "fragment": r"fragment (\d+) (parameters|state|history|outer|states) (\d+) (\d+) (-|\d+\+\d+x\d+(?:,\d+\+\d+x\d+)*) (" + _HEX64 + ")",
    "reads": r"reads (\d+) (reads-\d+\.bin) (\d+) (\d+) (" + _HEX64 + ")",
    "resumed-from": r"resumed-from (" + _HEX64 + r") (\d+) (same|new)",
    "auth": r"auth (none|hmac-sha256 " + _HEX64 + ")",
    "sha256": r"sha256 (" + _HEX64 + ")",
}
# a number is at most 18 digits, as the executables' restore reads it (int() of thousands
# of digits would be a ValueError, and a 2^64 would be taken)
_PATTERNS = {k: v.replace(r"[1-9]\d*", r"[1-9]\d{0,17}").replace(r"\d+", r"\d{1,18}") for k, v in _PATTERNS.items()}
LEARNER_ITEMS = ("learner", "inputs", "contract", "layout")  # every manifest of a checkpoint, the root's
_ORDER = ("version", "identity", "learner", "inputs", "contract", "layout")


def _runs(text: str) -> tuple[Run, ...]:
    if text == "-":
        return ()
    return tuple(tuple(int(x) for x in re.fullmatch(r"(\d{1,18})\+(\d{1,18})x(\d{1,18})", r).groups())
                 for r in text.split(","))


def parse(text: str, path: str = "manifest.txt") -> Manifest:
    """A manifest from its text; CheckpointError(checkpoint-manifest) names the first line
    that is out of place or malformed, (checkpoint-hash-mismatch) a wrong trailer."""
    def bad(line_no: int, what: str, col: int = 1):
        return CheckpointError("checkpoint-manifest", what, path, line_no, col)

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    else:
        raise bad(len(lines), "the manifest is truncated (its last line has no end)")
    if lines and lines[0] == "alphac-checkpoint 2":
        raise bad(1, "format 2 is not read: it names neither the learner's inputs nor an auth line "
                  f"(expected {HEAD!r}); resume it with the alphac that wrote it")
    if not lines or lines[0] != HEAD:
        raise bad(1, f"expected {HEAD!r}, the first line of a checkpoint manifest")
    got: dict = {"region": {}, "manifest": {}, "shard": [], "fragment": [], "reads": []}
    line_of: dict[str, int] = {}
    trailer = None
    for no, line in enumerate(lines[1:], start=2):
        key = line.split(" ", 1)[0]
        pattern = _PATTERNS.get(key)
        if pattern is None:
            raise bad(no, f"unknown item {key!r}")
        m = re.fullmatch(pattern, line)
        if m is None:
            raise bad(no, f"malformed {key!r} line")
        if trailer is not None:
            raise bad(no, "a line after the sha256 trailer")
        g = m.groups()
        if "auth" in got and key != "sha256":
            raise bad(no, "a line after the auth line (only the sha256 trailer follows it)")
        if key in _ORDER or key in ("owners", "resumed-from", "auth"):
            if key in got:
                raise bad(no, f"{key!r} is given twice")
            want = _ORDER.index(key) if key in _ORDER else None
            if want is not None and [k for k in _ORDER if k in got] != list(_ORDER[:want]):
                raise bad(no, f"{key!r} out of order: expected {' '.join(_ORDER)} first")
            got[key] = g
        elif key == "region":
            got["region"][g[0]] = int(g[1])
        elif key == "manifest":
            got["manifest"][int(g[0])] = (g[1], g[2])
        elif key == "shard":
            got["shard"].append(ShardEntry(int(g[0]), g[1], int(g[2]), g[3]))
        elif key == "fragment":
            if not got["shard"] or got["shard"][-1].owner != int(g[0]):
                raise bad(no, f"fragment of owner {g[0]} outside its shard's lines")
            got["fragment"].append(FragmentEntry(int(g[0]), g[1], int(g[2]), int(g[3]), _runs(g[4]), g[5]))
        elif key == "reads":
            if not got["shard"] or got["shard"][-1].owner != int(g[0]) or g[1] != f"reads-{g[0]}.bin":
                raise bad(no, f"schedule of owner {g[0]} outside its shard's lines, or not its file")
            got["reads"].append(ReadsEntry(int(g[0]), g[1], int(g[2]), int(g[3]), g[4]))
        elif key == "sha256":
            trailer = g[0]
            body = "".join(x + "\n" for x in lines[:no - 1])
            if hashlib.sha256(body.encode()).hexdigest() != trailer:
                raise CheckpointError("checkpoint-hash-mismatch", "the manifest's sha256 line does not "
                                      "match its contents (a changed or truncated manifest)", path, no)
        line_of.setdefault(key, no)
        if key in ("manifest", "shard", "region", "reads"):
            line_of.setdefault(f"{key} {g[0]}", no)
        elif key == "fragment":
            line_of.setdefault(f"fragment {g[0]} {g[1]}", no)
    if trailer is None:
        raise bad(len(lines), "the manifest is truncated (no sha256 line)")
    for key in _ORDER + ("owners",):
        if key not in got:
            raise bad(len(lines), f"no {key!r} line")
    resumed = got.get("resumed-from")
    return Manifest(path, int(got["version"][0]), int(got["identity"][0], 16), got["learner"][0],
                    got["inputs"][0], got["contract"][0], got["layout"][0], got["region"],
                    tuple(int(o) for o in got["owners"][0].split()), got["manifest"],
                    tuple(got["shard"]), tuple(got["fragment"]),
                    (resumed[0], int(resumed[1]), resumed[2]) if resumed else None, trailer,
                    got["auth"][0] if "auth" in got else None, text, line_of, tuple(got["reads"]))


def read_regular(p: Path) -> bytes:
    """The bytes of the checkpoint file `p`, read as the executables' restore reads it: no
    link followed, never blocking, refused NotRegular unless a regular file."""
    with open_regular(p, follow_links=False) as f:
        return f.read()


def _parsed(data: bytes, p: Path) -> Manifest:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError("checkpoint-manifest", f"{p} cannot be read ({exc})", str(p)) from None
    return parse(text, str(p))


def read_manifest(ckpt_dir: str | Path, name: str = ROOT_MANIFEST) -> Manifest:
    d = Path(ckpt_dir)
    if d.name.startswith("ckpt-") and ".partial-" in d.name:
        raise CheckpointError("checkpoint-manifest", f"{d} is a partial checkpoint, never loaded", str(d))
    p = d / name
    try:
        data = read_regular(p)
    except NotRegular as exc:
        raise CheckpointError("checkpoint-shard-missing" if name != ROOT_MANIFEST else "checkpoint-manifest",
                              str(exc), str(p)) from None
    except FileNotFoundError:
        raise CheckpointError("checkpoint-shard-missing" if name != ROOT_MANIFEST else "checkpoint-manifest",
                              f"{p} does not exist" + ("" if name != ROOT_MANIFEST else
                                                       " (not a checkpoint directory)"), str(p)) from None
    except OSError as exc:
        raise CheckpointError("checkpoint-manifest", f"{p} cannot be read ({exc})", str(p)) from None
    m = _parsed(data, p)
    if name == ROOT_MANIFEST and m.auth is None:
        raise CheckpointError("checkpoint-manifest", "no 'auth' line (the root manifest says whether it is "
                              "tagged)", str(p), m.line_of.get("sha256", 0))
    return m


KEY_MIN, KEY_MAX = 32, 4096  # a key file's size, as the executables' (alphac/runtime/auth.c)


def read_key(path: str | Path) -> bytes:
    """The bytes of a key file, checked as the executables check theirs: a regular file (no
    link, never blocking) of this user or root, private to it (mode 0600), of KEY_MIN to
    KEY_MAX bytes; CheckpointError(key-file) otherwise."""
    import os

    try:
        with open_regular(path, follow_links=False) as f:
            st = os.fstat(f.fileno())
            why = (f"belongs to uid {st.st_uid}; it must be this user's (uid {os.geteuid()}) or root's"
                   if st.st_uid not in (os.geteuid(), 0) else
                   f"has mode {st.st_mode & 0o7777:04o}; it must be private to its owner (chmod 600)"
                   if st.st_mode & 0o077 else
                   f"holds {st.st_size} bytes; a key is {KEY_MIN} to {KEY_MAX} bytes"
                   if not KEY_MIN <= st.st_size <= KEY_MAX else "")
            data = b"" if why else f.read(KEY_MAX + 1)
    except (NotRegular, OSError) as exc:
        raise CheckpointError("key-file", f"cannot read the key file {path} ({exc})", str(path)) from None
    if why or not KEY_MIN <= len(data) <= KEY_MAX:
        raise CheckpointError("key-file", f"the key file {path} {why or 'changed while it was read'}", str(path))
    return data


def checkpoint_key(run_key: bytes) -> bytes:
    """The key a checkpoint's tag is made with: HMAC-SHA-256(run key, "alphac-checkpt-1"), so
    the run key itself never tags anything but frames."""
    return hmac.new(run_key, CHECKPOINT_KEY_LABEL.encode("ascii"), hashlib.sha256).digest()


def _tagged_bytes(m: Manifest) -> bytes:
    """Every byte of the root manifest before its `auth` line."""
    at = m.text.rfind("\nauth ")
    return m.text[:at + 1].encode("utf-8")


def manifest_tag(m: Manifest, run_key: bytes) -> str:
    """The `auth` line's tag a run keyed with `run_key` writes: HMAC-SHA-256 under the
    checkpoint key over every byte of the manifest before that line (hex)."""
    return hmac.new(checkpoint_key(run_key), _tagged_bytes(m), hashlib.sha256).hexdigest()


def check_tag(m: Manifest, run_key: bytes) -> None:
    """The root manifest `m` tagged under `run_key`; CheckpointError(checkpoint-auth) when
    its auth line is `none` or holds another tag (a forged or another key's checkpoint)."""
    line = m.line_of.get("auth", 0)
    if m.auth == "none":
        raise CheckpointError("checkpoint-auth", f"{m.path} is not tagged (written by an unkeyed run); a keyed "
                              "reader takes only checkpoints tagged under its key", m.path, line)
    want = manifest_tag(m, run_key)
    if not hmac.compare_digest(m.auth or "", f"hmac-sha256 {want}"):
        raise CheckpointError("checkpoint-auth", f"{m.path}'s tag is not the one this key makes (another key's "
                              "checkpoint, or a forged one)", m.path, line)

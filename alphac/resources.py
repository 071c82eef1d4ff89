"""The data shipped inside the package: the grammar (`alphac/syntax/alpha.lark`), the std
library (`alphac/std/`) and the target descriptions (`alphac/targets/*.toml`); where
alphac caches what it compiles (`cache_dir`, `store_kept`); and how a file someone else may
have placed (a run's outputs, a checkpoint's files) is opened (`open_regular`) and hashed
(`sha256_file`).

They are found with `importlib.resources`, never relative to a source tree, so a regular
(non-editable) install works from any directory.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import os
import stat
import tempfile
from contextlib import ExitStack
from importlib.resources import as_file, files
from pathlib import Path

_extracted = ExitStack()
atexit.register(_extracted.close)


def data_path(package: str, *parts: str) -> Path:
    """A real file-system path for the file or directory `parts` inside `package`.

    An installed package lies on disk and this is simply its path; a package imported from
    a zip file has the resource extracted for the life of the process (a directory needs
    Python 3.12 or later there)."""
    return _extracted.enter_context(as_file(files(package).joinpath(*parts)))


def cache_dir() -> Path:
    """$ALPHAC_CACHE, else $XDG_CACHE_HOME/alphac, else ~/.cache/alphac: the runtime's objects
    (alphac.targets.runtime), the kernels' objects (`objects/`, alphac.targets.llvm) and the
    oracle's compiled engine (alphac.oracle.compiled)."""
    if os.environ.get("ALPHAC_CACHE"):
        return Path(os.environ["ALPHAC_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "alphac"


def file_identity(path: str | os.PathLike | None) -> str:
    """A file as a cache key names it: its path, size, modification time and inode (a
    library or tool upgraded in place is another file), or its path and "absent"."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        st = None
    return f"{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}" if st else f"{path}:absent"


def store_kept(path: Path, data: bytes, kept: int) -> None:
    """Write `data` at `path` whole (staged beside it, then renamed), then keep the newest
    `kept` files of its directory with its suffix. Best effort: a cache that cannot be
    written is one that misses."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, staged = tempfile.mkstemp(prefix=path.name, suffix=".partial", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(staged, path)
        except BaseException:
            os.unlink(staged)
            raise
        newest = sorted(path.parent.glob(f"*{path.suffix}"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in newest[kept:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


class NotRegular(OSError):
    """A file that is a directory, a FIFO, a socket or a device (or, where links are
    refused, a symbolic link), not a regular file."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | Path, follow_links: bool = True):
    """`path` opened for reading in binary, refused NotRegular unless it is a regular file
    (and, without `follow_links`, unless it is no symbolic link). It is opened O_NONBLOCK and
    looked at with fstat before anything is read, so a FIFO (or a device) in its place never
    blocks the reader. FileNotFoundError where it is missing."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP:
            raise NotRegular(f"{path} is a symbolic link, not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"{path} is {_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def sha256_file(path: str | Path) -> str:
    """The sha256 of a regular file's bytes, in hex, read a MiB at a time (NotRegular, as
    open_regular, for anything else)."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

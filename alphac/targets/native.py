"""What every CPU target shares: compile an llvmlite module to an object, link it into an
executable with the target's linker command, reproducibly; and the store of linked
executables, by the content of what went into them (`stored_link`)."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llvmlite import ir

from alphac.resources import cache_dir, file_identity, sha256_file, store_kept
from alphac.targets import llvm
from alphac.targets.target import Target, TargetError

# The object is always linked under this name so that nothing the linker records about
# its inputs differs between two builds of the same module.
OBJECT_NAME = "alphac.o"
LINK_TIMEOUT_S = 120
# The executable store: the newest this many linked executables, each under the sha256 of
# everything the link read; inputs over STORE_MAX_BYTES (an image of many samples) are
# linked every time, not stored.
EXECUTABLES_KEPT = 256
STORE_MAX_BYTES = 64 << 20


def _first_error(text: str) -> str:
    """The linker line that says what went wrong (not collect2's summary)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for needle in ("undefined reference", "cannot find", "error"):
        for ln in lines:
            if needle in ln and not ln.startswith("collect2"):
                return ln
    return lines[0] if lines else "no message"


@dataclass(frozen=True)
class NativeBackend:
    """A CPU target: llvmlite object emission plus the toml's linker command."""

    target: Target

    @property
    def name(self) -> str:
        return self.target.name

    def compile_object(self, module: ir.Module) -> bytes:
        return llvm.compile_object(module, self.target)

    def linker_available(self) -> bool:
        return shutil.which(self.target.linker[0]) is not None

    def link(self, objects, exe_path: str | os.PathLike) -> Path:
        """Link one object (or several, in order) into `exe_path`; `link-failed` carries the
        linker's first error."""
        exe = Path(exe_path)
        if not self.linker_available():
            raise TargetError("linker-missing",
                              f"{self.target.linker[0]}: not found (needed to link for {self.name})")
        self.target.check_libraries()
        command = self.target.link_command(objects, exe)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=LINK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise TargetError("link-failed", f"{command[0]} ran longer than {LINK_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise TargetError("link-failed",
                              f"{command[0]} exited {done.returncode}: {_first_error(done.stderr + done.stdout)}")
        return exe

    def link_bytes(self, obj: bytes, exe_path: str | os.PathLike, extra=()) -> Path:
        """Write `obj` under the fixed object name in a private directory and link it, then
        the `extra` objects (copied there under fixed names too, such as the runtime's);
        through the executable store (`stored_link`)."""
        with tempfile.TemporaryDirectory(prefix="alphac-link-") as tmp:
            obj_path = Path(tmp) / OBJECT_NAME
            obj_path.write_bytes(obj)
            paths = [obj_path]
            for i, path in enumerate(extra):
                paths.append(Path(tmp) / f"alphac-{i + 1}.o")
                try:  # the linker reads the name, not where it points: no 6 MB copy per link
                    os.symlink(Path(path).resolve(), paths[-1])
                except OSError:
                    shutil.copyfile(path, paths[-1])
            return stored_link(self, paths, Path(exe_path), kept_inputs=len(extra))

    def build(self, module: ir.Module, exe_path: str | os.PathLike) -> Path:
        return self.link_bytes(self.compile_object(module), exe_path)


# -- the executable store -----------------------------------------------------------------
# A link reads its objects, the target's libraries and the toolchain's own files (the
# compiler driver, the linker, the C library), and its output depends on nothing else: the
# objects lie under fixed names and the linker records no time. So an executable linked
# once is found again under the sha256 of all of that, and copied instead of linked: the
# same bytes (tests/e2e/test_build_cli.py links twice into two stores and compares).

def store_dir() -> Path:
    return cache_dir() / "executables"


@functools.lru_cache(maxsize=None)
def _toolchain(driver: str) -> str:
    """The files of the toolchain behind the linker command's first word: the driver, and
    where it is a compiler driver, the linker and the C library it links."""
    found = shutil.which(driver)
    parts = [file_identity(found)]
    for query in ("-print-prog-name=ld", "-print-file-name=libc.a", "-print-file-name=libc.so"):
        try:
            done = subprocess.run([driver, query], capture_output=True, text=True, timeout=60)
            answer = done.stdout.strip() if done.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            answer = ""
        parts.append(file_identity(shutil.which(answer) if answer and os.sep not in answer else answer))
    return "\n".join(parts)


@functools.lru_cache(maxsize=256)
def _kept_digest(path: Path, identity: str) -> bytes:
    """The sha256 of a linked file, remembered under its `identity` (file_identity: path,
    size, modification time, inode, so a file written again is read again): the runtime's
    cached objects are read once per process instead of once per link."""
    return bytes.fromhex(sha256_file(path))


def _link_key(backend: NativeBackend, objects: list[Path], kept_inputs: int = 0) -> str | None:
    """The store's name for the link of `objects`, the digests of whose last `kept_inputs`
    are remembered by file identity; None where the inputs are too big to keep."""
    if sum(p.stat().st_size for p in objects) > STORE_MAX_BYTES:
        return None
    h = hashlib.sha256(b"alphac executable 1\0")
    h.update("\0".join(backend.target.link_command([p.name for p in objects], "EXE")).encode())
    h.update(b"\0" + _toolchain(backend.target.linker[0]).encode())
    for lib in backend.target.libs:
        h.update(b"\0" + file_identity(lib).encode())
    fresh = len(objects) - kept_inputs
    for i, p in enumerate(objects):
        h.update(b"\0" + (hashlib.sha256(p.read_bytes()).digest() if i < fresh
                          else _kept_digest(p.resolve(), file_identity(p.resolve()))))
    return h.hexdigest()


def stored_link(backend: NativeBackend, objects: list[Path], exe: Path, kept_inputs: int = 0) -> Path:
    """`backend.link(objects, exe)`, or the executable that link made before, copied from the
    store (and then the newest there). A store that cannot be read or written is passed by."""
    key = _link_key(backend, objects, kept_inputs) if backend.linker_available() else None
    kept = store_dir() / f"{key[:40]}.exe" if key else None
    if kept is not None:
        try:
            shutil.copyfile(kept, exe)
            mode = os.stat(exe).st_mode
            os.chmod(exe, mode | (mode & 0o444) >> 2)  # executable wherever readable
            os.utime(kept)
            return exe
        except OSError:
            exe.unlink(missing_ok=True)
    backend.link(objects, exe)
    if kept is not None:
        store_kept(kept, exe.read_bytes(), EXECUTABLES_KEPT)
    return exe

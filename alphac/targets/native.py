"""What every CPU target shares: compile an llvmlite module to an object, link it into an
executable with the target's linker command, reproducibly."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llvmlite import ir

from alphac.targets import llvm
from alphac.targets.target import Target, TargetError

# The object is always linked under this name so that nothing the linker records about
# its inputs differs between two builds of the same module.
OBJECT_NAME = "alphac.o"
LINK_TIMEOUT_S = 120


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
        for lib in self.target.libs:
            if not os.path.isfile(lib):
                raise TargetError("library-missing", f"{lib}: not found (needed to link for {self.name})")
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
        the `extra` objects (copied there under fixed names too, such as the runtime's)."""
        with tempfile.TemporaryDirectory(prefix="alphac-link-") as tmp:
            obj_path = Path(tmp) / OBJECT_NAME
            obj_path.write_bytes(obj)
            paths = [obj_path]
            for i, path in enumerate(extra):
                paths.append(Path(tmp) / f"alphac-{i + 1}.o")
                shutil.copyfile(path, paths[-1])
            return self.link(paths, exe_path)

    def build(self, module: ir.Module, exe_path: str | os.PathLike) -> Path:
        return self.link_bytes(self.compile_object(module), exe_path)

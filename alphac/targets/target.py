"""Targets as parsed, frozen values: one `alphac/targets/<name>.toml` each, the only place
triples, CPUs, features, linkers and runners are written."""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from alphac.diagnostics import hinted
from alphac.resources import data_path

# The `*.toml` files shipped in this package (`alphac/targets/`); `$ALPHAC_TARGETS` overrides it.
TARGETS_DIR = data_path("alphac.targets")


class TargetError(Exception):
    """A one-line tooling error with a stable code from the TOOLING catalogue section."""

    def __init__(self, code: str, message: str):
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, f"code {code!r} is not in the catalogue"
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True)
class Target:
    """One compilation target. `linker` and `assembler` are argument lists whose `{objs}`
    (every object, in order), `{exe}`, `{ptx}`, `{cubin}` items are substituted; `cc` is the
    C compiler of the role runtime and `cflags` what the target adds to the runtime's own
    flags; `runner` prefixes the executable when it is started (empty: run natively)."""

    name: str
    triple: str
    cpu: str
    features: str
    machine: str  # the ELF e_machine name pyelftools reports (EM_X86_64, EM_AARCH64, ...)
    linker: tuple[str, ...]
    cc: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    runner: tuple[str, ...] = ()
    assembler: tuple[str, ...] = ()
    host: str = ""  # for device targets: the target of the executable that loads the code
    source: str = ""

    @property
    def static(self) -> bool:
        return "-static" in self.linker

    def link_command(self, objs, exe: str | os.PathLike) -> list[str]:
        """The linker's argument list for `objs` (one path or several, in order)."""
        objs = [objs] if isinstance(objs, (str, os.PathLike)) else list(objs)
        out: list[str] = []
        for a in self.linker:
            if a == "{objs}":
                out.extend(os.fspath(o) for o in objs)
            else:
                out.append(os.fspath(exe) if a == "{exe}" else a)
        return out

    def run_command(self, exe: str | os.PathLike, *args: str) -> list[str]:
        return [*self.runner, os.fspath(exe), *args]


_REQUIRED = ("name", "triple", "cpu", "features", "machine", "linker", "cc")


def targets_dir() -> Path:
    return Path(os.environ.get("ALPHAC_TARGETS", TARGETS_DIR))


def target_names() -> tuple[str, ...]:
    """Every target described in the targets directory, sorted."""
    return tuple(sorted(p.stem for p in targets_dir().glob("*.toml")))


def parse_target(text: str, source: str = "<string>") -> Target:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TargetError("bad-target-file", f"{source}: {exc}") from None
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise TargetError("bad-target-file", f"{source}: missing {', '.join(missing)}")
    for key in ("linker", "runner", "assembler", "cc", "cflags"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise TargetError("bad-target-file", f"{source}: {key} must be a list of strings")
    for key in ("name", "triple", "cpu", "features", "machine", "host"):
        if not isinstance(data.get(key, ""), str):
            raise TargetError("bad-target-file", f"{source}: {key} must be a string")
    return Target(
        name=data["name"], triple=data["triple"], cpu=data["cpu"], features=data["features"],
        machine=data["machine"], linker=tuple(data["linker"]), cc=tuple(data["cc"]),
        cflags=tuple(data.get("cflags", [])), runner=tuple(data.get("runner", [])),
        assembler=tuple(data.get("assembler", [])), host=data.get("host", ""), source=source)


@functools.lru_cache(maxsize=None)
def _load(directory: str, name: str) -> Target:
    path = Path(directory) / f"{name}.toml"
    known = target_names()
    if name not in known:
        raise TargetError("unknown-target", hinted(f"unknown target {name!r}; known: "
                                                   f"{', '.join(known)}", name, known))
    target = parse_target(path.read_text(encoding="utf-8"), str(path))
    if target.name != name:
        raise TargetError("bad-target-file", f"{path}: name {target.name!r} differs from the file name")
    return target


def load_target(name: str) -> Target:
    """The target described by NAME.toml in the targets directory; `unknown-target` lists
    the known ones."""
    return _load(str(targets_dir()), name)

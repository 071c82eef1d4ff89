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
class CpuLevel:
    """A CPU level above a target's baseline that its kernels may be built for: the LLVM
    cpu and features, and the features of the target's `cpu_checks` an executable built
    for it requires. A `host` level is this machine's CPU (alphac.targets.levels)."""

    name: str
    cpu: str = ""
    features: str = ""
    requires: tuple[str, ...] = ()
    host: bool = False


@dataclass(frozen=True)
class Target:
    """One compilation target. `linker` and `assembler` are argument lists whose `{objs}`
    (every object, in order, then `libs`), `{exe}`, `{ptx}`, `{cubin}` items are substituted;
    `cc` is the C compiler of the role runtime and `cflags` what the target adds to the
    runtime's own flags; `libs` the static libraries linked after the objects (OpenSSL's
    libcrypto: the runtime's MACs and hashes); `runner` prefixes the executable when it is
    started (empty: run natively)."""

    name: str
    triple: str
    cpu: str
    features: str
    machine: str  # the ELF e_machine name pyelftools reports (EM_X86_64, EM_AARCH64, ...)
    linker: tuple[str, ...]
    cc: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    libs: tuple[str, ...] = ()
    runner: tuple[str, ...] = ()
    assembler: tuple[str, ...] = ()
    host: str = ""  # for device targets: the target of the executable that loads the code
    source: str = ""
    # (the C compiler's __builtin_cpu_supports name, LLVM's name) of every feature an
    # executable can test at startup, in the order of the image's `cpu_required` bits
    cpu_checks: tuple[tuple[str, str], ...] = ()
    levels: tuple[CpuLevel, ...] = ()  # the levels above the baseline
    level: str = "baseline"  # the level this value's cpu and features are
    requires: tuple[str, ...] = ()  # the cpu_checks the level needs

    @property
    def static(self) -> bool:
        return "-static" in self.linker

    def check_libraries(self) -> None:
        """TargetError `library-missing` for the first of `libs` that is not installed."""
        for lib in self.libs:
            if not os.path.isfile(lib):
                raise TargetError("library-missing", f"{lib}: not found (needed to link for {self.name})")

    def link_command(self, objs, exe: str | os.PathLike) -> list[str]:
        """The linker's argument list for `objs` (one path or several, in order)."""
        objs = [objs] if isinstance(objs, (str, os.PathLike)) else list(objs)
        out: list[str] = []
        for a in self.linker:
            if a == "{objs}":
                out.extend(os.fspath(o) for o in objs)
                out.extend(self.libs)
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
    for key in ("linker", "runner", "assembler", "cc", "cflags", "libs"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise TargetError("bad-target-file", f"{source}: {key} must be a list of strings")
    for key in ("name", "triple", "cpu", "features", "machine", "host"):
        if not isinstance(data.get(key, ""), str):
            raise TargetError("bad-target-file", f"{source}: {key} must be a string")
    checks = data.get("cpu_checks", {})
    if not isinstance(checks, dict) or not all(isinstance(v, str) for v in checks.values()) \
            or len(checks) > 64:  # the image's cpu_required is one 64-bit word
        raise TargetError("bad-target-file", f"{source}: cpu_checks must map at most 64 names to "
                          "LLVM feature names")
    return Target(
        name=data["name"], triple=data["triple"], cpu=data["cpu"], features=data["features"],
        machine=data["machine"], linker=tuple(data["linker"]), cc=tuple(data["cc"]),
        cflags=tuple(data.get("cflags", [])), libs=tuple(data.get("libs", [])), runner=tuple(data.get("runner", [])),
        assembler=tuple(data.get("assembler", [])), host=data.get("host", ""), source=source,
        cpu_checks=tuple(checks.items()), levels=_levels(data.get("levels", {}), checks, source))


def _levels(table, checks: dict, source: str) -> tuple[CpuLevel, ...]:
    """The [levels.NAME] tables: `cpu` (and `features`) and `requires`, or `host = true`."""
    if not isinstance(table, dict):
        raise TargetError("bad-target-file", f"{source}: levels must be a table of tables")
    out = []
    for name, spec in table.items():
        if not isinstance(spec, dict) or name == "baseline":
            raise TargetError("bad-target-file", f"{source}: levels.{name} must be a table "
                              "(the baseline is the target's own cpu)")
        host = spec.get("host", False) is True
        requires = spec.get("requires", [])
        unknown = [f for f in requires if f not in checks] if isinstance(requires, list) else [requires]
        if unknown or host == ("cpu" in spec) or not isinstance(spec.get("cpu", ""), str):
            raise TargetError("bad-target-file", f"{source}: levels.{name} needs a cpu string "
                              f"or host = true, and requires only cpu_checks names (not {unknown})")
        out.append(CpuLevel(name, spec.get("cpu", ""), spec.get("features", ""), tuple(requires), host))
    return tuple(out)


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

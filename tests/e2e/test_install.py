"""A regular (non-editable) `pip install .` into a fresh virtual environment works from any
directory: the grammar, the std library and the target descriptions come from the installed
package, never from a source tree."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

import alphac.check

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "specs" / "demo.alpha"

# Files of the package the installed copy must hold (the compiler reads them at run time).
SHIPPED = (".py", ".lark", ".alpha", ".toml", ".c", ".h")

# Run inside the virtual environment: where the package and its data were found.
PROBE = r"""
import json, sys, sysconfig
from pathlib import Path
import alphac
from alphac.check.modules import std_root
from alphac.syntax.parse import GRAMMAR
from alphac.targets.target import target_names, targets_dir
print(json.dumps({
    "prefix": sys.prefix,
    "purelib": sysconfig.get_paths()["purelib"],
    "package": str(Path(alphac.__file__).resolve().parent),
    "grammar": str(GRAMMAR),
    "std": str(std_root()),
    "targets": str(targets_dir()),
    "target_names": list(target_names()),
}))
"""


def _clean_env() -> dict[str, str]:
    """The environment without anything that would point Python or alphac at a source tree,
    and with pip kept off every index and its configuration files."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "ALPHAC_STD", "ALPHAC_TARGETS")
           and not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def _run(argv, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, (f"{proc.args} exited {proc.returncode}\n"
                                  f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc.stdout


def _copy_tracked(dest: Path) -> list[str]:
    """The repository's tracked files (`git ls-files`), copied to `dest`; their names."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    names = [name for name in listed if name and (ROOT / name).is_file()]
    for name in names:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    return names


def _make_venv(venv: Path, env) -> Path:
    """A virtual environment that sees the packages of the interpreter running the tests:
    pip, setuptools, wheel and alphac's dependencies come from there, nothing is downloaded.
    Skipped if venv is unavailable. Its python."""
    try:
        import venv as _venv  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"python3 -m venv is unavailable: {exc}")
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                cwd=venv.parent, env=env)
    if made.returncode != 0:
        pytest.skip(f"python3 -m venv is unavailable: {made.stderr.strip()}")
    py = venv / "bin" / "python"
    if sys.prefix != sys.base_prefix:
        # The tests run in a virtual environment themselves: a new one sees only the base
        # interpreter's site packages, so name this one's too (as plain path entries, after
        # the new environment's own site-packages; their .pth files are not run).
        purelib = _ok(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           cwd=venv, env=env)).strip()
        Path(purelib, "_running_interpreter.pth").write_text(
            "".join(f"{d}\n" for d in site.getsitepackages()))
    return py


def _can_build_wheels(py: Path, env) -> None:
    """pip builds a wheel, even of a local directory, with setuptools' `bdist_wheel`: part of
    setuptools since 70.1, before that of the `wheel` package (in the test extra)."""
    probe = ("import importlib.util as u, setuptools; print(setuptools.__version__, "
             "bool(u.find_spec('setuptools.command.bdist_wheel') or u.find_spec('wheel')))")
    version, able = _ok(_run([py, "-c", probe], cwd=py.parent, env=env)).split()
    assert able == "True", (f"setuptools {version} has no bdist_wheel and the wheel package is "
                            "not installed: pip cannot build alphac offline (`make setup` "
                            "installs the test extra, which holds wheel)")


def test_pip_install_works_from_any_directory(tmp_path):
    env = _clean_env()
    src, venv, work = tmp_path / "src", tmp_path / "venv", tmp_path / "work"
    for d in (src, work):
        d.mkdir()
    tracked = _copy_tracked(src)
    py = _make_venv(venv, env)
    _ok(_run([py, "-c", "import pip"], cwd=work, env=env))
    _can_build_wheels(py, env)

    _ok(_run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "."],
             cwd=src, env=env))
    shutil.rmtree(src)  # nothing below may read the copy it was installed from

    # The installed copy is the one imported, and it holds every module and data file. (An
    # editable install of another checkout in the site packages puts its finder after the
    # path finder, so it cannot win; but it would serve a module missing from this copy.)
    where = json.loads(_ok(_run([py, "-c", PROBE], cwd=work, env=env)))
    purelib = Path(where["purelib"]).resolve()
    package = Path(where["package"]).resolve()
    assert Path(where["prefix"]).resolve() == venv.resolve()
    assert package == purelib / "alphac", where
    assert Path(where["grammar"]).resolve() == package / "syntax" / "alpha.lark"
    assert Path(where["std"]).resolve() == package / "std"
    assert Path(where["targets"]).resolve() == package / "targets"
    assert {"x86_64", "aarch64"} <= set(where["target_names"])
    expected = {name for name in tracked if name.startswith("alphac/") and name.endswith(SHIPPED)}
    installed = {str(p.relative_to(purelib)) for p in package.rglob("*") if p.is_file()}
    assert sorted(expected - installed) == []

    # The commands, from a directory that holds nothing but the spec.
    cli = venv / "bin" / "alphac"
    spec = work / "demo.alpha"
    shutil.copy2(DEMO, spec)
    out = work / "out"
    checked = _ok(_run([cli, "check", spec.name], cwd=work, env=env))
    assert checked.startswith("ok: demo.alpha"), checked

    # Which executables the build must write and how many owners the launch runs: the
    # demo's deployment, read from the source tree in this process.
    dep = alphac.check.load_deployment(str(DEMO))
    names = {f"demo-{dep.role_of(o).name}-{dep.placement[o]}" for o in range(dep.owners)}
    built = _ok(_run([cli, "build", spec.name, "--all", "-o", out.name], cwd=work, env=env))
    assert {p.name for p in out.iterdir()} == names | {f"{n}.deps" for n in names}, built
    for name in names:
        assert (out / name).read_bytes()[:4] == b"\x7fELF"

    launched = _ok(_run([cli, "launch", spec.name, "-o", out.name], cwd=work, env=env))
    rows = launched.strip().splitlines()[1:1 + dep.owners]
    assert len(rows) == dep.owners and all(row.split()[-1] == "match" for row in rows), launched
    assert sorted(p.name for p in work.iterdir()) == ["demo.alpha", "out"]

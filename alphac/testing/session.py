"""Repeated launches in one process (tests, benchmarks): each (deployment variant, role,
target) is planned and built once into a per-process build directory, then reused; and
one executable per owner, to start owners by hand."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from alphac.launch.cache import ensure_built
from alphac.launch.plan_run import PlanRun, run_plan
from alphac.launch.roles import role_table
from alphac.launch.runs import new_run_dir

_root: Path | None = None
_plans: dict[str, object] = {}
_exes: dict[str, dict] = {}
_deps: dict[str, object] = {}


def root() -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="alphac-launch-"))
        atexit.register(shutil.rmtree, _root, True)
    return _root


def deployment(spec: str):
    """The deployment of a spec file, loaded once."""
    if spec not in _deps:
        from alphac import driver

        _deps[spec] = driver.deployment(spec)
    return _deps[spec]


def plan(key: str, dep):
    """The plan of `dep`, cached under `key` (a name for the variant: spec plus changes)."""
    if key not in _plans:
        from alphac import driver

        _plans[key] = driver.plan(dep)
    return _plans[key]


def built(key: str, dep, faults: bool = False) -> dict:
    """{(role, target): executable} for `dep`, built once under root()/key; with `faults`,
    a test build's, with the runtime's fault-injection hooks (under root()/key-faults)."""
    name = f"{key}-faults" if faults else key
    if name not in _exes:
        _exes[name] = ensure_built(plan(key, dep), root() / name, faults=faults)
    return _exes[name]


def run(key: str, dep, **kw) -> PlanRun:
    """Run every owner of a cached build in a fresh run directory (see plan_run.run_plan)."""
    exes = kw.pop("exes", None) or built(key, dep)
    kw.setdefault("deadline_s", 120.0)
    kw.setdefault("root", plan(key, dep).tree.owner)
    return run_plan(dep, exes, new_run_dir(root(), key), **kw)


def owner_exes(dep, exes: Mapping[tuple[str, str], Path]) -> list[Path]:
    """One executable per owner, in owner order (the role table's exe column)."""
    return [e.exe for e in role_table(dep, exes)]

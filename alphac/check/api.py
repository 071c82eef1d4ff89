"""The checker's entry points: one root file in, a CheckedSpec (or every diagnostic) out."""

from __future__ import annotations

import sys
from dataclasses import replace

from alphac.check.lower import DEPLOYMENT, LEARNER, RESUME, Lowering
from alphac.check.modules import World
from alphac.check.shapes import LOCAL_CORRELATION, NAMED, lower_named
from alphac.check.evaluate import Evaluator
from alphac.check.values import VObj
from alphac.diagnostics import CompileError, Diagnostic, DiagnosticBag, SourceCache, Span, hinted, nearest
from alphac.ir import nodes as ir

# The syntax stage bounds tree depth (syntax/parse.py MAX_DEPTH); checking recurses a few
# frames per level, so give it room above Python's default.
_RECURSION = 20000
if sys.getrecursionlimit() < _RECURSION:
    sys.setrecursionlimit(_RECURSION)


def check_file(path: str) -> tuple[ir.CheckedSpec | None, list[Diagnostic], SourceCache]:
    """Parse, check and lower `path`: (spec or None, every diagnostic, the sources read)."""
    bag = DiagnosticBag()
    sources = SourceCache()
    world = World(bag, sources)
    root = world.load_root(path)
    if root is None:
        return None, bag.items, sources
    ev = Evaluator(world, stands_for={key: DEPLOYMENT for key in NAMED})
    ev.validate_families()
    lowering = Lowering(ev)
    learners: list[ir.Learner] = []
    deployments: list[ir.Deployment] = []
    dropped = []  # values that did not lower: some diagnostic must say why
    lowered: dict[int, int] = {}  # id of a deployment object -> its index in deployments
    refused: set[int] = set()  # deployment objects that did not lower
    resumes: list[tuple[str, VObj]] = []
    for name, decl in root.values.items():
        got = ev.value_of(root, name, decl.span)
        if got is None or not isinstance(got[0], VObj):
            continue
        obj = got[0]
        if obj.key in (LEARNER, LOCAL_CORRELATION):
            learner = lowering.any_learner(obj)
            if learner is None:
                dropped.append(name)
            elif learner not in learners:
                learners.append(learner)
        elif obj.key == RESUME:
            resumes.append((name, obj))
        elif obj.key == DEPLOYMENT or obj.key in NAMED:
            dep = (lower_named(lowering, obj, path) if obj.key in NAMED
                   else lowering.deployment(obj, path))
            if dep is None:
                dropped.append(name)
                refused.add(id(obj))
                continue
            lowered.setdefault(id(obj), len(deployments))
            deployments.append(dep)
            if not any(dep.learner is known for known in learners):
                learners.append(dep.learner)
    _attach_resumes(lowering, resumes, lowered, refused, deployments, path)
    if dropped and not bag.items:
        raise AssertionError(f"{', '.join(dropped)} did not lower, yet no diagnostic says why")
    if bag.items:
        return None, bag.items, sources
    spec = ir.CheckedSpec(path, root.name, tuple(sorted(
        f"{m.name}.{f}" for m in world.modules.values() for f in m.families)),
        tuple(learners), tuple(deployments))
    return spec, [], sources


def _attach_resumes(lowering: Lowering, resumes, lowered: dict[int, int], refused: set[int],
                    deployments: list[ir.Deployment], path: str) -> None:
    """Set each resume declaration's Resume on the deployment it names: one per deployment,
    and only on a deployment value of this file."""
    first: dict[int, tuple[str, Span]] = {}
    for name, obj in resumes:
        got = lowering.resume(obj, path)
        if got is None:
            continue
        target, resume = got
        if id(target) in refused:
            continue  # the deployment's own diagnostics say why
        if id(target) not in lowered:
            what = f"deployment {target.name}" if target.name else "a deployment"
            lowering.bag.error("resume-foreign-deployment", f"resume {name} names {what}, which "
                               f"is not a deployment value of {path}", obj.span,
                               ["a resume declaration names a deployment declared in the same file"])
            continue
        index = lowered[id(target)]
        dep = deployments[index]
        if index in first:
            other, span = first[index]
            lowering.bag.error("resume-duplicate", f"resume {name} and resume {other} both name "
                               f"deployment {dep.name}", obj.span,
                               [f"resume {other} is at {span}",
                                "a deployment resumes from one checkpoint"])
            continue
        first[index] = (name, obj.span)
        deployments[index] = replace(dep, resume=resume)


def module_files(path: str) -> list[str]:
    """The files a check of `path` reads: the file and every module it imports (the
    prelude and std modules included), found as the checker finds them, parsed only."""
    world = World(DiagnosticBag(), SourceCache())
    world.load_root(path)
    return sorted(world.by_file)


def load_spec(path: str) -> ir.CheckedSpec:
    """The checked spec of `path`; raises CompileError holding every diagnostic."""
    spec, diagnostics, _ = check_file(path)
    if spec is None:
        raise CompileError(diagnostics)
    return spec


def load_deployment(path: str, name: str | None = None) -> ir.Deployment:
    """The file's deployment named `name`, or its single one; CompileError(no-deployment) if
    it has none, several and none is named, or none of that name."""
    return select_deployment(load_spec(path), path, name)


def select_deployment(spec: ir.CheckedSpec, path: str, name: str | None = None) -> ir.Deployment:
    """The checked spec's deployment named `name`, or its single one; CompileError
    (no-deployment) if it has none, several and none is named, or none of that name: then
    located at the deployment it most likely means (the nearest name's declaration, else
    the first deployment's), with every name in a note."""
    deps = spec.deployments
    names = [d.name for d in deps]
    if name is not None:
        if name in names:
            return deps[names.index(name)]
        close = nearest(name, names)
        meant = deps[names.index(close[0])] if close else (deps[0] if deps else None)
        span = meant.span if meant is not None and meant.span.line > 0 else Span(path, 1, 1)
        raise CompileError(Diagnostic("no-deployment", hinted(
            f"{path} defines no deployment named {name}", name, names), span,
            (f"its deployments: {', '.join(names) or 'none'}",)))
    if len(deps) == 1:
        return deps[0]
    if not deps:
        raise CompileError(Diagnostic("no-deployment", f"{path} defines 0 deployments; exactly "
                                      "one is needed here", Span(path, 1, 1)))
    raise CompileError(Diagnostic(
        "no-deployment", f"{path} defines {len(deps)} deployments; name one with --deployment NAME",
        deps[1].span, (f"its deployments: {', '.join(names)}",)))

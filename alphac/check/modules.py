"""Module loading and name resolution: files, imports, the Std.Core prelude, family schemas.

Imports resolve in the std library (`alphac/std/`, shipped in the package, or `$ALPHAC_STD`)
first, then beside the importing file; `A.B` is the file `A/B.alpha`. A module sees its own
names, the names of every module it imports (transitively) and the prelude, unqualified or
qualified.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from alphac.diagnostics import CompileError, DiagnosticBag, SourceCache, Span, did_you_mean
from alphac.resources import data_path
from alphac.syntax import ast
from alphac.syntax.parse import parse_text, read_source

PRELUDE = "Std.Core"
DEFAULT_STD = data_path("alphac", "std")


def std_root() -> Path:
    return Path(os.environ.get("ALPHAC_STD") or DEFAULT_STD)


SUGGEST_DEPTH = 3  # how deep "did you mean" looks for modules (A.B.C is A/B/C.alpha)


def known_modules(beside: str) -> list[str]:
    """The modules an import could name, for "did you mean": the std library's and those
    beside `beside`, at most SUGGEST_DEPTH directories down."""
    found = []
    for base in (std_root(), Path(beside).parent):
        for depth in range(1, SUGGEST_DEPTH + 1):
            found += [".".join(p.relative_to(base).with_suffix("").parts)
                      for p in base.glob("/".join(["*"] * depth) + ".alpha")]
    return found


@dataclass(frozen=True)
class FieldSchema:
    name: str
    type: ast.TypeExpr
    span: Span
    default: ast.Expr | None = None  # checked where the family is declared (evaluate.py)


@dataclass(frozen=True)
class CtorSchema:
    name: str
    family: str  # the family's key
    fields: tuple[FieldSchema, ...]
    span: Span

    def field(self, name: str) -> FieldSchema | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True)
class FamilySchema:
    """A family read from its declaration: erased parameters and constructors with fields."""

    key: str  # "Module.Name"
    name: str
    module: str
    params: tuple[tuple[str, ast.TypeExpr], ...]
    ctors: tuple[CtorSchema, ...]
    span: Span


@dataclass
class ModuleInfo:
    name: str
    file: str
    tree: ast.Module
    imports: list[str] = field(default_factory=list)
    families: dict[str, FamilySchema] = field(default_factory=dict)
    ctors: dict[str, CtorSchema] = field(default_factory=dict)
    values: dict[str, ast.ValueDecl] = field(default_factory=dict)
    visible: list[str] = field(default_factory=list)  # modules whose names this one sees


class World:
    """Every module loaded for one root file, with its diagnostics and sources."""

    def __init__(self, bag: DiagnosticBag, sources: SourceCache):
        self.bag = bag
        self.sources = sources
        self.modules: dict[str, ModuleInfo] = {}
        self.by_file: dict[str, ModuleInfo] = {}
        # modules with an import that failed: their unknown names are that error's follow-ons
        self.broken: set[str] = set()

    # ------------------------------------------------------------------ loading
    def _parse(self, path: str) -> ast.Module | None:
        try:
            text = read_source(path)
            self.sources.add(path, text)
            return parse_text(path, text)
        except CompileError as exc:
            self.bag.extend(exc.diagnostics)
            return None

    def load_root(self, path: str) -> ModuleInfo | None:
        tree = self._parse(path)
        if tree is None:
            return None
        declared = [i for i in tree.items if isinstance(i, ast.ModuleDecl)]
        name = declared[0].name if declared else Path(path).stem
        info = self._register(name, path, tree)
        self._load_imports(info)
        return info

    def _register(self, name: str, path: str, tree: ast.Module) -> ModuleInfo:
        info = ModuleInfo(name, path, tree)
        if name in self.modules and self.modules[name].file != path:
            self.bag.error("duplicate-definition",
                           f"module {name} is defined twice (also in {self.modules[name].file})",
                           tree.span)
        self.modules.setdefault(name, info)
        self.by_file[path] = info
        self._collect(info)
        return info

    def _find(self, name: str, beside: str, importer: str = "") -> str | None:
        rel = Path(*name.split(".")).with_suffix(".alpha")
        bases = [std_root(), Path(beside).parent]
        # A module A.B.C in DIR/A/B/C.alpha also finds its siblings from DIR.
        parts = importer.split(".") if importer else []
        stem = Path(beside).with_suffix("")
        if len(parts) > 1 and stem.parts[-len(parts):] == tuple(parts):
            bases.append(Path(*stem.parts[:-len(parts)]) if len(stem.parts) > len(parts) else Path("."))
        for base in bases:
            candidate = base / rel
            if candidate.is_file():
                return str(candidate)
        return None

    def _load_imports(self, root: ModuleInfo) -> None:
        pending = [root]
        prelude_needed = True
        while pending or prelude_needed:
            if not pending:
                prelude_needed = False
                if PRELUDE in self.modules:
                    break
                path = self._find(PRELUDE, root.file)
                if path is None:
                    self.bag.error("unknown-module", f"the prelude {PRELUDE} is not in the std library ({std_root()})",
                                   Span(root.file, 1, 1))
                    break
                prelude = self._load_module(PRELUDE, path, Span(root.file, 1, 1))
                if prelude is not None:
                    pending.append(prelude)
                continue
            info = pending.pop()
            for item in info.tree.items:
                if not isinstance(item, ast.Import):
                    continue
                info.imports.append(item.name)
                if item.name in self.modules:
                    continue
                path = self._find(item.name, info.file, info.name)
                if path is None:
                    self._unknown_module(info, item)
                    continue
                loaded = self._load_module(item.name, path, item.span)
                if loaded is not None:
                    pending.append(loaded)
        for info in self.modules.values():
            info.visible = self._closure(info)

    def _unknown_module(self, info: ModuleInfo, item: ast.Import) -> None:
        hint = did_you_mean(item.name, known_modules(info.file))
        self.bag.error("unknown-module",
                       f"no module {item.name} in the std library or beside {info.file}", item.span,
                       [f"looked for {Path(*item.name.split('.')).with_suffix('.alpha')}"]
                       + ([hint] if hint else [])
                       + ["names it would define are not reported as unknown"])
        self.broken.add(info.name)

    def _load_module(self, name: str, path: str, where: Span) -> ModuleInfo | None:
        if path in self.by_file:
            return None
        tree = self._parse(path)
        if tree is None:
            return None
        declared = [i for i in tree.items if isinstance(i, ast.ModuleDecl)]
        if declared and declared[0].name != name:
            self.bag.error("module-name-mismatch",
                           f"{path} declares module {declared[0].name}, imported as {name}",
                           declared[0].span)
        return self._register(name, path, tree)

    def _closure(self, info: ModuleInfo) -> list[str]:
        seen = [info.name]
        stack = list(reversed(info.imports))
        while stack:
            name = stack.pop()
            if name in seen or name not in self.modules:
                continue
            seen.append(name)
            stack.extend(reversed(self.modules[name].imports))
        if PRELUDE not in seen and PRELUDE in self.modules:
            seen.append(PRELUDE)
        return seen

    # ------------------------------------------------------------------ declarations
    def _collect(self, info: ModuleInfo) -> None:
        names: dict[str, Span] = {}
        modules = [i for i in info.tree.items if isinstance(i, ast.ModuleDecl)]
        for extra in modules[1:]:
            self.bag.error("duplicate-definition", "a file declares its module once", extra.span)

        def define(name: str, span: Span) -> bool:
            if name in names:
                self.bag.error("duplicate-definition",
                               f"{name} is already defined in this module (at {names[name]})", span)
                return False
            names[name] = span
            return True

        for item in info.tree.items:
            if isinstance(item, ast.FamilyDecl):
                if not define(item.name, item.span):
                    continue
                schema = self._family(info, item, define)
                info.families[item.name] = schema
                for ctor in schema.ctors:
                    info.ctors[ctor.name] = ctor
            elif isinstance(item, ast.ValueDecl):
                if define(item.name, item.span):
                    info.values[item.name] = item

    def _family(self, info: ModuleInfo, decl: ast.FamilyDecl, define) -> FamilySchema:
        key = f"{info.name}.{decl.name}"
        params: list[tuple[str, ast.TypeExpr]] = []
        ctors: list[CtorSchema] = []
        current: tuple[ast.ConstructorDecl, list[FieldSchema]] | None = None
        for member in decl.members:
            if isinstance(member, ast.ParameterDecl):
                if current is not None:
                    self.bag.error("misplaced-member",
                                   f"parameter {member.name} must come before the constructors",
                                   member.span)
                if any(p == member.name for p, _ in params):
                    self.bag.error("duplicate-definition",
                                   f"parameter {member.name} is declared twice", member.span)
                    continue
                params.append((member.name, member.type))
            elif isinstance(member, ast.ConstructorDecl):
                if current is not None:
                    ctors.append(CtorSchema(current[0].name, key, tuple(current[1]), current[0].span))
                define(member.name, member.span)
                current = (member, [])
            else:
                if current is None:
                    self.bag.error("misplaced-member",
                                   f"field {member.name} belongs to no constructor; "
                                   "declare a constructor before its fields", member.span)
                    continue
                if any(f.name == member.name for f in current[1]):
                    self.bag.error("duplicate-definition",
                                   f"field {member.name} is declared twice in {current[0].name}",
                                   member.span)
                    continue
                current[1].append(FieldSchema(member.name, member.type, member.span, member.default))
        if current is not None:
            ctors.append(CtorSchema(current[0].name, key, tuple(current[1]), current[0].span))
        return FamilySchema(key, decl.name, info.name, tuple(params), tuple(ctors), decl.span)

    # ------------------------------------------------------------------ lookup
    def lookup(self, info: ModuleInfo, name: str, kind: str, span: Span, report: bool = True):
        """Resolve `name` seen from `info` among `kind` ("families", "ctors" or "values"):
        (module, object) or None, reporting unknown-name/unknown-type/ambiguous-name."""
        if "." in name:
            module, _, simple = name.rpartition(".")
            target = self.modules.get(module)
            if target is not None and target.name in info.visible:
                found = getattr(target, kind).get(simple)
                if found is not None:
                    return target, found
        else:
            own = getattr(info, kind).get(name)
            if own is not None:
                return info, own
            hits = [(self.modules[m], getattr(self.modules[m], kind)[name])
                    for m in info.visible[1:] if name in getattr(self.modules[m], kind)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                if report:
                    where = ", ".join(m.name for m, _ in hits)
                    self.bag.error("ambiguous-name", f"{name} is defined in {where}", span,
                                   ["qualify it with its module name"])
                return None
        if report and not self.unknown_is_follow_on(info):
            code = "unknown-type" if kind == "families" else "unknown-name"
            what = {"families": "family", "ctors": "constructor", "values": "value"}[kind]
            self.bag.error(code, f"no {what} named {name} is in scope", span,
                           self.suggestions(info, name, (kind,)))
        return None

    def family_schema(self, key: str) -> FamilySchema | None:
        """The family of a type key `Module.Name`, or None (not a family)."""
        module, _, name = key.rpartition(".")
        home = self.modules.get(module)
        return home.families.get(name) if home is not None else None

    def unknown_is_follow_on(self, info: ModuleInfo) -> bool:
        """Whether an unknown name in `info` may be what a failed import would define."""
        return any(m in self.broken for m in info.visible or [info.name])

    def in_scope(self, info: ModuleInfo, kinds) -> set[str]:
        """Every name of the given kinds `info` sees unqualified."""
        names: set[str] = set()
        for m in info.visible or [info.name]:
            for kind in kinds:
                names |= set(getattr(self.modules[m], kind))
        return names

    def suggestions(self, info: ModuleInfo, name: str, kinds) -> list[str]:
        """The "did you mean" note for a name not in scope, or none."""
        hint = did_you_mean(name.rpartition(".")[2], self.in_scope(info, kinds))
        return [hint] if hint else []

    def ambiguous(self, info: ModuleInfo, name: str) -> bool:
        """Whether `name` is a value or constructor of several modules `info` imports."""
        if "." in name or name in info.values or name in info.ctors:
            return False
        return any(sum(name in getattr(self.modules[m], kind) for m in info.visible[1:]) > 1
                   for kind in ("values", "ctors"))

    def family_count(self) -> int:
        return sum(len(m.families) for m in self.modules.values())

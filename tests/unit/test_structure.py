"""The stages import only downwards: every import of `alphac.X...` in every module under
alphac/ (at the top or inside a function) names a stage no later than the importer's, the
oracle reads nothing of the planner, targets nothing of codegen, nothing of the product reads
the test scaffolding (alphac.testing), and the stages' import graph has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "alphac"

# Lowest first: a stage may import itself and the stages before it. `resources` finds the
# package's data files; `runtime` holds the runtime's C sources (package data); `testing`,
# last, is what tests and benchmarks drive the product with: it may import every stage, and
# nothing of the product imports it.
ORDER = ["codes", "wire", "resources", "diagnostics", "explain", "ir", "checkpoint", "syntax", "check", "plan", "oracle", "image",
         "codegen", "runtime", "targets", "executables", "driver", "launch", "qualify", "commands", "demo", "__main__", "testing"]
RANK = {stage: i for i, stage in enumerate(ORDER)}
ROOT = "alphac"  # the package itself (its version): below every stage, imports nothing

# Pairs the order would allow that must stay apart: the oracle is a model of the declared
# order independent of the planner, so that the two can be compared; targets compile and
# link the modules they are handed and read executables back, whoever generated them.
APART = {("oracle", "plan"), ("targets", "codegen")}

# Imports against the order or APART that are still in the tree while they are being taken
# out; each applies only to the importing modules named. (None at present.)
KNOWN: dict[tuple[str, str], tuple[str, ...]] = {}

# What a command may import: the driver, diagnostics, the plan's renderers, the one
# word <-> float conversion (to show words), launch (which runs the owners and itself builds
# through the driver) and qualify (which launches).
COMMAND_IMPORTS = ("alphac", "alphac.commands", "alphac.driver", "alphac.diagnostics",
                   "alphac.plan.render", "alphac.ir.words", "alphac.launch", "alphac.qualify")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str:
    """`alphac.plan.tree` -> plan, `alphac.driver` -> driver, `alphac` -> the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def is_submodule(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name).is_dir()


def imports_of(path: Path) -> list[tuple[str, int]]:
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    return imports_in(path.read_text(encoding="utf-8"), package, str(path))


def imports_in(text: str, package: str, filename: str = "<text>") -> list[tuple[str, int]]:
    """Every `alphac...` module a module of `package` imports, with its line, at the top or
    in a function: `from alphac import x` names alphac.x when x is a module or package,
    else alphac."""
    tree = ast.parse(text, filename=filename)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "alphac"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "alphac":
                continue
            if target == "alphac":
                found += [(f"alphac.{a.name}" if is_submodule(a.name) else "alphac", node.lineno)
                          for a in node.names]
            else:
                found.append((target, node.lineno))
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def edges() -> list[tuple[str, str, str, str]]:
    """(importer stage, imported stage, importer module, where) for every cross-stage import."""
    out = []
    for path in modules():
        importer = module_name(path)
        for target, line in imports_of(path):
            a, b = stage_of(importer), stage_of(target)
            if a != b:
                out.append((a, b, importer, f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"))
    return out


def test_every_module_belongs_to_a_stage():
    stray = [str(p.relative_to(PACKAGE.parent)) for p in modules()
             if stage_of(module_name(p)) not in RANK and module_name(p) != ROOT]
    assert not stray, f"not in the stage order of tests/unit/test_structure.py: {stray}"


def test_the_package_itself_imports_nothing_of_alphac():
    assert imports_of(PACKAGE / "__init__.py") == []


def allowed(a: str, b: str, importer: str) -> bool:
    if b in (a, ROOT):
        return True
    if a in RANK and b in RANK and RANK[b] < RANK[a] and (a, b) not in APART:
        return True
    return any(importer == m or importer.startswith(m + ".") for m in KNOWN.get((a, b), ()))


def test_no_stage_imports_a_later_one():
    bad = [f"{where} ({a} -> {b})" for a, b, importer, where in edges()
           if not allowed(a, b, importer)]
    assert not bad, "imports against the stage order:\n" + "\n".join(bad)


def test_the_stages_import_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in edges():
        graph.setdefault(a, set()).add(b)
    path: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            pytest.fail("a cycle between stages: " + " -> ".join(cycle))


def test_nothing_of_the_product_imports_the_test_scaffolding():
    """Tests, benchmarks and scripts import alphac.testing; no module of the product does."""
    bad = [where for a, b, _, where in edges() if b == "testing" and a != "testing"]
    assert not bad, "the product imports alphac.testing:\n" + "\n".join(bad)


def test_commands_reach_the_stages_through_the_driver():
    bad = []
    for path in sorted((PACKAGE / "commands").rglob("*.py")):
        for target, line in imports_of(path):
            if not any(target == m or target.startswith(m + ".") for m in COMMAND_IMPORTS):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_imports_inside_functions_and_relative_ones_count():
    text = ("import json\n"
            "from . import tree\n"
            "def f():\n"
            "    from alphac import driver, __version__\n"
            "    import alphac.launch.cache\n"
            "    from ..codegen.build import build_executable\n")
    found = [t for t, _ in imports_in(text, "alphac.plan")]
    assert found == ["alphac.plan", "alphac.driver", "alphac", "alphac.launch.cache",
                     "alphac.codegen.build"]
    assert [allowed("plan", stage_of(t), "alphac.plan.x") for t in found] == [
        True, False, True, False, False]
    assert not allowed("oracle", "plan", "alphac.oracle.vector")

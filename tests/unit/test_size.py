"""scripts/size.py: a file over the limit, a concern over its ceiling, and a ceiling left
above what it guards fail the check; the checkout itself passes it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "size.py"


def _size():
    spec = importlib.util.spec_from_file_location("size_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(tmp_path: Path, files: dict[str, int]) -> Path:
    for name, n in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n" * n)
    return tmp_path


def test_the_checkout_is_within_its_ceilings():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_new_file_over_the_limit_fails(tmp_path, monkeypatch, capsys):
    size = _size()
    monkeypatch.setattr(size, "CEILINGS", {})
    monkeypatch.setattr(size, "FILE_CEILINGS", {})
    root = _tree(tmp_path, {"alphac/runtime/a.c": 500, "alphac/codegen/b.py": 10})
    assert size.main(["size", str(root)]) == 0
    (root / "alphac/plan").mkdir()
    (root / "alphac/plan/big.py").write_text("x = 1\n" * 501)
    assert size.main(["size", str(root)]) == 1
    assert "alphac/plan/big.py: 501 lines, above its ceiling of 500" in capsys.readouterr().err


def test_a_ceiling_may_only_come_down(tmp_path, monkeypatch, capsys):
    size = _size()
    monkeypatch.setattr(size, "BUDGETS", {"C runtime": ("alphac/runtime", 100)})
    monkeypatch.setattr(size, "CEILINGS", {"C runtime": 120})
    monkeypatch.setattr(size, "FILE_CEILINGS", {})
    root = _tree(tmp_path, {"alphac/runtime/a.c": 120})
    assert size.main(["size", str(root)]) == 0
    (root / "alphac/runtime/b.c").write_text("x\n")  # above the ceiling
    assert size.main(["size", str(root)]) == 1
    assert "C runtime: 121 lines, above its ceiling of 120" in capsys.readouterr().err
    (root / "alphac/runtime/b.c").unlink()
    (root / "alphac/runtime/a.c").write_text("x\n" * 110)  # lines taken out: lower the ceiling
    assert size.main(["size", str(root)]) == 1
    assert "lower its ceiling (120) to 110" in capsys.readouterr().err

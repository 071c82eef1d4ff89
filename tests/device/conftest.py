"""Fixtures of the SM86 tests: the stand-in driver, built once per session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import build_stub  # noqa: E402


@pytest.fixture(scope="session")
def stub_dir(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("cc is not installed")
    d = tmp_path_factory.mktemp("stub")
    build_stub(d)
    return d

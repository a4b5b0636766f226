"""The layering rules of docs/ARCHITECTURE.md, enforced with import-linter contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold() -> None:
    beside_python = Path(sys.executable).with_name("lint-imports")
    lint_imports = str(beside_python) if beside_python.exists() else shutil.which("lint-imports")
    if lint_imports is None:
        pytest.skip("lint-imports is not installed (it comes with the test extra)")
    result = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout

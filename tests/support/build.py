"""What setup.py compiles with mypyc (its COMPILED list, read without running setup.py)."""

from __future__ import annotations

import ast
from pathlib import Path

SETUP = Path(__file__).resolve().parents[2] / "setup.py"


def compiled_modules() -> list[str]:
    """The dotted names of the modules the compiled build (the image's) has as extensions."""
    for node in ast.parse(SETUP.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILED":
            files = ast.literal_eval(node.value)
            return [f.removesuffix(".py").replace("/", ".") for f in files]
    raise AssertionError("setup.py has no COMPILED list")

"""`pip install .` is enough to run every command: product code imports only the standard
library, its own packages and what `pyproject.toml` declares in `dependencies` — never a test
tool (`kubernetes`, `kubernetes_asyncio`, `playwright`, `pytest`, … of the `test` extra), and no
package it only gets because a dependency happens to need it today.

Every import in the product packages is read (imports inside functions too, which run later:
a command that works in the dev venv would otherwise fail in a user's).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PRODUCT = PYPROJECT["tool"]["importlinter"]["root_packages"]


def _dist(requirement: str) -> str:
    """`Jinja2>=3.1` → `jinja2` (PEP 503 normalized)."""
    name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports() -> dict[str, set[str]]:
    """Top-level module imported → the files importing it (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def test_product_code_imports_only_declared_runtime_dependencies() -> None:
    declared = {_dist(r) for r in PYPROJECT["project"]["dependencies"]}
    # The embedded cluster (and the build-time schema derivation) may use the `local` extra:
    # `trainops up` says how to install it when it is missing (trainops/commands/local.py).
    local = {_dist(r) for r in PYPROJECT["project"]["optional-dependencies"]["local"]}
    test_only = {_dist(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    providers = metadata.packages_distributions()
    problems = []
    for module, files in sorted(_imports().items()):
        if module in PRODUCT or module in sys.stdlib_module_names or module == "__future__":
            continue
        dists = {_dist(d) for d in providers.get(module, [])}
        where = ", ".join(sorted(files)[:3]) + (" …" if len(files) > 3 else "")
        if dists & local and all(
            f.startswith("localcluster/") or f == "policies/schemas/derive.py" for f in files
        ):
            continue
        if dists & test_only and not dists & declared:
            problems.append(f"{module} (test-only: {sorted(dists)}) imported by {where}")
        elif not dists & declared:
            problems.append(f"{module} ({sorted(dists) or 'not installed'}) imported by {where}")
    assert not problems, "undeclared runtime imports:\n" + "\n".join(problems)


def test_the_scan_sees_imports_inside_functions() -> None:
    # repo_proxy imports kube inside a function (lazily): seen all the same.
    imports = _imports()
    assert "trainops/commands/repo_proxy.py" in imports["kube"]
    assert "aiohttp" in imports and "yaml" in imports

"""The repository's YAML manifests, parsed once per test run.

The CRD manifests are ~350 KB each: PyYAML's pure-Python loader takes seconds per load on a
busy 2-core machine, so tests share one parse (with the C loader when PyYAML has it).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

__all__ = ["REPO", "crd_files", "documents"]

REPO = Path(__file__).resolve().parents[2]
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _documents(path: Path, mtime_ns: int) -> tuple[Any, ...]:
    return tuple(d for d in yaml.load_all(path.read_text(), Loader=_LOADER) if d)


def documents(path: Path) -> list[Any]:
    """The non-empty YAML documents of `path` (copies: callers may change them)."""
    path = Path(path).resolve()
    return copy.deepcopy(list(_documents(path, path.stat().st_mtime_ns)))


def crd_files() -> list[Path]:
    """The CRD manifests shipped in deploy/crds (not the kustomization beside them)."""
    return [
        p
        for p in sorted((REPO / "deploy" / "crds").glob("*.yaml"))
        if any(d.get("kind") == "CustomResourceDefinition" for d in _documents_of(p))
    ]


def _documents_of(path: Path) -> tuple[Any, ...]:
    path = path.resolve()
    return _documents(path, path.stat().st_mtime_ns)

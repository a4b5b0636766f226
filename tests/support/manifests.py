"""The repository's YAML manifests, parsed once per test run.

The CRD manifests are ~350 KB each: PyYAML's pure-Python loader takes seconds per load on a
busy 2-core machine, so tests share one parse (with the C loader when PyYAML has it).
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["REPO", "container_arg", "crd_files", "documents"]

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


def container_arg(arg: str, container: dict[str, Any], pod_namespace: str) -> str:
    """Kubernetes' `$(VAR)` expansion of a container's argument, from its `env` values and
    the downward API's `metadata.namespace` (what deploy/'s Deployments use)."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = pod_namespace
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)

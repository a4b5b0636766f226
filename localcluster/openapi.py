"""OpenAPI documents for kubectl (stub: filled in by apifidelity)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localcluster.types import ResourceInfo

__all__ = ["openapi_v2", "openapi_v3_document", "openapi_v3_index"]


def openapi_v3_index(resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """`GET /openapi/v3`: one entry per served group-version."""
    paths: dict[str, Any] = {}
    for gv in sorted({r.group_version for r in resources}):
        key = f"api/{gv}" if "/" not in gv else f"apis/{gv}"
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash=0"}
    return {"paths": paths}


def openapi_v3_document(
    group_version: str, resources: Sequence[ResourceInfo]
) -> dict[str, Any] | None:
    """`GET /openapi/v3/api/v1` or `/openapi/v3/apis/<g>/<v>`; None when not served (404)."""
    if not any(r.group_version == group_version for r in resources):
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": {},
        "components": {"schemas": {}},
    }


def openapi_v2(resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """`GET /openapi/v2` as JSON."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": {},
        "definitions": {},
    }

"""Server-side printing: meta.k8s.io/v1 Table answers for `kubectl get` (stub)."""

from __future__ import annotations

from typing import Any

from localcluster.types import ResourceInfo

__all__ = ["to_table"]


def to_table(
    info: ResourceInfo,
    objects: list[dict[str, Any]],
    *,
    include_object: str = "Metadata",
    list_meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Render objects as a Table with a NAME column."""
    rows = []
    for obj in objects:
        md = obj.get("metadata", {})
        row: dict[str, Any] = {"cells": [md.get("name", "")]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object == "Metadata":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": md,
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta or {}),
        "columnDefinitions": [
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name",
                "priority": 0,
            }
        ],
        "rows": rows,
    }

"""Server-side printing: `meta.k8s.io/v1` Table answers for `kubectl get`.

kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever columns the
server returns; it only hides columns with `priority > 0` unless `-o wide`. So the look of
`kubectl get` is decided here. Built-in kinds get the columns of the real API server's printers
(the cells are rendered server-side, e.g. `AGE` as `5m2s`); custom resources get `NAME` followed
by the CRD's `additionalPrinterColumns` (or `AGE` when none are declared), with cells typed as
the real server types them (a `date` column shows the age, `5d`);
any other kind (and CRDs themselves) gets `NAME` and `CREATED AT` (a timestamp, as on a real
cluster).

Everything here is pure: `now` is a parameter (defaulting to the clock only at the edge).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from localcluster.api.types import PrinterColumn, ResourceInfo
from localcluster.http.cells import human_duration, parse_time
from localcluster.http.printers import (
    BUILTIN_PRINTERS,
    CREATED_AT_PRINTER,
    NAME_COLUMN,
    Column,
    RowFn,
)
from localcluster.http.printers_policy import POLICY_PRINTERS
from localcluster.schema.jsonpath import jsonpath_values

__all__ = [
    "human_duration",
    "row_renderer",
    "table_head",
    "to_table",
]

Obj = dict[str, Any]

_NAME_DOC = "Name must be unique within a namespace."


def to_table(
    info: ResourceInfo,
    objects: list[Obj],
    *,
    include_object: str = "Metadata",
    list_meta: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A Table of `objects` (one row each). `include_object` is the request's
    `includeObject` (`None`, `Metadata` → PartialObjectMetadata, `Object`)."""
    cells_of = row_renderer(info, now)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells_of(obj)}
        embedded = _embedded(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    return {**table_head(info, list_meta), "rows": rows}


def table_head(info: ResourceInfo, list_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Table without its rows (kind, apiVersion, metadata, columnDefinitions): large lists
    are encoded row by row around it, reusing each object's cached JSON."""
    columns, _ = _printer(info)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta or {}),
        "columnDefinitions": [
            {
                "name": name,
                "type": typ,
                "format": fmt,
                "description": _NAME_DOC if fmt == "name" else name,
                "priority": prio,
            }
            for name, typ, prio, fmt in columns
        ],
    }


def row_renderer(info: ResourceInfo, now: datetime | None = None) -> Callable[[Obj], list[Any]]:
    """The function giving one object's row cells (ages relative to `now`, default the clock)."""
    when = now or datetime.now(UTC)
    _, row_fn = _printer(info)
    return lambda obj: row_fn(obj, when)


def _embedded(obj: Obj, include_object: str) -> Obj | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def _printer(info: ResourceInfo) -> tuple[list[Column], RowFn]:
    if info.is_custom or info.printer_columns:
        return _custom_printer(info)
    key = (info.group, info.kind)
    return BUILTIN_PRINTERS.get(key) or POLICY_PRINTERS.get(key) or CREATED_AT_PRINTER


# --------------------------------------------------------------------------- custom resources


def _printer_columns(info: ResourceInfo) -> tuple[PrinterColumn, ...]:
    if info.printer_columns:
        return info.printer_columns
    declared = (info.crd_version or {}).get("additionalPrinterColumns")
    if declared:
        return tuple(
            PrinterColumn(
                name=c.get("name", ""),
                type=c.get("type", "string"),
                json_path=c.get("jsonPath", ""),
                description=c.get("description", ""),
                priority=int(c.get("priority", 0)),
                format=c.get("format", ""),
            )
            for c in declared
        )
    return (PrinterColumn("Age", "date", ".metadata.creationTimestamp"),)


def _custom_printer(info: ResourceInfo) -> tuple[list[Column], RowFn]:
    printer_columns = _printer_columns(info)
    columns: list[Column] = [NAME_COLUMN] + [
        (c.name, c.type, c.priority, c.format) for c in printer_columns
    ]

    def row(obj: Obj, now: datetime) -> list[Any]:
        cells: list[Any] = [str(obj.get("metadata", {}).get("name", ""))]
        for col in printer_columns:
            values = jsonpath_values(obj, col.json_path)
            cells.append(_cell(col.type, values[0], now) if values else None)
        return cells

    return columns, row


def _cell(typ: str, value: Any, now: datetime) -> Any:
    """A custom column's cell, typed as the real server types it. kubectl v1.32 prints a
    `date` cell verbatim, yet real clusters show custom resources' AGE as `5d`: the cell is
    rendered here as the age."""
    if value is None:
        return None
    if typ == "integer":
        return (
            int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        )
    if typ == "number":
        return (
            float(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else None
        )
    if typ == "boolean":
        return value if isinstance(value, bool) else None
    if typ == "date":
        when = parse_time(value)
        return human_duration((now - when).total_seconds()) if when else "<invalid>"
    return _go_text(value)


def _go_text(value: Any) -> str:
    """A value as the server's JSONPath printer writes it (Go's `%v`): `[a b]`, `map[k:v]`."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, list):
        return "[" + " ".join(_go_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_text(value[k])}" for k in sorted(value)) + "]"
    return str(value)

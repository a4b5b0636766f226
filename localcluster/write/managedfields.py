"""managedFields bookkeeping: who owns which field of an object.

Entries are keyed by (manager, operation, subresource) and hold a field set (`fieldsets`).
`track_update` maintains them for every write that is not a server-side apply: the writer owns
every field it set or changed, other managers lose those, and fields that are gone are owned by
nobody. Entries are written in the API server's order (Apply first, then oldest first, then by
manager) and an entry whose set did not change keeps its `fieldsV1` and `time` untouched, so an
unchanged object stays byte-identical (no new resourceVersion).
"""

from __future__ import annotations

from typing import Any

from localcluster.api.types import ResourceInfo
from localcluster.schema.schemawalk import SchemaCursor, cursor_for
from localcluster.write import fieldsets
from localcluster.write.fieldsets import FieldPath

__all__ = [
    "ManagerKey",
    "base_entries",
    "decoded_entries",
    "encode_entries",
    "entries_of",
    "leaf_value",
    "manager_key",
    "track_update",
    "with_managed_fields",
    "write_scope",
]

ManagerKey = tuple[str, str, str]  # manager, operation, subresource


def entries_of(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list(((obj or {}).get("metadata") or {}).get("managedFields") or [])


def manager_key(entry: dict[str, Any]) -> ManagerKey:
    return (
        str(entry.get("manager", "")),
        str(entry.get("operation", "")),
        str(entry.get("subresource", "")),
    )


def decoded_entries(
    entries: list[dict[str, Any]],
) -> dict[ManagerKey, tuple[dict[str, Any], set[FieldPath]]]:
    out: dict[ManagerKey, tuple[dict[str, Any], set[FieldPath]]] = {}
    for entry in entries:
        out[manager_key(entry)] = (entry, fieldsets.decode(entry.get("fieldsV1")))
    return out


def write_scope(info: ResourceInfo, subresource: str) -> dict[str, Any]:
    """Which top-level fields a write to this endpoint may own."""
    if subresource == "status":
        return {"include": frozenset({"status"})}
    if "status" in info.subresources:
        return {"exclude": frozenset({"status"})}
    return {}


def encode_entries(
    info: ResourceInfo,
    decoded: dict[ManagerKey, tuple[dict[str, Any], set[FieldPath]]],
    touched: dict[ManagerKey, str],
) -> list[dict[str, Any]]:
    out = []
    for key, (entry, paths) in decoded.items():
        if not paths:
            continue
        manager, operation, subresource = key
        new = {
            "manager": manager,
            "operation": operation,
            "apiVersion": entry.get("apiVersion") or info.api_version,
            "time": entry.get("time"),
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1_of(entry, paths),
        }
        if key in touched:
            new["apiVersion"] = info.api_version
            new["time"] = touched[key]
        if subresource:
            new["subresource"] = subresource
        if new["time"] is None:
            del new["time"]
        out.append(new)
    # The API server's order: Apply before Update, then oldest first, then by manager.
    out.sort(
        key=lambda e: (
            e["operation"], e.get("time") or "", e["manager"], e["apiVersion"],
            e.get("subresource", ""),
        )
    )  # fmt: skip
    return out


def fields_v1_of(entry: dict[str, Any], paths: set[FieldPath]) -> dict[str, Any]:
    """The entry's fieldsV1, kept as sent when its set is unchanged (byte-stable writes)."""
    sent = entry.get("fieldsV1")
    if isinstance(sent, dict) and fieldsets.decode(sent) == paths:
        return sent
    return fieldsets.encode(paths)


def with_managed_fields(obj: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)
    return obj


def base_entries(old: dict[str, Any] | None, new: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries to start from: the old object's, unless the writer replaced them on purpose
    (kubectl does so when it upgrades client-side-apply managers to server-side apply)."""
    sent = (new.get("metadata") or {}).get("managedFields")
    old_entries = entries_of(old)
    if sent is not None and sent != old_entries:
        return [e for e in sent if isinstance(e, dict) and e.get("manager") is not None]
    return old_entries


def track_update(
    info: ResourceInfo,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str = "Update",
    now: str,
    subresource: str = "",
) -> dict[str, Any]:
    """`new` with managedFields for a non-apply write: the writer owns every field it set or
    changed, other managers lose those, and fields that are gone are owned by nobody."""
    schema = cursor_for(info)
    scope = write_scope(info, subresource)
    # Only metadata.managedFields is replaced: a shallow copy down to metadata is enough.
    result = {**new, "metadata": dict(new.get("metadata") or {})}
    decoded = decoded_entries(base_entries(old, new))
    new_set = fieldsets.field_set(result, schema, **scope)
    if old is None:
        changed = set(new_set)
    else:
        old_set = fieldsets.field_set(old, schema, **scope)
        changed = {
            p
            for p in new_set
            if p not in old_set
            or leaf_value(result, p, new_set, schema) != leaf_value(old, p, new_set, schema)
        }
    key: ManagerKey = (manager, operation, subresource)
    if decoded:  # the writer's fields outside its scope still count as present
        everything = new_set if not scope else fieldsets.field_set(result, schema)
    for other, (entry, paths) in list(decoded.items()):
        kept = {p for p in paths if p in everything and (other == key or p not in changed)}
        decoded[other] = (entry, kept)
    touched: dict[ManagerKey, str] = {}
    if changed:
        entry, paths = decoded.get(key, ({}, set()))
        decoded[key] = (entry, paths | changed)
        touched[key] = now
    return with_managed_fields(result, encode_entries(info, decoded, touched))


def leaf_value(
    obj: Any, path: FieldPath, members: set[FieldPath], schema: SchemaCursor | None = None
) -> Any:
    """The value that decides whether a member changed: a leaf's value; for a node with
    members below it (a list item, a map) only its presence."""
    value = fieldsets.value_at(obj, path, schema)
    if isinstance(value, (dict, list)) and any(
        len(p) > len(path) and p[: len(path)] == path for p in members
    ):
        return value is not fieldsets.MISSING
    return value

"""Server-side apply (`application/apply-patch+yaml`): merging by schema, ownership, conflicts.

`server_side_apply` merges the applied configuration into the live object by the schema's list
and map semantics (lists merged by keys ordered as structured-merge-diff orders them, sets as
unions, atomic lists and maps replaced), reports fields another manager owns with a different
value as 409 Conflict with the API server's message and `FieldManagerConflict` causes, takes
them over with `force`, removes fields the manager stopped applying when nobody else owns them,
and, like the real server's last-applied manager, lets `kubectl` take over the fields it
applied client-side before.

Known gaps (docs/LOCALCLUSTER-FIDELITY.md): no conversion between versions (one served version
per resource); only list-map key fields are defaulted before items are keyed (`protocol: TCP`
of ports, schema defaults of CRD keys).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema.schemawalk import SchemaCursor, cursor_for
from localcluster.write import fieldsets, managedfields
from localcluster.write.fieldsets import FieldPath

__all__ = ["server_side_apply"]


def server_side_apply(
    info: ResourceInfo,
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    force: bool,
    now: str,
    subresource: str = "",
) -> dict[str, Any]:
    """The object after applying `applied` as `manager` (live None: create).

    Raises ApiError 400 for a configuration of another kind, 409 Conflict when another manager
    owns a field this one sets to a different value (unless `force`)."""
    if not manager:
        raise ApiError(
            400,
            "BadRequest",
            "PATCH, application/apply-patch+yaml requests require fieldManager to be set",
        )
    if not isinstance(applied, dict):
        raise ApiError(
            400, "BadRequest", "error decoding YAML: the applied configuration is not an object"
        )
    if applied.get("apiVersion") != info.api_version or applied.get("kind") != info.kind:
        raise ApiError(
            400,
            "BadRequest",
            f"the {'API version' if applied.get('kind') == info.kind else 'kind'} in the data "
            f"({applied.get('apiVersion') if applied.get('kind') == info.kind else applied.get('kind')}) "
            f"does not match the expected "
            f"{'API version' if applied.get('kind') == info.kind else 'kind'} "
            f"({info.api_version if applied.get('kind') == info.kind else info.kind})",
        )
    schema = cursor_for(info)
    scope = managedfields.write_scope(info, subresource)
    config = _drop_nulls(applied)
    applied_set = fieldsets.field_set(config, schema, **scope, apply=True)
    base = copy.deepcopy(live) if live is not None else {}
    decoded = managedfields.decoded_entries(managedfields.entries_of(live))
    key: managedfields.ManagerKey = (manager, "Apply", subresource)

    conflicts: list[tuple[managedfields.ManagerKey, FieldPath]] = []
    for other, (_, paths) in decoded.items():
        if other == key:
            continue
        for path in sorted(paths & applied_set):
            if managedfields.leaf_value(
                base, path, applied_set, schema
            ) != managedfields.leaf_value(config, path, applied_set, schema):
                conflicts.append((other, path))
    if (
        conflicts
        and not force
        and not _upgrades_client_side_apply(manager, live, conflicts, schema, scope)
    ):
        versions = {
            k: str(e.get("apiVersion") or info.api_version) for k, (e, _) in decoded.items()
        }
        raise _conflict_error(conflicts, versions)
    for other, path in conflicts:
        entry, paths = decoded[other]
        decoded[other] = (entry, paths - {path})

    previous = decoded.get(key, ({}, set()))[1]
    owned_by_others: set[FieldPath] = set()
    for other, (_, paths) in decoded.items():
        if other != key:
            owned_by_others |= paths
    keep = owned_by_others | applied_set
    for path in sorted(previous - applied_set, key=len):
        if path in owned_by_others or any(
            len(p) > len(path) and p[: len(path)] == path for p in keep
        ):
            continue
        fieldsets.remove_path(base, path, schema)
        _prune_empty_parents(base, path, keep, schema)

    result = _structured_merge(base, config, schema)
    if live is not None:
        # Identity comes from the live object, never from the applied configuration.
        for field in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp"):
            if field in (live.get("metadata") or {}):
                result["metadata"][field] = live["metadata"][field]
    decoded[key] = (decoded.get(key, ({}, set()))[0], applied_set)
    everything = fieldsets.field_set(result, schema)
    for other, (entry, paths) in list(decoded.items()):
        decoded[other] = (entry, {p for p in paths if p in everything})
    # A no-op apply changes nothing, not even its entry's time (so no new resourceVersion).
    noop = (
        live is not None
        and previous == applied_set
        and _without_managed(result) == (_without_managed(live))
    )
    return managedfields.with_managed_fields(
        result, managedfields.encode_entries(info, decoded, {} if noop else {key: now})
    )


def _without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _upgrades_client_side_apply(
    manager: str,
    live: dict[str, Any] | None,
    conflicts: list[tuple[managedfields.ManagerKey, FieldPath]],
    schema: SchemaCursor,
    scope: dict[str, Any],
) -> bool:
    """Whether the conflicts are forgiven because kubectl moves from client-side to server-side
    apply: as on the real server, an apply by manager `kubectl` may take over fields recorded in
    the last-applied-configuration annotation whose live value is still the applied one."""
    if manager != "kubectl" or live is None:
        return False
    annotation = ((live.get("metadata") or {}).get("annotations") or {}).get(_LAST_APPLIED)
    try:
        last_applied = json.loads(annotation) if annotation else None
    except ValueError:
        return False
    if not isinstance(last_applied, dict):
        return False
    last_set = fieldsets.field_set(last_applied, schema, **scope)
    return all(
        path in last_set
        and managedfields.leaf_value(live, path, last_set, schema)
        == managedfields.leaf_value(last_applied, path, last_set, schema)
        for _, path in conflicts
    )


def _prune_empty_parents(
    obj: dict[str, Any], path: FieldPath, keep: set[FieldPath], schema: SchemaCursor
) -> None:
    """After removing `path`, remove the lists/maps it leaves empty unless someone owns them."""
    for cut in range(len(path) - 1, 0, -1):
        parent = path[:cut]
        value = fieldsets.value_at(obj, parent, schema)
        if value or value is fieldsets.MISSING or parent in keep or not parent[-1].startswith("f:"):
            return
        fieldsets.remove_path(obj, parent, schema)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _structured_merge(live: Any, applied: Any, schema: SchemaCursor) -> Any:
    if not isinstance(applied, dict) or not isinstance(live, dict):
        return copy.deepcopy(applied)
    out = dict(live)
    for key, value in applied.items():
        child = schema.field(key)
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "managedFields"}
        if isinstance(value, dict) and not child.is_atomic_map():
            out[key] = _structured_merge(out.get(key), value, child)
        elif isinstance(value, list):
            out[key] = _merge_list(out.get(key), value, schema, key)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_list(live: Any, applied: list[Any], parent: SchemaCursor, key: str) -> list[Any]:
    semantics = parent.list_semantics(key)
    current = list(live) if isinstance(live, list) else []
    if semantics.list_type == "set":
        return _interleave(current, applied, _json_identity, lambda old, new: copy.deepcopy(new))
    if semantics.list_type != "map" or not semantics.keys:
        return copy.deepcopy(applied)
    if not all(isinstance(i, dict) for i in [*current, *applied]):
        return copy.deepcopy(applied)
    items = parent.field(key).items()

    def identity(item: Any) -> str:
        return _json_identity(semantics.identity(item))

    return _interleave(
        current,
        applied,
        identity,
        lambda old, new: (
            _structured_merge(old, new, items) if old is not None else copy.deepcopy(new)
        ),
    )


def _json_identity(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _interleave(live: list[Any], applied: list[Any], identity: Any, merge: Any) -> list[Any]:
    """Merge two associative lists the way structured-merge-diff orders them: shared items in
    the applied order, applied-only items where the applied list puts them, and live-only
    items kept in place relative to their neighbours."""
    live_ids = [identity(i) for i in live]
    applied_ids = [identity(i) for i in applied]
    live_by_id = dict(zip(live_ids, live, strict=True))
    in_applied = set(applied_ids)
    in_live = set(live_ids)
    shared = [i for i in applied_ids if i in in_live]
    out: list[Any] = []
    merged: set[str] = set()
    li = ri = 0
    while li < len(live) or ri < len(applied):
        if li < len(live) and ri < len(applied):
            if live_ids[li] == applied_ids[ri]:
                out.append(merge(live[li], applied[ri]))
                merged.add(applied_ids[ri])
                if shared and shared[0] == applied_ids[ri]:
                    shared.pop(0)
                li += 1
                ri += 1
                continue
            if live_ids[li] in in_applied and shared and shared[0] != live_ids[li]:
                li += 1  # a shared item whose turn has not come: the applied order places it
                continue
        if li < len(live):
            if live_ids[li] not in in_applied:
                out.append(copy.deepcopy(live[li]))
                li += 1
                continue
            if live_ids[li] in merged:
                li += 1
                continue
        if ri < len(applied):
            rid = applied_ids[ri]
            merged.add(rid)
            out.append(merge(live_by_id.get(rid), applied[ri]))
            if shared and shared[0] == rid:
                shared.pop(0)
            ri += 1
    return out


def _manager_label(key: managedfields.ManagerKey, api_version: str) -> str:
    manager, operation, subresource = key
    text = json.dumps(manager)
    if subresource:
        text += f" with subresource {json.dumps(subresource)}"
    if operation == "Update":
        text += f" using {api_version}"
    return text


def _conflict_error(
    conflicts: list[tuple[managedfields.ManagerKey, FieldPath]],
    versions: dict[managedfields.ManagerKey, str],
) -> ApiError:
    """409 Conflict with the real message: one line for one conflict, else grouped by manager."""
    label = {k: _manager_label(k, versions[k]) for k, _ in conflicts}
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {label[k]}",
            "field": fieldsets.path_string(p),
        }
        for k, p in conflicts
    ]
    if len(conflicts) == 1:
        k, p = conflicts[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {label[k]}: {fieldsets.path_string(p)}"
        )
    else:
        lines: list[str] = []
        for k in sorted({k for k, _ in conflicts}, key=lambda k: label[k]):
            lines.append(f"conflicts with {label[k]}:")
            lines.extend(f"- {fieldsets.path_string(p)}" for kk, p in conflicts if kk == k)
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, details={"causes": causes})

"""PATCH bodies, server-side apply and `metadata.managedFields`.

The request pipeline computes the object a PATCH asks for here, before admission and
validation see it:

* `application/json-patch+json` — RFC 6902, via the `jsonpatch` library;
* `application/merge-patch+json` — RFC 7386 (what kubectl uses for custom resources);
* `application/strategic-merge-patch+json` — built-in kinds only (see `strategicmerge`); a custom
  resource gets 415 UnsupportedMediaType, as from the real server;
* `application/apply-patch+yaml` — server-side apply: `server_side_apply` merges the applied
  configuration into the live object by the schema's list/map semantics, tracks which manager
  owns which field (`fieldsets`), reports conflicts with other managers as 409 Conflict with the
  real message and causes, takes fields over with `force`, and removes fields a manager stopped
  applying when nobody else owns them.

`track_update` keeps managedFields right for every other write (create, update, patch): the
writer owns what it changed; other managers lose those fields.

Known gaps (documented in docs/LOCALCLUSTER-FIDELITY.md): no conversion between versions (one
served version per CRD is assumed); only list-map key fields are defaulted before field sets
are computed (`protocol: TCP` of ports, schema defaults of CRD keys). Merged lists are ordered
as structured-merge-diff orders them (`_interleave`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from localcluster import fieldsets
from localcluster.fieldsets import FieldPath
from localcluster.schemawalk import SchemaCursor, cursor_for
from localcluster.strategicmerge import apply_strategic_merge
from localcluster.types import ApiError, ResourceInfo

__all__ = ["apply_patch", "server_side_apply", "track_update"]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def apply_patch(
    info: ResourceInfo, original: dict[str, Any], body: bytes, content_type: str
) -> dict[str, Any]:
    """The object `original` patched by `body`; raises ApiError 400 (undecodable patch),
    415 (unsupported patch type) or 422 (a JSON patch that does not apply)."""
    ctype = content_type.split(";")[0].strip().lower()
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    if not info.is_custom:
        accepted.append(STRATEGIC_PATCH)
    if ctype not in accepted or ctype == APPLY_PATCH:
        raise ApiError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )
    try:
        patch = json.loads(body or b"null")
    except ValueError as e:
        raise ApiError(400, "BadRequest", f"error decoding patch: {e}") from e
    if ctype == JSON_PATCH:
        return _json_patch(original, patch)
    if not isinstance(patch, dict):
        raise ApiError(
            400,
            "BadRequest",
            f"error decoding patch: json: cannot unmarshal {_json_kind(patch)} into Go value "
            "of type map[string]interface {}",
        )
    if ctype == MERGE_PATCH:
        merged = _merge_patch(copy.deepcopy(original), patch)
        return merged if isinstance(merged, dict) else {}
    return apply_strategic_merge(original, patch, cursor_for(info))


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "bool", type(None): "null"}.get(
        type(value), "number"
    )


def _json_patch(original: dict[str, Any], patch: Any) -> dict[str, Any]:
    if not isinstance(patch, list):
        raise ApiError(
            400,
            "BadRequest",
            "error decoding patch: json: cannot unmarshal "
            f"{_json_kind(patch) if not isinstance(patch, dict) else 'object'} "
            "into Go value of type jsonpatch.Patch",
        )
    try:
        result = jsonpatch.JsonPatch(patch).apply(original)
    except jsonpatch.JsonPatchTestFailed as e:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {e}"
        ) from e
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError) as e:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {e}"
        ) from e
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "the patched document is not an object")
    return result


def _merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


# --------------------------------------------------------------------------- managed fields

ManagerKey = tuple[str, str, str]  # manager, operation, subresource


def _entries(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list(((obj or {}).get("metadata") or {}).get("managedFields") or [])


def _key(entry: dict[str, Any]) -> ManagerKey:
    return (
        str(entry.get("manager", "")),
        str(entry.get("operation", "")),
        str(entry.get("subresource", "")),
    )


def _decoded(
    entries: list[dict[str, Any]],
) -> dict[ManagerKey, tuple[dict[str, Any], set[FieldPath]]]:
    out: dict[ManagerKey, tuple[dict[str, Any], set[FieldPath]]] = {}
    for entry in entries:
        out[_key(entry)] = (entry, fieldsets.decode(entry.get("fieldsV1")))
    return out


def _scope(info: ResourceInfo, subresource: str) -> dict[str, Any]:
    """Which top-level fields a write to this endpoint may own."""
    if subresource == "status":
        return {"include": frozenset({"status"})}
    if "status" in info.subresources:
        return {"exclude": frozenset({"status"})}
    return {}


def _encode_entries(
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
            "fieldsV1": _fields_v1(entry, paths),
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


def _fields_v1(entry: dict[str, Any], paths: set[FieldPath]) -> dict[str, Any]:
    """The entry's fieldsV1, kept as sent when its set is unchanged (byte-stable writes)."""
    sent = entry.get("fieldsV1")
    if isinstance(sent, dict) and fieldsets.decode(sent) == paths:
        return sent
    return fieldsets.encode(paths)


def _with_managed_fields(obj: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)
    return obj


def _base_entries(old: dict[str, Any] | None, new: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries to start from: the old object's, unless the writer replaced them on purpose
    (kubectl does so when it upgrades client-side-apply managers to server-side apply)."""
    sent = (new.get("metadata") or {}).get("managedFields")
    old_entries = _entries(old)
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
    scope = _scope(info, subresource)
    result = copy.deepcopy(new)
    decoded = _decoded(_base_entries(old, new))
    new_set = fieldsets.field_set(result, schema, **scope)
    if old is None:
        changed = set(new_set)
    else:
        old_set = fieldsets.field_set(old, schema, **scope)
        changed = {
            p
            for p in new_set
            if p not in old_set
            or _leaf_value(result, p, new_set, schema) != _leaf_value(old, p, new_set, schema)
        }
    key: ManagerKey = (manager, operation, subresource)
    everything = fieldsets.field_set(result, schema)
    for other, (entry, paths) in list(decoded.items()):
        kept = {p for p in paths if p in everything and (other == key or p not in changed)}
        decoded[other] = (entry, kept)
    touched: dict[ManagerKey, str] = {}
    if changed:
        entry, paths = decoded.get(key, ({}, set()))
        decoded[key] = (entry, paths | changed)
        touched[key] = now
    return _with_managed_fields(result, _encode_entries(info, decoded, touched))


def _leaf_value(
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
    scope = _scope(info, subresource)
    config = _drop_nulls(applied)
    applied_set = fieldsets.field_set(config, schema, **scope)
    base = copy.deepcopy(live) if live is not None else {}
    decoded = _decoded(_entries(live))
    key: ManagerKey = (manager, "Apply", subresource)

    conflicts: list[tuple[ManagerKey, FieldPath]] = []
    for other, (_, paths) in decoded.items():
        if other == key:
            continue
        for path in sorted(paths & applied_set):
            if _leaf_value(base, path, applied_set, schema) != _leaf_value(
                config, path, applied_set, schema
            ):
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
    return _with_managed_fields(result, _encode_entries(info, decoded, {} if noop else {key: now}))


def _without_managed(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _upgrades_client_side_apply(
    manager: str,
    live: dict[str, Any] | None,
    conflicts: list[tuple[ManagerKey, FieldPath]],
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
        and _leaf_value(live, path, last_set, schema)
        == _leaf_value(last_applied, path, last_set, schema)
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


def _manager_label(key: ManagerKey, api_version: str) -> str:
    manager, operation, subresource = key
    text = json.dumps(manager)
    if subresource:
        text += f" with subresource {json.dumps(subresource)}"
    if operation == "Update":
        text += f" using {api_version}"
    return text


def _conflict_error(
    conflicts: list[tuple[ManagerKey, FieldPath]], versions: dict[ManagerKey, str]
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

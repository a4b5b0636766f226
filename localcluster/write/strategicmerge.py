"""Applying a strategic merge patch (`application/strategic-merge-patch+json`) to a built-in object.

This is what the server does with the patch kubectl's client-side `apply`, `label`, `annotate`,
`scale`, `set image` and `patch --type strategic` send. It is a JSON merge patch (RFC 7386) with
two differences, both driven by the kind's schema (see `schemawalk`):

* lists with `x-kubernetes-patch-strategy: merge` merge instead of being replaced — lists of maps
  by their `x-kubernetes-patch-merge-key` (containers by `name`, ports by `containerPort`,
  volumeMounts by `mountPath`, …), lists of scalars as a union (finalizers);
* directives, as kubectl v1.32 emits them:
  - `{"$patch": "replace"}` in a map (replace the map) or as a list item (replace the list),
  - `{"$patch": "delete"}` in a map (delete it) or in a list item with its merge key (delete that
    item),
  - `{"$patch": "merge"}` (the default, accepted and dropped),
  - `$retainKeys: [...]` (fields with strategy `retainKeys`: drop keys not listed),
  - `$setElementOrder/<field>: [...]` (the order of a merged list),
  - `$deleteFromPrimitiveList/<field>: [...]` (remove scalars from a merged list).

Not supported (never emitted by kubectl v1.32): the legacy `$patch: delete` on a list of scalars
(`$deletePrimitive`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from localcluster.api.types import ApiError
from localcluster.schema.schemawalk import ListSemantics, SchemaCursor

__all__ = ["apply_strategic_merge"]

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def apply_strategic_merge(
    original: dict[str, Any], patch: dict[str, Any], schema: SchemaCursor
) -> dict[str, Any]:
    """The object `original` with `patch` applied; raises ApiError 400 for malformed directives."""
    result = _merge_map(copy.deepcopy(original), patch, schema)
    return result if result is not None else {}


def _bad(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def _merge_map(
    original: dict[str, Any] | None, patch: dict[str, Any], schema: SchemaCursor
) -> dict[str, Any] | None:
    directive = patch.get(_PATCH)
    if directive == "delete":
        return None
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != _PATCH}, schema)
    if directive not in (None, "merge"):
        raise _bad(f"Unknown patch type: {directive!r}")
    out: dict[str, Any] = dict(original) if isinstance(original, dict) else {}
    retain = patch.get(_RETAIN)
    if retain is not None:
        if not isinstance(retain, list):
            raise _bad(f"invalid $retainKeys value: {json.dumps(retain)}")
        keep = set(retain)
        out = {k: v for k, v in out.items() if k in keep}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN):
            continue
        if key.startswith(_ORDER):
            if not isinstance(value, list):
                raise _bad(f"invalid {key} value: {json.dumps(value)}")
            orders[key[len(_ORDER) :]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            if not isinstance(value, list):
                raise _bad(f"invalid {key} value: {json.dumps(value)}")
            current = out.get(field)
            if isinstance(current, list):
                out[field] = [v for v in current if v not in value]
            continue
        if value is None:
            out.pop(key, None)
            continue
        child = schema.field(key)
        if isinstance(value, dict):
            merged = _merge_map(out.get(key), value, child)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list):
            semantics = schema.list_semantics(key)
            out[key] = _merge_list(out.get(key), value, semantics, child.items())
        else:
            out[key] = value
    for field, order in orders.items():
        if isinstance(out.get(field), list):
            server = original.get(field) if isinstance(original, dict) else None
            out[field] = _reorder(
                out[field], order, server if isinstance(server, list) else [],
                schema.list_semantics(field),
            )  # fmt: skip
    return out


def _merge_list(
    original: Any, patch: list[Any], semantics: ListSemantics, items: SchemaCursor
) -> list[Any]:
    # A `{"$patch": "replace"}` item replaces the whole list with the other items.
    if any(isinstance(i, dict) and i.get(_PATCH) == "replace" and len(i) == 1 for i in patch):
        return [
            _strip(i, items) if isinstance(i, dict) else i
            for i in patch
            if not (isinstance(i, dict) and i.get(_PATCH) == "replace" and len(i) == 1)
        ]
    current = list(original) if isinstance(original, list) else []
    if not semantics.patch_merge:
        return [_strip(i, items) if isinstance(i, dict) else i for i in patch]
    if not semantics.merge_key:
        # A merged list of scalars: union, keeping the original order.
        for value in patch:
            if value not in current:
                current.append(value)
        return current
    key = semantics.merge_key
    for item in patch:
        if not isinstance(item, dict):
            raise _bad(f"patch list item is not a map: {json.dumps(item)}")
        if key not in item:
            raise _bad(f"map: {json.dumps(item)} does not contain declared merge key: {key}")
        idx = next(
            (i for i, c in enumerate(current) if isinstance(c, dict) and c.get(key) == item[key]),
            None,
        )
        if item.get(_PATCH) == "delete":
            if idx is not None:
                current.pop(idx)
            continue
        merged = _merge_map(current[idx] if idx is not None else None, item, items)
        if merged is None:
            if idx is not None:
                current.pop(idx)
        elif idx is None:
            current.append(merged)
        else:
            current[idx] = merged
    return current


def _reorder(
    values: list[Any], order: list[Any], server: list[Any], semantics: ListSemantics
) -> list[Any]:
    """Apply `$setElementOrder`: the listed items in the given order, the server-only items
    in their live order, interleaved by their live positions where both sides have one."""
    key = semantics.merge_key

    def identity(v: Any) -> str:
        return json.dumps(v.get(key) if key and isinstance(v, dict) else v, sort_keys=True)

    rank = {identity(o): i for i, o in enumerate(order)}
    position = {identity(v): i for i, v in enumerate(server)}
    listed = sorted((v for v in values if identity(v) in rank), key=lambda v: rank[identity(v)])
    server_only = [v for v in values if identity(v) not in rank]
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(listed):
        if j >= len(listed):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(listed[j])
            j += 1
        else:
            left = position.get(identity(server_only[i]))
            right = position.get(identity(listed[j]))
            if left is not None and right is not None and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(listed[j])
                j += 1
    return out


def _strip(value: dict[str, Any], schema: SchemaCursor) -> dict[str, Any]:
    """A patch fragment without directives (for values that replace, not merge)."""
    merged = _merge_map(None, value, schema)
    return merged if merged is not None else {}

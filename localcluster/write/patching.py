"""PATCH bodies: the object a PATCH request asks for, before admission and validation.

* `application/json-patch+json` — RFC 6902, via the `jsonpatch` library;
* `application/merge-patch+json` — RFC 7386 (what kubectl uses for custom resources);
* `application/strategic-merge-patch+json` — built-in kinds only (`strategicmerge`); a custom
  resource gets 415 UnsupportedMediaType with the real "accepted media types" message;
* `application/apply-patch+yaml` — server-side apply, in `serverside` (re-exported here).

`track_update` (from `managedfields`, re-exported) keeps managedFields right for every other
write. This module is the seam the request pipeline calls.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema.schemawalk import cursor_for
from localcluster.write.managedfields import track_update
from localcluster.write.serverside import server_side_apply
from localcluster.write.strategicmerge import apply_strategic_merge

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

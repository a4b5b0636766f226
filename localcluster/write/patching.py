"""PATCH bodies: the object a PATCH request asks for, before admission and validation.

* `application/json-patch+json` — RFC 6902 as kube-apiserver applies it (`jsonpatch6902`);
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

from localcluster.api.fielderrors import FieldError, invalid_error
from localcluster.api.jsonyaml import load_json
from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema.schemawalk import cursor_for
from localcluster.write import jsonpatch6902
from localcluster.write.managedfields import track_update
from localcluster.write.serverside import server_side_apply
from localcluster.write.strategicmerge import apply_strategic_merge

__all__ = [
    "apply_patch",
    "json_patch_strict_errors",
    "server_side_apply",
    "strict_patch_error",
    "track_update",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def apply_patch(
    info: ResourceInfo,
    original: dict[str, Any],
    body: bytes,
    content_type: str,
    *,
    field_validation: str = "Warn",
) -> dict[str, Any]:
    """The object `original` patched by `body`; raises ApiError 400 (undecodable patch),
    413 (a JSON patch of too many operations), 415 (unsupported patch type) or 422 (a JSON
    patch that does not apply)."""
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
    if ctype == JSON_PATCH:
        return _json_patch(original, body, field_validation)
    try:
        patch = load_json(body or b"null")
    except ValueError as e:
        raise ApiError(400, "BadRequest", f"error decoding patch: {e}") from e
    except RecursionError:
        raise ApiError(400, "BadRequest", "error decoding patch: nested too deeply") from None
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


def json_patch_strict_errors(body: bytes, content_type: str) -> list[str]:
    """What kube-apiserver's strict decoding of a JSON patch finds (`json patch unknown field
    "[0].x"`, … duplicate field …): warnings under fieldValidation Warn, a 422 under Strict.
    Empty for other patch types and for bodies that do not decode (apply_patch refuses those)."""
    if content_type.split(";")[0].strip().lower() != JSON_PATCH:
        return []
    try:
        _, errors = jsonpatch6902.decode(body)
    except jsonpatch6902.DecodeError:
        return []
    return [f"json patch {e}" for e in errors]


def strict_patch_error(patched: Any, errors: list[str]) -> ApiError:
    """kube-apiserver's 422 for a JSON patch with unknown or duplicate members under
    fieldValidation=Strict: the patched object quoted (top-level keys sorted, as the patch
    library writes it; nested objects here in stored order, which can differ from its), then the
    strict decoding errors."""
    if isinstance(patched, dict):
        patched = dict(sorted(patched.items()))
    text = json.dumps(patched, separators=(",", ":"), ensure_ascii=False)
    detail = "strict decoding error: " + ", ".join(errors)
    return invalid_error("", "", "", [FieldError.invalid("patch", text, detail)])


def _json_patch(original: dict[str, Any], body: bytes, field_validation: str) -> dict[str, Any]:
    strict = field_validation in ("Strict", "Warn")
    try:
        ops, _ = jsonpatch6902.decode(body, strict=strict)
    except jsonpatch6902.DecodeError as e:
        raise ApiError(400, "BadRequest", f"error decoding patch: {e}" if strict else str(e)) from e
    if len(ops) > jsonpatch6902.MAX_OPERATIONS:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{jsonpatch6902.MAX_OPERATIONS}, got {len(ops)}",
        )
    try:
        result = jsonpatch6902.apply(original, ops)
    except jsonpatch6902.PatchFailed as e:
        # kube-apiserver keeps the reason to itself: a generic 422 with empty details.
        raise ApiError(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            details={},
        ) from e
    if not isinstance(result, dict):
        raise ApiError(
            422, "Invalid", "the server rejected our request due to an error in our request"
        )
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

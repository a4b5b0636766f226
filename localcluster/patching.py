"""PATCH bodies and managedFields (stub: merge-patch and json-patch only)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from localcluster.types import ApiError, ResourceInfo

__all__ = ["apply_patch", "server_side_apply", "track_update"]


def apply_patch(
    info: ResourceInfo, original: dict[str, Any], body: bytes, content_type: str
) -> dict[str, Any]:
    """The patched object; raises ApiError 400/415/422."""
    ctype = content_type.split(";")[0].strip()
    try:
        patch = json.loads(body)
    except ValueError as e:
        raise ApiError(400, "BadRequest", f"error decoding patch: {e}") from e
    if ctype == "application/json-patch+json":
        try:
            return jsonpatch.apply_patch(original, patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            raise ApiError(422, "Invalid", str(e)) from e
    if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        return _merge(copy.deepcopy(original), patch)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = _merge(target.get(k), v)
    return target


def server_side_apply(
    info: ResourceInfo,
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    force: bool,
    now: str,
) -> dict[str, Any]:
    """The new object after a server-side apply (stub: merge without ownership)."""
    base = copy.deepcopy(live) if live is not None else {}
    return _merge(base, applied)


def track_update(
    info: ResourceInfo,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str,
    now: str,
    subresource: str = "",
) -> dict[str, Any]:
    """`new` with managedFields maintained for a non-apply write (stub: unchanged)."""
    return new

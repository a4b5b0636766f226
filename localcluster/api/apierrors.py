"""Constructors for the `Status` errors kube-apiserver answers with, texts included.

Clients parse these: kubectl prints `Error from server (<reason>): <message>`, client-go maps
`reason` to `IsNotFound`/`IsConflict`/…, and controllers retry on 409 Conflict. So every text
and `details` shape here follows what the real server sends (`k8s.io/apimachinery` errors).
"""

from __future__ import annotations

from typing import Any

from localcluster.api.types import ApiError, ResourceInfo

__all__ = [
    "already_exists",
    "bad_request",
    "cause",
    "conflict",
    "expired",
    "forbidden",
    "gone",
    "internal",
    "invalid",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "qualified",
    "too_large_resource_version",
    "unauthorized",
    "unsupported_media_type",
]


def qualified(info: ResourceInfo) -> str:
    """`pods`, `deployments.apps`: the group-qualified resource name used in messages."""
    return f"{info.plural}.{info.group}" if info.group else info.plural


def _details(info: ResourceInfo, name: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if info.group:
        details["group"] = info.group
    details["kind"] = info.plural
    details.update(extra)
    return details


def not_found(info: ResourceInfo, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(info)} "{name}" not found',
        details=_details(info, name),
    )


def already_exists(info: ResourceInfo, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(info)} "{name}" already exists',
        details=_details(info, name),
    )


def conflict(info: ResourceInfo, name: str, why: str, *, subresource: str = "") -> ApiError:
    what = qualified(info) + (f"/{subresource}" if subresource else "")
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {what} "{name}": {why}',
        details=_details(info, name),
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def cause(reason: str, message: str, field: str) -> dict[str, str]:
    """One `details.causes[]` entry (reason like FieldValueInvalid, FieldValueRequired)."""
    return {"reason": reason, "message": message, "field": field}


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid: `Pod "x" is invalid: [metadata.name: Invalid value: ..., ...]`."""
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qkind = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = causes
    return ApiError(422, "Invalid", f'{qkind} "{name}" is invalid: {joined}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(info: ResourceInfo, name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{qualified(info)} "{name}" is forbidden: {why}',
        details=_details(info, name),
    )


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Gone", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got "{content_type}")',
    )


def not_acceptable(accept: str) -> ApiError:
    return ApiError(
        406,
        "NotAcceptable",
        f"only the following media types are accepted: application/json, application/yaml, application/json;stream=watch (got {accept})",
    )


def too_large_resource_version(requested: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        details={
            "causes": [
                {
                    "reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version",
                }
            ],
            "retryAfterSeconds": 1,
        },
    )


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )

"""Field errors as apimachinery renders them, and the 422 Invalid Status built from them.

`FieldError` is one cause (`reason`, `field`, message body) with the constructors of
apimachinery's `field` package (`required`, `invalid`, `type_invalid`, `not_supported`,
`forbidden`, `duplicate`, `too_long`, `too_many`) and their exact texts
(`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
"string"`); paths render as `spec.replicaSpecs[0].template`, map keys as `labels[app]`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from localcluster.api.types import ApiError
from policies.fieldpath import json_type

__all__ = [
    "FieldError",
    "MapKey",
    "PathPart",
    "go_value",
    "invalid_error",
    "json_type",
    "render_path",
    "too_long_detail",
]


PathPart = str | int


def render_path(parts: tuple[PathPart, ...]) -> str:
    """`spec.replicaSpecs[0].template`, map keys as `labels[app]` (apimachinery style)."""
    out = ""
    for part in parts:
        if isinstance(part, (int, MapKey)):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


class MapKey(str):
    """A key of a map (additionalProperties), rendered in brackets."""


def go_value(value: Any) -> str:
    """A value as apimachinery prints it in `Invalid value: …`."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(json_type(value))


@dataclass(frozen=True)
class FieldError:
    """One apimachinery field error: `reason` is the Status cause reason."""

    reason: str
    field: str
    body: str
    # The node whose value decides ratcheting (None: never ratcheted, e.g. transition rules).
    node: tuple[PathPart, ...] | None = dataclasses.field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.field}: {self.body}" if self.field else self.body

    def cause(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.body, "field": self.field}

    @classmethod
    def required(cls, field: str, detail: str = "") -> FieldError:
        return cls(
            "FieldValueRequired", field, "Required value" + (f": {detail}" if detail else "")
        )

    @classmethod
    def invalid(cls, field: str, value: Any, detail: str) -> FieldError:
        body = f"Invalid value: {go_value(value)}" + (f": {detail}" if detail else "")
        return cls("FieldValueInvalid", field, body)

    @classmethod
    def type_invalid(cls, field: str, value: Any, detail: str) -> FieldError:
        return cls("FieldValueTypeInvalid", field, f"Invalid value: {go_value(value)}: {detail}")

    @classmethod
    def not_supported(cls, field: str, value: Any, allowed: list[Any]) -> FieldError:
        supported = ", ".join(go_value(v) for v in allowed)
        return cls(
            "FieldValueNotSupported",
            field,
            f"Unsupported value: {go_value(value)}: supported values: {supported}",
        )

    @classmethod
    def forbidden(cls, field: str, detail: str) -> FieldError:
        return cls("FieldValueForbidden", field, "Forbidden" + (f": {detail}" if detail else ""))

    @classmethod
    def duplicate(cls, field: str, value: Any) -> FieldError:
        return cls("FieldValueDuplicate", field, f"Duplicate value: {_go_literal(value)}")

    @classmethod
    def too_long(cls, field: str, limit: int) -> FieldError:
        return cls("FieldValueTooLong", field, too_long_detail(limit))

    @classmethod
    def too_many(cls, field: str, count: int, limit: int) -> FieldError:
        unit = "item" if limit == 1 else "items"
        return cls(
            "FieldValueTooMany", field, f"Too many: {count}: must have at most {limit} {unit}"
        )


def too_long_detail(limit: int) -> str:
    """`Too long: …` as Kubernetes 1.32 words every size check (OpenAPI maxLength of custom
    resources, ObjectMeta's total annotation size, a request's fieldManager), checked against
    kube-apiserver v1.32.13 (hack/reference-cluster); later releases say `must have at most`
    for the last two."""
    unit = "byte" if limit == 1 else "bytes"
    return f"Too long: may not be more than {limit} {unit}"


def _go_literal(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{_go_literal(v)}" for k, v in value.items())
        return "map[string]interface {}{" + inner + "}"
    return json.dumps(value)


def invalid_error(kind: str, group: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """The 422 Invalid Status the API server builds from field errors."""
    texts = [str(e) for e in errors]
    aggregate = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {aggregate}',
        details={
            **({"name": name} if name else {}),
            "group": group,
            "kind": kind,
            "causes": [e.cause() for e in errors],
        },
    )

"""Walking an object against a CRD's structural schema: pruning, defaults, OpenAPI validation.

A custom resource goes through the same steps as on a real API server, in the same order:
unknown fields are found and pruned (reported per `fieldValidation`), `null`s in non-nullable
fields are dropped, schema `default`s are applied, and then the object is validated against the
schema's keywords (type, required, enum, bounds, lengths, pattern, format, list uniqueness).
CEL rules run afterwards (`celrules`). The error texts and cause reasons are the
apimachinery ones (`spec.replicas: Invalid value: "string": spec.replicas in body must be of
type integer: "string"`), built by `fielderrors.FieldError`.

Pure functions over plain dicts; the schema is the CRD version's `openAPIV3Schema`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from localcluster.api.fielderrors import FieldError, MapKey, PathPart, json_type, render_path

__all__ = ["apply_defaults", "find_unknown_fields", "ratchet", "validate"]

# --------------------------------------------------------------------------- pruning

_ROOT_ALWAYS = {"apiVersion", "kind", "metadata"}


def find_unknown_fields(
    obj: Any, schema: dict[str, Any], meta_fields: frozenset[str], *, prune: bool
) -> list[str]:
    """The paths of fields the schema does not declare (`spec.foo`), removed when `prune`.
    `metadata` of the root and of embedded resources is checked against `meta_fields`."""
    unknown: list[str] = []
    _prune(obj, schema, (), unknown, meta_fields, prune, root=True)
    return unknown


def _prune(
    value: Any,
    schema: dict[str, Any],
    path: tuple[PathPart, ...],
    unknown: list[str],
    meta_fields: frozenset[str],
    prune: bool,
    *,
    root: bool = False,
) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            child_path = (*path, key)
            if embedded and key in _ROOT_ALWAYS:
                # ObjectMeta whatever the schema says (it may only restrict name/generateName).
                if key == "metadata" and isinstance(value[key], dict):
                    for mk in list(value[key]):
                        if mk not in meta_fields:
                            unknown.append(render_path((*child_path, mk)))
                            if prune:
                                del value[key][mk]
                continue
            if key in props:
                _prune(value[key], props[key], child_path, unknown, meta_fields, prune)
            elif isinstance(extra, dict):
                _prune(value[key], extra, (*path, MapKey(key)), unknown, meta_fields, prune)
            elif extra is True or preserve:
                continue
            else:
                unknown.append(render_path(child_path))
                if prune:
                    del value[key]
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(item, items, (*path, i), unknown, meta_fields, prune)


# --------------------------------------------------------------------------- defaults


def apply_defaults(obj: Any, schema: dict[str, Any]) -> Any:
    """`obj` with `null`s in non-nullable fields dropped and schema defaults filled in, in
    place (defaults apply to absent properties of objects that exist, as on a real server)."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key in list(obj):
            sub = props.get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if obj[key] is None and sub is not None and not sub.get("nullable"):
                del obj[key]
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
        for key, value in obj.items():
            sub = props.get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if sub is not None:
                apply_defaults(value, sub)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in obj:
                apply_defaults(item, items)
    return obj


# --------------------------------------------------------------------------- validation

_TYPE_OK = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    # A float is an integer when integral and within int64, as kube-apiserver decides (2.0 is
    # stored as 2; 1e23 is "number").
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer() and -(2.0**63) <= v < 2.0**63)
    ),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}

_FORMATS: dict[str, re.Pattern[str]] = {
    "date-time": re.compile(
        r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
    ),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "uuid": re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"),
    "ipv4": re.compile(r"^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)$"),
    "hostname": re.compile(
        r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$"
    ),
    "byte": re.compile(r"^[A-Za-z0-9+/]*={0,2}$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
}


def validate(obj: Any, schema: dict[str, Any]) -> list[FieldError]:
    """Every OpenAPI keyword violation in `obj` (already pruned and defaulted); each error
    remembers the node it was found on (for `ratchet`)."""
    errors: list[FieldError] = []
    _validate(obj, schema, (), errors, root=True)
    return errors


def ratchet(errors: list[FieldError], obj: Any, old: Any) -> list[FieldError]:
    """The errors that survive validation ratcheting on update: an error on a node whose value
    is unchanged from the stored object is dropped (so tightening a CRD schema does not block
    writes that leave the offending field alone, e.g. status updates)."""
    return [e for e in errors if e.node is None or _value_at(obj, e.node) != _value_at(old, e.node)]


_ABSENT = object()


def _value_at(obj: Any, parts: tuple[PathPart, ...]) -> Any:
    for part in parts:
        if isinstance(part, int):
            if not isinstance(obj, list) or part >= len(obj):
                return _ABSENT
            obj = obj[part]
        else:
            if not isinstance(obj, dict) or part not in obj:
                return _ABSENT
            obj = obj[part]
    return obj


def _validate(
    value: Any,
    schema: dict[str, Any],
    path: tuple[PathPart, ...],
    errors: list[FieldError],
    *,
    root: bool = False,
) -> None:
    start = len(errors)
    _validate_node(value, schema, path, errors, root=root)
    for i in range(start, len(errors)):
        if errors[i].node == ():
            errors[i] = dataclasses.replace(errors[i], node=path)


def _validate_node(
    value: Any,
    schema: dict[str, Any],
    path: tuple[PathPart, ...],
    errors: list[FieldError],
    *,
    root: bool = False,
) -> None:
    field = render_path(path)
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            errors.append(
                FieldError.type_invalid(
                    field, "null", f'{field} in body must be of type {schema["type"]}: "null"'
                )
            )
        return
    typ = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _TYPE_OK["integer"](value)):
            errors.append(
                FieldError.type_invalid(
                    field,
                    json_type(value),
                    f'{field} in body must be of type integer,string: "{json_type(value)}"',
                )
            )
            return
    elif typ in _TYPE_OK and not _TYPE_OK[typ](value):
        errors.append(
            FieldError.type_invalid(
                field,
                json_type(value),
                f'{field} in body must be of type {typ}: "{json_type(value)}"',
            )
        )
        if typ == "integer" and isinstance(value, float):
            _validate_number(value, schema, field, errors)  # kube-openapi checks bounds too
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(FieldError.not_supported(field, value, list(schema["enum"])))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(value, schema, field, errors)
    elif isinstance(value, str):
        _validate_string(value, schema, field, errors)
    elif isinstance(value, list):
        _validate_list(value, schema, path, errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, errors, root=root)


def _go_float(x: float) -> str:
    """Go's `%v` of a float64 (`strconv.FormatFloat(x, 'g', -1, 64)`): the shortest digits, in
    exponent form from 1e+06 up and below 1e-04 (`2.147483647e+09`)."""
    if x == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(float(x))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # digits before the decimal point
    e = point - 1
    minus = "-" if sign else ""
    if e < -4 or e >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"


def _validate_number(
    value: float, schema: dict[str, Any], field: str, errors: list[FieldError]
) -> None:
    lo, hi = schema.get("minimum"), schema.get("maximum")

    def shown(bound: float) -> str:  # kube-openapi prints a float's bounds as float64s
        return _go_float(bound) if isinstance(value, float) else str(bound)

    if lo is not None:
        if schema.get("exclusiveMinimum") and value <= lo:
            errors.append(
                FieldError.invalid(
                    field, value, f"{field} in body should be greater than {shown(lo)}"
                )
            )
        elif value < lo:
            errors.append(
                FieldError.invalid(
                    field,
                    value,
                    f"{field} in body should be greater than or equal to {shown(lo)}",
                )
            )
    if hi is not None:
        if schema.get("exclusiveMaximum") and value >= hi:
            errors.append(
                FieldError.invalid(field, value, f"{field} in body should be less than {shown(hi)}")
            )
        elif value > hi:
            errors.append(
                FieldError.invalid(
                    field, value, f"{field} in body should be less than or equal to {shown(hi)}"
                )
            )
    step = schema.get("multipleOf")
    if step and (value / step) != int(value / step):
        errors.append(
            FieldError.invalid(field, value, f"{field} in body should be a multiple of {step}")
        )


def _validate_string(
    value: str, schema: dict[str, Any], field: str, errors: list[FieldError]
) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(FieldError.too_long(field, int(schema["maxLength"])))
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            FieldError.invalid(
                field, value, f"{field} in body should be at least {schema['minLength']} chars long"
            )
        )
    pattern = schema.get("pattern")
    if pattern and not _pattern(pattern).search(value):
        errors.append(FieldError.invalid(field, value, f"{field} in body should match '{pattern}'"))
    fmt = schema.get("format")
    if fmt and not _format_ok(fmt, value):
        errors.append(
            FieldError.invalid(
                field, value, f"{field} in body must be of type {fmt}: {json.dumps(value)}"
            )
        )


def _format_ok(fmt: str, value: str) -> bool:
    if fmt == "date-time":
        if not _FORMATS["date-time"].match(value):
            return False
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            return False
        return True
    regex = _FORMATS.get(fmt)
    return regex is None or bool(regex.match(value))


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(pattern: str) -> re.Pattern[str]:
    compiled = _PATTERNS.get(pattern)
    if compiled is None:
        compiled = _PATTERNS[pattern] = re.compile(pattern)
    return compiled


def _validate_list(
    value: list[Any], schema: dict[str, Any], path: tuple[PathPart, ...], errors: list[FieldError]
) -> None:
    field = render_path(path)
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(FieldError.too_many(field, len(value), int(schema["maxItems"])))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(
            FieldError.invalid(
                field, value, f"{field} in body should have at least {schema['minItems']} items"
            )
        )
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                errors.append(FieldError.duplicate(render_path((*path, i)), item))
            else:
                seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: list[dict[str, Any]] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            ident = {k: item.get(k) for k in keys if k in item}
            if ident in seen_keys:
                errors.append(FieldError.duplicate(render_path((*path, i)), ident))
            else:
                seen_keys.append(ident)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, (*path, i), errors)


def _validate_object(
    value: dict[str, Any],
    schema: dict[str, Any],
    path: tuple[PathPart, ...],
    errors: list[FieldError],
    *,
    root: bool,
) -> None:
    # kube-openapi's object validator, in its order: property counts, values of map keys
    # (additionalProperties), declared properties, then required ones. (Siblings among the
    # declared properties come in Go map order on a real server, which varies from request to
    # request; here they come in the object's order.)
    field = render_path(path)
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(
            FieldError.invalid(
                field,
                value,
                f"{field} in body should have at least {schema['minProperties']} properties",
            )
        )
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(FieldError.too_many(field, len(value), int(schema["maxProperties"])))
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, item in value.items():
            if key not in props and not (root and key in _ROOT_ALWAYS):
                # kube-openapi's object validator joins a map key with a dot (`requests.cpu`),
                # unlike apimachinery's field.Path.Key (`requests[cpu]`) in built-in validation.
                _validate(item, extra, (*path, key), errors)
    for key, item in value.items():
        if key in props:
            _validate(item, props[key], (*path, key), errors)
    for name in schema.get("required") or []:
        if name not in value:
            errors.append(FieldError.required(render_path((*path, name))))

"""Schema checks of the write path: custom resources, built-in kinds and CRDs themselves.

* `prepare_custom_object` — what the API server does to a custom resource between mutating and
  validating admission: prune unknown fields (reporting them per `fieldValidation`: Strict → 400
  `strict decoding error: unknown field "spec.foo"`, Warn → a warning per field, Ignore →
  silently), drop `null`s in non-nullable fields, apply schema defaults, validate the OpenAPI
  keywords (`structural`) and then the CEL rules (`celrules`; skipped, as on a real server, after
  a type, enum, required, too-long or too-many error). On update, errors on nodes whose value
  is unchanged from the stored object are dropped (validation ratcheting, on by default since
  Kubernetes 1.30; transition rules are never ratcheted). Errors are one 422 Invalid with a
  cause per field.
* `validate_builtin` — unknown and duplicate fields of built-in kinds against the JSON schemas
  of Kubernetes v1.32 shipped in kubernetes-validate, plus the JSON type errors a Go decoder
  reports (`json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of
  type int32`, always a 400).
* `validate_crd` (from `crdvalidation`) — a CRD the real server would refuse: names, versions,
  non-structural schemas, CEL rules that do not compile.

`fieldValidation` values: `Strict`, `Warn` (also the default for an empty value, as since
Kubernetes 1.27), `Ignore`. Duplicate fields can only be seen in the raw body: the pipeline
finds them with `find_duplicate_fields(body)` and passes them in.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Sequence
from typing import Any

from localcluster.api.fielderrors import FieldError, invalid_error, render_path
from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema import builtindefs, celrules, structural
from localcluster.schema.celk8s import Quantity
from localcluster.schema.crdvalidation import validate_crd

__all__ = [
    "default_custom_object",
    "find_duplicate_fields",
    "invalid_error",
    "prepare_custom_object",
    "validate_builtin",
    "validate_crd",
]

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# Errors after which the API server does not run CEL rules (their cost would be unbounded).
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)


@functools.cache
def _meta_fields() -> frozenset[str]:
    return frozenset(builtindefs.builtin_definitions()[_OBJECT_META]["properties"])


def _mode(field_validation: str) -> str:
    mode = (field_validation or "Warn").strip()
    if mode not in ("Strict", "Warn", "Ignore"):
        raise ApiError(
            400,
            "BadRequest",
            f'fieldValidation parameter "{mode}" is not one of "Strict", "Warn", "Ignore"',
        )
    return mode


def _schema(info: ResourceInfo) -> dict[str, Any] | None:
    schema = ((info.crd_version or {}).get("schema") or {}).get("openAPIV3Schema")
    return schema if isinstance(schema, dict) else None


def _strict_error(info: ResourceInfo, problems: Sequence[str]) -> ApiError:
    return ApiError(
        400,
        "BadRequest",
        f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
        f"strict decoding error: {', '.join(problems)}",
    )


def _report(
    info: ResourceInfo, mode: str, unknown: Sequence[str], duplicates: Sequence[str]
) -> list[str]:
    problems = [f'unknown field "{p}"' for p in unknown] + [
        f'duplicate field "{p}"' for p in duplicates
    ]
    if problems and mode == "Strict":
        raise _strict_error(info, problems)
    return problems if mode == "Warn" else []


def prepare_custom_object(
    info: ResourceInfo,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    field_validation: str,
    duplicates: Sequence[str] = (),
    meta_causes: Sequence[dict[str, str]] = (),
) -> tuple[dict[str, Any], list[str]]:
    """The pruned, defaulted object and warnings; raises ApiError 400 (Strict and unknown or
    duplicate fields) or 422 Invalid (schema or CEL violations, a cause per field).

    `meta_causes` (ObjectMeta's validation, done by the caller) come first in that 422, as
    kube-apiserver's custom resource strategy lists them, and count for the rule of skipping
    CEL after a blocking error."""
    mode = _mode(field_validation)
    schema = _schema(info)
    result = copy.deepcopy(obj)
    if schema is None:
        if meta_causes:
            raise _meta_invalid(info, result, meta_causes)
        return result, _report(info, mode, (), duplicates)
    unknown = structural.find_unknown_fields(result, schema, _meta_fields(), prune=True)
    warnings = _report(info, mode, unknown, duplicates)
    structural.apply_defaults(result, schema)
    errors = [FieldError(c["reason"], c.get("field", ""), c["message"]) for c in meta_causes]
    schema_errors = structural.validate(result, schema)
    errors += structural.ratchet(schema_errors, result, old) if old is not None else schema_errors
    if celrules.has_rules(schema):
        if any(e.reason in _BLOCKING for e in errors):
            errors.append(
                FieldError(
                    "FieldValueInvalid",
                    "<nil>",
                    'Invalid value: "null": some validation rules were not checked because the '
                    "object was invalid; correct the existing errors to complete validation",
                )
            )
        else:
            rule_errors = celrules.evaluate_rules(result, old, schema)
            errors.extend(structural.ratchet(rule_errors, result, old) if old else rule_errors)
    if errors:
        name = str((result.get("metadata") or {}).get("name", ""))
        raise invalid_error(info.kind, info.group, name, errors)
    return result, warnings


def _meta_invalid(
    info: ResourceInfo, obj: dict[str, Any], causes: Sequence[dict[str, str]]
) -> ApiError:
    errors = [FieldError(c["reason"], c.get("field", ""), c["message"]) for c in causes]
    return invalid_error(
        info.kind, info.group, str((obj.get("metadata") or {}).get("name", "")), errors
    )


def default_custom_object(info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with schema defaults applied (a real server also defaults objects read from
    storage, so a default added to a CRD later shows up on read)."""
    schema = _schema(info)
    if schema is None:
        return obj
    defaulted: dict[str, Any] = structural.apply_defaults(copy.deepcopy(obj), schema)
    return defaulted


# --------------------------------------------------------------------------- built-in kinds


def validate_builtin(
    info: ResourceInfo,
    obj: dict[str, Any],
    *,
    field_validation: str,
    duplicates: Sequence[str] = (),
) -> list[str]:
    """Warnings for unknown/duplicate fields of a built-in kind (Warn); raises ApiError 400 for
    them with Strict, and for JSON type errors whatever the mode. Unknown fields are removed
    from `obj` in place, as decoding into Go structs drops them on a real server. Kinds
    kubernetes-validate does not know pass unchecked."""
    mode = _mode(field_validation)
    defs = builtindefs.builtin_definitions()
    root = builtindefs.definition_name(info)
    if root not in defs:
        return _report(info, mode, (), duplicates)
    unknown: list[str] = []
    type_error = _walk_builtin(obj, root, defs, (), (), unknown)
    if type_error:
        raise ApiError(
            400,
            "BadRequest",
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            f"{type_error}",
        )
    return _report(info, mode, unknown, duplicates)


def _resolve(node: dict[str, Any], defs: dict[str, Any], struct: str) -> tuple[dict[str, Any], str]:
    while True:
        ref = node.get("$ref")
        if not ref:
            return node, struct
        struct = str(ref).rsplit("/", 1)[-1]
        node = defs.get(struct, {})


def _go_type(node: dict[str, Any], defs: dict[str, Any]) -> str:
    resolved, name = _resolve(node, defs, "")
    if name:
        short = name.rsplit(".", 1)[-1]
        return {"IntOrString": "intstr.IntOrString", "Quantity": "resource.Quantity"}.get(
            short, short
        )
    typ = resolved.get("type")
    typ = next(t for t in typ if t != "null") if isinstance(typ, list) and typ else typ
    fmt = resolved.get("format", "")
    if typ == "integer":
        return fmt if fmt in ("int32", "int64") else "int"
    if typ == "number":
        return "float64"
    if typ == "boolean":
        return "bool"
    if typ == "array":
        return "[]" + _go_type(resolved.get("items") or {}, defs)
    if typ == "object":
        extra = resolved.get("additionalProperties")
        if isinstance(extra, dict):
            return "map[string]" + _go_type(extra, defs)
        return "map[string]interface {}"
    return str(typ or "interface {}")


_JSON_KINDS = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "bool",
    int: "number",
    float: "number",
}


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _type_matches(value: Any, node: dict[str, Any]) -> bool:
    if "oneOf" in node:  # IntOrString, Quantity
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    typ = node.get("type")
    if not typ or value is None:  # untyped; null decodes as the zero value
        return True
    is_bool = isinstance(value, bool)
    for t in typ if isinstance(typ, list) else (typ,):
        wanted = _PY_TYPES.get(t)
        if wanted is not None and isinstance(value, wanted) and (t == "boolean" or not is_bool):
            return True
    return False


def _walk_builtin(
    value: Any,
    node_name: str,
    defs: dict[str, Any],
    path: tuple[str | int, ...],
    go_path: tuple[str, ...],
    unknown: list[str],
    node: dict[str, Any] | None = None,
    struct: str = "",
) -> str:
    """Collect unknown fields; return the first JSON type error (or "")."""
    if node is None:
        node = defs[node_name]
        struct = node_name
    raw = node
    node, struct = _resolve(node, defs, struct)
    if not _type_matches(value, node):
        kind = _JSON_KINDS.get(type(value), "value")
        field = ".".join(go_path)
        parent = struct.rsplit(".", 1)[-1] if go_path else ""
        where = f" into Go struct field {parent}.{field}" if go_path else " into Go value"
        return f"json: cannot unmarshal {kind}{where} of type {_go_type(raw, defs)}"
    if isinstance(value, str) and struct.endswith(_QUANTITY_STRUCT) and not _is_quantity(value):
        return _QUANTITY_FORMAT
    if isinstance(value, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        for key, item in list(value.items()):
            if props and key in props:
                err = _walk_builtin(
                    item,
                    node_name,
                    defs,
                    (*path, key),
                    (*go_path, key),
                    unknown,
                    props[key],
                    struct,
                )
            elif isinstance(extra, dict):
                err = _walk_builtin(
                    item, node_name, defs, (*path, key), go_path, unknown, extra, struct
                )
            elif props and not extra:
                unknown.append(render_path((*tuple(path), key)))
                del value[key]  # a Go decoder drops unknown fields
                continue
            else:
                continue
            if err:
                return err
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                err = _walk_builtin(
                    item, node_name, defs, (*path, i), go_path, unknown, items, struct
                )
                if err:
                    return err
    return ""


_QUANTITY_STRUCT = ".resource.Quantity"
# resource.ErrFormatWrong, as the decoder reports a Quantity string that does not parse.
_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def _is_quantity(text: str) -> bool:
    try:
        Quantity(text)
    except ValueError:  # CelFunctionError included
        return False
    return True


def find_duplicate_fields(body: bytes) -> list[str]:
    """Paths of keys that occur twice in one JSON object of `body` (`metadata.name`); [] when
    the body is not JSON (YAML bodies are checked by their own loader)."""
    found: list[str] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                found.append(key)
            seen.add(key)
            out[key] = value
        return out

    try:
        json.loads(body, object_pairs_hook=hook)
    except ValueError:
        return []
    if not found:
        return []
    # Second pass with paths, only when there is something to report.
    return _duplicate_paths(json.loads(body, object_pairs_hook=lambda p: _Pairs(p)), ())


class _Pairs(list[tuple[str, Any]]):
    """A JSON object kept as its list of pairs."""


def _duplicate_paths(value: Any, path: tuple[str | int, ...]) -> list[str]:
    out: list[str] = []
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, item in value:
            if key in seen:
                out.append(render_path((*path, key)))
            seen.add(key)
            out.extend(_duplicate_paths(item, (*path, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_duplicate_paths(item, (*path, i)))
    return out

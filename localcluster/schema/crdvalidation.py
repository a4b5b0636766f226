"""Validation of CustomResourceDefinitions: what the API server refuses before serving a CRD.

Names (`metadata.name` = `<plural>.<group>`, lowercase plural, a dotted group), scope, exactly
one storage version, and the structural-schema rules: a type on every node (unless
int-or-string or preserve-unknown-fields), no `properties` together with
`additionalProperties`, a root `metadata` restricted to name/generateName, list-map keys that
exist and are required or defaulted; `x-kubernetes-validations` whose rule and
messageExpression compile (syntax and unknown functions), whose reason is known, whose
fieldPath exists, and which use `oldSelf` only where old and new values correlate (not below
atomic lists or sets); printer columns with a known type and a simple JSONPath. Errors use the
real field paths
(`spec.versions[0].schema.openAPIV3Schema.properties[spec].type`).
"""

from __future__ import annotations

import json
from typing import Any

from localcluster.api.fielderrors import FieldError, invalid_error
from localcluster.schema import celrules
from localcluster.schema.jsonpath import jsonpath_parses

__all__ = ["validate_crd"]


def validate_crd(crd: dict[str, Any]) -> None:
    """Raise ApiError 422 for a CRD the real API server would refuse."""
    errors: list[FieldError] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group") or "")
    plural = str(names.get("plural") or "")
    name = str((crd.get("metadata") or {}).get("name") or "")
    if not group:
        errors.append(FieldError.required("spec.group"))
    elif "." not in group:
        errors.append(
            FieldError.invalid("spec.group", group, "should be a domain with at least one dot")
        )
    if not plural:
        errors.append(FieldError.required("spec.names.plural"))
    elif plural != plural.lower():
        errors.append(
            FieldError.invalid(
                "spec.names.plural",
                plural,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'",
            )
        )
    if not names.get("kind"):
        errors.append(FieldError.required("spec.names.kind"))
    if group and plural and name != f"{plural}.{group}":
        errors.append(
            FieldError.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(
            FieldError.not_supported("spec.scope", spec.get("scope", ""), ["Cluster", "Namespaced"])
        )
    versions = spec.get("versions") or []
    if not versions:
        errors.append(
            FieldError.required(
                "spec.versions", "must have exactly one version marked as storage version"
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(
            FieldError.invalid(
                "spec.versions", versions_summary(versions),
                "must have exactly one version marked as storage version",
            )
        )  # fmt: skip
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        base = f"spec.versions[{i}].schema.openAPIV3Schema"
        if schema is None:
            errors.append(FieldError.required(base, "schemas are required"))
            continue
        errors.extend(_structural_errors(schema, base, root=True))
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            errors.extend(
                _printer_column(column, f"spec.versions[{i}].additionalPrinterColumns[{j}]")
            )
    if errors:
        raise invalid_error("CustomResourceDefinition", "apiextensions.k8s.io", name, errors)


def versions_summary(versions: list[dict[str, Any]]) -> str:
    return json.dumps([v.get("name") for v in versions])


_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
_RULE_REASONS = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
]


def _printer_column(column: Any, path: str) -> list[FieldError]:
    column = column if isinstance(column, dict) else {}
    errors: list[FieldError] = []
    if not column.get("name"):
        errors.append(FieldError.required(f"{path}.name"))
    if column.get("type") not in _COLUMN_TYPES:
        errors.append(
            FieldError.not_supported(f"{path}.type", column.get("type", ""), _COLUMN_TYPES)
        )
    json_path = str(column.get("jsonPath") or "")
    if not json_path:
        errors.append(FieldError.required(f"{path}.jsonPath"))
    elif not json_path.startswith(".") or not jsonpath_parses(json_path):
        errors.append(
            FieldError.invalid(
                f"{path}.jsonPath", json_path, "must be a simple json path starting with ."
            )
        )
    return errors


def _rule_errors(
    rule: Any, schema: dict[str, Any], path: str, uncorrelatable: str
) -> list[FieldError]:
    """One `x-kubernetes-validations` entry: rule and messageExpression compile, reason is
    known, fieldPath exists, and `oldSelf` is only used where old and new nodes correlate."""
    rule = rule if isinstance(rule, dict) else {}
    errors: list[FieldError] = []
    text = str(rule.get("rule", ""))
    problem = celrules.compile_error(text) if text else "rule must not be empty"
    if problem:
        errors.append(FieldError.invalid(f"{path}.rule", text, f"compilation failed: {problem}"))
    elif uncorrelatable and celrules.is_transition_rule(text):
        errors.append(
            FieldError.invalid(
                f"{path}.rule", text,
                f"oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}",
            )
        )  # fmt: skip
    expression = rule.get("messageExpression")
    if expression:
        problem = celrules.compile_error(str(expression))
        if problem:
            errors.append(
                FieldError.invalid(
                    f"{path}.messageExpression", expression,
                    f"messageExpression compilation failed: {problem}",
                )
            )  # fmt: skip
    reason = rule.get("reason")
    if reason is not None and reason not in _RULE_REASONS:
        errors.append(FieldError.not_supported(f"{path}.reason", reason, _RULE_REASONS))
    field_path = rule.get("fieldPath")
    if field_path and not _field_path_exists(schema, str(field_path)):
        errors.append(
            FieldError.invalid(f"{path}.fieldPath", field_path, "fieldPath must be a valid path")
        )
    return errors


def _field_path_exists(schema: dict[str, Any], field_path: str) -> bool:
    node: Any = schema
    for part in celrules.field_path_parts(field_path):
        if not isinstance(node, dict):
            return False
        if isinstance(part, int):
            node = node.get("items")
            continue
        props = node.get("properties") or {}
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return False
    return node is not None


def _structural_errors(
    schema: Any, path: str, *, root: bool = False, data: str = "", uncorrelatable: str = ""
) -> list[FieldError]:
    """Structural-schema errors of `schema` at `path`; `data` is the object path the node
    describes and `uncorrelatable` the list (if any) below which old and new values no longer
    correlate (items of atomic lists and sets)."""
    if not isinstance(schema, dict):
        return [FieldError.invalid(path, "", "must be an object")]
    errors: list[FieldError] = []
    typ = schema.get("type")
    untyped_ok = schema.get("x-kubernetes-int-or-string") or schema.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if root and typ != "object":
        errors.append(FieldError.invalid(f"{path}.type", typ or "", 'must be "object" at the root'))
    elif not typ and not untyped_ok:
        errors.append(
            FieldError.required(f"{path}.type", "must not be empty for specified object fields")
        )
    if schema.get("properties") and isinstance(schema.get("additionalProperties"), dict):
        errors.append(
            FieldError.forbidden(
                f"{path}.additionalProperties",
                "additionalProperties and properties are mutual exclusive",
            )
        )
    if root:
        meta = (schema.get("properties") or {}).get("metadata")
        if isinstance(meta, dict):
            extra = set(meta.get("properties") or {}) - {"name", "generateName"}
            if extra or set(meta) - {"type", "properties", "description"}:
                errors.append(
                    FieldError.forbidden(
                        f"{path}.properties[metadata]",
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    )
                )
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        items = schema.get("items") or {}
        if not keys:
            errors.append(
                FieldError.required(
                    f"{path}.x-kubernetes-list-map-keys",
                    "must not be empty if x-kubernetes-list-type is map",
                )
            )
        if items.get("type") != "object":
            errors.append(
                FieldError.invalid(
                    f"{path}.items.type", items.get("type", ""),
                    "must be object if parent array's x-kubernetes-list-type is map",
                )
            )  # fmt: skip
        for key in keys:
            sub = (items.get("properties") or {}).get(key)
            if sub is None:
                errors.append(
                    FieldError.invalid(
                        f"{path}.x-kubernetes-list-map-keys", keys,
                        "entries must all be names of item properties",
                    )
                )  # fmt: skip
            elif key not in (items.get("required") or []) and "default" not in sub:
                errors.append(
                    FieldError.required(
                        f"{path}.items.properties[{key}]",
                        "this property is in x-kubernetes-list-map-keys, so it must have a "
                        "default or be a required property",
                    )
                )
    elif list_type not in (None, "atomic", "set"):
        errors.append(
            FieldError.not_supported(
                f"{path}.x-kubernetes-list-type", list_type, ["atomic", "set", "map"]
            )
        )
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        errors.extend(
            _rule_errors(rule, schema, f"{path}.x-kubernetes-validations[{i}]", uncorrelatable)
        )
    for key, sub in (schema.get("properties") or {}).items():
        child = f"{data}.{key}" if data else key
        errors.extend(
            _structural_errors(
                sub, f"{path}.properties[{key}]", data=child, uncorrelatable=uncorrelatable
            )
        )
    if isinstance(schema.get("additionalProperties"), dict):
        errors.extend(
            _structural_errors(
                schema["additionalProperties"], f"{path}.additionalProperties",
                data=data, uncorrelatable=uncorrelatable,
            )
        )  # fmt: skip
    if isinstance(schema.get("items"), dict):
        below = uncorrelatable or ("" if list_type == "map" else data or "self")
        errors.extend(
            _structural_errors(schema["items"], f"{path}.items", data=data, uncorrelatable=below)
        )
    elif schema.get("type") == "array":
        errors.append(FieldError.required(f"{path}.items", "must be specified"))
    return errors

"""Strict decoding of a training job against its structural schema: unknown fields and types.

A real API server, asked with `fieldValidation=Strict` (what kubectl sends), rejects fields its
schema does not know and values of the wrong JSON type before any rule runs. `trainops check`
and the GitOps pre-flight have no server at all, so `check(obj)` repeats that step from the same
schema the CRDs carry (`policies.schema`); the webhook's `/validate` skips it
(`policies.validate(..., schema_checked=True)`), since the API server has just done it:

- an unknown field is reported on its parent, `spec.replicaSpecs[1].template: Forbidden:
  unknown field "containers"`, so the path points at an object that exists in the user's file
  (the error's `value` is the unknown key, not shown in the message, so `trainops check` can
  point at the key's own line);
- a value of the wrong type is `Invalid` with the expected type;
- inside the embedded pod template, missing `required` fields, duplicate keys of
  `x-kubernetes-list-type: map` lists and duplicate items of `set` lists are reported as the
  server would (our own fields' required-ness, enums and ranges, and the pod fields the rules
  explain better, are the semantic rules' business, so nothing is said twice);
- the `maxItems`/`maxLength` bounds that exist only to bound CEL cost (pod containers,
  debug/resume command and args) are enforced, so the CRD never refuses what we admit;
- `null` counts as absent, as the server prunes nulls on non-nullable fields;
- `status` and the root `metadata` are skipped: the server owns both (status is ignored on
  writes to the main resource; ObjectMeta has its own validation).

The schema is compiled once per kind into a small tree of `_Node`s and walked by hand: no
jsonschema per request, paths built only when something is wrong. Never raises on arbitrary
input: recursion follows the schema, which is finite, not the object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from policies import fieldpath
from policies.fieldpath import ErrorType, FieldError, Path
from policies.schema import openapi_schema

__all__ = ["check", "source_parts"]

_SKIPPED_ROOT_FIELDS = frozenset({"metadata", "status"})
_SCALARS = (str, int, float, bool, type(None))
_EXPECTED = {"int-or-string": "integer or string"}
_INT_BITS = {"int32": 32, "int64": 64}


def check(obj: Any) -> list[FieldError]:
    """Unknown fields and type mismatches in a whole job object (empty when it decodes)."""
    if not isinstance(obj, dict):
        return [fieldpath.invalid(Path(), fieldpath.json_type(obj), "must be of type object")]
    kind = obj.get("kind")
    root = _compiled(kind) if isinstance(kind, str) else None
    if root is None:
        return []
    errors: list[FieldError] = []
    for key, value in obj.items():
        if key in _SKIPPED_ROOT_FIELDS or value is None:
            continue
        child = root.props.get(key) if isinstance(key, str) else None
        if child is None:
            errors.append(_unknown(Path(), key))
        else:
            _walk(child, value, (None, key), errors)
    return errors


def source_parts(error: FieldError) -> tuple[str | int, ...]:
    """The plain path of the node a user should look at for `error`.

    Usually the error's own path; for an unknown field, the unknown key under it (the error
    names the parent, which exists in the schema, but the key is what is wrong in the file).
    `trainops check` and the GitOps pre-flight map this to a line of the source YAML.
    """
    parts = error.path.plain_parts()
    if error.type is ErrorType.FORBIDDEN and error.detail.startswith("unknown field"):
        return (*parts, str(error.value))
    return parts


# --- compiled schema --------------------------------------------------------------------------

_EXACT_TYPES: dict[str, frozenset[type]] = {
    "object": frozenset({dict}),
    "array": frozenset({list}),
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "int-or-string": frozenset({int, str}),
}


# Paths under construction are linked pairs `(parent, part)` (root: `None`), so descending costs
# one small tuple, and a `Path` is only built when something is wrong.
_Parts = tuple[Any, Any] | None
_Checker = Callable[[Any, _Parts, list[FieldError]], None]


@dataclass(eq=False)
class _Node:
    kind: str  # object, array, string, integer, number, boolean, int-or-string, any
    props: dict[str, _Node] = field(default_factory=dict)
    additional: _Node | None = None
    items: _Node | None = None
    required: tuple[str, ...] = ()
    map_keys: tuple[tuple[str, Any], ...] = ()  # (key, default) of list-type map lists
    is_set: bool = False  # x-kubernetes-list-type: set (scalar items, each at most once)
    max_items: int | None = None
    max_length: int | None = None
    int_bits: int | None = None  # 32 or 64: integers of `format: int32` / `int64`
    # Python types accepted without further thought (the fast path); others go to `_walk`.
    exact: frozenset[type] = frozenset()
    is_object: bool = False
    is_array: bool = False
    # Objects and arrays: checks a value of an exact type (built once, see `_object_checker`).
    check: _Checker | None = None


@cache
def _compiled(kind: Any) -> _Node | None:
    try:
        schema = openapi_schema(kind)
    except (ValueError, TypeError):
        return None
    return _compile(schema, (), in_template=False)


_POD = ("spec", "replicaSpecs", "*", "template", "spec")
_REQUIRED_BY_RULES: dict[tuple[str, ...], frozenset[str]] = {
    _POD: frozenset({"containers"}),
    (*_POD, "containers", "*"): frozenset({"name"}),
    (*_POD, "initContainers", "*"): frozenset({"name"}),
}
"""Required pod fields the semantic rules report themselves, with a more helpful message."""


def _compile(schema: dict[str, Any], location: tuple[str, ...], *, in_template: bool) -> _Node:
    if schema.get("x-kubernetes-int-or-string"):
        return _Node("int-or-string", exact=_EXACT_TYPES["int-or-string"])
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return _Node("any")
    kind = schema["type"]
    node = _Node(kind, exact=_EXACT_TYPES[kind])
    if (
        kind == "string"
        and schema.get("maxLength") is not None
        and not ("enum" in schema or "pattern" in schema)
    ):
        node.exact = frozenset()  # take the slow path, which checks the length
    if kind == "integer" and schema.get("format") in _INT_BITS:
        node.int_bits = _INT_BITS[schema["format"]]
        node.exact = frozenset()  # take the slow path, which checks the range
    node.is_object = kind == "object"
    node.is_array = kind == "array"
    for name, sub in schema.get("properties", {}).items():
        node.props[name] = _compile(
            sub, (*location, name), in_template=in_template or name == "template"
        )
    if "additionalProperties" in schema:
        node.additional = _compile(
            schema["additionalProperties"], (*location, "{}"), in_template=in_template
        )
    if "items" in schema:
        node.items = _compile(schema["items"], (*location, "*"), in_template=in_template)
    if in_template or not (
        "enum" in schema or "pattern" in schema or "x-kubernetes-list-map-keys" in schema
    ):
        # Bounds that exist for CEL cost only; our enums, patterns and list-map lists are the
        # semantic rules' (which say NotSupported, Invalid or Duplicate instead).
        node.max_items = schema.get("maxItems")
        node.max_length = schema.get("maxLength")
    if in_template:
        skip = _REQUIRED_BY_RULES.get(location, frozenset())
        node.required = tuple(r for r in schema.get("required", ()) if r not in skip)
        node.is_set = schema.get("x-kubernetes-list-type") == "set"
        if schema.get("x-kubernetes-list-type") == "map":
            item_props = schema["items"].get("properties", {})
            node.map_keys = tuple(
                (k, item_props.get(k, {}).get("default"))
                for k in schema.get("x-kubernetes-list-map-keys", ())
            )
    if node.is_object:
        node.check = _object_checker(node)
    elif node.is_array:
        node.check = _array_checker(node)
    return node


# --- walking ----------------------------------------------------------------------------------


class _MapKey(str):
    """A map key in a path under construction (becomes `Path.key`, which decides the style)."""


def _path(parts: _Parts) -> Path:
    chain: list[Any] = []
    while parts is not None:
        parts, part = parts
        chain.append(part)
    path = Path()
    for part in reversed(chain):
        if isinstance(part, _MapKey):
            path = path.key(str(part))
        elif isinstance(part, int):
            path = path.index(part)
        else:
            path = path.child(part)
    return path


def _walk(node: _Node, value: Any, parts: _Parts, errors: list[FieldError]) -> None:
    """Check `value` against `node` (the slow path: anything not of an exact accepted type)."""
    kind = node.kind
    if kind == "object":
        if not isinstance(value, dict):
            errors.append(_wrong_type(parts, value, "object"))
            return
        assert node.check is not None
        node.check(value, parts, errors)
    elif kind == "array":
        if not isinstance(value, list):
            errors.append(_wrong_type(parts, value, "array"))
            return
        assert node.check is not None
        node.check(value, parts, errors)
    elif kind != "any" and not _scalar_ok(kind, value):
        errors.append(_wrong_type(parts, value, _EXPECTED.get(kind, kind)))
    elif node.int_bits is not None and not -(2 ** (node.int_bits - 1)) <= value < 2 ** (
        node.int_bits - 1
    ):
        bits = node.int_bits
        errors.append(
            fieldpath.invalid(
                _path(parts),
                value,
                f"must be a {bits}-bit integer, between {-(2 ** (bits - 1))} and {2 ** (bits - 1) - 1}",
            )
        )
    elif node.max_length is not None and isinstance(value, str):
        size = len(value.encode("utf-8"))
        if size > node.max_length:
            errors.append(fieldpath.too_long(_path(parts), value, node.max_length))


# The fast path. Each object and array node gets its own checker closure, built once per kind,
# holding everything it needs in local variables: per property the exact Python types accepted
# without thought, the child's checker (None for scalars) and the child node (for the slow
# path). A valid job is then one dict lookup and one type test per field, and one call per
# object or array; nothing else is allocated but the linked path pair of each container.


def _object_checker(node: _Node) -> _Checker:
    table = {name: (child.exact, child.check, child) for name, child in node.props.items()}
    lookup = table.get
    extra = node.additional
    extra_exact = extra.exact if extra is not None else frozenset()
    extra_check = extra.check if extra is not None else None
    required_names = node.required

    def check_object(value: dict[Any, Any], parts: _Parts, errors: list[FieldError]) -> None:
        for key, child_value in value.items():
            entry = lookup(key)
            if entry is not None:
                exact, check, child = entry
                if type(child_value) in exact:
                    if check is not None:
                        check(child_value, (parts, key), errors)
                elif child_value is not None:
                    _walk(child, child_value, (parts, key), errors)
            elif child_value is None:
                continue
            elif extra is None or not isinstance(key, str):
                errors.append(_unknown(_path(parts), key))
            elif type(child_value) in extra_exact:
                if extra_check is not None:
                    extra_check(child_value, (parts, _MapKey(key)), errors)
            else:
                _walk(extra, child_value, (parts, _MapKey(key)), errors)
        for name in required_names:
            if value.get(name) is None:
                errors.append(fieldpath.required(_path((parts, name))))

    return check_object


def _array_checker(node: _Node) -> _Checker:
    items = node.items
    if items is None:
        return _accept
    item_node: _Node = items
    max_items = node.max_items
    map_keys = node.map_keys
    is_set = node.is_set
    exact = items.exact
    item_check = items.check
    expected = _EXPECTED.get(items.kind, items.kind)

    def check_array(value: list[Any], parts: _Parts, errors: list[FieldError]) -> None:
        if max_items is not None and len(value) > max_items:
            errors.append(_too_many(parts, len(value), max_items))
        if item_check is not None:
            for i, item in enumerate(value):
                if type(item) in exact:
                    item_check(item, (parts, i), errors)
                elif item is None:
                    errors.append(_wrong_type((parts, i), item, expected))
                else:
                    _walk(item_node, item, (parts, i), errors)
        else:
            for item in value:  # scalars: no index is needed unless one is wrong
                if type(item) not in exact:
                    _scalar_items(item_node, value, parts, errors)
                    break
        if map_keys and len(value) > 1:
            _check_map_keys(map_keys, value, parts, errors)
        elif is_set and len(value) > 1:
            _check_set(value, parts, errors)

    return check_array


def _scalar_items(node: _Node, value: list[Any], parts: _Parts, errors: list[FieldError]) -> None:
    """Report every item of a scalar list that is not of an exact accepted type."""
    expected = _EXPECTED.get(node.kind, node.kind)
    for i, item in enumerate(value):
        if type(item) in node.exact:
            continue
        if item is None:
            errors.append(_wrong_type((parts, i), item, expected))
        else:
            _walk(node, item, (parts, i), errors)


def _accept(value: Any, parts: _Parts, errors: list[FieldError]) -> None:
    return None


def _check_map_keys(
    map_keys: tuple[tuple[str, Any], ...], value: list[Any], parts: _Parts, errors: list[FieldError]
) -> None:
    seen: set[tuple[Any, ...]] = set()
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            continue
        shown = {k: item.get(k, default) for k, default in map_keys}
        if not all(isinstance(v, _SCALARS) for v in shown.values()):
            continue  # a key of the wrong type is reported by the walk
        key = tuple(shown.values())
        if key in seen:
            errors.append(fieldpath.duplicate(_path((parts, i)), shown))
        seen.add(key)


def _check_set(value: list[Any], parts: _Parts, errors: list[FieldError]) -> None:
    seen: set[Any] = set()
    for i, item in enumerate(value):
        if not isinstance(item, _SCALARS) or item is None:
            continue
        if item in seen:
            errors.append(fieldpath.duplicate(_path((parts, i)), item))
        seen.add(item)


def _scalar_ok(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    if kind == "int-or-string":
        return isinstance(value, (int, str)) or (isinstance(value, float) and value.is_integer())
    return False


def _too_many(parts: _Parts, count: int, limit: int) -> FieldError:
    return fieldpath.invalid(_path(parts), count, f"must have at most {limit} items")


def _unknown(parent: Path, key: Any) -> FieldError:
    """Forbidden on the parent; `value` holds the key, so a caller can locate the key itself."""
    return FieldError(ErrorType.FORBIDDEN, parent, f'unknown field "{key}"', str(key))


def _wrong_type(parts: _Parts, value: Any, expected: str) -> FieldError:
    detail = f"must be of type {expected}"
    if expected == _EXPECTED["int-or-string"] and isinstance(value, float):
        detail += f' (quote it: "{value}")'
    return fieldpath.invalid(_path(parts), fieldpath.json_type(value), detail)

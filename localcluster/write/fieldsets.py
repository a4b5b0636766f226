"""Field sets: the `fieldsV1` language of `metadata.managedFields`.

A field set is a set of paths; a path is a tuple of tokens as structured-merge-diff spells them:
`f:<field>` (struct field or map key), `k:{"name":"app"}` (an item of a list merged by keys),
`v:"x"` (an item of a set-list). A path is in the set when the manager owns that node: a scalar,
an atomic list or map, a list item (whose children are owned too), or a map such as `labels`
(encoded with a `.` entry next to its children, as the real server does).

Pure functions only: computing the set of an object against its schema, encoding/decoding
`fieldsV1`, reading and removing the value at a path, and rendering a path the way conflict
messages show it (`.spec.containers[name="app"].image`).
"""

from __future__ import annotations

import json
from typing import Any

from localcluster.schema.schemawalk import SchemaCursor

__all__ = [
    "MISSING",
    "FieldPath",
    "decode",
    "encode",
    "field_set",
    "path_string",
    "remove_path",
    "value_at",
]

FieldPath = tuple[str, ...]

# Fields nobody owns: identity and server-maintained metadata.
_IGNORED_TOP = frozenset({"apiVersion", "kind"})
_IGNORED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)
_MISSING = object()


def field_set(
    obj: dict[str, Any], schema: SchemaCursor, *, include: frozenset[str] | None = None,
    exclude: frozenset[str] = frozenset(), apply: bool = False,
) -> set[FieldPath]:  # fmt: skip
    """The paths `obj` sets (top-level fields limited to `include`, minus `exclude`).

    `apply`: the set of an applied configuration, where a non-empty map (`labels`, `data`) is
    not a member itself, only its entries are (no `.` in an Apply entry's `f:labels`, as
    structured-merge-diff's ToFieldSet); an Update's set has the map too."""
    out: set[FieldPath] = set()
    maps = not apply
    for key, value in obj.items():
        if key in _IGNORED_TOP or key in exclude or (include is not None and key not in include):
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _IGNORED_META}
            if meta:
                _walk_map(meta, schema.field("metadata"), ("f:metadata",), out, maps)
            continue
        if value is not None:
            _walk_value(key, value, schema, ("f:" + key,), out, maps)
    return out


def _walk_map(
    obj: dict[str, Any], schema: SchemaCursor, prefix: FieldPath, out: set[FieldPath], maps: bool
) -> None:
    for key, value in obj.items():
        if value is not None:  # a null is no value: nobody owns it (as on a real server)
            _walk_value(key, value, schema, (*prefix, "f:" + key), out, maps)


def _walk_value(
    key: str, value: Any, parent: SchemaCursor, path: FieldPath, out: set[FieldPath], maps: bool
) -> None:
    child = parent.field(key)
    if isinstance(value, dict):
        if not value or child.is_atomic_map():
            out.add(path)
            return
        if maps and child.is_map():
            out.add(path)
        _walk_map(value, child, path, out, maps)
    elif isinstance(value, list):
        semantics = parent.list_semantics(key)
        if semantics.list_type == "set":
            out.update((*path, "v:" + _json(v)) for v in value)
        elif semantics.list_type == "map" and semantics.keys:
            items = child.items()
            for item in value:
                if not isinstance(item, dict):
                    out.add(path)
                    return
                token = "k:" + _json(semantics.identity(item))
                out.add((*path, token))
                _walk_map(item, items, (*path, token), out, maps)
        else:
            out.add(path)
    else:
        out.add(path)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def encode(paths: set[FieldPath]) -> dict[str, Any]:
    """The `fieldsV1` trie of a set (`.` marks a member that also has members below it)."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for token in path:
            node = node.setdefault(token, {})
    for path in paths:
        node = root
        for token in path:
            node = node[token]
        if node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted(v) for k, v in sorted(node.items(), key=lambda kv: (kv[0] != ".", kv[0]))}


def decode(fields: dict[str, Any] | None) -> set[FieldPath]:
    """The set a `fieldsV1` trie describes."""
    out: set[FieldPath] = set()

    def walk(node: dict[str, Any], prefix: FieldPath) -> None:
        for token, child in node.items():
            if token == ".":
                if prefix:
                    out.add(prefix)
                continue
            path = (*prefix, token)
            if isinstance(child, dict) and child:
                walk(child, path)
            else:
                out.add(path)

    walk(fields or {}, ())
    return out


def _item_matches(item: Any, token: str, defaults: dict[str, Any]) -> bool:
    if token.startswith("k:"):
        keys = json.loads(token[2:])
        return isinstance(item, dict) and all(
            item.get(k, defaults.get(k, _MISSING)) == v for k, v in keys.items()
        )
    if token.startswith("v:"):
        return bool(item == json.loads(token[2:]))
    return False


def _locate(obj: Any, path: FieldPath, schema: SchemaCursor | None) -> tuple[Any, dict[str, Any]]:
    """The value at `path` (or MISSING) and the key defaults of the list holding its last
    step (for matching `k:` tokens of items that omit a defaulted key)."""
    current = obj
    cursor, parent, field = schema, None, ""
    defaults: dict[str, Any] = {}
    for token in path:
        if token.startswith("f:"):
            name = token[2:]
            if not isinstance(current, dict) or name not in current:
                return _MISSING, {}
            current = current[name]
            if cursor is not None:
                parent, field, cursor = cursor, name, cursor.field(name)
            defaults = {}
        elif isinstance(current, list):
            defaults = dict(parent.list_semantics(field).key_defaults) if parent else {}
            current = next((i for i in current if _item_matches(i, token, defaults)), _MISSING)
            if current is _MISSING:
                return _MISSING, {}
            if cursor is not None:
                cursor, parent = cursor.items(), None
        else:
            return _MISSING, {}
    return current, defaults


def value_at(obj: Any, path: FieldPath, schema: SchemaCursor | None = None) -> Any:
    """The value at `path`, or `MISSING` (a sentinel compared by identity). With the object's
    `schema`, list items match `k:` tokens through defaulted keys (`protocol: TCP`)."""
    return _locate(obj, path, schema)[0]


MISSING = _MISSING


def remove_path(obj: dict[str, Any], path: FieldPath, schema: SchemaCursor | None = None) -> None:
    """Remove the node at `path` from `obj` in place (no-op when absent)."""
    if not path:
        return
    parent, _ = _locate(obj, path[:-1], schema) if len(path) > 1 else (obj, {})
    token = path[-1]
    if token.startswith("f:") and isinstance(parent, dict):
        parent.pop(token[2:], None)
    elif isinstance(parent, list):
        defaults: dict[str, Any] = {}
        if schema is not None and len(path) > 1 and path[-2].startswith("f:"):
            holder = _cursor_at(schema, path[:-2])
            defaults = dict(holder.list_semantics(path[-2][2:]).key_defaults)
        parent[:] = [i for i in parent if not _item_matches(i, token, defaults)]


def _cursor_at(schema: SchemaCursor, path: FieldPath) -> SchemaCursor:
    cursor = schema
    for token in path:
        cursor = cursor.field(token[2:]) if token.startswith("f:") else cursor.items()
    return cursor


def path_string(path: FieldPath) -> str:
    """`.spec.containers[name="app"].image`, as conflict messages print paths."""
    out = []
    for token in path:
        if token.startswith("f:"):
            out.append("." + token[2:])
        elif token.startswith("k:"):
            keys = json.loads(token[2:])
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in keys.items()) + "]")
        elif token.startswith("v:"):
            out.append(f"[={token[2:]}]")
        else:
            out.append(f"[{token}]")
    return "".join(out)

"""JSON patch (RFC 6902) as kube-apiserver v1.32 applies it, not as the RFC words it.

kube-apiserver decodes the operations twice: strictly into `{op, path, from, value}` records
(type errors are 400s worded as Go's decoder words them; unknown and duplicate members become
`json patch unknown field "[0].x"` warnings, or a 422 under `fieldValidation=Strict`), then
applies them with evanphx/json-patch v4, whose semantics are more lenient than the RFC's in
ways clients come to rely on, reproduced here:

* a path is split on `/` and its first segment dropped, whatever it is (`data/color` addresses
  the root's `color`); an empty or slash-less path addresses nothing (except for `replace` and
  `test`, where `""` is the whole document);
* reading a missing object member is not an error: `replace` of a missing member adds it,
  `copy` from one adds `null`, `test` of one passes only against `null`;
* array indices may be negative (counted from the end), `-` appends for `add`;
* an intermediate segment that is missing, `null` or a scalar fails the operation.

Every failure of an operation is the same 422 to the client (kube-apiserver keeps the reason to
itself); `PatchFailed` carries the reason for logs and tests. Pure functions over plain values.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from localcluster.api.jsonyaml import load_json
from localcluster.write.decoding import go_json_kind

__all__ = [
    "MAX_OPERATIONS",
    "DecodeError",
    "PatchFailed",
    "apply",
    "decode",
]

MAX_OPERATIONS = 10000
_FIELDS = ("op", "path", "from", "value")
_STRING_FIELDS = ("op", "path", "from")
_INDEX = re.compile(r"[+-]?[0-9]+\Z")


class DecodeError(ValueError):
    """The patch body is not a list of operation records (Go's decoder's words)."""


class PatchFailed(ValueError):
    """An operation does not apply; the message says why (kube-apiserver does not tell)."""


def decode(body: bytes, *, strict: bool = True) -> tuple[list[Any], list[str]]:
    """The operations of `body` and its strict-decoding errors (`unknown field "[0].x"`,
    `duplicate field "[0].op"`, in body order). `strict` (fieldValidation Strict or Warn)
    decodes as kube-apiserver's typed pass does; otherwise only as evanphx's `DecodePatch`."""
    members: dict[int, list[str]] = {}  # id of a decoded object -> its member names, in order

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)  # the last of duplicate members wins, as in Go
        members[id(obj)] = [key for key, _ in items]
        return obj

    try:
        ops = load_json(body or b"null", object_pairs_hook=pairs)
    except ValueError as e:
        raise DecodeError(str(e)) from e
    if not strict:
        if ops is not None and not isinstance(ops, list):
            raise DecodeError(
                f"json: cannot unmarshal {go_json_kind(ops)} into Go value of type jsonpatch.Patch"
            )
        return ops or [], []
    if ops is None:
        return [], []
    if not isinstance(ops, list):
        raise DecodeError(
            f"json: cannot unmarshal {go_json_kind(ops)} into Go value of type []handlers.jsonPatchOp"
        )
    errors: list[str] = []
    type_error = ""
    for i, op in enumerate(ops):
        if op is None:
            continue
        if not isinstance(op, dict):
            type_error = type_error or (
                f"json: cannot unmarshal {go_json_kind(op)} into Go value of type handlers.jsonPatchOp"
            )
            continue
        seen: set[str] = set()
        for key in members.get(id(op), list(op)):
            if key in seen:
                errors.append(f'duplicate field "[{i}].{key}"')
            elif key not in _FIELDS:
                errors.append(f'unknown field "[{i}].{key}"')
            seen.add(key)
        for key in _STRING_FIELDS:
            value = op.get(key)
            if value is not None and not isinstance(value, str):
                type_error = type_error or (
                    f"json: cannot unmarshal {go_json_kind(value)} into Go struct field "
                    f"jsonPatchOp.{key} of type string"
                )
    if type_error:
        raise DecodeError(type_error)
    return ops, errors


def apply(document: Any, ops: list[Any]) -> Any:
    """`document` (not modified) with `ops` applied; PatchFailed at the first that fails."""
    root = [copy.deepcopy(document)]  # a box, so `replace ""` can swap the document
    for op in ops:
        op = op if isinstance(op, dict) else {}
        kind = op.get("op")
        step = _STEPS.get(kind if isinstance(kind, str) else "")
        if step is None:
            name = kind if isinstance(kind, str) else "unknown"
            raise PatchFailed(f"Unexpected kind: {name}")
        step(root, op)
    return root[0]


# --- operations ----------------------------------------------------------------------------


def _member(op: dict[str, Any], name: str) -> str:
    value = op.get(name)
    if not isinstance(value, str):
        raise PatchFailed(f"operation missing {name} field")
    return value


def _value(op: dict[str, Any]) -> Any:
    return copy.deepcopy(op.get("value"))


def _add(root: list[Any], op: dict[str, Any]) -> None:
    path = _member(op, "path")
    con, key = _find(root[0], path)
    _insert(con, key, _value(op))


def _remove(root: list[Any], op: dict[str, Any]) -> None:
    path = _member(op, "path")
    con, key = _find(root[0], path)
    _delete(con, key)


def _replace(root: list[Any], op: dict[str, Any]) -> None:
    path = _member(op, "path")
    if path == "":
        value = op.get("value")
        if not isinstance(value, (dict, list)):
            raise PatchFailed("replace operation value must be object or array")
        root[0] = copy.deepcopy(value)
        return
    con, key = _find(root[0], path)
    if isinstance(con, list):
        con[_index(con, key, len(con))] = _value(op)
    else:
        con[key] = _value(op)


def _move(root: list[Any], op: dict[str, Any]) -> None:
    source = _member(op, "from")
    con, key = _find(root[0], source)
    value = _get(con, key)
    _delete(con, key)
    path = _member(op, "path")
    con, key = _find(root[0], path)
    _insert(con, key, value)


def _copy(root: list[Any], op: dict[str, Any]) -> None:
    source = _member(op, "from")
    con, key = _find(root[0], source)
    value = copy.deepcopy(_get(con, key))
    path = _member(op, "path")
    con, key = _find(root[0], path)
    _insert(con, key, value)


def _test(root: list[Any], op: dict[str, Any]) -> None:
    path = _member(op, "path")
    expected = op.get("value")
    if path == "":
        actual = root[0]
    else:
        con, key = _find(root[0], path)
        actual = _get(con, key)
    if actual is None and expected is None:
        return
    if actual is None or expected is None or not _same(actual, expected):
        raise PatchFailed(f"testing value {path} failed")


_STEPS = {
    "add": _add,
    "remove": _remove,
    "replace": _replace,
    "move": _move,
    "copy": _copy,
    "test": _test,
}


# --- containers ----------------------------------------------------------------------------


def _decode_key(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


def _find(document: Any, path: str) -> tuple[dict[str, Any] | list[Any], str]:
    """The container the last segment of `path` is in, and that segment (decoded)."""
    segments = path.split("/")
    if len(segments) < 2:
        raise PatchFailed(f'doc is missing path: "{path}"')
    current = document
    for segment in segments[1:-1]:
        if not isinstance(current, (dict, list)):
            raise PatchFailed(f'doc is missing path: "{path}"')
        try:
            current = _get(current, _decode_key(segment))
        except PatchFailed:
            raise PatchFailed(f'doc is missing path: "{path}"') from None
        if not isinstance(current, (dict, list)):
            raise PatchFailed(f'doc is missing path: "{path}"')
    if not isinstance(current, (dict, list)):
        raise PatchFailed(f'doc is missing path: "{path}"')
    return current, _decode_key(segments[-1])


def _index(array: list[Any], key: str, size: int) -> int:
    """`key` as an index below `size` (negative ones count from `size`)."""
    if not _INDEX.match(key):
        raise PatchFailed(f"value was not a proper array index: '{key}'")
    index = int(key)
    if index < 0:
        if index < -size:
            raise PatchFailed(f"Unable to access invalid index: {index}")
        index += size
    if index >= size:
        raise PatchFailed(f"Unable to access invalid index: {index}")
    return index


def _get(con: dict[str, Any] | list[Any], key: str) -> Any:
    if isinstance(con, dict):
        return con.get(key)
    return con[_index(con, key, len(con))]


def _insert(con: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(con, dict):
        con[key] = value
    elif key == "-":
        con.append(value)
    else:
        con.insert(_index(con, key, len(con) + 1), value)


def _delete(con: dict[str, Any] | list[Any], key: str) -> None:
    if isinstance(con, dict):
        if key not in con:
            raise PatchFailed(f"Unable to remove nonexistent key: {key}: missing value")
        del con[key]
    else:
        del con[_index(con, key, len(con))]


def _same(a: Any, b: Any) -> bool:
    """Equality as the library compares: structurally for objects and arrays, scalars as
    written (so 2 and 2.0, or 1 and true, differ)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_same(a[k], b[k]) if a[k] is not None else b[k] is None for k in a)
        )
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    return type(a) is type(b) and a == b

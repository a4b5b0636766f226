"""Is a live object what Git says? Normalize, then compare only what desired specifies (pure).

Server-side apply semantics, as gitops-engine's `pkg/diff` approximates them: the sync engine
applies desired with its own field manager, so a field desired does not mention — set by the
API server (defaults, `status`), by a controller, or by another field manager — is not drift.
So live is first *projected* onto desired's shape: in an object, only the keys desired has are
kept; a list is compared whole — its length, its order and its scalar items — but an item that
is an object is projected onto the desired item at the same index (server defaults inside a
container, such as `terminationMessagePath`, are not drift; one container more or less is).

Before that, `normalize_live` drops what only the server writes (`status`, `managedFields`,
`resourceVersion`, `uid`, `generation`, `creationTimestamp`, `selfLink`, `deletionTimestamp`,
`deletionGracePeriodSeconds`) and kubectl's last-applied annotation; `ignoreDifferences`
pointers (RFC 6901) are removed from both sides. Our tracking label and annotation stay: they
are part of what is desired (Argo CD's label tracking), so a live object without them, or with
another repository's, differs and the sync applies them (adoption), after which prune can
find it.

Scalars compare as JSON values, with one allowance for YAML: a number and the string of that
number are equal (`cpu: 1` in Git, `cpu: "1"` live). Training jobs are already defaulted by
the pre-flight, so webhook defaults never count.
"""

from __future__ import annotations

import base64
import difflib
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from gitops.engine.pairing import ResourceKey

__all__ = [
    "DiffResult",
    "diff",
    "mask_secrets",
    "normalize_live",
    "pointers_for",
    "remove_pointers",
]

_SERVER_METADATA = (
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class DiffResult:
    modified: bool
    desired_norm: dict[str, Any]
    live_norm: dict[str, Any] | None
    """Live projected onto desired's fields (None when there is no live object)."""

    @functools.cached_property
    def text(self) -> str:
        """A unified diff of the two as YAML, from live (`---`) to desired (`+++`), Secret
        values masked; "" when equal. Rendered when first asked for, once: only a diff page
        reads it, and YAML of 10,000 objects missing at a first sync is seconds of CPU."""
        return _text(self.desired_norm, self.live_norm) if self.modified else ""


def normalize_live(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without what only the server writes (and kubectl's last-applied annotation).

    Copied only where it changes (the top level, metadata, labels and annotations): the rest
    is shared with `obj`, so callers must not modify it in place. (A deep copy here was most of
    a 1,000-job comparison's time.)"""
    out = dict(obj)
    out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta = out["metadata"] = dict(meta)
        for key in _SERVER_METADATA:
            meta.pop(key, None)
        _drop_key(meta, "annotations", _LAST_APPLIED)
    return out


def pointers_for(
    key: ResourceKey, ignore_differences: Iterable[Mapping[str, Any]] | None
) -> list[str]:
    """The JSON pointers of every `spec.ignoreDifferences` rule matching `key`."""
    out: list[str] = []
    for rule in ignore_differences or ():
        if str(rule.get("group") or "") != key.group or rule.get("kind") != key.kind:
            continue
        if rule.get("name") and rule["name"] != key.name:
            continue
        if rule.get("namespace") and rule["namespace"] != key.namespace:
            continue
        out.extend(p for p in rule.get("jsonPointers") or () if isinstance(p, str))
    return out


def remove_pointers(obj: dict[str, Any], pointers: Sequence[str]) -> dict[str, Any]:
    """`obj` without the fields at `pointers` (absent ones are ignored); containers along each
    pointer's path are copied, the rest is shared with `obj` (do not modify it in place)."""
    out = dict(obj)
    for pointer in pointers:
        parts = _parse_pointer(pointer)
        if not parts:
            continue
        parent: Any = out
        for part in parts[:-1]:
            parent = _copied_child(parent, part)
            if parent is None:
                break
        else:
            last = parts[-1]
            if isinstance(parent, dict):
                parent.pop(last, None)
            elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
                del parent[int(last)]
    return out


def diff(
    desired: Mapping[str, Any],
    live: Mapping[str, Any] | None,
    ignore_pointers: Sequence[str] = (),
) -> DiffResult:
    """Compare `desired` with `live` (already fetched; None when absent) as described above."""
    want = remove_pointers(_without_empty_meta(_fold_string_data(dict(desired))), ignore_pointers)
    if live is None:
        return DiffResult(True, want, None)
    have = remove_pointers(normalize_live(live), ignore_pointers)
    projected = _project(want, have)
    assert isinstance(projected, dict) or projected is None
    live_norm = projected if isinstance(projected, dict) else {}
    modified = not _equal(want, live_norm)
    return DiffResult(modified, want, live_norm)


# --- internals --------------------------------------------------------------------------------


def _drop_key(meta: dict[str, Any], field: str, key: str) -> None:
    values = meta.get(field)
    if isinstance(values, dict) and key in values:
        values = meta[field] = {k: v for k, v in values.items() if k != key}
        if not values:
            meta.pop(field)


def _fold_string_data(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret's `stringData` as the API server stores it: base64 in `data` (it never keeps
    `stringData`, so comparing it as written would be drift forever)."""
    string_data = obj.get("stringData")
    if obj.get("kind") != "Secret" or not isinstance(string_data, dict):
        return obj
    data = dict(obj.get("data") or {})
    for k, v in string_data.items():
        data[k] = base64.b64encode(str(v).encode()).decode()
    out = {k: v for k, v in obj.items() if k != "stringData"}
    out["data"] = data
    return out


def _without_empty_meta(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` (a shallow copy the caller owns) without empty labels/annotations maps."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and any(meta.get(f) == {} for f in ("labels", "annotations")):
        obj["metadata"] = {k: v for k, v in meta.items() if v != {} or k not in _META_MAPS}
    return obj


_META_MAPS = ("labels", "annotations")


def _project(want: Any, have: Any) -> Any:
    """`have` reduced to the fields `want` has (missing ones stay missing)."""
    if isinstance(want, dict) and isinstance(have, dict):
        return {k: _project(v, have[k]) for k, v in want.items() if k in have}
    if isinstance(want, list) and isinstance(have, list) and len(want) == len(have):
        return [_project(w, h) for w, h in zip(want, have, strict=True)]
    return have


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, int | float) and isinstance(b, str):
        return _number_text(a) == b
    if isinstance(b, int | float) and isinstance(a, str):
        return _number_text(b) == a
    return type(a) is type(b) and a == b


def _number_text(n: int | float) -> str:
    return str(int(n)) if isinstance(n, float) and n.is_integer() else str(n)


def _text(want: dict[str, Any], have: dict[str, Any] | None) -> str:
    """A unified diff from live (`---`) to desired (`+++`), as `kubectl diff` shows it, with
    Secret values masked (`mask_secrets`)."""
    want, have = mask_secrets(want, have)
    a = _dump(want).splitlines(keepends=True)
    b = _dump(have).splitlines(keepends=True) if have is not None else []
    return "".join(difflib.unified_diff(b, a, "live", "desired"))


_SECRET_MASK = "++++++++"


def mask_secrets(want: Any, have: Any) -> tuple[Any, Any]:
    """Secrets with every `data`/`stringData` value replaced by `+` signs, as Argo CD shows
    them: the live side's mask is one `+` longer where its value differs, so a diff still says
    which keys changed without saying what they hold."""

    def values(o: Any) -> dict[str, Any]:
        if not isinstance(o, dict) or o.get("kind") != "Secret":
            return {}
        return {**(o.get("data") or {}), **(o.get("stringData") or {})}

    def masked(o: Any, other: dict[str, Any], second: bool) -> Any:
        if not isinstance(o, dict) or o.get("kind") != "Secret":
            return o
        out = dict(o)
        for field in ("data", "stringData"):
            if isinstance(o.get(field), dict):
                out[field] = {
                    k: _SECRET_MASK + ("+" if second and other.get(k) != v else "")
                    for k, v in o[field].items()
                }
        return out

    return masked(want, values(have), False), masked(have, values(want), True)


def _dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True)


def _parse_pointer(pointer: str) -> list[str]:
    if not pointer.startswith("/"):
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _copied_child(node: Any, part: str) -> Any:
    """The child at `part`, replaced in `node` by a shallow copy of itself (None if absent)."""
    child = _child(node, part)
    if isinstance(child, dict | list):
        child = dict(child) if isinstance(child, dict) else list(child)
        if isinstance(node, dict):
            node[part] = child
        else:
            node[int(part)] = child
    return child


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return None

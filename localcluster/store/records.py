"""What the store holds and hands out, and how it is encoded.

A `Record` is a stored object with its JSON encoding, kept so a LIST is a byte join; an
`Event` is one committed change (ADDED, MODIFIED, DELETED) with the object before and after,
what the event log and watchers get. Objects are encoded once, by `dumps`: compact JSON with
an API object's keys in kube-apiserver's order, so responses read as the real server's.
`clone` is the deep copy writers build new objects from (objects handed out are shared).
Pure: no I/O.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Event", "Record", "clone", "dumps"]


def dumps(obj: Any) -> bytes:
    """Compact JSON; an API object's keys in kube-apiserver's order (Go struct order: kind,
    apiVersion, metadata as ObjectMeta declares its fields, then the rest as given)."""
    return json.dumps(_api_order(obj), separators=(",", ":"), ensure_ascii=False).encode()


_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)


def _api_order(obj: Any) -> Any:
    if not isinstance(obj, dict) or "kind" not in obj:
        return obj
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    ordered_meta = {k: meta[k] for k in _META_ORDER if k in meta}
    if len(ordered_meta) != len(meta):
        ordered_meta.update(meta)
    out: dict[str, Any] = {"kind": obj["kind"]}
    if "apiVersion" in obj:
        out["apiVersion"] = obj["apiVersion"]
    out["metadata"] = ordered_meta
    out.update(obj)  # the remaining keys, in their order (the first three keep their places)
    out["metadata"] = ordered_meta
    return out


def clone(obj: Any) -> Any:
    """A deep copy of a JSON value (faster than copy.deepcopy for plain JSON)."""
    return json.loads(json.dumps(obj))


_PARTIAL_HEAD = b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'


@dataclass(frozen=True)
class Record:
    obj: dict[str, Any]
    raw: bytes  # the JSON encoding of obj, reused by list responses

    @functools.cached_property
    def partial_raw(self) -> bytes:
        """The object as a PartialObjectMetadata (what Table rows embed by default), encoded
        once per stored version: metadata with managedFields dominates a large Table."""
        return _PARTIAL_HEAD + dumps(self.obj.get("metadata", {})) + b"}"

    @property
    def rv(self) -> int:
        return int(self.obj["metadata"]["resourceVersion"])


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    old: dict[str, Any] | None
    raw: bytes
    old_size: int = 0  # JSON size of `old` (what it adds to the event log's byte count)

    @property
    def size(self) -> int:
        return len(self.raw) + self.old_size

"""Desired objects paired with live ones by `ResourceKey` (pure), as gitops-engine's
`pkg/sync/reconcile.go` does: aligned triples with None where one side is missing — a desired
object without a live one is to be created, a live one without a desired one is a prune
candidate.

Keys: `(group, kind, namespace, name)`. A namespaced desired object without a namespace goes
to the destination namespace; cluster-scoped kinds (`CLUSTER_SCOPED`, or what the caller
learnt from discovery) always have namespace "". The version is not part of the key: `apps/v1`
and `apps/v1beta2` of the same Deployment are one object.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, NamedTuple

from gitops.engine.kinds import CLUSTER_SCOPED, group_of

__all__ = [
    "DuplicateResourceError",
    "Pair",
    "ResourceKey",
    "duplicates",
    "key_of",
    "pair",
]


class ResourceKey(NamedTuple):
    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{kind} {self.namespace}/{self.name}" if self.namespace else f"{kind} {self.name}"


class Pair(NamedTuple):
    key: ResourceKey
    desired: dict[str, Any] | None
    live: dict[str, Any] | None


class DuplicateResourceError(ValueError):
    """The same object is defined more than once among the desired objects."""

    def __init__(self, keys: list[ResourceKey]) -> None:
        super().__init__("defined more than once: " + ", ".join(map(str, keys)))
        self.keys = keys


def key_of(
    obj: dict[str, Any],
    namespace: str = "",
    *,
    cluster_scoped: Collection[tuple[str, str]] = CLUSTER_SCOPED,
) -> ResourceKey:
    """The key of `obj`; `namespace` fills in a namespaced object's missing namespace."""
    group = group_of(str(obj.get("apiVersion", "")))
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = str(meta.get("name", ""))
    ns = "" if (group, kind) in cluster_scoped else str(meta.get("namespace") or namespace)
    return ResourceKey(group, kind, ns, name)


def duplicates(
    desired: Iterable[dict[str, Any]],
    namespace: str,
    *,
    cluster_scoped: Collection[tuple[str, str]] = CLUSTER_SCOPED,
) -> list[ResourceKey]:
    """Keys that more than one desired object has, sorted."""
    seen: set[ResourceKey] = set()
    dups: set[ResourceKey] = set()
    for obj in desired:
        key = key_of(obj, namespace, cluster_scoped=cluster_scoped)
        (dups if key in seen else seen).add(key)
    return sorted(dups)


def pair(
    desired: Iterable[dict[str, Any]],
    live: Iterable[dict[str, Any]],
    *,
    namespace: str,
    cluster_scoped: Collection[tuple[str, str]] = CLUSTER_SCOPED,
) -> list[Pair]:
    """Every key of either side with its desired and live object, sorted by key.

    Raises DuplicateResourceError when two desired objects share a key (which one would win
    is not for us to guess). Live objects are keyed by their own metadata.
    """
    desired = list(desired)
    dups = duplicates(desired, namespace, cluster_scoped=cluster_scoped)
    if dups:
        raise DuplicateResourceError(dups)
    want = {key_of(o, namespace, cluster_scoped=cluster_scoped): o for o in desired}
    have = {key_of(o, "", cluster_scoped=cluster_scoped): o for o in live}
    return [Pair(k, want.get(k), have.get(k)) for k in sorted(want.keys() | have.keys())]

"""A repository's live objects from the shared informer cache, by tracking id (issue #17).

Listing every kind by a label all repositories share, each round, costs a full read of every
tracked object of the cluster, and any write to any of them changed every repository's
fingerprint. Instead, the informers the reconciler keeps anyway (training jobs) carry an index
by tracking id (`tracking_ids`, controller-runtime's field indexer), and a repository reads
exactly its own objects with a lookup:

- `tracking_ids(obj)` (pure, the index function): the uid label, the uid annotation (both when
  they differ), else `repository:<namespace>/<name>` from the name annotation, for objects
  applied before uids were recorded; nothing for an untracked object;
- `object_digest(obj)` and `digests` (pure): a 64-bit digest of one object version (its kind,
  namespace, name and resourceVersion), summed per tracking id. The sum is order-free, so the
  cache keeps it up to date per event in O(1), and a round that changed nothing is told by
  comparing two numbers instead of reading every object;
- `LiveCache` is what the sync engine is given (a `Protocol`: `gitops.runtime.sync` never sees an
  informer), and `InformerCache` implements it over informers created with
  `indexers={TRACKING_INDEX: tracking_ids}`. Another cache (a process-wide `kube.Manager`'s
  shared informers) only has to offer the same four methods.

Kinds the cache does not hold (ConfigMaps, Roles, PVCs… a repository may keep) are listed by
the sync engine, by the uid label, within the repository's scope (`gitops.runtime.sync`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from gitops.engine import names
from gitops.engine.pairing import ResourceKey
from kube.informer import Informer

__all__ = [
    "MASK",
    "TRACKING_INDEX",
    "InformerCache",
    "LiveCache",
    "digests",
    "name_id",
    "object_digest",
    "replaced",
    "tracking_ids",
]

TRACKING_INDEX = "gitops-tracking-id"
"""The name of the informers' index by `tracking_ids`."""
MASK = (1 << 64) - 1
"""Digests are sums modulo 2**64."""
_NAME_PREFIX = "repository:"


def name_id(repository: str) -> str:
    """The tracking id of an object applied by `repository` (`namespace/name`) before uids
    were recorded (`tracking_ids`): never equal to a uid."""
    return _NAME_PREFIX + repository


def tracking_ids(obj: Mapping[str, Any]) -> list[str]:
    """The tracking ids `obj` is indexed under (see the module docstring)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    out = []
    for value in (
        labels.get(names.REPOSITORY_UID_LABEL),
        annotations.get(names.REPOSITORY_UID_ANNOTATION),
    ):
        if isinstance(value, str) and value and value not in out:
            out.append(value)
    if out:
        return out
    repository = annotations.get(names.REPOSITORY_ANNOTATION)
    return [name_id(repository)] if isinstance(repository, str) and repository else []


def object_digest(obj: Mapping[str, Any]) -> int:
    """A 64-bit digest of one version of `obj`: its namespace, name, uid and resourceVersion
    (not its kind: a list's items may lack it, and the uid tells objects apart)."""
    meta = obj.get("metadata") or {}
    text = "|".join(
        (
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            str(meta.get("resourceVersion") or ""),
        )
    )
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def digests(objects: Iterable[Mapping[str, Any]], ids: Iterable[str]) -> dict[str, int]:
    """For each of `ids`, the sum (mod 2**64) of `object_digest` over the `objects` indexed
    under it: what `InformerCache.digest` tells for a cache holding exactly `objects`."""
    return replaced(dict.fromkeys(ids, 0), [(None, obj) for obj in objects])


def replaced(
    current: Mapping[str, int],
    changes: Iterable[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]],
) -> dict[str, int]:
    """The digests of `current`'s ids once each (old, new) pair of `changes` is applied:
    old's version taken out (None: it was not there), new's put in (None: it is gone). After
    a sync, the outcomes' objects against the cached ones: what the cache will hold once its
    watch delivers them."""
    out = dict(current)
    for old, new in changes:
        for obj, sign in ((old, -1), (new, +1)):
            if obj is None:
                continue
            wanted = [i for i in tracking_ids(obj) if i in out]
            if wanted:
                d = object_digest(obj) * sign
                for i in wanted:
                    out[i] = (out[i] + d) & MASK
    return out


class LiveCache(Protocol):
    """Live objects of the kinds a shared cache holds, for `gitops.runtime.sync.SyncEngine`."""

    def serves(self, group: str, kind: str) -> bool:
        """Whether objects of this kind are read from the cache (never listed per round)."""
        ...

    def plural(self, group: str, kind: str) -> str:
        """The resource name of a kind it `serves` (for access reviews)."""
        ...

    def tracked_by(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """Every cached object indexed under any of `ids` (each once), every namespace."""
        ...

    def get(self, key: ResourceKey) -> dict[str, Any] | None:
        """The cached object of `key` (a kind `serves`), None when there is none."""
        ...

    def digest(self, tracking_id: str) -> int:
        """The sum of `object_digest` over the cached objects indexed under `tracking_id`."""
        ...


class InformerCache:
    """`LiveCache` over informers created with `indexers={TRACKING_INDEX: tracking_ids}`.

    The digests are kept by a handler on each informer; objects already cached when it is
    built are counted at once (built before the informers run, nothing is missed either)."""

    def __init__(self, informers: Iterable[Informer]) -> None:
        self._by_kind: dict[tuple[str, str], Informer] = {}
        self._digests: dict[str, int] = {}
        for informer in informers:
            resource = informer.resource
            self._by_kind[(resource.group, resource.kind)] = informer
            for obj in informer.list():
                self._add(obj, +1)
            informer.add_handler(self._on_event)

    def serves(self, group: str, kind: str) -> bool:
        return (group, kind) in self._by_kind

    def plural(self, group: str, kind: str) -> str:
        return self._by_kind[(group, kind)].resource.plural

    def tracked_by(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        ids = list(dict.fromkeys(ids))
        out = []
        for informer in self._by_kind.values():
            seen: set[str] = set()
            for tracking_id in ids:
                for obj in informer.by_index(TRACKING_INDEX, tracking_id):
                    meta = obj.get("metadata") or {}
                    name = f"{meta.get('namespace')}/{meta.get('name')}"
                    if name not in seen:
                        seen.add(name)
                        out.append(_typed(obj, informer))
        return out

    def get(self, key: ResourceKey) -> dict[str, Any] | None:
        informer = self._by_kind.get((key.group, key.kind))
        if informer is None:
            return None
        obj = informer.get(key.namespace or None, key.name)
        return None if obj is None else _typed(obj, informer)

    def digest(self, tracking_id: str) -> int:
        return self._digests.get(tracking_id, 0)

    def _on_event(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is not None:
            self._add(old, -1)
        if event_type != "DELETED":
            self._add(obj, +1)

    def _add(self, obj: Mapping[str, Any], sign: int) -> None:
        ids = tracking_ids(obj)
        if not ids:
            return
        d = object_digest(obj) * sign
        for i in ids:
            value = (self._digests.get(i, 0) + d) & MASK
            if value:
                self._digests[i] = value
            else:
                self._digests.pop(i, None)


def _typed(obj: dict[str, Any], informer: Informer) -> dict[str, Any]:
    """`obj` with its apiVersion and kind (a list's items may lack them); the cached object
    itself is never changed."""
    if obj.get("apiVersion") and obj.get("kind"):
        return obj
    resource = informer.resource
    return {**obj, "apiVersion": resource.api_version, "kind": resource.kind}

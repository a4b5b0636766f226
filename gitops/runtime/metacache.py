"""Kinds outside the job caches, from metadata-only informers held per repository (issue #31).

A repository may keep ConfigMaps, Services, RoleBindings… beside its training jobs. Listing
each such kind every round cost a LIST per kind (and per namespace of its scope) even when
nothing changed. Instead the process's `kube.Manager` watches them metadata-only (names,
labels, annotations, resourceVersions: `Informer(metadata_only=True)`), one informer per
(apiVersion, resource, namespace or every namespace), started when a repository's round first
needs it and stopped once no repository needs it (`informer`, `settle`, `forget`; the Manager
counts the holders).

What the metadata answers, and what it does not:

- whether an object exists, and which repository tracks it: the informers are indexed by
  tracking id over labels and annotations (`gitops.runtime.livecache.tracking_ids`, the job
  caches' index);
- its uid and resourceVersion: a full copy read by an earlier round (the repository's memo
  keeps them) is still the object while both are the same, so a round GETs only the objects
  that changed since (`read`);
- nothing of its body: compare needs the whole object, read with a GET as the repository's
  identity.

Whose rights: the informers run as the reconciler. A (kind, namespace) the reconciler may not
both list and watch itself (deploy/gitops grants it nothing on what repositories keep) is not
cached, and the round lists it as the repository's identity, as before. From a cache a
repository is shown only what its identity may list in that namespace (asked as itself,
`gitops.runtime.tenantview`), and each full object is read as that identity.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitops.engine import tenancy
from gitops.engine.pairing import ResourceKey
from gitops.runtime.livecache import TRACKING_INDEX, tracking_ids
from gitops.runtime.tenantview import CacheAccess
from kube import errors
from kube.client import Client
from kube.informer import Informer
from kube.manager import Manager
from kube.resources import Resource

__all__ = ["DEFAULT_SYNC_TIMEOUT", "OWN_RIGHTS_TTL", "MetadataCache", "Need", "need_of", "read"]

DEFAULT_SYNC_TIMEOUT = 10.0
"""Seconds a round waits for a cache started for it to list once; then it lists itself."""
OWN_RIGHTS_TTL = 60.0
"""Seconds the reconciler's own answer (may it list and watch a kind there) is kept: where it
may not (deploy/), the rounds of every repository naming the kind ask once a minute."""

Need = tuple[str, str, str]
"""(apiVersion, resource, namespace or "" for every namespace and cluster-scoped kinds)."""


@dataclass
class _Held:
    resource: Resource
    informer: Informer


class MetadataCache:
    """The metadata-only informers each repository's rounds hold, on the process's Manager."""

    def __init__(self, manager: Manager, *, sync_timeout: float = DEFAULT_SYNC_TIMEOUT) -> None:
        self.manager = manager
        self.sync_timeout = sync_timeout
        self.access = CacheAccess(manager.client, ttl=OWN_RIGHTS_TTL)
        """The reconciler's own rights: whether it may list and watch a kind itself."""
        self._held: dict[str, dict[Need, _Held]] = {}

    async def informer(
        self, repository: str, resource: Resource, namespace: str | None
    ) -> Informer | None:
        """The synced metadata informer of `resource` in `namespace` (None: every namespace),
        held for `repository` from now until `settle` leaves it out; None when the reconciler
        may not list and watch it, or it has not listed within `sync_timeout`."""
        need = (resource.api_version, resource.plural, namespace or "")
        held = self._held.setdefault(repository, {})
        entry = held.get(need)
        if entry is None:
            ns = namespace or ""
            if not (
                await self.access.may("list", resource.group, resource.plural, ns)
                and await self.access.may("watch", resource.group, resource.plural, ns)
            ):
                return None
            informer = self.manager.acquire_metadata(resource, namespace)
            informer.add_indexer(TRACKING_INDEX, tracking_ids)
            entry = held[need] = _Held(resource, informer)
        if not await entry.informer.wait_synced(self.sync_timeout):
            return None
        return entry.informer

    async def objects(
        self,
        repository: str,
        ids: Iterable[str],
        resource: Resource,
        scope: tenancy.Scope | None,
        desired: Sequence[ResourceKey],
        used: set[Need],
        *,
        client: Client,
        access: CacheAccess,
        previous: Mapping[ResourceKey, dict[str, Any]],
    ) -> list[dict[str, Any]] | None:
        """`read` from the caches of `resource` in the namespaces `scope` reads (every one:
        one cache) for `repository`: its objects under the tracking `ids` and its `desired`
        ones, as `client`'s identity sees them; None when one of them cannot be had (the
        kind is then listed). Each cache it holds is added to `used`."""
        if not resource.namespaced:
            if scope is not None and not scope.lists_cluster_kind(resource.group, resource.kind):
                return []
            namespaces: list[str | None] = [None]
        elif scope is None or scope.namespaces is None:
            namespaces = [None]
        else:
            namespaces = list(sorted(scope.namespaces))
        ids = list(ids)
        wanted = [k for k in desired if (k.group, k.kind) == (resource.group, resource.kind)]
        out: list[dict[str, Any]] = []
        for namespace in namespaces:
            used.add(need_of(resource, namespace))  # held while it syncs, too
            informer = await self.informer(repository, resource, namespace)
            if informer is None:
                return None
            here = [k for k in wanted if namespace is None or k.namespace == namespace]
            out.extend(
                await read(informer, ids, here, client=client, access=access, previous=previous)
            )
        return out

    async def settle(self, repository: str, used: Collection[Need]) -> None:
        """Release every informer `repository` holds but did not use (`used`) this round: a
        kind it no longer names stops being watched once no other repository names it."""
        held = self._held.get(repository, {})
        for need in [n for n in held if n not in used]:
            entry = held.pop(need)
            await self.manager.release_metadata(entry.resource, need[2] or None)
        if not held:
            self._held.pop(repository, None)

    async def forget(self, repository: str) -> None:
        """Release all `repository` holds (it is gone)."""
        await self.settle(repository, ())

    def held(self, repository: str) -> set[Need]:
        return set(self._held.get(repository, {}))


def need_of(resource: Resource, namespace: str | None) -> Need:
    return (resource.api_version, resource.plural, namespace or "")


async def read(
    informer: Informer,
    ids: Iterable[str],
    wanted: Iterable[ResourceKey],
    *,
    client: Client,
    access: CacheAccess,
    previous: Mapping[ResourceKey, dict[str, Any]],
) -> list[dict[str, Any]]:
    """The whole objects, as `client`'s identity sees them, of the cached entries indexed
    under `ids` and of the `wanted` keys the cache holds: a `previous` copy of the same uid
    and resourceVersion is taken as it is, any other is read with a GET. An entry in a
    namespace the identity may not list (`access`), or that it may not read, is left out, as
    a list the API server forbids leaves it out."""
    resource = informer.resource
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for tracking_id in ids:
        for meta_obj in informer.by_index(TRACKING_INDEX, tracking_id):
            entries.setdefault(_place(meta_obj), meta_obj)
    for key in wanted:
        hit = informer.get(key.namespace or None, key.name)
        if hit is not None:
            entries.setdefault(_place(hit), hit)
    out: list[dict[str, Any]] = []
    for (namespace, name), meta_obj in sorted(entries.items()):
        if not await access.may_list(resource.group, resource.plural, namespace):
            continue
        key = ResourceKey(resource.group, resource.kind, namespace, name)
        kept = previous.get(key)
        if kept is not None and _version(kept) == _version(meta_obj):
            out.append(kept)
            continue
        try:
            full = await client.get(resource, name, namespace or None)
        except (errors.NotFound, errors.Forbidden):
            continue
        full.setdefault("apiVersion", resource.api_version)
        full.setdefault("kind", resource.kind)
        out.append(full)
    return out


def _place(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")

"""Reading one repository's live state, for `gitops.runtime.reconciler` (I/O on `kube.Client`).

Two sources, chosen per kind:

- **the shared cache** (`gitops.runtime.livecache.LiveCache`: the training jobs' informers): the
  objects indexed under the repository's tracking ids (its uid; `repository:<ns/name>` for
  objects applied before uids were recorded), plus the cached object of each desired key.
  No request at all;
- **metadata-only informers** (`gitops.runtime.metacache`) for every other kind the
  repository has or had (in Git now, applied by this process, or `appliedKinds` in its
  status), within its scope (`gitops.engine.tenancy.live_scope`): its objects by tracking id
  and the desired keys, each whole object taken from the last round's copy while its
  resourceVersion is the same, else read with a GET as its identity. No list;
- **a list by the uid label** (`gitops.trainops.dev/repository-uid=<uid>`), as its identity,
  for such a kind the reconciler may not watch itself (or without a Manager); plus a GET of
  each desired object not found so (a hand-made object of that name is compared and adopted,
  one another repository tracks is left alone: `gitops.engine.ownership`).

**Upgrade**: objects applied before the uid label existed carry only the shared
`gitops.trainops.dev/managed=true` label. The cache finds them through the annotations; for the
listed kinds the first round after a start also lists, for the kinds of the former default set
and those of the repository, by the managed label, and keeps doing so for the kinds where it
found objects of this repository still without the uid label (the next apply adds it).

A round that changed nothing is told without reading every object (`probe` then `stamp`):
the metadata caches (or lists of the listed kinds), two digests of the cache (`InformerCache.digest`,
kept per event) and the cached versions of the desired objects that were not the repository's
at the last comparison (`State.watch`: missing, hand-made or another's).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitops.engine import keys, names, ownership, tenancy
from gitops.engine.pairing import ResourceKey, key_of
from gitops.runtime import livecache, metacache
from gitops.runtime.discovery import Discovery
from gitops.runtime.tenantview import CacheAccess
from kube import errors
from kube.client import Client
from kube.resources import Resource

__all__ = ["LIST_PAGE", "LiveReader", "Probe", "State", "settled"]

LIST_PAGE = 1000
"""Objects per page when listing what a repository tracks."""


@dataclass(frozen=True)
class Probe:
    """The listed part of a repository's live state (kinds outside the cache)."""

    objects: dict[ResourceKey, dict[str, Any]]
    tracked: set[ResourceKey]
    legacy: frozenset[tuple[str, str]]
    """Kinds (apiVersion, kind) in which an object of this repository lacks the uid label:
    listed by the managed label again next round."""
    fingerprint: str


@dataclass(frozen=True)
class State:
    """A repository's live state: every object of interest by key, those it tracks, the
    desired keys of cached kinds whose object is not its own (`watch`), and the `stamp` that
    tells whether anything of it changed since."""

    objects: dict[ResourceKey, dict[str, Any]]
    tracked: set[ResourceKey]
    watch: tuple[ResourceKey, ...]
    stamp: str
    kinds: set[tuple[str, str]] = field(default_factory=set)
    """(apiVersion, kind) of every object found."""
    digests: dict[str, int] = field(default_factory=dict)
    """The cache's digest of each tracking id (`livecache.InformerCache.digest`) the stamp
    was made of."""


class LiveReader:
    """Live state as one identity (`client`) sees it; `cache` None: every kind is listed.

    This is a tenant's view: what it lists and GETs is sent as the identity (the client
    impersonates it), and what it takes from the shared cache is only what the identity may
    list there (`access`, asked as the identity: `gitops.runtime.tenantview`)."""

    def __init__(
        self,
        client: Client,
        discovery: Discovery,
        cache: livecache.LiveCache | None = None,
        metadata: metacache.MetadataCache | None = None,
    ) -> None:
        self.client = client
        self.discovery = discovery
        self.cache = cache
        self.metadata = metadata
        self.access = CacheAccess(client)

    def cached(self, key: ResourceKey) -> bool:
        return self.cache is not None and self.cache.serves(key.group, key.kind)

    async def probe(
        self,
        repository: str,
        uid: str,
        kinds: Iterable[tuple[str, str]],
        desired: Sequence[ResourceKey],
        *,
        scope: tenancy.Scope | None,
        legacy: Collection[tuple[str, str]] = (),
        previous: Mapping[ResourceKey, dict[str, Any]] | None = None,
    ) -> Probe:
        """Read the kinds of `kinds` (apiVersion, kind) outside the job cache: from the
        metadata caches (`previous`: the last probe's objects, reused while unchanged), else
        listed by the uid label, those of `legacy` also by the managed label, with a GET of
        each desired key of those kinds not found so. Under a `scope` nothing outside it is
        read, and a list or read the API server forbids (the repository's ServiceAccount may
        not) is left out: what the account cannot see it cannot change either, and the apply
        says so per resource."""
        objects: dict[ResourceKey, dict[str, Any]] = {}
        tracked: set[ResourceKey] = set()
        found_legacy: set[tuple[str, str]] = set()
        by_uid = f"{names.REPOSITORY_UID_LABEL}={uid}" if uid else f"{names.MANAGED_LABEL}=true"
        kinds = set(kinds)
        listed_kinds = sorted(kinds | set(legacy))
        ids = _ids(repository, uid)
        served: set[tuple[str, str]] = set()
        """(group, kind)s read from metadata caches: their desired keys are settled there."""
        used: set[metacache.Need] = set()
        for api_version, kind in listed_kinds:
            resource = await self.discovery.resource(api_version, kind)
            if resource is None or self.cached(ResourceKey(resource.group, kind, "", "")):
                continue
            from_cache = None  # a former default kind alone (the upgrade) is listed, once
            if (api_version, kind) in kinds and self.metadata is not None:
                from_cache = await self.metadata.objects(
                    repository, ids, resource, scope, desired, used,
                    client=self.client, access=self.access, previous=previous or {},
                )  # fmt: skip
            if from_cache is not None:
                served.add((resource.group, kind))
            selectors = [by_uid]
            if (api_version, kind) in legacy and by_uid != f"{names.MANAGED_LABEL}=true":
                selectors.append(f"{names.MANAGED_LABEL}=true")
            for selector in selectors if from_cache is None else [""]:
                items = from_cache
                if items is None:
                    items = await self._list_tracked(resource, selector, scope, desired)
                for i, obj in enumerate(items):
                    if i % LIST_PAGE == LIST_PAGE - 1:
                        await asyncio.sleep(0)  # let the loop run: thousands of objects
                    obj.setdefault("apiVersion", resource.api_version)
                    obj.setdefault("kind", resource.kind)
                    key = key_of(obj)
                    objects[key] = obj
                    if ownership.is_ours(obj, repository, uid):
                        tracked.add(key)
                        if uid and not _uid_labelled(obj, uid) and not _deleting(obj):
                            found_legacy.add((api_version, kind))
        if self.metadata is not None:
            await self.metadata.settle(repository, used)
        kinds_list = list(listed_kinds)
        listed = {(api_version.rpartition("/")[0], kind) for api_version, kind in kinds_list}
        if all(self.cached(ResourceKey(g, k, "", "")) or (g, k) in served for g, k in listed):
            desired = ()  # every desired kind is a cache's: nothing to GET (no O(files) loop)
        for key in desired:
            if key in objects or self.cached(key) or (key.group, key.kind) in served:
                continue
            resource = await _resource_of_key(self.discovery, key, kinds_list)
            if resource is None or not _in_scope(resource, key.namespace, scope):
                continue
            try:
                obj = await self.client.get(resource, key.name, key.namespace or None)
            except (errors.NotFound, errors.Forbidden):
                continue
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
            objects[key] = obj
        fingerprint = keys.fingerprint(objects, tracked)
        return Probe(objects, tracked, frozenset(found_legacy), fingerprint)

    def stamp(self, probe: Probe, repository: str, uid: str, watch: Iterable[ResourceKey]) -> str:
        """What tells whether the repository's live state changed since a `State` of the same
        stamp: the probe's fingerprint, the cache's digests of its tracking ids and the
        resourceVersions of the `watch` keys in the cache. O(1) + O(watch)."""
        if self.cache is None:
            return probe.fingerprint
        ids = _ids(repository, uid)
        return _stamp(probe, {i: self.cache.digest(i) for i in ids}, self._versions(watch))

    async def complete(
        self,
        probe: Probe,
        repository: str,
        uid: str,
        desired: Sequence[ResourceKey],
        *,
        scope: tenancy.Scope | None,
    ) -> State:
        """The whole live state: `probe`'s objects and, from the cache, the repository's own
        (within `scope`) and each desired key's.

        The cache is read on the loop, where it changes, in one go (dict lookups); the rest —
        ownership, the digests of thousands of applies — is assembled in a thread from that
        snapshot (cached objects are replaced by the informer, never changed in place)."""
        cache = self.cache
        if cache is None:  # the probe listed every kind
            objects, tracked = dict(probe.objects), set(probe.tracked)
            return State(
                objects, tracked, (), keys.fingerprint(objects, tracked), _kinds_of(objects)
            )
        ids = _ids(repository, uid)
        snapshot = _Snapshot(
            current={i: cache.digest(i) for i in ids},
            own=cache.tracked_by(ids),
            wanted=[k for k in desired if cache.serves(k.group, k.kind)],
        )
        snapshot.hits = [cache.get(k) for k in snapshot.wanted]
        snapshot.allowed = await self._readable(cache, snapshot)
        return await asyncio.to_thread(_assemble, probe, snapshot, repository, uid, scope)

    async def _readable(
        self, cache: livecache.LiveCache, snap: _Snapshot
    ) -> set[tuple[str, str, str]]:
        """The (group, kind, namespace)s of the snapshot's objects the identity may list."""
        seen = {
            (key.group, key.kind, key.namespace)
            for key in [key_of(o) for o in snap.own]
            + [k for k, hit in zip(snap.wanted, snap.hits, strict=True) if hit is not None]
        }
        allowed = set()
        for group, kind, namespace in sorted(seen):
            if await self.access.may_list(group, cache.plural(group, kind), namespace):
                allowed.add((group, kind, namespace))
        return allowed

    # --- internals ------------------------------------------------------------------------------

    def _versions(self, watch: Iterable[ResourceKey]) -> str:
        assert self.cache is not None
        return _versions_of(self.cache.get(k) for k in watch)

    async def _list_tracked(
        self,
        resource: Resource,
        selector: str,
        scope: tenancy.Scope | None,
        desired: Sequence[ResourceKey],
    ) -> list[dict[str, Any]]:
        """The objects of `resource` matching `selector`, within `scope`: every namespace
        (None), else one list per namespace of the scope. Under a scope, a list the API server
        forbids gives nothing; an every-namespace list it forbids falls back to the namespaces
        Git names."""
        if scope is None:
            return await self._pages(resource, None, selector)
        if not resource.namespaced:
            if not scope.lists_cluster_kind(resource.group, resource.kind):
                return []
            return await self._list_allowed(resource, None, selector)
        if scope.namespaces is not None:
            namespaces: list[str] = sorted(scope.namespaces)
        else:
            try:
                return await self._pages(resource, None, selector)
            except errors.Forbidden:
                namespaces = sorted({k.namespace for k in desired if k.namespace})
        out: list[dict[str, Any]] = []
        for namespace in namespaces:
            out.extend(await self._list_allowed(resource, namespace, selector))
        return out

    async def _list_allowed(
        self, resource: Resource, namespace: str | None, selector: str
    ) -> list[dict[str, Any]]:
        try:
            return await self._pages(resource, namespace, selector)
        except errors.Forbidden:
            return []

    async def _pages(
        self, resource: Resource, namespace: str | None, selector: str
    ) -> list[dict[str, Any]]:
        """Every object of the list, read `LIST_PAGE` at a time: one body of 10,000 objects is
        parsed in one call that holds the event loop (and the GIL) for a quarter second or
        more; pages let the loop run in between. An expired continue token (410) lists again
        in one go."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            try:
                body = await self.client.list(
                    resource, namespace, label_selector=selector, limit=LIST_PAGE,
                    continue_token=token,
                )  # fmt: skip
            except errors.Gone:
                body = await self.client.list(resource, namespace, label_selector=selector)
                return list(body.get("items") or [])
            out.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue") or None
            if token is None:
                return out


@dataclass
class _Snapshot:
    """What `LiveReader.complete` reads of the cache, on the loop."""

    current: dict[str, int]
    own: list[dict[str, Any]]
    wanted: list[ResourceKey]
    hits: list[dict[str, Any] | None] = field(default_factory=list)
    allowed: set[tuple[str, str, str]] = field(default_factory=set)
    """(group, kind, namespace) the identity may list: the cached objects it may see."""


def _assemble(
    probe: Probe, snap: _Snapshot, repository: str, uid: str, scope: tenancy.Scope | None
) -> State:
    """The `State` of `probe` and a cache snapshot (pure; run in a thread)."""
    objects, tracked = dict(probe.objects), set(probe.tracked)
    for obj in snap.own:
        meta = obj.get("metadata") or {}
        if not _in_namespaces(str(meta.get("namespace") or ""), scope):
            continue
        key = key_of(obj)
        if (key.group, key.kind, key.namespace) not in snap.allowed:
            continue  # the identity may not list it: as if a list had been forbidden
        objects[key] = obj
        if ownership.is_ours(obj, repository, uid):
            tracked.add(key)
    wanted, hits = [], {}
    for key, hit in zip(snap.wanted, snap.hits, strict=True):
        if not _in_namespaces(key.namespace, scope):
            continue
        if hit is not None and (key.group, key.kind, key.namespace) not in snap.allowed:
            hit = None
        wanted.append(key)
        hits[key] = hit
        if hit is not None and key not in objects:
            objects[key] = hit
    watch = tuple(k for k in wanted if k not in tracked)
    versions = _versions_of(hits.get(k) for k in watch)
    found = _kinds_of(objects)
    return State(objects, tracked, watch, _stamp(probe, snap.current, versions), found,
                 snap.current)  # fmt: skip


def settled(
    state: State,
    probe: Probe,
    results: Mapping[ResourceKey, dict[str, Any] | None],
    repository: str,
    uid: str,
    cache: livecache.LiveCache | None,
) -> tuple[State, Probe]:
    """`state` and `probe` once a sync's `results` are in (per key: the object the API server
    answered to its apply; None once pruned), without reading anything: the answers taken
    over the versions compared, which the caches' watches deliver a moment later, and the
    stamp what the caches will then tell (pure)."""

    def cached(key: ResourceKey) -> bool:
        return cache is not None and cache.serves(key.group, key.kind)

    listed = [(k, after) for k, after in results.items() if not cached(k)]
    objects, tracked = _overlaid(dict(probe.objects), set(probe.tracked), listed, repository, uid)
    probe = Probe(objects, tracked, probe.legacy, keys.fingerprint(objects, tracked))
    objects, tracked = _overlaid(
        dict(state.objects), set(state.tracked), results.items(), repository, uid
    )
    if cache is None:
        stamp = probe.fingerprint
        return State(objects, tracked, (), stamp, _kinds_of(objects)), probe
    changes = [(state.objects.get(k), after) for k, after in results.items() if cached(k)]
    digests = livecache.replaced(state.digests, changes)
    watch = tuple(k for k in state.watch if k not in tracked)
    versions = _versions_of(objects.get(k) for k in watch)
    stamp = _stamp(probe, digests, versions)
    return State(objects, tracked, watch, stamp, _kinds_of(objects), digests), probe


def _kinds_of(objects: Mapping[ResourceKey, Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {(str(o.get("apiVersion")), str(o.get("kind"))) for o in objects.values()}


def _versions_of(objects: Iterable[Mapping[str, Any] | None]) -> str:
    digest = hashlib.sha256()
    for obj in objects:
        meta = (obj or {}).get("metadata") or {}
        digest.update(f"{meta.get('uid', '')}|{meta.get('resourceVersion', '')}\n".encode())
    return digest.hexdigest()


def _ids(repository: str, uid: str) -> list[str]:
    return [i for i in (uid, livecache.name_id(repository)) if i]


def _stamp(probe: Probe, digests: Mapping[str, int], versions: str) -> str:
    shown = ",".join(f"{i}={d:016x}" for i, d in sorted(digests.items()))
    return f"{probe.fingerprint}|{shown}|{versions}"


def _overlaid(
    objects: dict[ResourceKey, dict[str, Any]],
    tracked: set[ResourceKey],
    outcomes: Iterable[tuple[ResourceKey, dict[str, Any] | None]],
    repository: str,
    uid: str,
) -> tuple[dict[ResourceKey, dict[str, Any]], set[ResourceKey]]:
    for key, after in outcomes:
        if after is None:
            objects.pop(key, None)
            tracked.discard(key)
            continue
        objects[key] = after
        if ownership.is_ours(after, repository, uid):
            tracked.add(key)
        else:
            tracked.discard(key)
    return objects, tracked


def _uid_labelled(obj: Mapping[str, Any], uid: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(names.REPOSITORY_UID_LABEL) == uid


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _in_scope(resource: Resource, namespace: str, scope: tenancy.Scope | None) -> bool:
    if scope is None:
        return True
    if not resource.namespaced:
        return scope.lists_cluster_kind(resource.group, resource.kind)
    return _in_namespaces(namespace, scope)


def _in_namespaces(namespace: str, scope: tenancy.Scope | None) -> bool:
    """Whether an object of a namespaced kind in `namespace` is within `scope` (the cache
    holds every namespace; what is outside is left out, as a list would)."""
    return scope is None or scope.namespaces is None or namespace in scope.namespaces


async def _resource_of_key(
    discovery: Discovery, key: ResourceKey, kinds: Iterable[tuple[str, str]]
) -> Resource | None:
    for api_version, kind in kinds:
        group = api_version.rpartition("/")[0]
        if kind == key.kind and group == key.group:
            return await discovery.resource(api_version, kind)
    return None

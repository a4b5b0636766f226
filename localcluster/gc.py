"""In-process controllers: garbage collector, namespace lifecycle, CRD cleanup, default SA.

They play the roles kube-controller-manager and the apiextensions server play in a real cluster,
driven by the same committed events watchers see (a hub subscription over all resources):

- ownerReference GC: a dependent whose owners are all gone is deleted (background propagation);
  dangling references next to a live owner are dropped. `orphan` on a deleting owner strips
  the references from its dependents, then the finalizer. `foregroundDeletion` deletes the
  dependents and keeps the owner until no dependent with `blockOwnerDeletion` remains.
- namespaces: a terminating namespace has its contents deleted; once empty, `kubernetes` leaves
  `spec.finalizers` and the namespace is removed. Every active namespace gets the `default`
  ServiceAccount (the serviceaccount controller's job).
- CRDs: a deleting CRD's custom resources are deleted before its cleanup finalizer goes.

Work is level-triggered: an event only names what to look at; the handler reads current state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from localcluster import deletion, storage, writes
from localcluster.registry import CRD_RESOURCE, NAMESPACES, resource_id
from localcluster.server import Server
from localcluster.storage import Event, clone
from localcluster.types import ApiError
from localcluster.watch import Subscription, WatchFilter

__all__ = ["Controllers"]

log = logging.getLogger("localcluster.gc")

Work = tuple[str, Any]
_EVENT_RIDS = ("/events", "events.k8s.io/events")
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
_CRD_RID = resource_id(CRD_RESOURCE)
_NS_RID = resource_id(NAMESPACES)
_SA_INFO_KEY = ("", "v1", "serviceaccounts")


class Controllers:
    def __init__(self, srv: Server, *, event_ttl: float = 3600.0) -> None:
        self.srv = srv
        self.event_ttl = event_ttl
        self._sub: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._expiry: asyncio.Task[None] | None = None
        self._pending: dict[Work, None] = {}
        self._failures: dict[Work, int] = {}

    async def start(self) -> None:
        store = self.srv.store
        self._sub = self.srv.hub.subscribe(WatchFilter(None), max_backlog=None)
        for rid in store.resources():
            for rec in store.records(rid):
                meta = rec.obj["metadata"]
                key = (rid, meta.get("namespace") or "", meta["name"])
                if meta.get("deletionTimestamp"):
                    self._pending[("deleting", key)] = None
                if meta.get("ownerReferences"):
                    self._pending[("dependent", key)] = None
                if rid == _NS_RID:
                    self._pending[("namespace", meta["name"])] = None
        self._task = asyncio.create_task(self._run(), name="localcluster-controllers")
        self._expiry = asyncio.create_task(self._expire_events(), name="localcluster-event-ttl")

    async def stop(self) -> None:
        if self._sub is not None:
            self._sub.close()
        for task in (self._task, self._expiry):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- event TTL (kube-apiserver --event-ttl, 1 h by default) ------------------------------

    async def _expire_events(self) -> None:
        interval = max(0.2, min(60.0, self.event_ttl / 4))
        while True:
            await asyncio.sleep(interval)
            now = self.srv.clock()
            for rid in _EVENT_RIDS:
                for rec in self.srv.store.records(rid):
                    if _event_age(rec.obj, now) > self.event_ttl:
                        meta = rec.obj["metadata"]
                        with contextlib.suppress(storage.StorageError):
                            await self.srv.store.delete(
                                rid, meta.get("namespace") or "", meta["name"]
                            )

    async def _run(self) -> None:
        assert self._sub is not None
        queue = self._sub.queue
        while True:
            while self._pending:
                work = next(iter(self._pending))
                del self._pending[work]
                try:
                    await self._process(work)
                    self._failures.pop(work, None)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    failures = self._failures[work] = self._failures.get(work, 0) + 1
                    delay = min(RETRY_SECONDS * 2 ** (failures - 1), MAX_RETRY_SECONDS)
                    log.exception("controller work %s failed; retrying in %.0fs", work, delay)
                    asyncio.get_running_loop().call_later(delay, self._retry, work)
                if not self._take(self._sub.drain()):
                    return
            if not self._take([await queue.get(), *self._sub.drain()]):
                return

    def _retry(self, work: Work) -> None:
        if self._sub is not None:
            self._sub.queue.put_nowait(("RETRY", work))  # type: ignore[arg-type]

    def _take(self, entries: list[Any]) -> bool:
        """Plan work for queued entries; False once the hub has closed the subscription."""
        for entry in entries:
            if entry is None:
                return False
            if entry[0] == "RETRY":
                self._pending.setdefault(entry[1], None)
            else:
                self._plan(entry[1])
        return True

    # -- planning: which keys an event concerns ---------------------------------------------

    def _plan(self, event: Event) -> None:
        key = (event.resource, event.namespace, event.name)
        meta = event.obj.get("metadata") or {}
        add = self._pending.setdefault
        if event.type == "DELETED":
            if meta.get("uid"):
                add(("owner-gone", meta["uid"]), None)
            if event.namespace:
                add(("namespace", event.namespace), None)
            for ref in meta.get("ownerReferences") or ():
                owner = self.srv.store.by_uid(ref.get("uid", ""))
                if owner is not None:
                    add(("deleting", owner), None)
            if event.resource != _CRD_RID:
                for crd in self.srv.store.records(_CRD_RID):
                    if crd.obj["metadata"].get("deletionTimestamp"):
                        add(("deleting", (_CRD_RID, "", crd.obj["metadata"]["name"])), None)
            return
        if meta.get("deletionTimestamp"):
            add(("deleting", key), None)
        if meta.get("ownerReferences"):
            add(("dependent", key), None)
        old_refs = {
            r.get("uid")
            for r in ((event.old or {}).get("metadata") or {}).get("ownerReferences") or ()
        }
        new_refs = {r.get("uid") for r in meta.get("ownerReferences") or ()}
        for uid in old_refs - new_refs:
            owner = self.srv.store.by_uid(uid or "")
            if owner is not None:
                add(("deleting", owner), None)
        if event.resource == _NS_RID:
            add(("namespace", event.name), None)

    async def _process(self, work: Work) -> None:
        kind, arg = work
        if kind == "owner-gone":
            for dep in self.srv.store.dependents(arg):
                await self._dependent(dep)
        elif kind == "dependent":
            await self._dependent(arg)
        elif kind == "deleting":
            await self._deleting(arg)
        elif kind == "namespace":
            await self._namespace(arg)

    # -- helpers ---------------------------------------------------------------------------

    def _get(self, key: storage.Key) -> dict[str, Any] | None:
        return self.srv.store.get(*key)

    async def _delete(self, key: storage.Key, propagation: str = "Background") -> None:
        info = self.srv.registry.by_resource_id(key[0])
        try:
            if info is None:
                await self.srv.store.delete(*key)
            else:
                await deletion.delete(
                    self.srv,
                    info,
                    key[1],
                    key[2],
                    deletion.DeleteOptions(propagation=propagation),
                    internal=True,
                )
        except (ApiError, storage.StorageError) as e:
            if not (isinstance(e, storage.Missing) or getattr(e, "code", 0) == 404):
                raise

    async def _mutate(self, key: storage.Key, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply `change` to a copy of the object and store it (removing it once finalized)."""
        for _ in range(5):
            obj = self._get(key)
            if obj is None:
                return
            new = clone(obj)
            change(new)
            if new == obj:
                return
            expect = obj["metadata"]["resourceVersion"]
            try:
                if writes.finalized(new):
                    await self.srv.store.delete(*key, expect_rv=expect)
                else:
                    await self.srv.store.update(key[0], new, expect_rv=expect)
                return
            except storage.Conflict:
                continue
            except storage.Missing:
                return

    async def _remove_finalizer(self, key: storage.Key, finalizer: str) -> None:
        def change(obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != finalizer]
            if not meta["finalizers"]:
                del meta["finalizers"]

        await self._mutate(key, change)

    async def _drop_owner(self, key: storage.Key, uids: set[str]) -> None:
        def change(obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            meta["ownerReferences"] = [
                r for r in meta.get("ownerReferences") or () if r.get("uid") not in uids
            ]
            if not meta["ownerReferences"]:
                del meta["ownerReferences"]

        await self._mutate(key, change)

    # -- garbage collection ----------------------------------------------------------------

    async def _dependent(self, key: storage.Key) -> None:
        obj = self._get(key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        refs = obj["metadata"].get("ownerReferences") or ()
        if not refs:
            return
        dangling: set[str] = set()
        alive = 0
        foreground = 0
        for ref in refs:
            owner_key = self.srv.store.by_uid(ref.get("uid", ""))
            owner = self._get(owner_key) if owner_key else None
            if owner is None:
                dangling.add(ref.get("uid", ""))
                continue
            alive += 1
            owner_meta = owner["metadata"]
            if owner_meta.get("deletionTimestamp") and deletion.FOREGROUND in (
                owner_meta.get("finalizers") or ()
            ):
                foreground += 1
        if alive == 0 or (foreground and foreground == alive):
            await self._delete(key)
        elif dangling:
            await self._drop_owner(key, dangling)

    async def _deleting(self, key: storage.Key) -> None:
        obj = self._get(key)
        if obj is None or not obj["metadata"].get("deletionTimestamp"):
            return
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or ()
        uid = meta.get("uid", "")
        if deletion.ORPHAN in finalizers:
            for dep in self.srv.store.dependents(uid):
                await self._drop_owner(dep, {uid})
            await self._remove_finalizer(key, deletion.ORPHAN)
        elif deletion.FOREGROUND in finalizers:
            blocking = False
            for dep in self.srv.store.dependents(uid):
                dep_obj = self._get(dep)
                if dep_obj is None:
                    continue
                if not dep_obj["metadata"].get("deletionTimestamp"):
                    await self._delete(dep, "Foreground")
                    dep_obj = self._get(dep)
                if dep_obj is not None and any(
                    r.get("uid") == uid and r.get("blockOwnerDeletion")
                    for r in dep_obj["metadata"].get("ownerReferences") or ()
                ):
                    blocking = True
            if not blocking:
                await self._remove_finalizer(key, deletion.FOREGROUND)
        if key[0] == _CRD_RID and writes.CRD_CLEANUP_FINALIZER in finalizers:
            await self._cleanup_crd(key, obj)

    async def _cleanup_crd(self, key: storage.Key, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        rid = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}"
        remaining = False
        for rec in self.srv.store.records(rid):
            m = rec.obj["metadata"]
            if not m.get("deletionTimestamp"):
                await self._delete((rid, m.get("namespace") or "", m["name"]))
            remaining = (
                remaining
                or self.srv.store.get(rid, m.get("namespace") or "", m["name"]) is not None
            )
        if not remaining:
            await self._remove_finalizer(key, writes.CRD_CLEANUP_FINALIZER)

    # -- namespaces --------------------------------------------------------------------------

    async def _namespace(self, name: str) -> None:
        ns = self.srv.store.get(_NS_RID, "", name)
        if ns is None:
            return
        if not ns["metadata"].get("deletionTimestamp"):
            await self._ensure_default_sa(name)
            return
        keys = list(self.srv.store.namespaced_keys(name))
        for key in keys:
            obj = self._get(key)
            if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                await self._delete(key)
        if any(self._get(k) is not None for k in keys) or any(
            True for _ in self.srv.store.namespaced_keys(name)
        ):
            return

        def finish(obj: dict[str, Any]) -> None:
            spec = obj.setdefault("spec", {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != "kubernetes"]
            if not spec["finalizers"]:
                del spec["finalizers"]

        await self._mutate((_NS_RID, "", name), finish)

    async def _ensure_default_sa(self, namespace: str) -> None:
        info = self.srv.registry.lookup(*_SA_INFO_KEY)
        if info is None or self.srv.get(info, namespace, "default") is not None:
            return
        try:
            await writes.create(
                self.srv,
                info,
                namespace,
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
                writes.WriteOptions(internal=True, field_manager="kube-controller-manager"),
            )
        except ApiError as e:
            if e.code not in (403, 404, 409):
                raise


def _event_age(event: dict[str, Any], now: datetime) -> float:
    """Seconds since the event was last recorded (its newest timestamp)."""
    series = event.get("series") or {}
    stamps = [
        (event.get("metadata") or {}).get("creationTimestamp"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        series.get("lastObservedTime"),
    ]
    newest = None
    for stamp in stamps:
        if isinstance(stamp, str) and stamp:
            try:
                when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                continue
            newest = when if newest is None or when > newest else newest
    return (now - newest).total_seconds() if newest is not None else 0.0

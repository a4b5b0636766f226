"""The in-process controller manager: one work loop for the controllers of this package.

They play the roles kube-controller-manager and the apiextensions server play in a real cluster,
driven by the same committed events watchers see (a hub subscription over all resources). Work is
level-triggered: an event only names what to look at (`_plan`); the step for it reads current
state (`garbagecollector`, `namespaces`, `serviceaccounts`, `rootca`). A failing step is retried with
exponential backoff. Event expiry (`eventttl`) runs beside the loop.

The subscription is bounded like every other (`store/watch.py`). If the loop falls behind and
the hub cuts it off, it does what an informer does on 410 Gone: subscribes again and re-reads
every object (`_resync`), so no change is missed and memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from localcluster.api.registry import CRD_RESOURCE, resource_id
from localcluster.controllers import (
    eventttl,
    garbagecollector,
    namespaces,
    rootca,
    serviceaccounts,
)
from localcluster.controllers.namespaces import NS_RID
from localcluster.store.records import Event
from localcluster.store.watch import Subscription, WatchFilter
from localcluster.write.state import Server

__all__ = ["Controllers"]

log = logging.getLogger("localcluster.controllers")

Work = tuple[str, Any]
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
_CRD_RID = resource_id(CRD_RESOURCE)
_CM_RID = "/configmaps"


class Controllers:
    def __init__(self, srv: Server, *, event_ttl: float = 3600.0, root_ca: str = "") -> None:
        self.srv = srv
        self.event_ttl = event_ttl
        self.root_ca = root_ca  # PEM published as kube-root-ca.crt; "" publishes nothing
        self._sub: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._expiry: asyncio.Task[None] | None = None
        self._pending: dict[Work, None] = {}
        self._failures: dict[Work, int] = {}

    async def start(self) -> None:
        self._resync()
        self._task = asyncio.create_task(self._run(), name="localcluster-controllers")
        self._expiry = asyncio.create_task(
            eventttl.expire_events(self.srv, self.event_ttl), name="localcluster-event-ttl"
        )

    def _resync(self) -> None:
        """Subscribe, then queue work for every stored object (no await in between: exact)."""
        store = self.srv.store
        self._sub = self.srv.hub.subscribe(WatchFilter(None))
        for rid in store.resources():
            for rec in store.records(rid):
                meta = rec.obj["metadata"]
                key = (rid, meta.get("namespace") or "", meta["name"])
                if meta.get("deletionTimestamp"):
                    self._pending[("deleting", key)] = None
                if meta.get("ownerReferences"):
                    self._pending[("dependent", key)] = None
                if rid == NS_RID:
                    self._pending[("namespace", meta["name"])] = None

    async def stop(self) -> None:
        if self._sub is not None:
            self._sub.close()
        for task in (self._task, self._expiry):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _run(self) -> None:
        while True:
            assert self._sub is not None
            sub = self._sub
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
                if not self._take(sub.drain()):
                    break
            else:
                if self._take([await sub.get(), *sub.drain()]):
                    continue
            if not sub.overflowed:
                return  # closed by the server: shutting down
            log.warning("controllers fell behind the event stream; re-reading every object")
            self._resync()

    def _retry(self, work: Work) -> None:
        if self._sub is not None:
            self._sub.put(("RETRY", work))

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

    def _plan(self, event: Event) -> None:
        """Which keys an event concerns (the steps themselves read current state)."""
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
        if event.resource == NS_RID:
            add(("namespace", event.name), None)
        elif event.resource == _CM_RID and event.name == rootca.ROOT_CA_NAME:
            add(("namespace", event.namespace), None)

    async def _process(self, work: Work) -> None:
        kind, arg = work
        srv = self.srv
        if kind == "owner-gone":
            for dep in srv.store.dependents(arg):
                await garbagecollector.collect_dependent(srv, dep)
        elif kind == "dependent":
            await garbagecollector.collect_dependent(srv, arg)
        elif kind == "deleting":
            await garbagecollector.finish_deleting(srv, arg)
        elif kind == "namespace":
            ns = srv.store.get(NS_RID, "", arg)
            if ns is None:
                return
            if ns["metadata"].get("deletionTimestamp"):
                await namespaces.finalize_namespace(srv, arg)
            else:
                await serviceaccounts.ensure_default_service_account(srv, arg)
                await rootca.publish_root_ca(srv, arg, self.root_ca)

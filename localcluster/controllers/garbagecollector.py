"""The garbage collector: ownerReferences, orphan and foreground deletion, CRD cleanup.

- A dependent whose owners are all gone is deleted (background propagation); dangling
  references next to a live owner are dropped.
- `orphan` on a deleting owner strips the references from its dependents, then the finalizer.
- `foregroundDeletion` deletes the dependents and keeps the owner until no dependent with
  `blockOwnerDeletion` remains.
- A deleting CRD's custom resources are deleted before its cleanup finalizer goes (the
  apiextensions server's job in a real cluster).

Each function is one level-triggered step: it reads current state for one key and acts on it.
"""

from __future__ import annotations

from typing import Any

from localcluster.api.registry import CRD_RESOURCE, resource_id
from localcluster.controllers import objects
from localcluster.store import storage
from localcluster.write import deletion, writes
from localcluster.write.state import Server

__all__ = ["collect_dependent", "finish_deleting"]

_CRD_RID = resource_id(CRD_RESOURCE)


async def collect_dependent(srv: Server, key: storage.Key) -> None:
    """Delete a dependent whose owners are gone (or all foreground-deleting); drop dangling refs."""
    obj = objects.get(srv, key)
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return
    refs = obj["metadata"].get("ownerReferences") or ()
    if not refs:
        return
    dangling: set[str] = set()
    alive = 0
    foreground = 0
    for ref in refs:
        owner_key = srv.store.by_uid(ref.get("uid", ""))
        owner = objects.get(srv, owner_key) if owner_key else None
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
        await objects.delete(srv, key)
    elif dangling:
        await objects.drop_owner(srv, key, dangling)


async def finish_deleting(srv: Server, key: storage.Key) -> None:
    """Work off the garbage-collector finalizers of a deleting object (and a CRD's cleanup)."""
    obj = objects.get(srv, key)
    if obj is None or not obj["metadata"].get("deletionTimestamp"):
        return
    meta = obj["metadata"]
    finalizers = meta.get("finalizers") or ()
    uid = meta.get("uid", "")
    if deletion.ORPHAN in finalizers:
        for dep in srv.store.dependents(uid):
            await objects.drop_owner(srv, dep, {uid})
        await objects.remove_finalizer(srv, key, deletion.ORPHAN)
    elif deletion.FOREGROUND in finalizers:
        blocking = False
        for dep in srv.store.dependents(uid):
            dep_obj = objects.get(srv, dep)
            if dep_obj is None:
                continue
            if not dep_obj["metadata"].get("deletionTimestamp"):
                await objects.delete(srv, dep, "Foreground")
                dep_obj = objects.get(srv, dep)
            if dep_obj is not None and any(
                r.get("uid") == uid and r.get("blockOwnerDeletion")
                for r in dep_obj["metadata"].get("ownerReferences") or ()
            ):
                blocking = True
        if not blocking:
            await objects.remove_finalizer(srv, key, deletion.FOREGROUND)
    if key[0] == _CRD_RID and writes.CRD_CLEANUP_FINALIZER in finalizers:
        await _cleanup_crd(srv, key, obj)


async def _cleanup_crd(srv: Server, key: storage.Key, crd: dict[str, Any]) -> None:
    spec = crd.get("spec") or {}
    rid = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}"
    remaining = False
    for rec in srv.store.records(rid):
        m = rec.obj["metadata"]
        if not m.get("deletionTimestamp"):
            await objects.delete(srv, (rid, m.get("namespace") or "", m["name"]))
        remaining = remaining or srv.store.get(rid, m.get("namespace") or "", m["name"]) is not None
    if not remaining:
        await objects.remove_finalizer(srv, key, writes.CRD_CLEANUP_FINALIZER)

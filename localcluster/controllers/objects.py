"""What the in-process controllers do to one object: read, delete, mutate, drop references.

The controllers act as kube-controller-manager acts: deletes go through the deletion rules
(`write.deletion`, so finalizers and propagation apply), while finalizer and owner-reference edits
are compare-and-swap writes straight to storage, retried on a conflict and dropped once the object
is gone. Shared by the garbage collector and the namespace controller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from localcluster.api.types import ApiError
from localcluster.store import storage
from localcluster.store.records import clone
from localcluster.write import deletion, writes
from localcluster.write.state import Server

__all__ = ["delete", "drop_owner", "get", "mutate", "remove_finalizer"]

_CAS_ATTEMPTS = 5


def get(srv: Server, key: storage.Key) -> dict[str, Any] | None:
    return srv.store.get(*key)


async def delete(srv: Server, key: storage.Key, propagation: str = "Background") -> None:
    """Delete as a client would (finalizers, propagation); an object already gone is fine."""
    info = srv.registry.by_resource_id(key[0])
    try:
        if info is None:
            await srv.store.delete(*key)
        else:
            await deletion.delete(
                srv,
                info,
                key[1],
                key[2],
                deletion.DeleteOptions(propagation=propagation),
                internal=True,
            )
    except (ApiError, storage.StorageError) as e:
        if not (isinstance(e, storage.Missing) or getattr(e, "code", 0) == 404):
            raise


async def mutate(srv: Server, key: storage.Key, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply `change` to a copy of the object and store it (removing it once finalized)."""
    for _ in range(_CAS_ATTEMPTS):
        obj = get(srv, key)
        if obj is None:
            return
        new = clone(obj)
        change(new)
        if new == obj:
            return
        expect = obj["metadata"]["resourceVersion"]
        try:
            if writes.finalized(new):
                await srv.store.delete(*key, expect_rv=expect)
            else:
                await srv.store.update(key[0], new, expect_rv=expect)
            return
        except storage.Conflict:
            continue
        except storage.Missing:
            return


async def remove_finalizer(srv: Server, key: storage.Key, finalizer: str) -> None:
    def change(obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != finalizer]
        if not meta["finalizers"]:
            del meta["finalizers"]

    await mutate(srv, key, change)


async def drop_owner(srv: Server, key: storage.Key, uids: set[str]) -> None:
    def change(obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["ownerReferences"] = [
            r for r in meta.get("ownerReferences") or () if r.get("uid") not in uids
        ]
        if not meta["ownerReferences"]:
            del meta["ownerReferences"]

    await mutate(srv, key, change)

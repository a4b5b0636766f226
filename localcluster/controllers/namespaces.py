"""The namespace controller: a terminating namespace is emptied, then its finalizer goes.

Once every object in the namespace is gone, `kubernetes` leaves `spec.finalizers` and the
namespace is removed (storage removes an object whose finalizers are all gone).
"""

from __future__ import annotations

from typing import Any

from localcluster.api.registry import NAMESPACES, resource_id
from localcluster.controllers import objects
from localcluster.write.state import Server

__all__ = ["NS_RID", "finalize_namespace"]

NS_RID = resource_id(NAMESPACES)
_FINALIZER = "kubernetes"


async def finalize_namespace(srv: Server, name: str) -> None:
    """Delete what a terminating namespace holds; drop its finalizer once it is empty."""
    keys = list(srv.store.namespaced_keys(name))
    for key in keys:
        obj = objects.get(srv, key)
        if obj is not None and not obj["metadata"].get("deletionTimestamp"):
            await objects.delete(srv, key)
    if any(objects.get(srv, k) is not None for k in keys) or any(
        True for _ in srv.store.namespaced_keys(name)
    ):
        return

    def finish(obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or () if f != _FINALIZER]
        if not spec["finalizers"]:
            del spec["finalizers"]

    await objects.mutate(srv, (NS_RID, "", name), finish)

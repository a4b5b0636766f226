"""An in-memory stand-in for the API server's object store, for the manager's unit tests.

It implements the `certs.kube.Cluster` seam with the semantics that matter for concurrency:
every write bumps `resourceVersion`; a replace carrying a stale one, or a create of an existing
name, raises `Conflict`; each call yields to the event loop so racing managers interleave.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from certs.kube import ClusterError, Conflict


class FakeCluster:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.version = 0
        self.writes: list[tuple[str, str]] = []

    def put(self, kind: str, obj: dict[str, Any], namespace: str = "") -> None:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[(kind, namespace, obj["metadata"]["name"])] = obj

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        await asyncio.sleep(0)
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj else None

    async def create(self, kind: str, body: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        await asyncio.sleep(0)
        name = body["metadata"]["name"]
        if (kind, namespace, name) in self.objects:
            raise Conflict(409, f"{kind} {name} already exists")
        self.put(kind, body, namespace)
        self.writes.append((kind, name))
        return copy.deepcopy(self.objects[(kind, namespace, name)])

    async def replace(
        self, kind: str, name: str, body: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        current = self.objects.get((kind, namespace, name))
        if current is None:
            raise ClusterError(404, f"{kind} {name} not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(
                409, "the object has been modified; please apply your changes to the latest version"
            )
        self.put(kind, body, namespace)
        self.writes.append((kind, name))
        return copy.deepcopy(self.objects[(kind, namespace, name)])

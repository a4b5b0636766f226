"""A minimal scheduler: binds every pending pod without a node to the one local node.

Like kube-scheduler it binds through the `pods/binding` subresource (the API server then sets
`spec.nodeName` and the `PodScheduled` condition) and records a `Scheduled` event. There is one
node, so there is nothing to choose: resource requests, node selectors, affinities and taints are
not evaluated (docs/KUBELET.md). Pods naming another `schedulerName` are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from localcluster.kubelet import events
from localcluster.kubelet.clock import event_suffix, rfc3339, utcnow
from localcluster.kubelet.kube import ApiException, Kube

__all__ = ["Scheduler", "wants_binding"]

log = logging.getLogger("trainops.scheduler")


def wants_binding(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and (spec.get("schedulerName") or "default-scheduler") == "default-scheduler"
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


class Scheduler:
    def __init__(self, kube: Kube, node_name: str) -> None:
        self.kube = kube
        self.node_name = node_name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                items, rv = await self.kube.list_pods()
                for pod in items:
                    await self._maybe_bind(pod)
                async for kind, pod in self.kube.watch(
                    self.kube.core.list_pod_for_all_namespaces, rv
                ):
                    if kind in ("ADDED", "MODIFIED"):
                        await self._maybe_bind(pod)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("scheduler watch ended: %s", e)
                await asyncio.sleep(0.5)

    async def _maybe_bind(self, pod: dict[str, Any]) -> None:
        if not wants_binding(pod):
            return
        meta = pod["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        try:
            await self.kube.bind_pod(ns, name, self.node_name)
        except ApiException as e:
            if e.status in (404, 409):  # gone, or bound meanwhile
                return
            raise
        event = events.pod_event(
            pod,
            "Scheduled",
            f"Successfully assigned {ns}/{name} to {self.node_name}",
            now=rfc3339(utcnow()),
            suffix=event_suffix(),
            component="default-scheduler",
        )
        with contextlib.suppress(Exception):
            await self.kube.create_event(ns, event)

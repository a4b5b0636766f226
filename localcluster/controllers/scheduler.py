"""A minimal scheduler: binds every pending pod without a node to the one local node.

Like kube-scheduler it binds through the `pods/binding` subresource (the API server then sets
`spec.nodeName` and the `PodScheduled` condition) and records a `Scheduled` event. There is one
node, so there is nothing to choose: resource requests, node selectors, affinities and taints are
not evaluated (docs/KUBELET.md).

It binds the pods whose `schedulerName` is one of `scheduler_names` (`SCHEDULER_NAMES` by
default): `default-scheduler` (also what an unset name means) and `t9k-scheduler` — the
controller gives the pods of jobs with `spec.scheduler.t9kScheduler` that name, and on the one
local node this scheduler stands in for the T9k Scheduler, ignoring its queue and priority.
Pods naming any other scheduler are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from typing import Any

from kube import resources
from kube.errors import Conflict, NotFound
from localcluster.client import events
from localcluster.client.clock import event_suffix, rfc3339, utcnow
from localcluster.client.kube import Kube

__all__ = ["SCHEDULER_NAMES", "Scheduler", "wants_binding"]

DEFAULT_SCHEDULER = "default-scheduler"
SCHEDULER_NAMES: frozenset[str] = frozenset({DEFAULT_SCHEDULER, "t9k-scheduler"})

log = logging.getLogger("trainops.scheduler")


def wants_binding(pod: dict[str, Any], scheduler_names: Collection[str] = SCHEDULER_NAMES) -> bool:
    """A pending pod, not yet bound or deleted, naming one of `scheduler_names`."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER) in scheduler_names
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


class Scheduler:
    def __init__(
        self, kube: Kube, node_name: str, *, scheduler_names: Collection[str] = SCHEDULER_NAMES
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.scheduler_names = frozenset(scheduler_names)
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
                async for kind, pod in self.kube.watch(resources.PODS, rv):
                    if kind in ("ADDED", "MODIFIED"):
                        await self._maybe_bind(pod)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("scheduler watch ended: %s", e)
                await asyncio.sleep(0.5)

    async def _maybe_bind(self, pod: dict[str, Any]) -> None:
        if not wants_binding(pod, self.scheduler_names):
            return
        meta = pod["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        try:
            await self.kube.bind_pod(ns, name, self.node_name)
        except (NotFound, Conflict):  # gone, or bound meanwhile
            return
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

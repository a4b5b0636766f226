"""The dashboard's only I/O: the GitOps `Hub` for recorded state, `kube.Client` for jobs.

Thin on purpose: each method is one read or one write, returning the API server's JSON, so
the pages' decisions stay in the pure view modules. Repositories and the jobs list come from
the Hub (the reconciler's informer caches, what the API serves); one job's object, its pods,
Events and logs, and the pause/resume/delete actions go to the API server through the client
(never a local shortcut: the same calls work against a real cluster).

Errors: `kube.errors.APIError` from the client pass through (the routes map NotFound to 404,
others to 502); `UnknownJob` when the kind's plural is not a training job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from gitops.apishow import job_row, shown_repository
from gitops.hub import Hub
from gitops.redact import redact_value
from kube import resources
from kube.client import Client
from kube.resources import Resource

__all__ = ["JOB_LABEL", "JOB_RESOURCES", "Backend", "UnknownJob"]

JOB_LABEL = "batch.tensorstack.dev/job-name"
"""The label the controller puts on every child of a job (controller/labels.py `JOB_NAME`)."""
JOB_RESOURCES = {r.plural: r for r in (resources.TFJOBS, resources.XGBJOBS)}
LOG_READ_TIMEOUT = 30.0


class UnknownJob(LookupError):
    """Not a training-job kind (the URL's plural)."""


class Backend:
    def __init__(self, hub: Hub, client: Client) -> None:
        self.hub = hub
        self.client = client

    # -- recorded state (the Hub) --------------------------------------------------------------
    def repositories(self) -> list[dict[str, Any]]:
        return [shown_repository(r) for r in self.hub.repositories()]

    def repository(self, namespace: str, name: str) -> dict[str, Any]:
        """Raises gitops.hub.UnknownRepository."""
        return shown_repository(self.hub.repository(namespace, name))

    def diffs(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [asdict(d) for d in self.hub.diff(namespace, name)]

    def job_rows(self) -> list[dict[str, Any]]:
        rows = [job_row(j) for j in self.hub.jobs()]
        rows.sort(key=lambda r: (r["namespace"] or "", r["name"] or "", r["kind"] or ""))
        return rows

    # -- one job (the API server) --------------------------------------------------------------
    async def job(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        return await self.client.get(_resource(plural), name, namespace)

    async def pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        body = await self.client.list(
            resources.PODS, namespace, label_selector=f"{JOB_LABEL}={job}"
        )
        return [p for p in body.get("items") or [] if isinstance(p, dict)]

    async def events(self, namespace: str, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The Events about the job itself (its uid, so a deleted namesake's are left out), with
        URL credentials masked (`gitops.redact`: GitOps' own are already; anyone may write one)."""
        meta = job.get("metadata") or {}
        body = await self.client.list(
            resources.EVENTS,
            namespace,
            field_selector=f"involvedObject.name={meta.get('name', '')}",
        )
        uid = meta.get("uid")
        return [
            redact_value(e)
            for e in body.get("items") or []
            if isinstance(e, dict)
            and (e.get("involvedObject") or {}).get("kind") == job.get("kind")
            and (not uid or (e.get("involvedObject") or {}).get("uid") in (None, "", uid))
        ]

    async def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.client.get(resources.PODS, name, namespace)

    async def log(self, namespace: str, pod: str, container: str, tail: int | None) -> bytes:
        data: bytes = await self.client.request(
            "GET",
            resources.PODS.object_path(pod, namespace, "log"),
            query={"container": container, "tailLines": tail},
            raw=True,
            timeout=LOG_READ_TIMEOUT,
        )
        return data

    def follow(
        self, namespace: str, pod: str, container: str, tail: int | None, *, limit: float
    ) -> AsyncIterator[bytes]:
        """The log's lines as they come (`follow=true`) for at most `limit` seconds; no idle
        limit, a quiet log is normal."""
        return self.client.stream_lines(
            resources.PODS.object_path(pod, namespace, "log"),
            query={"container": container, "tailLines": tail, "follow": True},
            deadline_seconds=limit,
        )

    async def set_paused(self, namespace: str, plural: str, name: str, paused: bool) -> None:
        """A merge patch of `spec.runMode.pause.enabled` (what `kubectl patch --type=merge`
        does; the controller deletes or recreates the replicas)."""
        patch = {"spec": {"runMode": {"pause": {"enabled": paused}}}}
        await self.client.patch(_resource(plural), name, patch, namespace, patch_type="merge")

    async def delete(self, namespace: str, plural: str, name: str) -> None:
        """Delete the job; its pods and services go with it (garbage collection)."""
        await self.client.delete(
            _resource(plural), name, namespace, propagation_policy="Background"
        )


def _resource(plural: str) -> Resource:
    try:
        return JOB_RESOURCES[plural]
    except KeyError:
        raise UnknownJob(plural) from None

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
from typing import Any

from gitops.api.show import job_row, shown_repository
from gitops.engine import handheld, names, ownership
from gitops.engine.redact import redact_value
from gitops.runtime.hub import Hub, ResourceDiff, UnknownRepository
from kube import errors, resources
from kube.client import Client
from kube.resources import Resource

__all__ = [
    "FIELD_MANAGER",
    "JOB_LABEL",
    "JOB_RESOURCES",
    "Backend",
    "DeployedFromGit",
    "UnknownJob",
]

JOB_LABEL = "batch.tensorstack.dev/job-name"
"""The label the controller puts on every child of a job (controller/labels.py `JOB_NAME`)."""
JOB_RESOURCES = {r.plural: r for r in (resources.TFJOBS, resources.XGBJOBS)}
LOG_READ_TIMEOUT = 30.0
FIELD_MANAGER = "trainops-dashboard"
"""The field manager of the dashboard's and the API's pause and resume."""


class UnknownJob(LookupError):
    """Not a training-job kind (the URL's plural)."""


class DeployedFromGit(Exception):
    """A delete refused: a JobRepository deploys the job and would create it again."""


class Backend:
    def __init__(
        self, hub: Hub, client: Client, *, progress_namespace: str = "kube-system"
    ) -> None:
        self.hub = hub
        self.client = client
        self.progress_namespace = progress_namespace
        """The controller's namespace, where each job's curves are (docs/PROGRESS.md)."""

    # -- recorded state (the Hub) --------------------------------------------------------------
    def repositories(self) -> list[dict[str, Any]]:
        return [shown_repository(r) for r in self.hub.repositories()]

    def repository(self, namespace: str, name: str) -> dict[str, Any]:
        """Raises gitops.runtime.hub.UnknownRepository."""
        return shown_repository(self.hub.repository(namespace, name))

    def diffs(self, namespace: str, name: str) -> list[ResourceDiff]:
        """Every diff of the repository: the pages show only those their reader may list
        (`gitops.api.access.visible_diffs`)."""
        return self.hub.diff(namespace, name)

    def job_rows(self) -> list[dict[str, Any]]:
        rows = [job_row(j) for j in self.hub.jobs()]
        rows.sort(key=lambda r: (r["namespace"] or "", r["name"] or "", r["kind"] or ""))
        return rows

    def live_jobs(self) -> list[dict[str, Any]]:
        """The training jobs as cached (their status: progress on the repository page)."""
        return list(self.hub.jobs())

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
        URL credentials masked (`gitops.engine.redact`: GitOps' own are already; anyone may write one)."""
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

    async def progress_curves(self, uid: str) -> str | None:
        """The job's curves document (`progress.json` of the controller's ConfigMap
        `trainops-progress-<uid>`), None before any; only the ConfigMap labelled with that uid."""
        try:
            cm = await self.client.get(
                resources.CONFIGMAPS, f"trainops-progress-{uid}", self.progress_namespace
            )
        except errors.NotFound:
            return None
        labels = (cm.get("metadata") or {}).get("labels") or {}
        if labels.get("batch.tensorstack.dev/progress-of") != uid:
            return None
        data = (cm.get("data") or {}).get("progress.json")
        return data if isinstance(data, str) else None

    async def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.client.get(resources.PODS, name, namespace)

    async def log(
        self,
        namespace: str,
        pod: str,
        container: str,
        tail: int | None,
        *,
        previous: bool = False,
    ) -> bytes:
        query: dict[str, Any] = {"container": container, "tailLines": tail}
        if previous:  # the container's run before this one (`kubectl logs --previous`)
            query["previous"] = "true"
        data: bytes = await self.client.request(
            "GET",
            resources.PODS.object_path(pod, namespace, "log"),
            query=query,
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

    async def set_paused(self, namespace: str, plural: str, name: str, paused: bool) -> bool:
        """Set `spec.runMode.pause.enabled` (the controller deletes or recreates the replicas);
        True when the job is deployed from Git and the value is now held by hand.

        Server-side apply as `trainops-dashboard` with force, so this manager owns the field
        even when it already had the value. On a Git-managed job the same apply adds the
        pointer to `gitops.trainops.dev/held-fields` (gitops/engine/handheld.py): Git stops managing
        the field, so neither self-heal nor a later commit undoes the pause or resume."""
        resource = _resource(plural)
        job = await self.client.get(resource, name, namespace)
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        held = ownership.tracking(job).tracked
        if held:
            pointers = handheld.with_held(job, handheld.PAUSE_POINTER)
            meta["annotations"] = {names.HELD_FIELDS_ANNOTATION: pointers}
        body = {
            "apiVersion": job.get("apiVersion") or resource.api_version,
            "kind": resource.kind,
            "metadata": meta,
            "spec": {"runMode": {"pause": {"enabled": paused}}},
        }
        await self.client.patch(
            resource, name, body, namespace, patch_type="apply",
            field_manager=FIELD_MANAGER, force=True,
        )  # fmt: skip
        return held

    async def delete(self, namespace: str, plural: str, name: str) -> None:
        """Delete the job; its pods and services go with it (garbage collection).

        Refused (`DeployedFromGit`) while a JobRepository that exists tracks the job: its next
        sync would create the job again, so the deletion would be silently undone."""
        resource = _resource(plural)
        job = await self.client.get(resource, name, namespace)
        refusal = self._deployed_from_git(job)
        if refusal is not None:
            raise DeployedFromGit(refusal)
        uid = (job.get("metadata") or {}).get("uid")
        await self.client.delete(
            resource, name, namespace, propagation_policy="Background",
            preconditions={"uid": uid} if uid else None,
        )  # fmt: skip

    def _deployed_from_git(self, job: dict[str, Any]) -> str | None:
        """Why deleting `job` here would be undone, or None."""
        t = ownership.tracking(job)
        if not t.repository or "/" not in t.repository:
            return None
        ns, _, rname = t.repository.partition("/")
        try:
            repo = self.hub.repository(ns, rname)
        except UnknownRepository:
            return None
        if t.uid and (repo.get("metadata") or {}).get("uid") not in (None, t.uid):
            return None  # a namesake of the repository that applied it: it is not tracked
        meta = job.get("metadata") or {}
        where = next(
            (
                f" ({r.get('file')})"
                for r in (repo.get("status") or {}).get("resources") or []
                if isinstance(r, dict)
                and r.get("name") == meta.get("name")
                and r.get("kind") == job.get("kind")
                and r.get("file")
            ),
            "",
        )
        return (
            f"{str(job.get('kind')).lower()} {meta.get('namespace')}/{meta.get('name')} is "
            f"deployed from Git by JobRepository {t.repository}{where}: deleting it here would "
            "be undone by its next sync; remove it from Git instead (a pause from here holds)"
        )


def _resource(plural: str) -> Resource:
    try:
        return JOB_RESOURCES[plural]
    except KeyError:
        raise UnknownJob(plural) from None

"""What the HTTP API (and the dashboard) need from the GitOps reconciler: the `Hub` protocol.

The reconciler (`gitops.runtime.reconciler`) implements it; `gitops.api.routes` only reads through it and asks
it to act, so the two meet here and nowhere else. Objects are the API server's JSON (plain
dicts): JobRepository objects with their `.status`, training jobs with theirs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from gitops.source.pushhooks import PushCheck, PushEvent

__all__ = ["Change", "Hub", "ResourceDiff", "UnknownRepository"]


class UnknownRepository(LookupError):
    """No JobRepository of that namespace/name."""


@dataclass(frozen=True)
class ResourceDiff:
    """One resource of a repository whose live state differs from Git (or is missing)."""

    group: str
    kind: str
    namespace: str
    name: str
    file: str
    line: int
    text: str
    """A unified diff of normalized YAML, live (`---`) to desired (`+++`)."""
    resource: str = ""
    """The kind's resource name (plural) when discovery knows it: what a reader of this diff
    must be allowed to list (`gitops.api.access.visible_diffs`); "" when unknown."""


@dataclass(frozen=True)
class Change:
    """One change for `GET /api/v1/stream`: `kind` is "repository" or "job", `type` is
    ADDED, MODIFIED or DELETED, `object` the object after the change (before, for DELETED)."""

    kind: str
    type: str
    object: dict[str, Any]


class Hub(Protocol):
    def repositories(self) -> list[dict[str, Any]]:
        """Every JobRepository the reconciler sees, with its status as stored (bounded: see
        `repository`), sorted by namespace/name."""
        ...

    def repository(self, namespace: str, name: str) -> dict[str, Any]:
        """One JobRepository (raises UnknownRepository), with every resource in
        `status.resources` (the stored status lists at most 500: `gitops.engine.status`)."""
        ...

    def diff(self, namespace: str, name: str) -> list[ResourceDiff]:
        """The resources of the last comparison that are not in sync (raises UnknownRepository;
        [] before the first comparison and when everything is in sync)."""
        ...

    def jobs(self) -> list[dict[str, Any]]:
        """Every training job (both kinds), with status; the owning repository is the value of
        the `gitops.trainops.dev/repository` annotation when it has one."""
        ...

    async def refresh(self, namespace: str, name: str) -> None:
        """Compare with Git now (fetch), and sync if the policy is automated (raises
        UnknownRepository). Returns once the request is queued, not when it is done."""
        ...

    async def sync(self, namespace: str, name: str, revision: str | None = None) -> None:
        """Sync now, even without an automated policy; to `revision` when given, once (raises
        UnknownRepository; ValueError for a revision that is not a valid ref or sha). Queued."""
        ...

    async def delete(self, namespace: str, name: str) -> None:
        """Delete the JobRepository object (raises UnknownRepository). What it applied stays in
        the cluster, as an Argo CD Application deleted without its resources finalizer leaves
        its resources."""
        ...

    async def push(self, event: PushEvent, check: PushCheck) -> list[str]:
        """Refresh every repository whose normalized repoURL and branch match the push and
        that `check` admits (given the push secret it names, read as the repository's
        ServiceAccount); the `namespace/name` of each one refreshed."""
        ...

    def changes(self) -> AsyncIterator[Change]:
        """Changes from now on, until the subscriber stops iterating (each subscriber gets its
        own bounded buffer; a subscriber too slow to keep up misses changes and is told so by
        a Change of kind "resync")."""
        ...

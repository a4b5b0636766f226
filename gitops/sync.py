"""The sync engine: read the live objects of a repository, apply, replace and prune (I/O).

gitops-engine's `pkg/sync` reduced to what trainops needs, on `kube.Client`:

- **Live state**: every object of the kinds involved (in Git now, or listed in the last status)
  that carries the tracking label, filtered by this repository's tracking annotation, plus a
  plain GET of each desired object not found that way (an object someone created by hand is
  compared — and adopted on apply; one another existing repository tracks is left alone, see
  gitops/ownership.py).
- **Apply** is server-side apply with the field manager `trainops-gitops` and `force`: Git
  wins over conflicting managers, while fields Git does not mention (a controller's, a user's
  annotation) stay theirs. The outcome is recorded verbatim: `created`, `configured`,
  `unchanged`, or the API server's message (an admission denial included) as `kube.errors`
  gives it. A training job whose immutable fields changed in Git is denied by the API server
  ("field is immutable…"); the message keeps that text and adds how to opt in to replacement.
- **Replace** (`gitops.trainops.dev/sync-options: Replace=true` on the object in Git): only
  when apply was refused as immutable — delete in the foreground, wait (bounded) until it is
  gone, apply again. A job is restarted only when it has to be.
- **Prune** deletes in the background with a uid precondition, so an object recreated by hand
  under the same name in the meantime survives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gitops import names, ownership, tenancy
from gitops.compare import ResourceState, replace_requested
from gitops.discovery import Discovery
from gitops.pairing import ResourceKey, key_of
from kube import errors
from kube.client import Client
from kube.resources import Resource

__all__ = ["REPLACE_HINT", "Outcome", "SyncEngine"]

REPLACE_HINT = (
    f"set the annotation {names.SYNC_OPTIONS_ANNOTATION}: Replace=true to delete and recreate "
    "the job"
)
LIST_PAGE = 1000
"""Objects per page when listing what a repository tracks (`SyncEngine.live`)."""
SYNCED, FAILED, PRUNED, PRUNE_SKIPPED = "Synced", "SyncFailed", "Pruned", "PruneSkipped"


@dataclass(frozen=True)
class Outcome:
    key: ResourceKey
    status: str
    """Synced, SyncFailed, Pruned or PruneSkipped."""
    message: str
    live: dict[str, Any] | None = None
    """The object after the operation (None after a prune or a failure)."""

    @property
    def failed(self) -> bool:
        return self.status == FAILED


class SyncEngine:
    def __init__(
        self, client: Client, discovery: Discovery, *, replace_timeout: float = 60.0
    ) -> None:
        self.client = client
        self.discovery = discovery
        self.replace_timeout = replace_timeout

    async def live(
        self,
        repository: str,
        kinds: Iterable[tuple[str, str]],
        desired: Iterable[ResourceKey],
        *,
        scope: tenancy.Scope | None = None,
        uid: str = "",
    ) -> tuple[dict[ResourceKey, dict[str, Any]], set[ResourceKey]]:
        """Live objects by key, and the keys of those this repository (of uid `uid`) applied
        (`gitops.ownership.is_ours`: its uid, or its name on objects applied before uids).

        `kinds` are (apiVersion, kind) pairs to list by the tracking label; `desired` the keys
        Git defines (fetched one by one when not found among the tracked). With a `scope`
        (`gitops.tenancy.live_scope`) nothing outside it is read, and a list or read the API
        server forbids (the repository's ServiceAccount may not) is left out: what the
        account cannot see it cannot change either, and the apply says so per resource."""
        desired = list(desired)
        live: dict[ResourceKey, dict[str, Any]] = {}
        tracked: set[ResourceKey] = set()
        selector = f"{names.MANAGED_LABEL}=true"
        for api_version, kind in sorted(set(kinds)):
            resource = await self.discovery.resource(api_version, kind)
            if resource is None:
                continue
            for i, obj in enumerate(await self._list_tracked(resource, selector, scope, desired)):
                if i % LIST_PAGE == LIST_PAGE - 1:
                    await asyncio.sleep(0)  # let the loop run: thousands of objects
                obj.setdefault("apiVersion", resource.api_version)
                obj.setdefault("kind", resource.kind)
                key = key_of(obj)
                live[key] = obj
                if ownership.is_ours(obj, repository, uid):
                    tracked.add(key)
        for key in desired:
            if key in live:
                continue
            resource = await self._resource_of_key(key, kinds)
            if resource is None or not _in_scope(resource, key.namespace, scope):
                continue
            try:
                obj = await self.client.get(resource, key.name, key.namespace or None)
            except (errors.NotFound, errors.Forbidden):
                continue
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
            live[key] = obj
        return live, tracked

    async def apply(self, state: ResourceState) -> Outcome:
        """Server-side apply of `state.desired` (Replace=true: delete and recreate when the
        API server refuses the change as immutable)."""
        assert state.key is not None and state.desired is not None
        key, body = state.key, state.desired
        resource = await self.discovery.resource(str(body.get("apiVersion", "")), key.kind)
        if resource is None:
            return Outcome(
                key, FAILED, f"the server does not serve {body.get('apiVersion')} {key.kind}"
            )
        try:
            after = await self._apply(resource, key, body)
        except errors.APIError as exc:
            if not _immutable(exc):
                return Outcome(key, FAILED, _message(exc))
            if not replace_requested(body):
                return Outcome(key, FAILED, f"{_message(exc)} ({REPLACE_HINT})")
            return await self._replace(resource, key, body, state.live)
        return Outcome(key, SYNCED, _verb(state.live, after), after)

    async def prune(self, state: ResourceState) -> Outcome:
        assert state.key is not None
        key, live = state.key, state.live or {}
        resource = await self.discovery.resource(str(live.get("apiVersion", "")), key.kind)
        if resource is None:
            return Outcome(key, FAILED, f"the server does not serve {key.kind} any more")
        uid = (live.get("metadata") or {}).get("uid")
        try:
            await self.client.delete(
                resource,
                key.name,
                key.namespace or None,
                propagation_policy="Background",
                preconditions={"uid": uid} if uid else None,
            )
        except errors.NotFound:
            return Outcome(key, PRUNED, "already gone")
        except errors.APIError as exc:
            return Outcome(key, FAILED, f"prune: {_message(exc)}")
        return Outcome(key, PRUNED, "pruned")

    # --- internals ------------------------------------------------------------------------------

    async def _list_tracked(
        self,
        resource: Resource,
        selector: str,
        scope: tenancy.Scope | None,
        desired: list[ResourceKey],
    ) -> list[dict[str, Any]]:
        """The objects of `resource` carrying the tracking label, within `scope`: every
        namespace (None), else one list per namespace of the scope. Under a scope, a list the
        API server forbids gives nothing; an every-namespace list it forbids falls back to
        the namespaces Git names."""
        if scope is None:
            return await self._pages(resource, None, selector)
        if not resource.namespaced:
            if not scope.lists_cluster_kind(resource.group, resource.kind):
                return []
            return await self._list_allowed(resource, None, selector)
        if scope.namespaces is not None:
            namespaces: list[str] = sorted(scope.namespaces)
        else:
            try:
                return await self._pages(resource, None, selector)
            except errors.Forbidden:
                namespaces = sorted({k.namespace for k in desired if k.namespace})
        out: list[dict[str, Any]] = []
        for namespace in namespaces:
            out.extend(await self._list_allowed(resource, namespace, selector))
        return out

    async def _list_allowed(
        self, resource: Resource, namespace: str | None, selector: str
    ) -> list[dict[str, Any]]:
        try:
            return await self._pages(resource, namespace, selector)
        except errors.Forbidden:
            return []

    async def _pages(
        self, resource: Resource, namespace: str | None, selector: str
    ) -> list[dict[str, Any]]:
        """Every object of the list, read `LIST_PAGE` at a time: one body of 10,000 objects is
        parsed in one call that holds the event loop (and the GIL) for a quarter second or
        more; pages let the loop run in between. An expired continue token (410) lists again
        in one go."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            try:
                body = await self.client.list(
                    resource, namespace, label_selector=selector, limit=LIST_PAGE,
                    continue_token=token,
                )  # fmt: skip
            except errors.Gone:
                body = await self.client.list(resource, namespace, label_selector=selector)
                return list(body.get("items") or [])
            out.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue") or None
            if token is None:
                return out

    async def _apply(
        self, resource: Resource, key: ResourceKey, body: dict[str, Any]
    ) -> dict[str, Any]:
        return await self.client.patch(
            resource,
            key.name,
            body,
            key.namespace or None,
            patch_type="apply",
            field_manager=names.FIELD_MANAGER,
            force=True,
        )

    async def _replace(
        self,
        resource: Resource,
        key: ResourceKey,
        body: dict[str, Any],
        live: dict[str, Any] | None,
    ) -> Outcome:
        uid = ((live or {}).get("metadata") or {}).get("uid")
        try:
            await self.client.delete(
                resource,
                key.name,
                key.namespace or None,
                propagation_policy="Foreground",
                preconditions={"uid": uid} if uid else None,
            )
        except errors.NotFound:
            pass
        except errors.APIError as exc:
            return Outcome(key, FAILED, f"replace: deleting: {_message(exc)}")
        deadline = time.monotonic() + self.replace_timeout
        while True:
            try:
                await self.client.get(resource, key.name, key.namespace or None)
            except errors.NotFound:
                break
            if time.monotonic() >= deadline:
                return Outcome(
                    key,
                    FAILED,
                    f"replace: still being deleted after {self.replace_timeout:.0f}s; "
                    "it is recreated once gone",
                )
            await asyncio.sleep(0.2)
        try:
            after = await self._apply(resource, key, body)
        except errors.APIError as exc:
            return Outcome(key, FAILED, f"replace: recreating: {_message(exc)}")
        return Outcome(key, SYNCED, "replaced (deleted and recreated)", after)

    async def _resource_of_key(
        self, key: ResourceKey, kinds: Iterable[tuple[str, str]]
    ) -> Resource | None:
        for api_version, kind in kinds:
            group = api_version.rpartition("/")[0]
            if kind == key.kind and group == key.group:
                return await self.discovery.resource(api_version, kind)
        return None


def _in_scope(resource: Resource, namespace: str, scope: tenancy.Scope | None) -> bool:
    if scope is None:
        return True
    if not resource.namespaced:
        return scope.lists_cluster_kind(resource.group, resource.kind)
    return scope.namespaces is None or namespace in scope.namespaces


def _immutable(exc: errors.APIError) -> bool:
    return isinstance(exc, errors.Invalid | errors.Forbidden) and "immutable" in exc.message


def _message(exc: errors.APIError) -> str:
    return exc.message or str(exc)


def _verb(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    if before is None:
        return "created"
    old = (before.get("metadata") or {}).get("resourceVersion")
    new = (after.get("metadata") or {}).get("resourceVersion")
    return "unchanged" if old == new else "configured"

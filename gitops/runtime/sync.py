"""The sync engine: read the live objects of a repository, apply, replace and prune (I/O).

gitops-engine's `pkg/sync` reduced to what trainops needs, on `kube.Client`:

- **Live state** is read by `reader` (`gitops.runtime.livestate.LiveReader`, as the same identity):
  the training jobs from the shared informer cache by tracking id, other kinds from
  metadata-only informers (`gitops.runtime.metacache`), or listed by the uid label.
- **Apply** is server-side apply with the field manager `trainops-gitops` and `force`: Git
  wins over conflicting managers, while fields Git does not mention (a controller's, a user's
  annotation) stay theirs. The outcome is recorded verbatim: `created`, `configured`,
  `unchanged`, or the API server's message (an admission denial included) as `kube.errors`
  gives it. A training job whose immutable fields changed in Git is denied by the API server
  ("field is immutable…"); the message keeps that text and adds how to opt in to replacement.
- **Replace** (`gitops.trainops.dev/sync-options: Replace=true` on the object in Git): only
  when apply was refused as immutable — delete in the foreground and report `Replacing`; the
  round ends and the next one (asked for at once by `gitops.runtime.operations`) creates the
  object when it is gone. No worker waits on a deletion. A job is restarted only when it has
  to be.
- **Prune** deletes in the background with a uid precondition, so an object recreated by hand
  under the same name in the meantime survives.
"""

from __future__ import annotations

from typing import Any

from gitops.engine import names
from gitops.engine.compare import ResourceState, replace_requested
from gitops.engine.pairing import ResourceKey
from gitops.engine.records import FAILED, PRUNED, REPLACING, SYNCED, Outcome
from gitops.runtime.discovery import Discovery
from gitops.runtime.livecache import LiveCache
from gitops.runtime.livestate import LiveReader
from gitops.runtime.metacache import MetadataCache
from kube import errors
from kube.client import Client
from kube.resources import Resource

__all__ = ["REPLACE_HINT", "SyncEngine"]

REPLACE_HINT = (
    f"set the annotation {names.SYNC_OPTIONS_ANNOTATION}: Replace=true to delete and recreate "
    "the job"
)


class SyncEngine:
    def __init__(
        self,
        client: Client,
        discovery: Discovery,
        *,
        cache: LiveCache | None = None,
        metadata: MetadataCache | None = None,
    ) -> None:
        self.client = client
        self.discovery = discovery
        self.cache = cache
        self.metadata = metadata
        self.reader = LiveReader(client, discovery, cache, metadata)

    async def apply(self, state: ResourceState) -> Outcome:
        """Server-side apply of `state.desired` (Replace=true: delete when the API server
        refuses the change as immutable — `REPLACING`: the object is created again by a later
        round, once its deletion has completed; no worker waits for it)."""
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
            return await self._replace(resource, key, state.live)
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
        live: dict[str, Any] | None,
    ) -> Outcome:
        """Delete (foreground: its pods first), and say so; the object is created again once it
        is gone, by the next round (`gitops.runtime.operations` asks for it at once)."""
        meta = (live or {}).get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return Outcome(key, REPLACING, "replace: still being deleted; created again once gone")
        uid = meta.get("uid")
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
        return Outcome(key, REPLACING, "replace: deleted; created again once gone")


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
